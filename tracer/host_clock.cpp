// The trace's host clock: see host_clock.h.
#include "tracer/host_clock.h"

#include <pthread.h>

#include <cmath>
#include <fstream>
#include <atomic>
#include <mutex>
#include <new>
#include <sstream>

namespace streamrace::tracer::host_clock {

std::atomic<const Scale*> detail::g_scale{nullptr};

namespace {

// Published scales are never freed: a reader may still hold the one before. A reader holds one
// for a few instructions; the slot it reads is written again only kScales adjustments later,
// and adjustments are at least kMinPeriodNs apart (the flusher also wakes at every buffer
// hand-off): 6.4 s at the least.
constexpr size_t kScales = 64;
constexpr int64_t kMinPeriodNs = 100'000'000;
// An error is caught up over kHorizonNs, longer than the periods between adjustments (so that
// an irregular period never overshoots), at most kMaxSlew faster or slower than the measured
// rate; an error beyond kJumpNs behind the clock is taken at once.
constexpr int64_t kHorizonNs = 1'000'000'000;
constexpr double kMaxSlew = 0.05;
constexpr int64_t kJumpNs = 1'000'000;

struct State {
  std::mutex mu;
  std::atomic<bool> started{false};  // written under mu; read without it by tsc_started()
  uint64_t tsc0 = 0;
  int64_t ns0 = 0;
  int64_t last_ns = 0;  // the clock at the last adjustment
  Scale scales[kScales];
  size_t next = 0;
};
State& state() {
  static State* s = new State;  // never destroyed: the flusher may adjust during exit
  return *s;
}

// A child forked while its parent's flusher held the lock would find it held for good: the
// child's lock is made anew (the child has one thread when this runs).
void renew_lock_in_child() { new (&state().mu) std::mutex; }

#if defined(__x86_64__)
// The counter and the clock read as close together as three tries allow (the counter's
// reading in the middle of the clock's).
void read_pair(uint64_t& tsc, int64_t& ns) {
  uint64_t best_gap = ~0ull;
  for (int i = 0; i < 3; ++i) {
    const uint64_t a = __rdtsc();
    const int64_t c = int64_t(clock_ns());
    const uint64_t b = __rdtsc();
    if (b - a < best_gap) {
      best_gap = b - a;
      tsc = a + (b - a) / 2;
      ns = c;
    }
  }
}
#endif

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

bool tsc_usable(std::string* why) {
#if !defined(__x86_64__)
  if (why) *why = "not an x86-64 CPU";
  return false;
#else
  const std::string source = first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  if (source != "tsc") {
    if (why) *why = "the kernel's clocksource is " + (source.empty() ? std::string("unknown") : "'" + source + "'") + ", not 'tsc'";
    return false;
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    bool constant = false, nonstop = false;
    for (std::string w; words >> w;) {
      constant |= w == "constant_tsc";
      nonstop |= w == "nonstop_tsc";
    }
    if (constant && nonstop) return true;
    if (why) *why = "the CPU's time-stamp counter is not both constant_tsc and nonstop_tsc";
    return false;
  }
  if (why) *why = "/proc/cpuinfo has no CPU flags";
  return false;
#endif
}

void start_tsc() {
#if defined(__x86_64__)
  State& s = state();
  // try_lock here and below: never wait on the flusher (a fork's child gets a new lock).
  std::unique_lock lock(s.mu, std::try_to_lock);
  if (!lock.owns_lock() || s.started) return;
  static bool fork_handler = false;
  if (!fork_handler) fork_handler = pthread_atfork(nullptr, nullptr, renew_lock_in_child) == 0;
  read_pair(s.tsc0, s.ns0);
  s.last_ns = s.ns0;
  s.started = true;
#endif
}

void adjust() {
#if defined(__x86_64__)
  State& s = state();
  std::unique_lock lock(s.mu, std::try_to_lock);
  if (!lock.owns_lock() || !s.started) return;
  uint64_t tsc = 0;
  int64_t ns = 0;
  read_pair(tsc, ns);
  if (ns - s.ns0 < kMinBaselineNs || tsc <= s.tsc0) return;
  const Scale* now = detail::g_scale.load(std::memory_order_relaxed);
  if (now != nullptr && ns - s.last_ns < kMinPeriodNs) return;
  // The counter's rate over the whole baseline, in ns per tick (the clock's own jitter of tens
  // of ns is then parts per million of it or less).
  const double ns_per_tick = double(ns - s.ns0) / double(tsc - s.tsc0);
  Scale next;
  next.base_tsc = tsc;
  if (now == nullptr) {
    next.base_ns = ns;
    next.mult = uint64_t(std::llround(ns_per_tick * 4294967296.0));
  } else {
    // Start where the current scale has got to (no step), and run faster or slower by the error
    // found, to be on the clock again after kHorizonNs (each adjustment takes the error anew).
    const int64_t at = detail::scaled(*now, tsc);
    const int64_t error = ns - at;  // > 0: the counter's readings are behind the clock
    double factor = 1.0 + double(error) / double(kHorizonNs);
    if (error > kJumpNs) {
      next.base_ns = ns;  // behind by more than a millisecond: forward at once
      factor = 1.0;
    } else {
      next.base_ns = at;
    }
    factor = std::min(std::max(factor, 1.0 - kMaxSlew), 1.0 + kMaxSlew);
    next.mult = uint64_t(std::llround(ns_per_tick * factor * 4294967296.0));
  }
  s.last_ns = ns;
  Scale& slot = s.scales[s.next++ % kScales];
  slot = next;
  detail::g_scale.store(&slot, std::memory_order_release);
#endif
}

void stop() {
  State& s = state();
  std::lock_guard lock(s.mu);
  detail::g_scale.store(nullptr, std::memory_order_release);
  s.started = false;
}

bool tsc_started() { return state().started.load(std::memory_order_relaxed); }

}  // namespace streamrace::tracer::host_clock
