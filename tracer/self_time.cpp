// SelfTime (self_time.h): per-thread counters of the tracer's own time, summed at exit.
#include "tracer/self_time.h"

#include <time.h>

#include <cstdio>
#include <mutex>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "tracer/tracer_settings.h"

namespace streamrace::tracer::self_time {
namespace {

struct Counters {
  std::atomic<uint64_t> ticks[kParts] = {};
  std::atomic<uint64_t> calls[kParts] = {};
};

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

struct Registry {
  std::mutex mu;
  std::vector<Counters*> threads;
  // Calibration: the counter and the clock when self-timing started.
  uint64_t tick0 = 0, ns0 = 0;
};
// Never destroyed: threads may still count while exit() runs static destructors.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

bool read_enabled() {
  const bool on = tracer_flag("self_time");
  if (on) {
    Registry& r = registry();
    r.tick0 = now_ticks();
    r.ns0 = monotonic_ns();
  }
  return on;
}

Counters& mine() {
  thread_local Counters* c = [] {
    auto* fresh = new Counters;
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.threads.push_back(fresh);
    return fresh;
  }();
  return *c;
}

const char* const kNames[kParts] = {"cupti", "nccl", "allocator", "python", "native", "scan", "record", "facts", "lookup", "hash"};

}  // namespace

bool detail::read_enabled_once() {
  static const bool on = read_enabled();
  g_enabled.store(on ? 2 : 1, std::memory_order_relaxed);
  return on;
}

uint64_t now_ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return monotonic_ns();
#endif
}

void add(Part part, uint64_t ticks) {
  Counters& c = mine();
  c.ticks[part].store(c.ticks[part].load(std::memory_order_relaxed) + ticks, std::memory_order_relaxed);
  c.calls[part].store(c.calls[part].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::string summary() {
  Registry& r = registry();
  uint64_t ticks[kParts] = {}, calls[kParts] = {};
  size_t nthreads = 0;
  {
    std::lock_guard lock(r.mu);
    nthreads = r.threads.size();
    for (Counters* c : r.threads)
      for (int p = 0; p < kParts; ++p) {
        ticks[p] += c->ticks[p].load(std::memory_order_relaxed);
        calls[p] += c->calls[p].load(std::memory_order_relaxed);
      }
  }
  const uint64_t dt = now_ticks() - r.tick0, dns = monotonic_ns() - r.ns0;
  const double ns_per_tick = dt > 0 && dns > 0 ? double(dns) / double(dt) : 1.0;
  std::string out = "self time (" + std::to_string(nthreads) + " threads):";
  char buf[160];
  for (int p = 0; p < kParts; ++p) {
    const double ms = double(ticks[p]) * ns_per_tick / 1e6;
    std::snprintf(buf, sizeof buf, "%s %s %llu calls %.3f ms (%.0f ns each)", p == 0 ? "" : ";", kNames[p],
                  (unsigned long long)calls[p], ms, calls[p] ? ms * 1e6 / double(calls[p]) : 0.0);
    out += buf;
  }
  return out;
}

}  // namespace streamrace::tracer::self_time
