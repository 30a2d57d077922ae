// SelfTime: where the tracer's own time goes, for the overhead benchmarks (setting
// `self_time`, off by default). With it on, each part below is timed on the thread that runs it
// (the CPU's time-stamp counter, converted to nanoseconds at exit) and the totals are printed
// on stderr at exit and kept as a notice in the trace:
//   cupti      the CUPTI callbacks, enter and exit (everything the tracer does for a CUDA call,
//              stacks included); CUPTI's own dispatch around them is not in it (an empty
//              subscriber, bench/cupti_floor, measures that)
//   nccl       the recording of an intercepted NCCL call (the call itself excluded)
//   allocator  PyTorch caching-allocator events (the tracker callback)
//   python     Python stacks (inside the parts above): call-site key, cache, C-API walks
//   native     native stacks (inside the parts above)
//   scan       a kernel launch's head and argument scan (inside cupti): function facts, the
//              pointer words' lookups, the arguments' hash
//   record     a kernel launch's record appended to the thread's buffer (inside cupti; its
//              stack is taken before, in python or native)
//   facts      inside scan: finding the launched function's cached facts (name, layout)
//   lookup     inside scan: the allocation table's answer for a word in its bounds (a call
//              per such word, pointer or not, but for a pointer the launch already named)
//   hash       inside scan: the arguments' hash of the words written
// Counters are per thread, written only by their thread and never freed (a thread that exited
// still counts); reading them at exit is a relaxed load.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace streamrace::tracer::self_time {

enum Part : int { kCupti, kNccl, kAllocator, kPython, kNative, kScan, kRecord, kFacts, kLookup, kHash, kParts };

namespace detail {
// 0: not read yet, 1: off, 2: on. A plain load on the hot path (a function-local static's
// guard and a call cost more, on every scope of every call).
inline std::atomic<int8_t> g_enabled{0};
bool read_enabled_once();
}  // namespace detail
// Read once from the `self_time` setting.
inline bool enabled() {
  const int8_t v = detail::g_enabled.load(std::memory_order_relaxed);
  return v != 0 ? v == 2 : detail::read_enabled_once();
}
// The time-stamp counter (or the monotonic clock in nanoseconds where there is none).
uint64_t now_ticks();
// Adds one timed call of `part` to the calling thread's counters.
void add(Part part, uint64_t ticks);
// "self time: cupti 1234 calls 5.6 ms (4.5 us each), ...": the totals so far.
std::string summary();

// Times its scope when self-timing is on; costs one load of a flag otherwise.
class Scope {
 public:
  explicit Scope(Part part) : part_(part), t0_(enabled() ? now_ticks() : 0) {}
  // With enabled() read once by the caller, for scopes on a hot path (no call when off).
  Scope(Part part, bool on) : part_(part), t0_(on ? now_ticks() : 0) {}
  ~Scope() { end(); }
  // Ends the timing before the scope does (once).
  void end() {
    if (t0_ != 0) add(part_, now_ticks() - t0_);
    t0_ = 0;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Part part_;
  uint64_t t0_;
};

}  // namespace streamrace::tracer::self_time
