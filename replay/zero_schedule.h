// Generators for DeepSpeed ZeRO gradient-bucket schedules (one backward pass of one rank),
// following /reference/deepspeed-zero-schedules.md: stage 1/2 with overlap_comm and
// contiguous_gradients (double ipg_buffer, reduction stream, fix variants) and stage 3 (one
// flat bucket on the reduce-and-partition stream, host throttling, reduce-scatter, parameter
// all-gather stream, producer -> reduce stream wait on the default or the current stream).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "replay/schedule.h"

namespace streamrace::replay {

// Stage 1/2 fix variants.
enum class ZeroFix {
  kNone,        // DeepSpeed 0.14.2: nothing orders the copy-in after the old flush
  kEvent,       // the seed's patch: per-buffer event recorded on R, C waits before reuse
  kWaitStream,  // DeepSpeed 0.14.3: C.wait_stream(R) in every flush
  kSync,        // a host synchronize after every flush
};

// Stage 3 variants: which stream the reduce stream waits on before copying a gradient in,
// and where gradients are produced.
enum class Stage3Variant {
  kDefaultStream,          // 0.13.3: RP waits on default_stream(); gradients on a side stream
  kDefaultStreamProducer,  // 0.13.3 with gradients produced on the default stream (usual case)
  kCurrentStream,          // later releases: RP waits on current_stream(); gradients on a side stream
};

// Stage 1/2: which part of each bucket a rank copies into its partition.
enum class ZeroPartition {
  // DeepSpeed: the flat parameter space is split into `world` equal partitions and each rank
  // copies the pieces of its own parameters out of the bucket; a bucket of several slices is
  // flattened, all-reduced and this rank's slices are copied back.
  kParameters,
  // Simplified: the bucket is all-reduced in place and each rank copies its 1/world share of
  // every bucket in one copy. The synthetic traces (the golden ZeRO-1 test, the demo trace in
  // samples/, the analyzer benchmark of bench/) use it: each rank reads half of every bucket.
  kBucketShare,
};

const char* to_string(ZeroFix f);
const char* to_string(Stage3Variant v);
std::optional<ZeroFix> parse_zero_fix(const std::string& s);          // "none", "event", ...
std::optional<Stage3Variant> parse_stage3_variant(const std::string& s);  // "none" = default-stream
std::vector<std::string> zero_variant_names(int stage);  // every variant of a stage, CLI order

struct ZeroConfig {
  int stage = 1;
  // Parameter sizes in elements, in forward (layer) order; gradient hooks fire in reverse.
  std::vector<uint64_t> param_elements;
  uint64_t bucket_elements = 0;
  int world = 2;
  int rank = 0;
  std::string dtype = "fp16";
  bool reduce_scatter = true;
  ZeroFix fix = ZeroFix::kNone;                        // stages 1 and 2
  Stage3Variant stage3 = Stage3Variant::kDefaultStream;  // stage 3
  int max_inflight = 2;      // stage 3 host throttles (fetches and flushes)
  bool fetch_params = true;  // stage 3: model the parameter all-gather stream
  uint64_t delay_ns = 0;     // a spin of this length on the reduce stream before every flush

  // Stages 1 and 2, modelling choices beyond the reference's defaults.
  ZeroPartition partition = ZeroPartition::kParameters;
  // Collectives run on the process group's own NCCL stream, which waits on the reduction
  // stream before each and is waited on after it (as ProcessGroupNCCL issues them).
  bool nccl_stream = false;
  // A weight buffer per parameter (next to its gradient), read by its backward kernel.
  bool weights = false;
  // Prefetch-style side traffic on this many extra streams: after each gradient copy into the
  // bucket a seeded draw picks a side stream, and one time in four that stream waits on the
  // compute stream, sets 4 KiB of a random gradient or weight buffer, and the compute stream
  // waits on it (ordered both ways: it adds work, not races).
  int side_streams = 0;
  uint64_t side_seed = 1;
  // Allocation churn (seeded by side_seed): after each gradient copy into the bucket (and its
  // side traffic), one time in `churn` the host frees a random gradient or weight buffer and
  // allocates it again (kFree, kAlloc: cudaFree synchronises the device; the new allocation
  // gets the same address and undefined contents). 0: none.
  int churn = 0;
  // Events of the wait_stream pairs (record, then wait) come from a pool of this many used
  // round robin, and the event fix records two events (one per ipg_buffer) again and again,
  // as a program that creates its events once does. 0: a new event for every record.
  int event_pool = 0;
};

// Named model sizes: "tiny" (exhaustive-search size), "small", "seed" (the seed issue's 16
// embeddings of 1024x1024 with a 1M-element bucket). Returns false for an unknown name.
bool apply_zero_preset(const std::string& name, ZeroConfig& cfg);
std::vector<std::string> zero_preset_names();

// The synthetic workloads of bench/'s trace generator (streamrace-tracegen), emitted without
// precise kernel accesses like a default-tier recording:
// - the ZeRO-1 bucket pattern of the golden tests and the demo trace (samples/traces/
//   zero1-synthetic): 16 fp16 gradients of 512 KiB, 2 MiB buckets, bucket-share partition,
//   collectives on the process group's NCCL stream; 2 ranks.
ZeroConfig synthetic_bucket_config(ZeroFix fix, int rank);
// - the analyzer benchmark's training shape (bench/analyzer_throughput.sh): `allocations / 2`
//   parameters with a 64 KiB gradient and a 64 KiB weight each, 8 MiB buckets, 8 ranks (this
//   is rank 0), the seed's event fix, collectives on the NCCL stream, side traffic on 5
//   more streams (8 streams in all), allocation churn one time in 64 and a 64-event pool.
//   Writing steps one after another gives the trace any length; streamrace-tracegen builds
//   step k with seed + k, so each step sets and churns other buffers (one step repeated would
//   hit the same ~12 % of them every time and leave the analyzer's shadow mostly unsplit).
ZeroConfig synthetic_training_config(int allocations, uint64_t seed);

// Builds the schedule; throws std::invalid_argument naming the bad parameter.
Schedule make_zero_schedule(const ZeroConfig& cfg);
// The variant name of a config ("none", "event", "default-stream", ...).
std::string zero_variant_name(const ZeroConfig& cfg);
// Sets the config's variant from its name for its stage; false for an unknown name.
bool set_zero_variant(ZeroConfig& cfg, const std::string& name);

}  // namespace streamrace::replay
