// Synthetic workloads written through TraceBuilder: the DeepSpeed ZeRO-1/2 bucket pattern
// of the seeds (for golden tests and the bundled demo trace) and a large training-shaped
// trace for the analyzer throughput benchmark.
#pragma once

#include <cstdint>
#include <string>

#include "traceformat/trace_builder.h"

namespace streamrace::synthetic {

enum class ZeroFix { kNone, kEvent, kWaitStream, kSync };
const char* to_string(ZeroFix f);
bool parse_zero_fix(const std::string& s, ZeroFix& out);

struct ZeroConfig {
  ZeroFix fix = ZeroFix::kNone;
  int rank = 0;
  int world = 2;
  int steps = 2;
  int params = 16;                      // gradients per backward pass
  uint64_t param_bytes = 512 << 10;     // fp16 gradient of each parameter
  uint64_t bucket_bytes = 2 << 20;      // reduce_bucket_size (elements) x 2 bytes
};

// One rank of ZeRO stage 1/2 with overlap_comm and contiguous_gradients, as DeepSpeed 0.14.2
// issues it (reference/deepspeed-zero-schedules.md), with the chosen fix. Stacks are
// synthetic Python frames naming stage_1_and_2.py and the lines the reference gives.
void write_zero_stage12(trace::TraceBuilder& t, const ZeroConfig& cfg);

struct TrainingShape {
  uint64_t events = 10'000'000;  // approximate number of records
  int streams = 8;
  int allocations = 100'000;
  uint64_t seed = 1;
};

// A ZeRO-shaped trace: 8 streams, events, collectives, 100k allocations, copies into
// buckets. Returns the number of records written.
uint64_t write_training_trace(trace::TraceBuilder& t, const TrainingShape& shape);

}  // namespace streamrace::synthetic
