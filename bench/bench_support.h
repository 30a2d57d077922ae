// Shared by the tracer's CPU benchmarks (handler_cost.cpp, allocator_event_cost.cpp): a clock
// reading and the CudaQueries a benchmark gives the call handler instead of a driver.
#pragma once

#include <time.h>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tracer/cuda_queries.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer::bench {

inline double now_ns(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

// One device, device memory everywhere; every kernel takes `pointers` 8-byte pointer
// parameters and one more parameter of `scalar_words` 8-byte words (a struct of sizes and
// strides, as PyTorch's OffsetCalculator), or (pointers 0) has no parameter layout known.
class BenchQueries : public CudaQueries {
 public:
  size_t pointers = 0;
  size_t scalar_words = 1;
  uint32_t device_of_context(uint64_t) override { return 0; }
  bool param_layout(uint64_t, bool, std::vector<ParamSlot>& out) override {
    if (pointers == 0) return false;
    out.clear();
    for (size_t i = 0; i < pointers; ++i) out.push_back(ParamSlot{uint32_t(i * 8), 8});
    out.push_back(ParamSlot{uint32_t(pointers * 8), uint32_t(scalar_words * 8)});
    return true;
  }
  trace::MemKind memory_kind(uint64_t) override { return trace::MemKind::kDevice; }
};

// A recorder's options for a benchmark: its trace in a fresh temporary folder of its own
// (`dir`, removed by the benchmark when done), its header naming `producer`.
struct BenchTrace {
  std::filesystem::path dir;
  RecorderOptions options;
};
inline BenchTrace bench_trace(const std::string& name, const char* producer) {
  BenchTrace t;
  t.dir = std::filesystem::temp_directory_path() / ("sr_" + name + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(t.dir);
  t.options.path = (t.dir / "t.srace").string();
  t.options.header_provider = [producer] {
    trace::TraceHeader h;
    h.producer = producer;
    return h;
  };
  return t;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A loop of `iterations` timed in blocks of `block`, with and without the tracer's work
// (`step(i, traced)`), alternating, the order swapped every pair; thread CPU time per
// iteration. `added`: the median of the pairs' differences; `off`: the median block without.
struct BlockTimes {
  double added = 0, off = 0;
  size_t pairs = 0;
};
template <typename Step>
BlockTimes alternate_blocks(long iterations, long block, Step&& step) {
  std::vector<double> off, added;
  long i = 0;
  for (long pair = 0; i < iterations; ++pair) {
    double cost[2];
    for (int half = 0; half < 2; ++half) {
      const bool traced = (half == 0) == (pair % 2 == 0);
      const double c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
      for (long k = 0; k < block; ++k, ++i) step(i, traced);
      cost[traced ? 0 : 1] = (now_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / double(block);
    }
    off.push_back(cost[1]);
    added.push_back(cost[0] - cost[1]);
  }
  return BlockTimes{median(added), median(off), added.size()};
}

}  // namespace streamrace::tracer::bench
