// CudaCallHandler: turns one CUDA API callback (runtime or driver domain, enter or exit,
// with the call's parameter struct) into a trace record. What each callback id is comes from
// the call table (cuda_call_table.h): the row's extractor reads the params struct into one
// CudaCall, and `emit` writes the record for it, the same way whichever entry point the call
// came through. CuptiSession only translates CUPTI's callback data into ApiCall, so tests
// drive the handler with synthetic parameter structs and no GPU.
//
// Counting each operation once: a runtime call opens a RuntimeScope on its thread, and the
// driver calls it makes are ignored, except a kernel launch's driver call, which carries the
// CUfunction and the argument buffer needed to scan pointer arguments. Records are written
// at the call's exit, once the call succeeded and its output parameters are filled in.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"
#include "tracer/allocation_table.h"
#include "tracer/cuda_call_table.h"
#include "tracer/cuda_queries.h"
#include "tracer/deferred_scan.h"
#include "tracer/host_access_tracker.h"
#include "tracer/stack_capture.h"
#include "tracer/step_markers.h"
#include "tracer/thread_state.h"
#include "tracer/torch_allocator_hook.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer {

class LaunchCorpus;

struct ApiCall {
  ApiDomain domain = ApiDomain::kRuntime;
  bool enter = true;
  uint32_t cbid = 0;               // CUPTI_RUNTIME_TRACE_CBID_* or CUPTI_DRIVER_TRACE_CBID_*
  const char* symbol_name = nullptr;  // kernel name for launches
  const void* params = nullptr;    // the generated *_params struct of the call
  int32_t result = 0;              // exit only: cudaError_t / CUresult
  uint32_t correlation = 0;
  uint64_t context = 0;
};

class CudaCallHandler {
 public:
  CudaCallHandler(TraceRecorder& rec, AllocationTable& allocs, CudaQueries& queries, StackCapture* stacks);

  void on_call(const ApiCall& call);

  // The callback ids the handler wants: the call table's rows (the Sanitizer session enables
  // exactly these).
  static std::vector<uint32_t> runtime_cbids();
  static std::vector<uint32_t> driver_cbids();
  // What CuptiSession enables of the runtime's rows: all but the kernel launches unless
  // `runtime_launches`. The runtime's launch calls the driver's (cuLaunchKernel under
  // cudaLaunchKernel, cuLaunchKernelEx under cudaLaunchKernelExC, the _ptsz of each under the
  // _ptsz), which CUPTI reports with the same stream handle and correlation id (measured:
  // bench/launch_probe/), so the driver's callbacks alone record every launch: two callbacks
  // per launch instead of four. The record then names the driver call.
  static std::vector<uint32_t> cupti_runtime_cbids(bool runtime_launches);

  // Stream handle as the trace names it: 0, cudaStreamLegacy and cudaStreamPerThread become
  // the synthetic legacy / per-thread ids of records.h.
  uint64_t normalize_stream(uint64_t handle, bool per_thread_default, uint32_t device);

  // A new recorder (a forked child's): string ids of the old one mean nothing there.
  void set_recorder(TraceRecorder& rec);
  void set_stacks(StackCapture* stacks) { stacks_ = stacks; }
  // Asked to attach after each device allocation the tracer records (PyTorch's allocator
  // gets its first segment inside its own malloc: see torch_allocator_hook.h).
  void set_torch_allocator_hook(TorchAllocatorHook* hook) { torch_hook_ = hook; }
  TorchAllocatorHook* torch_allocator_hook() const { return torch_hook_; }
  // Built-in kernel signatures bound the words scanned in the parameters they describe
  // (tracer/kernel_signatures.h); on by default (setting kernel_signatures).
  void set_kernel_signatures(bool on) { kernel_signatures_ = on; }
  // How many of the calling thread's launches took a memoised scan instead of scanning (the
  // same function, parameter bytes, grid and allocations again: cuda_call_handler.cpp,
  // MemoEntry).
  static uint64_t memo_hits_of_this_thread();
  // For tests: the calling thread's memo emptied, its hits counted from 0 and its next check
  // 1,024 hits away; every memoised outcome of the thread made wrong, and its next hit checked
  // (which must then turn the memo off, with a warning).
  static void reset_launch_memo_of_this_thread();
  static void spoil_launch_memo_of_this_thread();
  // Whether the launch memo is in use (setting launch_memo; off for good after a mismatch).
  void set_launch_memo(bool on) { memo_off_.store(!on, std::memory_order_relaxed); }
  bool launch_memo() const { return !memo_off_.load(std::memory_order_relaxed); }
  // Setting defer_scan (on by default): a launch's argument scan is finished by the flusher
  // (tracer/deferred_scan.h); the launching thread copies the words. Off: scanned at the
  // launch, as before (the launch memo applies only then). Records are the same either way.
  void set_deferred_scan(bool on);
  bool deferred_scan() const { return defer_; }
  // Setting bench_cut (benchmarks only): where a kernel launch's callback stops (0: nowhere;
  // 1 at CUPTI's callback, 2 after the call's lookup, 3 before the stack, 4 before the record
  // (a lean launch copies its words straight into the record, so after the stack),
  // 5 at CUPTI's callback after a locked add to the recorder's sequence counter).
  void set_bench_cut(int cut) { bench_cut_ = uint8_t(cut); }
  // Driver launches outside runtime and NCCL calls take the lean path (on by default; tests
  // turn it off to compare its records with the general path's).
  void set_lean_launches(bool on) { lean_launches_ = on; }
  int bench_cut() const { return bench_cut_; }
  // The flusher's half (for tests: its counts).
  const DeferredScan* deferred_scanner() const { return deferred_.get(); }
  // Setting launch_corpus (a benchmark's): every scanned launch is also written there
  // (tracer/launch_corpus.h); the caller owns it and keeps it for the handler's life.
  void set_launch_corpus(LaunchCorpus* corpus) { corpus_ = corpus; }
  // --host-accesses: told about pinned memory, async copies and host synchronisations, and
  // drained of the host accesses it caught at the start of every call.
  void set_host_access_tracker(HostAccessTracker* t) { host_ = t; }
  // Whether a driver call's enter callback does anything: on_driver records at exit; only the
  // host-access tracker acts at every callback (draining its accesses, a free's pinned range).
  bool wants_driver_enters() const { return host_ != nullptr; }
  TraceRecorder& recorder() { return *rec_; }
  // Step markers and capture window edges (NVTX ranges reach it from CuptiSession).
  StepMarkers& markers() { return markers_; }
  AllocationTable& allocations() { return allocs_; }
  CudaQueries& queries() { return queries_; }
  // Between capture windows no stack is taken: the calls are not written.
  uint32_t capture_stack() { return stacks_ && rec_->recording_hint() ? stacks_->capture() : 0; }
  uint32_t capture_stack(TracerThreadState& ts) { return stacks_ && rec_->recording_hint() ? stacks_->capture(ts) : 0; }
  uint32_t device_of(uint64_t context);
  uint32_t device_of(TracerThreadState& ts, uint64_t context);
  // The string id of a kernel's name (demangled where it demangles), cached per function:
  // the id a KernelLaunch or a graph kernel node of `func` carries (precise mode names the
  // kernel nodes it measures by it).
  uint32_t kernel_name_id(uint64_t func, const char* name);

 private:
  void on_runtime(TracerThreadState& ts, const ApiCall& c, const CallSpec& spec);
  void on_driver(TracerThreadState& ts, const ApiCall& c, const CallSpec& spec);
  // How a call becomes its record: under which API name and correlation id, and on which
  // stream (`stream_named`: already the trace's id, from the enclosing runtime launch).
  struct Emission {
    TracerThreadState* ts = nullptr;  // the calling thread's (from on_call)
    uint32_t api = 0;
    uint64_t correlation = 0;
    bool per_thread_default = false;
    bool stream_named = false;
    uint64_t stream = 0;
    uint64_t context = 0;
    int32_t result = 0;
    const char* symbol = nullptr;
  };
  // The one place a CudaCall becomes a trace record.
  void emit(const CudaCall& call, const Emission& e);
  uint32_t api_id(ApiDomain d, uint32_t cbid);
  trace::CallInfo call_info(uint32_t api);
  trace::MemKind mem_kind(uint64_t ptr);

  // Writes one record of type R: `fill` sets its fields, then its CallInfo is taken.
  template <typename R, typename Fill>
  void record(uint32_t api, Fill&& fill);
  void free(const CudaCall& call, const Emission& e, uint64_t stream);
  void memcpy(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device);
  // One kernel launch: call.args (kernelParams, a pointer per argument) or call.packed (one
  // buffer holding all arguments at their layout offsets) are scanned for pointers.
  void kernel(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device);
  // A scanner for rec_, with a change log of its own, registered with it.
  void start_scanner();
  // The launch path of a deferred scan (false: not taken, nothing done): deferred_kernel from
  // a CudaCall, lean_launch straight from a driver launch's parameters (on_call), both through
  // deferred_launch.
  bool deferred_kernel(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device);
  struct CallEntry;
  bool lean_launch(TracerThreadState& ts, const ApiCall& c, const CallSpec& spec, CallEntry& entry);
  bool deferred_launch(TracerThreadState& ts, const LaunchArgs& a, const char* symbol, uint32_t api,
                       uint64_t correlation, uint64_t stream, uint32_t device);
  // kTimed: with self-timing on (setting self_time); the untimed one has no timer code at all.
  template <bool kTimed>
  void timed_kernel(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device);
  // A launch's record head and pointer arguments (also a graph kernel node's parameters).
  void kernel_head(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device,
                   trace::KernelLaunchHead& h, std::vector<uint64_t>& ptrs);
  // `deferred`: where a launch whose scan is left to the flusher gets its deferred record's
  // tail (then `h` is that record's head and `ptrs` untouched); null: scanned here.
  template <bool kTimed>
  void timed_kernel_head(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device,
                         trace::KernelLaunchHead& h, std::vector<uint64_t>& ptrs,
                         std::span<const uint64_t>* deferred = nullptr);
  trace::Memcpy memcpy_record(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device);
  // The explicit graph API: one GraphEdit record (edges: one per 4096).
  void graph_edit(const CudaCall& call, const Emission& e, uint32_t device);
  // A module, library or context went: every cache keyed by a function handle forgets.
  void forget_functions();

  // A host free or unregister is about to run: the tracker's windows over it end first.
  void before_free(const CallSpec& spec, const void* params);

  // What every callback reads first, together: a line the callback need not touch is one
  // PyTorch's work between two launches may have evicted.
  TraceRecorder* rec_;
  // Counts the unloads of modules, libraries and contexts (kFunctionsUnload): a thread's
  // facts of functions filled at another count are forgotten before its next launch.
  std::atomic<uint64_t> functions_generation_{0};
  std::atomic<bool> memo_off_{false};  // the launch memo (cuda_call_handler.cpp, MemoEntry)
  AllocationTable& allocs_;
  CudaQueries& queries_;
  StackCapture* stacks_;
  HostAccessTracker* host_ = nullptr;
  bool kernel_signatures_ = true;
  LaunchCorpus* corpus_ = nullptr;
  bool defer_ = false;
  uint8_t bench_cut_ = 0;
  bool lean_launches_ = true;
  std::shared_ptr<DeferredScan> deferred_;  // registered with rec_ (which keeps it alive too)
  std::atomic<bool> scanner_wanted_{false};  // set_recorder: the next deferring launch makes one
  // Per callback id of each domain: the call's row (null: not one the tracer records) and
  // its API name's string id (0 until first used), side by side.
  // The row is copied in: the callback reads one line for both.
  struct alignas(64) CallEntry {
    CallSpec row{};
    const CallSpec* spec = nullptr;  // &row, or null
    std::atomic<uint32_t> api{0};
  };
  std::vector<CallEntry> runtime_calls_;
  std::vector<CallEntry> driver_calls_;
  TorchAllocatorHook* torch_hook_ = nullptr;
  StepMarkers markers_;
};

}  // namespace streamrace::tracer
