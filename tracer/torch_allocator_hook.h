// TorchAllocatorHook: PyTorch's CUDA caching allocator, seen from inside. The allocator
// carves tensors (blocks) out of large cudaMalloc segments, so the CUDA calls the tracer sees
// name only segments. The allocator reports every block event to the trace trackers attached
// to it (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker); the hook attaches one
// at run time, without a link-time dependency on PyTorch and without changing the user's
// script, and writes each event as an AllocatorBlock record.
//
// There is no C entry point: attachAllocatorTraceTracker is an inline call of a virtual
// method on the allocator object (the exported `c10::cuda::CUDACachingAllocator::allocator`).
// So the hook attaches only to PyTorch versions whose vtable slots and TraceEntry layout it
// knows (table in the .cpp), checks that every slot it calls points into libc10_cuda.so, that
// the backend names itself "native", and that the first segment event it receives matches a
// cudaMalloc/cuMemMap the tracer recorded; anything else and it stays detached (or stops
// recording) with a notice, and extents are taken from segments as before.
//
// When: right after the tracer records a device allocation, on that thread. The first
// segment of a PyTorch process is allocated inside the allocator's malloc (which holds the
// device allocator's recursive mutex, so attaching from there re-enters it safely), and the
// segment's own event follows the cudaMalloc: nothing of the allocator's history is missed.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tracer/thread_state.h"

namespace streamrace::tracer {

class CudaCallHandler;
class TraceRecorder;

// What one PyTorch version's allocator looks like from outside.
struct TorchAllocatorLayout {
  const char* version_prefix;  // "2.11." matches 2.11.0, 2.11.1+cu130, ...
  int slot_initialized;        // vtable slots of CUDAAllocator
  int slot_name;
  int slot_attach_trace_tracker;
  // TraceEntry field offsets
  int off_action, off_device, off_addr, off_stream, off_size;
};
// The layout for a torch version string ("2.11.0+cu130"), or nullptr when unknown.
const TorchAllocatorLayout* torch_allocator_layout(const std::string& version);
// The version in a torch/version.py text ("__version__ = '2.11.0+cu130'"), "" if none.
std::string torch_version_from_file_text(const std::string& text);

class TorchAllocatorHook {
 public:
  explicit TorchAllocatorHook(CudaCallHandler& handler) : handler_(handler) {}
  // Attaches if PyTorch's allocator is loaded, known and ready; cheap when it is not (or
  // when already attached or given up).
  void maybe_attach();
  // One trace entry as the allocator reported it (raw TraceEntry::Action values).
  void on_entry(int action, int device, uint64_t addr, uint64_t size, uint64_t stream);
  bool attached() const { return state_.load(std::memory_order_relaxed) == kAttached; }
  // streamrace_bench_pause (tracer/injection.cpp): events while paused are not recorded, as
  // the CUDA calls made then are not.
  void set_paused(bool paused) { paused_.store(paused, std::memory_order_relaxed); }
  // torch_allocator=0 (STREAMRACE_TORCH_ALLOCATOR=0, or in STREAMRACE_OPTIONS) turns the hook off.
  static bool enabled_by_env();

 private:
  enum State : int { kWaiting = 0, kAttached = 1, kGaveUp = 2, kStopped = 3 };
  void give_up(const std::string& why, bool warning);
  bool validate(TracerThreadState& ts, uint64_t addr, uint64_t size);

  CudaCallHandler& handler_;
  std::atomic<int> state_{kWaiting};
  std::atomic<int> validated_{0};    // 1: an event matched a traced allocation
  std::atomic<bool> paused_{false};
  // The interned name of each action's record, for the recorder whose uid is api_uid_ (an
  // event per tensor: interning the name each time took a lock and a string per event).
  uint32_t api_id(TraceRecorder& rec, int action);
  std::atomic<uint64_t> api_uid_{0};
  std::atomic<uint32_t> api_ids_[8] = {};
  std::atomic<int> mismatches_{0};
  std::atomic<unsigned long long> seen_loads_{0};  // load count at a look that found no libc10_cuda.so
  const TorchAllocatorLayout* layout_ = nullptr;
};

}  // namespace streamrace::tracer
