// Shared by the tracer's CPU benchmarks (handler_cost.cpp, allocator_event_cost.cpp): a clock
// reading and the CudaQueries a benchmark gives the call handler instead of a driver.
#pragma once

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tracer/cuda_queries.h"

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

}  // namespace streamrace::tracer::bench
