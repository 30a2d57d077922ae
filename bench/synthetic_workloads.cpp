// Synthetic workloads: the ZeRO-1/2 bucket pattern and a large training-shaped trace.
#include "bench/synthetic_workloads.h"

#include <random>
#include <vector>

namespace streamrace::synthetic {

using trace::AllocKind;
using trace::CopyKind;
using trace::NcclOp;
using trace::NcclType;
using trace::SiteFrame;
using trace::TraceBuilder;

const char* to_string(ZeroFix f) {
  switch (f) {
    case ZeroFix::kNone: return "none";
    case ZeroFix::kEvent: return "event";
    case ZeroFix::kWaitStream: return "wait-stream";
    case ZeroFix::kSync: return "sync";
  }
  return "?";
}

bool parse_zero_fix(const std::string& s, ZeroFix& out) {
  for (ZeroFix f : {ZeroFix::kNone, ZeroFix::kEvent, ZeroFix::kWaitStream, ZeroFix::kSync})
    if (s == to_string(f)) {
      out = f;
      return true;
    }
  return false;
}

namespace {

constexpr const char* kStage12 = "deepspeed/runtime/zero/stage_1_and_2.py";

// Python stack from the hook down to the call, innermost first.
uint32_t ds_stack(TraceBuilder& t, std::vector<std::pair<uint32_t, const char*>> inner_to_outer) {
  std::vector<SiteFrame> frames;
  for (auto& [line, fn] : inner_to_outer) frames.push_back(SiteFrame{kStage12, fn, line, true});
  frames.push_back(SiteFrame{"train.py", "train", 88, true});
  return t.stack(frames);
}

}  // namespace

void write_zero_stage12(TraceBuilder& t, const ZeroConfig& cfg) {
  const uint64_t compute = trace::legacy_stream(0);  // autograd hooks run on the default stream
  const uint64_t reduction = t.create_stream(trace::kStreamNonBlocking);
  const uint64_t nccl_stream = t.create_stream(trace::kStreamNonBlocking);
  const uint64_t comm = t.comm_init(cfg.rank, cfg.world);
  const uint64_t buffers[2] = {t.alloc(cfg.bucket_bytes), t.alloc(cfg.bucket_bytes)};
  const uint64_t partition = t.alloc(cfg.params * cfg.param_bytes / cfg.world + cfg.bucket_bytes);
  std::vector<uint64_t> weights, grads;
  for (int i = 0; i < cfg.params; ++i) {
    weights.push_back(t.alloc(cfg.param_bytes));
    grads.push_back(t.alloc(cfg.param_bytes));
  }
  const uint32_t st_copy = ds_stack(t, {{950, "reduce_independent_p_g_buckets_and_remove_grads"},
                                        {1416, "reduce_ready_partitions_and_remove_grads"},
                                        {903, "reduce_partition_and_remove_grads"}});
  const uint32_t st_wait = ds_stack(t, {{1362, "reduce_ipg_grads"}, {932, "reduce_independent_p_g_buckets_and_remove_grads"}});
  const uint32_t st_div = ds_stack(t, {{1050, "average_tensor"}, {1367, "reduce_ipg_grads"}});
  const uint32_t st_allreduce = ds_stack(t, {{1490, "allreduce_bucket"},
                                             {1005, "allreduce_and_copy_with_multiple_ranks"},
                                             {1031, "allreduce_and_scatter"},
                                             {1127, "average_tensor"}});
  const uint32_t st_partition = ds_stack(t, {{1340, "copy_grads_in_partition"}, {1369, "reduce_ipg_grads"}});
  const uint32_t st_event_fix = ds_stack(t, {{934, "reduce_independent_p_g_buckets_and_remove_grads"}});
  const uint32_t st_epilogue = ds_stack(t, {{760, "overlapping_partition_gradients_reduce_epilogue"}});
  const uint32_t st_model = t.stack({SiteFrame{"train.py", "forward", 41, true}, SiteFrame{"train.py", "train", 84, true}});

  uint64_t part_off = 0;
  for (int step = 0; step < cfg.steps; ++step) {
    int idx = 0;
    uint64_t filled = 0;
    uint64_t buf_event[2] = {0, 0};
    part_off = 0;
    auto flush = [&]() {
      if (filled == 0) return;
      const uint64_t bucket = buffers[idx];
      // reduce_ipg_grads -> average_tensor: R.wait_stream(C)
      t.at(st_wait);
      uint64_t e = t.create_event();
      t.record_event(e, compute);
      t.wait_event(reduction, e);
      if (cfg.fix == ZeroFix::kWaitStream) {  // 0.14.3: C.wait_stream(R)
        uint64_t back = t.create_event();
        t.record_event(back, reduction);
        t.wait_event(compute, back);
      }
      t.at(st_div).kernel(reduction, "at::native::vectorized_elementwise_kernel<div>", {bucket});
      // The process group's NCCL stream waits on the launching stream, and vice versa after.
      t.at(st_allreduce);
      uint64_t to_nccl = t.create_event();
      t.record_event(to_nccl, reduction);
      t.wait_event(nccl_stream, to_nccl);
      t.nccl(NcclOp::kAllReduce, nccl_stream, comm, bucket, bucket, filled / 2, NcclType::kFloat16);
      uint64_t from_nccl = t.create_event();
      t.record_event(from_nccl, nccl_stream);
      t.wait_event(reduction, from_nccl);
      // copy_grads_in_partition: this rank's share of the bucket into its partition.
      uint64_t share = filled / cfg.world;
      t.at(st_partition).memcpy(reduction, partition + part_off, bucket + share * cfg.rank, share);
      part_off += share;
      if (cfg.fix == ZeroFix::kEvent) {
        t.at(st_event_fix);
        buf_event[idx] = t.create_event();
        t.record_event(buf_event[idx], reduction);
      }
      if (cfg.fix == ZeroFix::kSync) t.at(st_wait).stream_synchronize(reduction);
      idx = 1 - idx;
      filled = 0;
      if (cfg.fix == ZeroFix::kEvent && buf_event[idx]) t.at(st_event_fix).wait_event(compute, buf_event[idx]);
    };
    // forward
    t.at(st_model);
    for (int i = 0; i < cfg.params; ++i) t.kernel(compute, "embedding_forward_kernel", {weights[i]});
    // backward, last parameter first
    for (int i = cfg.params - 1; i >= 0; --i) {
      t.at(st_model).kernel(compute, "embedding_backward_kernel", {grads[i], weights[i]});
      if (filled + cfg.param_bytes > cfg.bucket_bytes) flush();
      t.at(st_copy).memcpy(compute, buffers[idx] + filled, grads[i], cfg.param_bytes);
      filled += cfg.param_bytes;
    }
    flush();
    t.at(st_epilogue).device_synchronize(0);
    t.at(st_model).kernel(compute, "adam_kernel", {partition});
  }
}

uint64_t write_training_trace(TraceBuilder& t, const TrainingShape& shape) {
  std::mt19937_64 rng(shape.seed);
  const uint64_t start = t.next_seq();
  std::vector<uint64_t> streams;
  streams.push_back(trace::legacy_stream(0));
  for (int i = 1; i < shape.streams; ++i) streams.push_back(t.create_stream(trace::kStreamNonBlocking));
  const uint64_t compute = streams[0], reduction = streams[1], nccl_stream = streams[2];
  const uint64_t comm = t.comm_init(0, 8);
  std::vector<uint64_t> allocs;
  allocs.reserve(shape.allocations);
  for (int i = 0; i < shape.allocations; ++i) allocs.push_back(t.alloc(64 << 10));
  const uint64_t buckets[2] = {t.alloc(8 << 20), t.alloc(8 << 20)};
  const uint64_t partition = t.alloc(64 << 20);
  const uint32_t st_copy = t.stack({SiteFrame{"stage_1_and_2.py", "copy_into_bucket", 950, true}});
  const uint32_t st_k = t.stack({SiteFrame{"model.py", "forward", 12, true}});
  uint64_t part_off = 0;
  int idx = 0;
  uint64_t filled = 0;
  const uint64_t ev[2] = {t.create_event(), t.create_event()};  // one per bucket buffer
  bool ev_recorded[2] = {false, false};
  std::vector<uint64_t> events;
  for (int i = 0; i < 64; ++i) events.push_back(t.create_event());
  size_t next_event = 0;
  auto event = [&]() { return events[next_event++ % events.size()]; };
  // The backward pass walks the parameters in reverse order, as autograd does; each has a
  // gradient and a weight allocation next to each other.
  size_t param = allocs.size() / 2;
  while (t.next_seq() - start < shape.events) {
    param = param == 0 ? allocs.size() / 2 - 1 : param - 1;
    uint64_t g = allocs[2 * param];
    uint64_t w = allocs[2 * param + 1];
    t.at(st_k).kernel(compute, "backward_kernel", {g, w});
    if (filled + (64 << 10) > (8u << 20)) {
      uint64_t e = event();
      t.record_event(e, compute);
      t.wait_event(reduction, e);
      uint64_t to_nccl = event();
      t.record_event(to_nccl, reduction);
      t.wait_event(nccl_stream, to_nccl);
      t.nccl(NcclOp::kAllReduce, nccl_stream, comm, buckets[idx], buckets[idx], filled / 2, NcclType::kFloat16);
      uint64_t back = event();
      t.record_event(back, nccl_stream);
      t.wait_event(reduction, back);
      if (part_off + filled / 8 > (64u << 20)) part_off = 0;
      t.memcpy(reduction, partition + part_off, buckets[idx], filled / 8);
      part_off += filled / 8;
      t.record_event(ev[idx], reduction);
      ev_recorded[idx] = true;
      idx = 1 - idx;
      filled = 0;
      if (ev_recorded[idx]) t.wait_event(compute, ev[idx]);
    }
    t.at(st_copy).memcpy(compute, buckets[idx] + filled, g, 64 << 10);
    filled += 64 << 10;
    // Side streams: prefetch-style copies and allocation churn.
    uint64_t side = streams[3 + rng() % (streams.size() - 3)];
    if (rng() % 4 == 0) {
      uint64_t e = event();
      t.record_event(e, compute);
      t.wait_event(side, e);
      t.memset(side, allocs[rng() % allocs.size()], 4096);
      uint64_t b = event();
      t.record_event(b, side);
      t.wait_event(compute, b);
    }
    if (rng() % 64 == 0) {
      size_t k = rng() % allocs.size();
      t.free(allocs[k]);
      allocs[k] = t.alloc(64 << 10);
    }
  }
  t.device_synchronize(0);
  return t.next_seq() - start;
}

}  // namespace streamrace::synthetic
