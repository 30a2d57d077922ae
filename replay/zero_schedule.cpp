// DeepSpeed ZeRO bucket schedules as replay IR. The pseudo-sites (file, function, line) are
// those of DeepSpeed 0.14.2 stage_1_and_2.py and 0.13.3 stage3.py as cited in
// reference/deepspeed-zero-schedules.md and the seed issue's stacks, so findings on the
// emitted traces read like findings on the real program.
#include "replay/zero_schedule.h"

#include <algorithm>
#include <deque>
#include <random>
#include <tuple>
#include <stdexcept>

#include <fmt/format.h>

namespace streamrace::replay {

const char* to_string(ZeroFix f) {
  switch (f) {
    case ZeroFix::kNone: return "none";
    case ZeroFix::kEvent: return "event";
    case ZeroFix::kWaitStream: return "wait-stream";
    case ZeroFix::kSync: return "sync";
  }
  return "?";
}

const char* to_string(Stage3Variant v) {
  switch (v) {
    case Stage3Variant::kDefaultStream: return "default-stream";
    case Stage3Variant::kDefaultStreamProducer: return "default-stream-same";
    case Stage3Variant::kCurrentStream: return "current-stream";
  }
  return "?";
}

std::optional<ZeroFix> parse_zero_fix(const std::string& s) {
  for (auto f : {ZeroFix::kNone, ZeroFix::kEvent, ZeroFix::kWaitStream, ZeroFix::kSync})
    if (s == to_string(f)) return f;
  return std::nullopt;
}

std::optional<Stage3Variant> parse_stage3_variant(const std::string& s) {
  if (s == "none") return Stage3Variant::kDefaultStream;
  for (auto v : {Stage3Variant::kDefaultStream, Stage3Variant::kDefaultStreamProducer, Stage3Variant::kCurrentStream})
    if (s == to_string(v)) return v;
  return std::nullopt;
}

std::vector<std::string> zero_variant_names(int stage) {
  if (stage == 3) return {"default-stream", "default-stream-same", "current-stream"};
  return {"none", "event", "wait-stream", "sync"};
}

std::string zero_variant_name(const ZeroConfig& cfg) {
  return cfg.stage == 3 ? to_string(cfg.stage3) : to_string(cfg.fix);
}

bool set_zero_variant(ZeroConfig& cfg, const std::string& name) {
  if (cfg.stage == 3) {
    auto v = parse_stage3_variant(name);
    if (!v) return false;
    cfg.stage3 = *v;
    return true;
  }
  auto f = parse_zero_fix(name);
  if (!f) return false;
  cfg.fix = *f;
  return true;
}

std::vector<std::string> zero_preset_names() { return {"tiny", "small", "seed"}; }

bool apply_zero_preset(const std::string& name, ZeroConfig& cfg) {
  if (name == "tiny") {
    // Three buckets of two parameters each: the smallest shape with a buffer reused by
    // bucket k+2 while bucket k's flush may still run.
    cfg.param_elements = {2, 2, 2, 2, 2, 2};
    cfg.bucket_elements = 4;
  } else if (name == "small") {
    cfg.param_elements.assign(8, 4096);
    cfg.bucket_elements = 8192;
  } else if (name == "seed") {
    // debug.py: 16 nn.Embedding(1024, 1024); dp_zero1_fp16.yaml: reduce_bucket_size 1048576.
    cfg.param_elements.assign(16, 1024 * 1024);
    cfg.bucket_elements = 1048576;
  } else {
    return false;
  }
  return true;
}

ZeroConfig synthetic_bucket_config(ZeroFix fix, int rank) {
  ZeroConfig c;
  c.stage = 1;
  c.param_elements.assign(16, 256 * 1024);
  c.bucket_elements = 1024 * 1024;
  c.world = 2;
  c.rank = rank;
  c.dtype = "fp16";
  c.fix = fix;
  c.partition = ZeroPartition::kBucketShare;
  c.nccl_stream = true;
  return c;
}

ZeroConfig synthetic_training_config(int allocations, uint64_t seed) {
  ZeroConfig c;
  c.stage = 1;
  c.param_elements.assign(size_t(std::max(allocations, 2) / 2), 32 * 1024);
  c.bucket_elements = 4 * 1024 * 1024;
  c.world = 8;
  c.rank = 0;
  c.dtype = "fp16";
  c.fix = ZeroFix::kEvent;
  c.partition = ZeroPartition::kBucketShare;
  c.nccl_stream = true;
  c.weights = true;
  c.side_streams = 5;
  c.side_seed = seed;
  c.churn = 64;
  c.event_pool = 64;
  return c;
}

namespace {

constexpr const char* kStage12File = "deepspeed/runtime/zero/stage_1_and_2.py";
constexpr const char* kStage3File = "deepspeed/runtime/zero/stage3.py";

// Call stacks of the pseudo program (innermost first).
std::vector<Site> hook_stack(Site inner) {
  return {std::move(inner),
          {kStage12File, "reduce_ready_partitions_and_remove_grads", 1416},
          {kStage12File, "reduce_partition_and_remove_grads", 903}};
}

std::vector<Site> flush_stack(Site inner, bool epilogue) {
  std::vector<Site> s{std::move(inner), {kStage12File, "reduce_ipg_grads", 1367}};
  if (epilogue) {
    s.push_back({kStage12File, "overlapping_partition_gradients_reduce_epilogue", 752});
  } else {
    s.push_back({kStage12File, "reduce_independent_p_g_buckets_and_remove_grads", 932});
    s.push_back({kStage12File, "reduce_ready_partitions_and_remove_grads", 1416});
    s.push_back({kStage12File, "reduce_partition_and_remove_grads", 903});
  }
  return s;
}

const std::vector<Site>& backward_stack() {
  static const std::vector<Site> s{{"torch/autograd/graph.py", "_engine_run_backward", 769},
                                   {"debug.py", "train", 146}};
  return s;
}

class ScheduleWriter {
 public:
  explicit ScheduleWriter(Schedule& s) : s_(s) {}

  // A device operation or, with the host's kinds, a host action (the writer is the same).
  Action& device(ActionKind kind, uint32_t stream, std::string label, std::vector<Site> stack) {
    Action a;
    a.kind = kind;
    a.stream = stream;
    a.label = std::move(label);
    a.stack = std::move(stack);
    a.flush = flush_;
    s_.actions.push_back(std::move(a));
    return s_.actions.back();
  }
  void copy(uint32_t stream, ByteRange src, ByteRange dst, std::string label, std::vector<Site> stack,
            ActionKind kind = ActionKind::kCopy) {
    auto& a = device(kind, stream, std::move(label), std::move(stack));
    a.reads = {src};
    a.writes = {dst};
  }
  void divide(uint32_t stream, ByteRange r, uint64_t divisor, std::string label, std::vector<Site> stack) {
    auto& a = device(ActionKind::kDivide, stream, std::move(label), std::move(stack));
    a.reads = {r};
    a.writes = {r};
    a.divisor = divisor;
  }
  void collective(uint32_t stream, CollectiveKind k, ByteRange send, ByteRange recv, std::string label,
                  std::vector<Site> stack) {
    auto& a = device(ActionKind::kCollective, stream, std::move(label), std::move(stack));
    a.collective = k;
    a.reads = {send};
    a.writes = {recv};
  }
  void spin(uint32_t stream, uint64_t ns, std::vector<Site> stack) {
    auto& a = device(ActionKind::kSpin, stream, fmt::format("injected delay {} us", ns / 1000), std::move(stack));
    a.spin_ns = ns;
  }
  uint32_t record(uint32_t stream, std::string event_name, std::vector<Site> stack) {
    uint32_t e = s_.add_event(std::move(event_name));
    record_again(stream, e, std::move(stack));
    return e;
  }
  // A record of an existing event (a reused one).
  void record_again(uint32_t stream, uint32_t e, std::vector<Site> stack, const std::string& what = "") {
    auto& a = device(ActionKind::kEventRecord, stream, "record " + (what.empty() ? s_.events[e] : what + " on " + s_.events[e]),
                     std::move(stack));
    a.event = e;
  }
  void wait(uint32_t stream, uint32_t event, std::vector<Site> stack, const std::string& what = "") {
    auto& a = device(ActionKind::kStreamWait, stream,
                     s_.streams[stream].name + " waits on " + (what.empty() ? s_.events[event] : what + " on " + s_.events[event]),
                     std::move(stack));
    a.event = event;
  }
  // stream `waiter`.wait_stream(`on`): an event recorded on `on`, waited on by `waiter` (an
  // event of the pool when there is one).
  void wait_stream(uint32_t waiter, uint32_t on, const std::string& name, const std::vector<Site>& stack) {
    if (pool_.empty()) {
      uint32_t e = record(on, name, stack);
      wait(waiter, e, stack);
      return;
    }
    const uint32_t e = pool_[next_pooled_++ % pool_.size()];
    record_again(on, e, stack, name);
    wait(waiter, e, stack, name);
  }
  void set_event_pool(int n) {
    for (int i = 0; i < n; ++i) pool_.push_back(s_.add_event(fmt::format("event_pool[{}]", i)));
  }
  void host_lifetime(ActionKind kind, uint32_t buffer, std::vector<Site> stack) {
    auto& a = device(kind, kNone, fmt::format("{} {}", kind == ActionKind::kFree ? "free" : "allocate", s_.buffers[buffer].name),
                     std::move(stack));
    a.buffer = buffer;
  }
  void host(ActionKind kind, uint32_t stream, uint32_t event, std::string label, std::vector<Site> stack) {
    device(kind, stream, std::move(label), std::move(stack)).event = event;
  }
  void set_flush(int f) { flush_ = f; }

 private:
  Schedule& s_;
  int flush_ = -1;
  std::vector<uint32_t> pool_;
  size_t next_pooled_ = 0;
};

void check_common(const ZeroConfig& cfg) {
  if (cfg.world < 1 || cfg.world > 16)
    throw std::invalid_argument(fmt::format("world size {} is outside 1..16", cfg.world));
  if (cfg.rank < 0 || cfg.rank >= cfg.world)
    throw std::invalid_argument(fmt::format("rank {} is outside world size {}", cfg.rank, cfg.world));
  if (cfg.param_elements.empty()) throw std::invalid_argument("no parameters (give sizes or a preset)");
  if (cfg.bucket_elements == 0) throw std::invalid_argument("bucket size is 0");
  for (size_t i = 0; i < cfg.param_elements.size(); ++i) {
    if (cfg.param_elements[i] == 0) throw std::invalid_argument(fmt::format("parameter {} has 0 elements", i));
    if (cfg.param_elements[i] > cfg.bucket_elements)
      throw std::invalid_argument(fmt::format(
          "parameter {} ({} elements) is larger than the bucket ({} elements): DeepSpeed reduces such a "
          "parameter on its own, which the replay does not model",
          i, cfg.param_elements[i], cfg.bucket_elements));
    if (cfg.partition == ZeroPartition::kBucketShare && cfg.param_elements[i] % uint64_t(cfg.world))
      throw std::invalid_argument(fmt::format(
          "parameter {} ({} elements) does not split evenly over {} ranks, which the bucket-share partition needs",
          i, cfg.param_elements[i], cfg.world));
  }
  if (dtype_bytes(cfg.dtype) == 0 || cfg.dtype == "int8" || cfg.dtype == "uint8")
    throw std::invalid_argument("unknown dtype \"" + cfg.dtype + "\" (use fp16, bf16 or fp32)");
  if (cfg.side_streams < 0 || cfg.side_streams > 64)
    throw std::invalid_argument(fmt::format("{} side streams is outside 0..64", cfg.side_streams));
  if (cfg.churn < 0) throw std::invalid_argument(fmt::format("churn {} is negative", cfg.churn));
  if (cfg.event_pool < 0 || cfg.event_pool > 1 << 20)
    throw std::invalid_argument(fmt::format("an event pool of {} is outside 0..{}", cfg.event_pool, 1 << 20));
}

void fill_common(const ZeroConfig& cfg, Schedule& s) {
  s.world = cfg.world;
  s.rank = cfg.rank;
  s.dtype = cfg.dtype;
  s.elem_bytes = dtype_bytes(cfg.dtype);
  for (size_t i = 0; i < cfg.param_elements.size(); ++i)
    s.params.push_back(Param{fmt::format("p{}", i), cfg.param_elements[i]});
  s.meta["generator"] = "zero";
  s.meta["stage"] = std::to_string(cfg.stage);
  s.meta["variant"] = zero_variant_name(cfg);
  s.meta["bucket_elements"] = std::to_string(cfg.bucket_elements);
  s.meta["reduce_scatter"] = cfg.reduce_scatter ? "true" : "false";
  s.meta["delay_ns"] = std::to_string(cfg.delay_ns);
  std::string sizes;
  for (auto n : cfg.param_elements) sizes += (sizes.empty() ? "" : ",") + std::to_string(n);
  s.meta["param_elements"] = sizes;
  // The modelling choices beyond the reference's defaults, only where they are used.
  if (cfg.stage != 3) {
    if (cfg.partition == ZeroPartition::kBucketShare) s.meta["partition"] = "bucket-share";
    if (cfg.nccl_stream) s.meta["nccl_stream"] = "true";
    if (cfg.weights) s.meta["weights"] = "true";
    if (cfg.side_streams) s.meta["side_streams"] = fmt::format("{} (seed {})", cfg.side_streams, cfg.side_seed);
    if (cfg.churn) s.meta["churn"] = fmt::format("1 in {} (seed {})", cfg.churn, cfg.side_seed);
    if (cfg.event_pool) s.meta["event_pool"] = std::to_string(cfg.event_pool);
  }
}

// The gradients gathered in the bucket being filled (both stages).
struct Bucket {
  struct Entry {
    size_t param;
    uint64_t bucket_offset;  // elements
  };
  std::vector<Entry> entries;
  uint64_t elements = 0;
  int flushes = 0;

  bool fits(uint64_t n, uint64_t capacity) const { return elements + n <= capacity; }
  void add(size_t param, uint64_t n) {
    entries.push_back(Entry{param, elements});
    elements += n;
  }
  void clear() {
    entries.clear();
    elements = 0;
  }
};

Schedule make_stage12(const ZeroConfig& cfg) {
  Schedule s;
  fill_common(cfg, s);
  s.name = fmt::format("zero stage {} fix={} rank {}/{}", cfg.stage, to_string(cfg.fix), cfg.rank, cfg.world);
  s.description = fmt::format(
      "DeepSpeed ZeRO-{} overlap_comm bucket schedule (contiguous_gradients, double ipg_buffer), fix variant "
      "'{}', reduce_scatter={}",
      cfg.stage, to_string(cfg.fix), cfg.reduce_scatter);
  if (cfg.partition == ZeroPartition::kBucketShare) s.description += ", bucket-share partition";
  ScheduleWriter w(s);
  const uint32_t C = s.add_stream("compute", StreamKind::kLegacyDefault);
  const uint32_t R = s.add_stream("reduction", StreamKind::kNonBlocking);
  w.set_event_pool(cfg.event_pool);
  // With a pool, the event fix records one event per ipg_buffer again and again.
  std::optional<uint32_t> ipg_fixed[2];
  if (cfg.event_pool && cfg.fix == ZeroFix::kEvent)
    for (int b = 0; b < 2; ++b) ipg_fixed[b] = s.add_event(fmt::format("ipg_event[{}]", b));
  const uint32_t N = cfg.nccl_stream ? s.add_stream("nccl", StreamKind::kNonBlocking) : R;
  std::vector<uint32_t> sides;
  for (int i = 0; i < cfg.side_streams; ++i) sides.push_back(s.add_stream(fmt::format("side[{}]", i), StreamKind::kNonBlocking));

  const size_t n = cfg.param_elements.size();
  std::vector<uint64_t> flat_offset(n);
  uint64_t total = 0;
  for (size_t p = 0; p < n; ++p) {
    flat_offset[p] = total;
    total += cfg.param_elements[p];
  }
  const uint64_t W = uint64_t(cfg.world);
  const uint64_t part = (total + W - 1) / W;  // elements per rank partition (padded)
  const uint64_t part_lo = part * uint64_t(cfg.rank), part_hi = part_lo + part;

  std::vector<uint32_t> grad(n), weight;
  for (size_t p = 0; p < n; ++p) {
    grad[p] = s.add_buffer(fmt::format("grad[p{}]", p), cfg.param_elements[p] * s.elem_bytes, "gradient");
    if (cfg.weights) weight.push_back(s.add_buffer(fmt::format("weight[p{}]", p), cfg.param_elements[p] * s.elem_bytes, "param"));
  }
  const uint32_t ipg[2] = {s.add_buffer("ipg_buffer[0]", cfg.bucket_elements * s.elem_bytes, "bucket"),
                           s.add_buffer("ipg_buffer[1]", cfg.bucket_elements * s.elem_bytes, "bucket")};
  const uint32_t partition = s.add_buffer("grads_in_partition", part * s.elem_bytes, "partition");
  const uint32_t averaged = s.add_buffer("averaged_gradients", part * s.elem_bytes, "output");

  Bucket bucket;
  int ipg_index = 0;
  std::optional<uint32_t> ipg_events[2];
  // What of each parameter ends up in this rank's partition: elements [lo, lo + count) of the
  // parameter at element `at` of the partition.
  struct Piece {
    size_t param;
    uint64_t lo, count, at;
  };
  std::vector<Piece> pieces;
  uint64_t share_at = 0;  // kBucketShare: where the next bucket's share goes in the partition

  // This rank's piece of a parameter: [lo, hi) in the parameter's own element numbering.
  auto my_piece = [&](size_t p, uint64_t& lo, uint64_t& hi) {
    uint64_t a = std::max(flat_offset[p], part_lo), b = std::min(flat_offset[p] + cfg.param_elements[p], part_hi);
    if (a >= b) return false;
    lo = a - flat_offset[p];
    hi = b - flat_offset[p];
    return true;
  };
  // A collective on the process group's stream: it waits on R before, R waits on it after.
  auto collective = [&](CollectiveKind kind, ByteRange send, ByteRange recv, std::string label, const std::vector<Site>& stack,
                        int k) {
    if (N != R) w.wait_stream(N, R, fmt::format("nccl_ready[{}]", k), stack);
    w.collective(N, kind, send, recv, std::move(label), stack);
    if (N != R) w.wait_stream(R, N, fmt::format("nccl_done[{}]", k), stack);
  };

  auto flush = [&](bool epilogue) {
    const int k = bucket.flushes++;
    w.set_flush(k);
    const uint32_t buf = ipg[ipg_index];
    const uint64_t elements = bucket.elements;
    const ByteRange used = s.elems(buf, 0, elements);
    const auto site = [&](const char* fn, uint32_t line) { return flush_stack(Site{kStage12File, fn, line}, epilogue); };
    // average_tensor: the reduction stream waits for the copies into this bucket.
    w.wait_stream(R, C, fmt::format("compute_ready[{}]", k), site("average_tensor", 1051));
    if (cfg.fix == ZeroFix::kWaitStream)  // 0.14.3: current_stream().wait_stream(reduction_stream)
      w.wait_stream(C, R, fmt::format("reduction_done[{}]", k), site("average_tensor", 1052));
    if (cfg.delay_ns) w.spin(R, cfg.delay_ns, site("average_tensor", 1053));
    w.divide(R, used, W, fmt::format("divide ipg_buffer[{}] (bucket {})", ipg_index, k), site("average_tensor", 1071));
    const bool in_place = !cfg.reduce_scatter || bucket.entries.size() == 1 || cfg.partition == ZeroPartition::kBucketShare;
    const auto ar_stack = [&](const char* fn, uint32_t line) {
      auto st = site("average_tensor", 1127);
      st.insert(st.begin(), Site{kStage12File, "allreduce_and_scatter", 1031});
      st.insert(st.begin(), Site{kStage12File, "allreduce_and_copy_with_multiple_ranks", 1005});
      if (fn) st.insert(st.begin(), Site{kStage12File, fn, line});
      return st;
    };
    if (in_place) {
      // One in-place all_reduce of the bucket (a single slice stays a view of the bucket).
      collective(CollectiveKind::kAllReduce, used, used, fmt::format("all_reduce ipg_buffer[{}] (bucket {})", ipg_index, k),
                 cfg.reduce_scatter ? ar_stack("allreduce_bucket", 1496) : site("average_tensor", 1135), k);
    } else {
      const uint32_t flat = s.add_buffer(fmt::format("flat[{}]", k), elements * s.elem_bytes, "temp");
      const ByteRange all = s.elems(flat, 0, elements);
      w.copy(R, used, all, fmt::format("flatten ipg_buffer[{}] (bucket {})", ipg_index, k),
             ar_stack("allreduce_bucket", 1488));
      collective(CollectiveKind::kAllReduce, all, all, fmt::format("all_reduce flat[{}]", k), ar_stack("allreduce_bucket", 1496), k);
      for (const auto& e : bucket.entries) {
        uint64_t lo, hi;
        if (!my_piece(e.param, lo, hi)) continue;
        w.copy(R, s.elems(flat, e.bucket_offset + lo, hi - lo), s.elems(buf, e.bucket_offset + lo, hi - lo),
               fmt::format("copy back p{} into ipg_buffer[{}]", e.param, ipg_index), ar_stack(nullptr, 0),
               ActionKind::kCopyBack);
      }
    }
    // copy_grads_in_partition: this rank's slices out of the bucket.
    if (cfg.partition == ZeroPartition::kBucketShare) {
      const uint64_t share = elements / W, from = share * uint64_t(cfg.rank);
      w.copy(R, s.elems(buf, from, share), s.elems(partition, share_at, share),
             fmt::format("copy rank {}'s share of ipg_buffer[{}] into grads_in_partition", cfg.rank, ipg_index),
             site("copy_grads_in_partition", 1343));
      for (const auto& e : bucket.entries) {
        const uint64_t a = std::max(e.bucket_offset, from), b = std::min(e.bucket_offset + cfg.param_elements[e.param], from + share);
        if (a < b) pieces.push_back(Piece{e.param, a - e.bucket_offset, b - a, share_at + a - from});
      }
      share_at += share;
    } else {
      for (const auto& e : bucket.entries) {
        uint64_t lo, hi;
        if (!my_piece(e.param, lo, hi)) continue;
        w.copy(R, s.elems(buf, e.bucket_offset + lo, hi - lo), s.elems(partition, flat_offset[e.param] + lo - part_lo, hi - lo),
               fmt::format("copy p{} from ipg_buffer[{}] into grads_in_partition", e.param, ipg_index),
               site("copy_grads_in_partition", 1343));
        pieces.push_back(Piece{e.param, lo, hi - lo, flat_offset[e.param] + lo - part_lo});
      }
    }
    if (cfg.fix == ZeroFix::kSync)
      w.host(ActionKind::kDeviceSync, kNone, kNone, "host synchronize after the flush",
             site("reduce_ipg_grads", 1380));
    if (!epilogue) {
      const auto hook = [&](uint32_t line) { return hook_stack(Site{kStage12File, "reduce_independent_p_g_buckets_and_remove_grads", line}); };
      if (cfg.fix == ZeroFix::kEvent && ipg_fixed[ipg_index]) {  // the seed's patch: event on R for this buffer
        w.record_again(R, *ipg_fixed[ipg_index], hook(935), fmt::format("bucket {}", k));
        ipg_events[ipg_index] = *ipg_fixed[ipg_index];
      } else if (cfg.fix == ZeroFix::kEvent) {
        ipg_events[ipg_index] = w.record(R, fmt::format("ipg_event[{}] (bucket {})", ipg_index, k), hook(935));
      }
      ipg_index = 1 - ipg_index;
      if (cfg.fix == ZeroFix::kEvent && ipg_events[ipg_index]) w.wait(C, *ipg_events[ipg_index], hook(943));
    }
    bucket.clear();
    w.set_flush(-1);
  };

  std::mt19937_64 rng(cfg.side_seed);
  const std::vector<Site> side_stack{{"train.py", "prefetch", 30}, {"train.py", "train", 146}};
  auto side_traffic = [&]() {
    const uint32_t side = sides[rng() % sides.size()];
    if (rng() % 4) return;
    w.wait_stream(side, C, "side_ready", side_stack);
    const size_t pick = rng() % (n * (cfg.weights ? 2 : 1));
    const uint32_t target = pick < n ? grad[pick] : weight[pick - n];
    auto& m = w.device(ActionKind::kMemset, side, "side traffic: set " + s.buffers[target].name, side_stack);
    m.writes = {ByteRange{target, 0, std::min<uint64_t>(4096, s.buffers[target].bytes)}};
    w.wait_stream(C, side, "side_done", side_stack);
  };
  const std::vector<Site> churn_stack{{"torch/cuda/memory.py", "empty_cache", 192}, {"train.py", "train", 150}};
  auto churn = [&]() {
    if (rng() % uint64_t(cfg.churn)) return;
    const size_t pick = rng() % (n * (cfg.weights ? 2 : 1));
    const uint32_t target = pick < n ? grad[pick] : weight[pick - n];
    w.host_lifetime(ActionKind::kFree, target, churn_stack);
    w.host_lifetime(ActionKind::kAlloc, target, churn_stack);
  };

  for (size_t i = n; i-- > 0;) {
    auto& a = w.device(ActionKind::kProduce, C, fmt::format("backward writes grad[p{}]", i), backward_stack());
    a.writes = {s.elems(grad[i], 0, cfg.param_elements[i])};
    if (cfg.weights) a.reads = {s.elems(weight[i], 0, cfg.param_elements[i])};
    a.param = uint32_t(i);
    if (!bucket.fits(cfg.param_elements[i], cfg.bucket_elements)) flush(false);
    w.copy(C, s.elems(grad[i], 0, cfg.param_elements[i]), s.elems(ipg[ipg_index], bucket.elements, cfg.param_elements[i]),
           fmt::format("copy grad[p{}] into ipg_buffer[{}]", i, ipg_index),
           hook_stack(Site{kStage12File, "reduce_independent_p_g_buckets_and_remove_grads", 950}));
    bucket.add(i, cfg.param_elements[i]);
    if (!sides.empty()) side_traffic();
    if (cfg.churn) churn();
  }
  if (bucket.elements) flush(true);
  const std::vector<Site> epi{{kStage12File, "overlapping_partition_gradients_reduce_epilogue", 760}};
  w.host(ActionKind::kDeviceSync, kNone, kNone, "epilogue: device synchronize", epi);
  // Build the averaged gradients on the compute stream from the partition.
  w.copy(C, s.elems(partition, 0, part), s.elems(averaged, 0, part), "averaged_gradients from grads_in_partition",
         {{kStage12File, "overlapping_partition_gradients_reduce_epilogue", 765}});
  std::sort(pieces.begin(), pieces.end(), [](const Piece& x, const Piece& y) {
    return std::tie(x.param, x.lo) < std::tie(y.param, y.lo);
  });
  for (const auto& pc : pieces)
    s.expectations.push_back(Expectation{s.elems(averaged, pc.at, pc.count), uint32_t(pc.param), pc.lo,
                                         fmt::format("averaged gradient of p{} [{}, {})", pc.param, pc.lo, pc.lo + pc.count)});
  return s;
}

Schedule make_stage3(const ZeroConfig& cfg) {
  Schedule s;
  fill_common(cfg, s);
  const bool side = cfg.stage3 != Stage3Variant::kDefaultStreamProducer;
  const bool wait_current = cfg.stage3 == Stage3Variant::kCurrentStream;
  s.name = fmt::format("zero stage 3 {} rank {}/{}", to_string(cfg.stage3), cfg.rank, cfg.world);
  s.description = fmt::format(
      "DeepSpeed ZeRO-3 overlap_comm schedule: gradients produced on the {} stream, reduce stream waits on the {} "
      "stream before copying them into the flat bucket, reduce_scatter={}",
      side ? "side" : "default", wait_current ? "current" : "default", cfg.reduce_scatter);
  ScheduleWriter w(s);
  const uint32_t C = s.add_stream("default", StreamKind::kLegacyDefault);
  const uint32_t G = side ? s.add_stream("backward-side", StreamKind::kNonBlocking) : C;
  const uint32_t RP = s.add_stream("reduce_and_partition", StreamKind::kNonBlocking);
  const uint32_t AG = cfg.fetch_params ? s.add_stream("allgather", StreamKind::kNonBlocking) : kNone;
  const uint32_t producer_wait_target = wait_current ? G : C;

  const size_t n = cfg.param_elements.size();
  const uint64_t W = uint64_t(cfg.world), me = uint64_t(cfg.rank);
  std::vector<uint64_t> chunk(n);
  std::vector<uint32_t> grad(n), shard(n), full(n), gpart(n);
  for (size_t p = 0; p < n; ++p) {
    chunk[p] = (cfg.param_elements[p] + W - 1) / W;
    grad[p] = s.add_buffer(fmt::format("grad[p{}]", p), cfg.param_elements[p] * s.elem_bytes, "gradient");
    if (cfg.fetch_params) {
      shard[p] = s.add_buffer(fmt::format("ds_tensor[p{}]", p), chunk[p] * s.elem_bytes, "param");
      full[p] = s.add_buffer(fmt::format("param[p{}]", p), chunk[p] * W * s.elem_bytes, "param");
    }
    gpart[p] = s.add_buffer(fmt::format("grad_partition[p{}]", p), chunk[p] * s.elem_bytes, "partition");
  }
  const uint32_t ipg = s.add_buffer("ipg_bucket", cfg.bucket_elements * s.elem_bytes, "bucket");

  Bucket bucket;
  std::deque<uint32_t> fetch_events, flush_events;

  const auto s3 = [](const char* fn, uint32_t line) {
    return std::vector<Site>{{kStage3File, fn, line},
                             {kStage3File, "reduce_partition_and_remove_grads", 1183},
                             {"torch/autograd/graph.py", "_engine_run_backward", 769}};
  };

  auto flush = [&](bool last) {
    const int k = bucket.flushes++;
    w.set_flush(k);
    if (int(flush_events.size()) > cfg.max_inflight) {
      w.host(ActionKind::kEventSync, kNone, flush_events.front(),
             "throttle: host waits for " + s.events[flush_events.front()],
             s3("_DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads", 1256));
      flush_events.pop_front();
    }
    const auto site = [&](uint32_t line) { return s3("_DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads", line); };
    if (cfg.delay_ns) w.spin(RP, cfg.delay_ns, site(1260));
    uint64_t S = 0;  // elements per rank in the interleaved buffer
    for (const auto& e : bucket.entries) S += chunk[e.param];
    const uint32_t inter = s.add_buffer(fmt::format("interleaved[{}]", k), S * W * s.elem_bytes, "temp");
    // Interleave: rank r's chunk of every parameter, padded, in one contiguous run per rank.
    uint64_t qoff = 0;
    std::vector<uint64_t> q_at(bucket.entries.size());
    for (size_t b = 0; b < bucket.entries.size(); ++b) {
      const auto& e = bucket.entries[b];
      q_at[b] = qoff;
      const uint64_t np = cfg.param_elements[e.param];
      for (uint64_t r = 0; r < W; ++r) {
        uint64_t lo = r * chunk[e.param], hi = std::min(np, lo + chunk[e.param]);
        uint64_t valid = hi > lo ? hi - lo : 0;
        if (valid)
          w.copy(RP, s.elems(ipg, e.bucket_offset + lo, valid), s.elems(inter, r * S + qoff, valid),
                 fmt::format("interleave p{} chunk {} (bucket {})", e.param, r, k), site(1275));
        if (valid < chunk[e.param]) {
          auto& m = w.device(ActionKind::kMemset, RP, fmt::format("pad p{} chunk {}", e.param, r), site(1277));
          m.writes = {s.elems(inter, r * S + qoff + valid, chunk[e.param] - valid)};
        }
      }
      qoff += chunk[e.param];
    }
    const ByteRange inter_all = s.elems(inter, 0, S * W);
    w.divide(RP, inter_all, W, fmt::format("divide interleaved[{}]", k), site(1282));
    uint32_t src_buf;
    uint64_t src_base;
    if (cfg.reduce_scatter) {
      const uint32_t out = s.add_buffer(fmt::format("rs_out[{}]", k), S * s.elem_bytes, "temp");
      w.collective(RP, CollectiveKind::kReduceScatter, inter_all, s.elems(out, 0, S),
                   fmt::format("reduce_scatter bucket {}", k),
                   {{"deepspeed/runtime/comm/coalesced_collectives.py", "reduce_scatter_coalesced", 120},
                    {kStage3File, "_DeepSpeedZeroOptimizer_Stage3__avg_scatter_grads", 1330}});
      src_buf = out;
      src_base = 0;
    } else {
      w.collective(RP, CollectiveKind::kAllReduce, inter_all, inter_all, fmt::format("all_reduce bucket {}", k),
                   {{kStage3File, "_DeepSpeedZeroOptimizer_Stage3__avg_scatter_grads", 1326}});
      src_buf = inter;
      src_base = me * S;
    }
    for (size_t b = 0; b < bucket.entries.size(); ++b) {
      const auto& e = bucket.entries[b];
      const uint64_t np = cfg.param_elements[e.param];
      uint64_t lo = me * chunk[e.param], hi = std::min(np, lo + chunk[e.param]);
      if (hi <= lo) continue;
      w.copy(RP, s.elems(src_buf, src_base + q_at[b], hi - lo), s.elems(gpart[e.param], 0, hi - lo),
             fmt::format("partition_grads p{}", e.param), s3("partition_grads", 1352), ActionKind::kCopyBack);
    }
    flush_events.push_back(w.record(RP, fmt::format("reduce_and_partition_done[{}]", k), site(1296)));
    bucket.clear();
    w.set_flush(-1);
    (void)last;
  };

  for (size_t i = n; i-- > 0;) {
    if (cfg.fetch_params) {
      const std::vector<Site> fetch{{"deepspeed/runtime/zero/partitioned_param_coordinator.py", "fetch_sub_module", 300}};
      w.collective(AG, CollectiveKind::kAllGather, s.elems(shard[i], 0, chunk[i]), s.elems(full[i], 0, chunk[i] * W),
                   fmt::format("all_gather p{}", i), fetch);
      fetch_events.push_back(w.record(AG, fmt::format("fetched[p{}]", i), fetch));
      w.wait(G, fetch_events.back(), fetch);
      if (int(fetch_events.size()) > cfg.max_inflight) {
        w.host(ActionKind::kEventSync, kNone, fetch_events.front(), "throttle: host waits for " + s.events[fetch_events.front()],
               {{"deepspeed/runtime/zero/partitioned_param_coordinator.py", "fetch_sub_module", 320}});
        fetch_events.pop_front();
      }
    }
    auto& a = w.device(ActionKind::kProduce, G, fmt::format("backward writes grad[p{}]", i), backward_stack());
    a.writes = {s.elems(grad[i], 0, cfg.param_elements[i])};
    if (cfg.fetch_params) a.reads = {s.elems(full[i], 0, chunk[i] * W)};
    a.param = uint32_t(i);
    if (!bucket.fits(cfg.param_elements[i], cfg.bucket_elements)) flush(false);
    // __add_grad_to_ipg_bucket: RP waits on the producer (0.13.3: on default_stream()).
    w.wait_stream(RP, producer_wait_target, fmt::format("grad_ready[p{}]", i),
                  s3("_DeepSpeedZeroOptimizer_Stage3__add_grad_to_ipg_bucket", 1230));
    w.copy(RP, s.elems(grad[i], 0, cfg.param_elements[i]), s.elems(ipg, bucket.elements, cfg.param_elements[i]),
           fmt::format("copy grad[p{}] into ipg_bucket", i),
           s3("_DeepSpeedZeroOptimizer_Stage3__add_grad_to_ipg_bucket", 1240));
    bucket.add(i, cfg.param_elements[i]);
  }
  if (bucket.elements) flush(true);
  const std::vector<Site> end{{kStage3File, "independent_gradient_partition_epilogue", 1170}};
  w.host(ActionKind::kStreamSync, RP, kNone, "epilogue: reduce_and_partition_stream.synchronize()", end);
  const std::vector<Site> step{{kStage3File, "step", 2080}};
  w.wait_stream(C, RP, "step: default stream waits on reduce_and_partition", step);
  for (size_t p = 0; p < n; ++p) {
    uint64_t lo = me * chunk[p], hi = std::min(cfg.param_elements[p], lo + chunk[p]);
    if (hi <= lo) continue;
    s.expectations.push_back(Expectation{s.elems(gpart[p], 0, hi - lo), uint32_t(p), lo,
                                         fmt::format("gradient partition of p{} [{}, {})", p, lo, hi)});
  }
  return s;
}

}  // namespace

Schedule make_zero_schedule(const ZeroConfig& cfg) {
  if (cfg.stage < 1 || cfg.stage > 3) throw std::invalid_argument(fmt::format("stage {} is not 1, 2 or 3", cfg.stage));
  check_common(cfg);
  Schedule s = cfg.stage == 3 ? make_stage3(cfg) : make_stage12(cfg);
  auto errs = s.validate();
  if (!errs.empty()) throw std::logic_error("generator produced a malformed schedule: " + errs.front());
  return s;
}

}  // namespace streamrace::replay
