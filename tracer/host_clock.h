// The host clock of the trace: CLOCK_MONOTONIC in nanoseconds, the time of every record's
// host_ts_ns and of CUPTI's device timestamps (cupti_session.cpp).
//
// By default each reading is a clock_gettime. With setting host_clock=tsc (docs/tracer.md), where
// the kernel itself keeps CLOCK_MONOTONIC with the time-stamp counter (its clocksource is "tsc":
// it found the counters constant and in step across CPUs), a reading is the counter scaled: no
// call, and no LFENCE (the vDSO's reading orders the counter behind every earlier load, so on a
// launch path with cache misses outstanding it waits for them). The scale is set by adjust(),
// which the recorder's flusher calls after each flush (at most every 100 ms): the counter's rate
// is measured against clock_gettime over the whole time since start_tsc(), and each new scale
// starts where the last one had got to and slews by the error it finds, to be rid of it in a
// second: readings stay within microseconds of clock_gettime and do not step. A thread that read
// the old scale and was held up before it read the counter may get a reading a little ahead of
// one it takes next with the new scale (at most 5 % of the hold-up): a thread's records take
// now_ns_after(), which keeps them in order. Before the first adjust()
// at least kMinBaselineNs after start_tsc(), readings are clock_gettime's.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace streamrace::tracer::host_clock {

// ns = base_ns + ((tsc - base_tsc) * mult) / 2^32, the difference signed.
struct Scale {
  uint64_t base_tsc = 0;
  int64_t base_ns = 0;
  uint64_t mult = 0;
};

namespace detail {
extern std::atomic<const Scale*> g_scale;  // null: clock_gettime
inline int64_t scaled(const Scale& s, uint64_t tsc) {
  const __int128 d = __int128(int64_t(tsc - s.base_tsc)) * __int128(s.mult);
  return s.base_ns + int64_t(d >> 32);
}
}  // namespace detail

constexpr int64_t kMinBaselineNs = 50'000'000;  // the counter's rate is measured over ≥ 50 ms

// CLOCK_MONOTONIC through clock_gettime.
inline uint64_t clock_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline uint64_t now_ns() {
#if defined(__x86_64__)
  if (const Scale* s = detail::g_scale.load(std::memory_order_acquire); s != nullptr)
    return uint64_t(detail::scaled(*s, __rdtsc()));
#endif
  return clock_ns();
}

// now_ns() for one thread's records: never below `last`, the thread's last reading, which it
// then becomes (clock_gettime's readings are in order by themselves; the counter's, see above).
inline uint64_t now_ns_after(uint64_t& last) {
#if defined(__x86_64__)
  if (const Scale* s = detail::g_scale.load(std::memory_order_acquire); s != nullptr) {
    uint64_t v = uint64_t(detail::scaled(*s, __rdtsc()));
    if (v < last) v = last;
    last = v;
    return v;
  }
#endif
  return last = clock_ns();  // kept too: the first scale may start a little below it
}

// Whether the counter may stand in for the clock here; if not, `why` says what is missing.
bool tsc_usable(std::string* why);
// Anchors the counter to the clock (readings stay clock_gettime's until adjust() has a baseline).
void start_tsc();
// Measures the counter's rate and publishes the next scale (no-op before start_tsc()).
void adjust();
// Back to clock_gettime (tests; a forked child keeps its parent's scale, which holds there too).
void stop();
// Whether start_tsc() ran (readings come from the counter from the first adjust() on).
bool tsc_started();
// Whether readings come from the counter now.
inline bool on_tsc() { return detail::g_scale.load(std::memory_order_relaxed) != nullptr; }

}  // namespace streamrace::tracer::host_clock
