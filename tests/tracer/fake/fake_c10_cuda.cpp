// A stand-in for PyTorch's libc10_cuda.so, for torch_allocator_hook_test: the exported
// `c10::cuda::CUDACachingAllocator::allocator` points at an object whose vtable has
// initialized(), attachAllocatorTraceTracker() and name() at torch 2.11's slots, and whose
// trace entries have TraceEntry's field offsets. The test drives it through the C functions.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fake {

struct TraceEntry {  // offsets as torch 2.11's: action 0, device 4, addr 8, stream 32, size 40
  int32_t action;
  int8_t device;
  uint64_t addr;
  std::shared_ptr<void> context;
  void* stream;
  uint64_t size;
  uint64_t mempool[2];
  uint64_t time;
  std::string compile_context;
  std::string user_metadata;
};
static_assert(offsetof(TraceEntry, stream) == 32 && offsetof(TraceEntry, size) == 40);
using Tracker = std::function<void(const TraceEntry&)>;

bool g_initialized = false;
std::string g_name = "native";
std::vector<Tracker> g_trackers;

class CachingAllocator {
 public:
  virtual void unused0() {}
  virtual void unused1() {}
  virtual void unused2() {}
  virtual void unused3() {}
  virtual void unused4() {}
  virtual void unused5() {}
  virtual bool initialized() { return g_initialized; }
  virtual void unused7() {}
  virtual void unused8() {}
  virtual void unused9() {}
  virtual void unused10() {}
  virtual void unused11() {}
  virtual void unused12() {}
  virtual void unused13() {}
  virtual void unused14() {}
  virtual void unused15() {}
  virtual void unused16() {}
  virtual void unused17() {}
  virtual void unused18() {}
  virtual void unused19() {}
  virtual void unused20() {}
  virtual void unused21() {}
  virtual void unused22() {}
  virtual void unused23() {}
  virtual void unused24() {}
  virtual void unused25() {}
  virtual void unused26() {}
  virtual void unused27() {}
  virtual void unused28() {}
  virtual void unused29() {}
  virtual void unused30() {}
  virtual void unused31() {}
  virtual void unused32() {}
  virtual void unused33() {}
  virtual void unused34() {}
  virtual void unused35() {}
  virtual void unused36() {}
  virtual void unused37() {}
  virtual void unused38() {}
  virtual void unused39() {}
  virtual void unused40() {}
  virtual void unused41() {}
  virtual void unused42() {}
  virtual void unused43() {}
  virtual void attachAllocatorTraceTracker(Tracker t) { g_trackers.push_back(std::move(t)); }
  virtual void unused45() {}
  virtual void unused46() {}
  virtual void unused47() {}
  virtual void unused48() {}
  virtual std::string name() { return g_name; }
};

CachingAllocator g_allocator;

}  // namespace fake

namespace c10::cuda::CUDACachingAllocator {
__attribute__((visibility("default"))) std::atomic<fake::CachingAllocator*> allocator{nullptr};
}

extern "C" {
__attribute__((visibility("default"))) void fake_torch_reset(int set_allocator, int initialized, const char* name) {
  fake::g_trackers.clear();
  fake::g_initialized = initialized != 0;
  fake::g_name = name;
  c10::cuda::CUDACachingAllocator::allocator.store(set_allocator ? &fake::g_allocator : nullptr);
}
__attribute__((visibility("default"))) int fake_torch_trackers() { return int(fake::g_trackers.size()); }
__attribute__((visibility("default"))) void fake_torch_emit(int action, int device, uint64_t addr, uint64_t size,
                                                             void* stream) {
  fake::TraceEntry e{action, int8_t(device), addr, nullptr, stream, size, {0, 0}, 0, "N/A", ""};
  for (auto& t : fake::g_trackers) t(e);
}
}
