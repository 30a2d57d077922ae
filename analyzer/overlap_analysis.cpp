// OverlapAnalysis: collective/compute overlap and the causes of compute idle time.
#include "analyzer/overlap_analysis.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "analyzer/happens_before.h"
#include "traceformat/call_stream.h"

namespace streamrace::analysis {

using namespace streamrace::trace;

namespace {

enum class OpClass { kCompute, kCollective };

struct Op {
  uint64_t seq = 0, correlation = 0, stream = 0, comm = 0, bytes = 0, host_ts = 0;
  uint32_t name_id = 0, stack_id = 0;
  OpClass cls = OpClass::kCompute;
  uint64_t start = 0, end = 0;  // 0 = untimed
  bool timed() const { return end > start; }
};

// A call that can hold a stream or the host back.
struct Sync {
  uint64_t seq = 0, host_ts = 0;
  RecordKind kind{};
  uint64_t stream = 0;      // StreamWaitEvent: the waiting stream; StreamSynchronize: the stream
  int64_t marked_op = -1;   // StreamWaitEvent/EventSynchronize: index of the op the event marks
  uint32_t stack_id = 0;
};

struct Interval {
  uint64_t lo, hi;
};

uint64_t union_length(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  uint64_t total = 0, cur_lo = 0, cur_hi = 0;
  bool open = false;
  for (const auto& i : v) {
    if (!open || i.lo > cur_hi) {
      if (open) total += cur_hi - cur_lo;
      cur_lo = i.lo;
      cur_hi = i.hi;
      open = true;
    } else {
      cur_hi = std::max(cur_hi, i.hi);
    }
  }
  if (open) total += cur_hi - cur_lo;
  return total;
}

}  // namespace

RankOverlap analyze_overlap(const std::string& path, const OverlapOptions& opts) {
  CallStream stream(path);
  RankOverlap out;
  out.trace = path;
  out.rank = stream.header().rank;
  // Call records in call order, kept compactly; timings arrive after their ops.
  std::vector<std::pair<RecordKind, std::vector<uint8_t>>> calls;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> timing;  // correlation -> start, end
  stream.for_each([&](const RecordView& r) {
    switch (r.kind) {
      case RecordKind::kOpTiming: {
        auto t = r.as<OpTiming>();
        timing[t.correlation] = {t.start_ns, t.end_ns};
        return;
      }
      case RecordKind::kNcclCommInit: {
        auto c = r.as<NcclCommInit>();
        if (c.rank >= 0 && out.rank < 0) out.rank = c.rank;
        return;
      }
      case RecordKind::kKernelLaunch: case RecordKind::kMemcpy: case RecordKind::kMemset: case RecordKind::kNcclCall:
      case RecordKind::kEventRecord: case RecordKind::kStreamWaitEvent: case RecordKind::kEventSynchronize:
      case RecordKind::kStreamSynchronize: case RecordKind::kDeviceSynchronize: case RecordKind::kFree:
        calls.push_back({r.kind, std::vector<uint8_t>(r.body.begin(), r.body.end())});
        return;
      default:
        return;
    }
  });
  const TraceDictionary& dict = stream.dictionary();
  auto frames_of = [&](uint32_t id) {
    std::vector<Frame> f;
    if (const auto* frames = dict.stack(id))
      for (const auto& s : *frames)
        f.push_back(Frame{dict.str(s.file_id), dict.str(s.function_id), s.line, s.kind == FrameKind::kPython, s.pc});
    return f;
  };
  auto name_of = [&](uint32_t id) { return dict.str(id); };
  auto label_of = [&](uint64_t s) {
    auto [it, inserted] = out.stream_labels.try_emplace(s);
    if (inserted) it->second = dict.label(s);
    return it->second;
  };

  std::vector<Op> ops;
  std::vector<Sync> syncs;
  std::unordered_map<uint64_t, int64_t> last_op_on_stream;
  std::unordered_map<uint64_t, int64_t> event_marks;  // event -> op index it marks
  auto add_op = [&](Op op) {
    auto it = timing.find(op.correlation);
    if (op.correlation && it != timing.end()) {
      op.start = it->second.first;
      op.end = it->second.second;
    }
    (op.timed() ? out.timed_ops : out.untimed_ops)++;
    last_op_on_stream[op.stream] = int64_t(ops.size());
    ops.push_back(op);
  };
  for (auto& rec : calls) {
    RecordView v{rec.first, rec.second};
    uint64_t seq;
    std::memcpy(&seq, rec.second.data(), sizeof(seq));
    switch (rec.first) {
      case RecordKind::kKernelLaunch: {
        auto k = v.as<KernelLaunchHead>();
        add_op(Op{seq, k.correlation, k.stream, 0, 0, k.call.host_ts_ns, k.name_id, k.call.stack_id});
        break;
      }
      case RecordKind::kMemcpy: {
        auto m = v.as<Memcpy>();
        add_op(Op{seq, m.correlation, m.stream, 0, m.bytes, m.call.host_ts_ns, m.call.api_id, m.call.stack_id});
        break;
      }
      case RecordKind::kMemset: {
        auto m = v.as<Memset>();
        add_op(Op{seq, m.correlation, m.stream, 0, m.bytes, m.call.host_ts_ns, m.call.api_id, m.call.stack_id});
        break;
      }
      case RecordKind::kNcclCall: {
        auto n = v.as<NcclCall>();
        Op op{seq, n.correlation, n.stream, n.comm, n.count * nccl_type_size(n.datatype), n.call.host_ts_ns,
              n.call.api_id, n.call.stack_id};
        op.cls = OpClass::kCollective;
        add_op(op);
        break;
      }
      case RecordKind::kEventRecord: {
        auto e = v.as<EventRecord>();
        auto it = last_op_on_stream.find(e.stream);
        event_marks[e.event] = it == last_op_on_stream.end() ? -1 : it->second;
        break;
      }
      case RecordKind::kStreamWaitEvent: {
        auto w = v.as<StreamWaitEvent>();
        auto it = event_marks.find(w.event);
        syncs.push_back(Sync{seq, w.call.host_ts_ns, rec.first, w.stream, it == event_marks.end() ? -1 : it->second,
                             w.call.stack_id});
        break;
      }
      case RecordKind::kEventSynchronize: {
        auto w = v.as<EventSynchronize>();
        auto it = event_marks.find(w.event);
        syncs.push_back(Sync{seq, w.call.host_ts_ns, rec.first, 0, it == event_marks.end() ? -1 : it->second,
                             w.call.stack_id});
        break;
      }
      case RecordKind::kStreamSynchronize: {
        auto w = v.as<StreamSynchronize>();
        auto it = last_op_on_stream.find(w.stream);
        syncs.push_back(Sync{seq, w.call.host_ts_ns, rec.first, w.stream, it == last_op_on_stream.end() ? -1 : it->second,
                             w.call.stack_id});
        break;
      }
      case RecordKind::kDeviceSynchronize: {
        auto w = v.as<DeviceSynchronize>();
        syncs.push_back(Sync{seq, w.call.host_ts_ns, rec.first, 0, -1, w.call.stack_id});
        break;
      }
      case RecordKind::kFree: {
        // cudaFree and the other synchronising frees hold the host like cudaDeviceSynchronize.
        // (Older traces also have the tracer's DeviceSynchronize record just before: the same
        // kind of sync at the same place, so the cause reported is the same.)
        auto f = v.as<Free>();
        if (free_synchronizes_device(f.kind))
          syncs.push_back(Sync{seq, f.call.host_ts_ns, RecordKind::kDeviceSynchronize, 0, -1, f.call.stack_id});
        break;
      }
      default:
        break;
    }
  }

  // Compute intervals per stream, and the union over all streams.
  std::map<uint64_t, std::vector<Interval>> compute_by_stream;
  std::vector<Interval> all_compute, all_collective;
  uint64_t first = UINT64_MAX, last = 0;
  for (const Op& op : ops) {
    if (!op.timed()) continue;
    first = std::min(first, op.start);
    last = std::max(last, op.end);
    if (op.cls == OpClass::kCompute) {
      compute_by_stream[op.stream].push_back({op.start, op.end});
      all_compute.push_back({op.start, op.end});
    } else {
      all_collective.push_back({op.start, op.end});
    }
  }
  for (auto& [s, v] : compute_by_stream)
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  out.span_ns = last > first ? last - first : 0;
  {
    auto tmp = all_compute;
    out.compute_ns = union_length(tmp);
  }

  // Collectives: overlap with compute on other streams.
  for (const Op& op : ops) {
    if (op.cls != OpClass::kCollective || !op.timed()) continue;
    std::vector<Interval> clip;
    for (const auto& [s, v] : compute_by_stream) {
      if (s == op.stream) continue;
      auto it = std::lower_bound(v.begin(), v.end(), op.start, [](const Interval& i, uint64_t t) { return i.hi <= t; });
      for (; it != v.end() && it->lo < op.end; ++it) clip.push_back({std::max(it->lo, op.start), std::min(it->hi, op.end)});
    }
    CollectiveOverlap c;
    c.op = name_of(op.name_id);
    c.stream = op.stream;
    c.comm = op.comm;
    c.bytes = op.bytes;
    c.seq = op.seq;
    c.start_ns = op.start;
    c.end_ns = op.end;
    c.overlapped_ns = union_length(clip);
    c.stack = frames_of(op.stack_id);
    out.per_collective.push_back(std::move(c));
    out.collectives++;
    out.collective_ns += op.end - op.start;
    out.overlapped_ns += out.per_collective.back().overlapped_ns;
  }
  // Exposed: collective time during which no compute ran anywhere.
  {
    std::vector<Interval> both = all_collective;
    both.insert(both.end(), all_compute.begin(), all_compute.end());
    uint64_t both_union = union_length(both);
    auto comp = all_compute;
    uint64_t comp_union = union_length(comp);
    // |coll \ comp| = |coll ∪ comp| - |comp|
    out.exposed_ns = both_union > comp_union ? both_union - comp_union : 0;
  }

  // Idle stretches on compute streams and what held them.
  std::map<uint64_t, std::vector<size_t>> ops_by_stream;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].timed() && ops[i].cls == OpClass::kCompute) ops_by_stream[ops[i].stream].push_back(i);
  std::map<std::string, uint64_t> cause_total;
  std::vector<std::string> cause_order;
  for (auto& [stream, idx] : ops_by_stream) {
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return ops[a].start < ops[b].start; });
    for (size_t k = 1; k < idx.size(); ++k) {
      const Op& a = ops[idx[k - 1]];
      const Op& b = ops[idx[k]];
      if (b.start <= a.end || b.start - a.end < opts.min_wait_ns) continue;
      ComputeWait w;
      w.stream = stream;
      w.start_ns = a.end;
      w.end_ns = b.start;
      uint64_t best_t = 0;
      const uint64_t lo_seq = std::min(a.seq, b.seq), hi_seq = std::max(a.seq, b.seq);
      auto first_sync = std::lower_bound(syncs.begin(), syncs.end(), lo_seq,
                                         [](const Sync& s, uint64_t v) { return s.seq < v; });
      const Sync* host_sync = nullptr;
      for (auto it = first_sync; it != syncs.end() && it->seq < hi_seq; ++it) {
        if (it->kind == RecordKind::kStreamWaitEvent) {
          if (it->stream != stream || it->marked_op < 0) continue;
          const Op& x = ops[size_t(it->marked_op)];
          if (!x.timed() || x.end <= a.end || x.end > b.start + 5'000) continue;
          if (x.end > best_t) {
            best_t = x.end;
            w.cause = "stream wait";
            w.detail = fmt::format("waited for {} on {}", name_of(x.name_id), label_of(x.stream));
            w.stack = frames_of(it->stack_id);
            if (x.cls == OpClass::kCollective) {
              // The collective itself started late because another collective on the same
              // communicator was still running: NCCL runs one communicator's work in order.
              for (const Op& y : ops)
                if (y.cls == OpClass::kCollective && y.comm == x.comm && y.timed() && y.seq < x.seq &&
                    y.end <= x.start + 2'000 && x.start - y.end < 20'000 && y.end > a.end) {
                  w.cause = "collective ahead";
                  w.detail = fmt::format("waited for {} on {}, which queued behind {} on the same communicator",
                                         name_of(x.name_id), label_of(x.stream), name_of(y.name_id));
                }
            }
          }
        } else if (it->kind != RecordKind::kStreamWaitEvent) {
          host_sync = &*it;
        }
      }
      if (b.host_ts > a.end + opts.min_wait_ns / 2 && b.host_ts >= best_t) {
        // The host issued the next op only after the stream had gone idle.
        if (host_sync) {
          w.cause = host_sync->kind == RecordKind::kEventSynchronize ? "event synchronize"
                    : host_sync->kind == RecordKind::kStreamSynchronize ? "stream synchronize"
                                                                         : "device synchronize";
          w.detail = host_sync->marked_op >= 0
                         ? fmt::format("host blocked until {} on {} finished",
                                       name_of(ops[size_t(host_sync->marked_op)].name_id),
                                       label_of(ops[size_t(host_sync->marked_op)].stream))
                         : "host blocked";
          w.stack = frames_of(host_sync->stack_id);
        } else {
          w.cause = "host launch";
          w.detail = "the host issued the next operation late (CPU-bound Python or launch overhead)";
          w.stack = frames_of(b.stack_id);
        }
      }
      if (w.cause.empty()) {
        w.cause = "unexplained";
        w.detail = "no wait, synchronisation or late launch found between the two operations";
        w.stack = frames_of(b.stack_id);
      }
      if (!cause_total.count(w.cause)) cause_order.push_back(w.cause);
      cause_total[w.cause] += w.end_ns - w.start_ns;
      out.waits.push_back(std::move(w));
    }
  }
  std::sort(out.waits.begin(), out.waits.end(),
            [](const ComputeWait& x, const ComputeWait& y) { return x.end_ns - x.start_ns > y.end_ns - y.start_ns; });
  if (out.waits.size() > opts.max_waits) out.waits.resize(opts.max_waits);
  for (const auto& c : cause_order) out.wait_by_cause.emplace_back(c, cause_total[c]);
  for (const auto& c : out.per_collective) label_of(c.stream);
  for (const auto& w : out.waits) label_of(w.stream);
  return out;
}

namespace {
std::string ms(uint64_t ns) { return fmt::format("{:.3f} ms", double(ns) / 1e6); }
std::string pct(uint64_t part, uint64_t whole) {
  return whole ? fmt::format("{:.1f}%", 100.0 * double(part) / double(whole)) : std::string("-");
}
std::string site(const std::vector<Frame>& stack) {
  for (const auto& f : stack)
    if (f.python) return fmt::format("{}:{} in {}", f.file.substr(f.file.rfind('/') + 1), f.line, f.function);
  if (!stack.empty()) return stack.front().function;
  return "<no stack>";
}
}  // namespace

void write_overlap_text(std::ostream& out, const std::vector<RankOverlap>& ranks, const OverlapOptions& opts) {
  for (const RankOverlap& r : ranks) {
    auto label_of = [&](uint64_t s) {
      auto it = r.stream_labels.find(s);
      return it != r.stream_labels.end() ? it->second : trace::stream_label(s, {});
    };
    out << fmt::format("rank {} ({})\n", r.rank, r.trace);
    if (r.timed_ops == 0) {
      out << "  no device timestamps in this trace: record it with `streamrace run --timing` (STREAMRACE_TIMING=1)\n";
      continue;
    }
    out << fmt::format("  {} collectives, {} of collective time, {} of it overlapped with compute on other streams\n",
                       r.collectives, ms(r.collective_ns), pct(r.overlapped_ns, r.collective_ns));
    out << fmt::format("  exposed collective time (nothing else running): {}", ms(r.exposed_ns));
    if (opts.steps > 0) out << fmt::format(" = {} per step over {} steps", ms(r.exposed_ns / uint64_t(opts.steps)), opts.steps);
    out << fmt::format("\n  compute busy {} of a {} span\n", ms(r.compute_ns), ms(r.span_ns));
    // Per collective kind and stream.
    std::map<std::pair<std::string, uint64_t>, std::tuple<uint64_t, uint64_t, uint64_t>> groups;
    for (const auto& c : r.per_collective) {
      auto& g = groups[{c.op, c.stream}];
      std::get<0>(g) += 1;
      std::get<1>(g) += c.end_ns - c.start_ns;
      std::get<2>(g) += c.overlapped_ns;
    }
    for (const auto& [key, g] : groups)
      out << fmt::format("    {:<20} on {:<36} x{:<5} {:>12}  overlapped {}\n", key.first, label_of(key.second),
                         std::get<0>(g), ms(std::get<1>(g)), pct(std::get<2>(g), std::get<1>(g)));
    if (!r.wait_by_cause.empty()) {
      out << "  compute streams idle, by cause:\n";
      for (const auto& [cause, ns] : r.wait_by_cause) out << fmt::format("    {:<20} {}\n", cause, ms(ns));
      out << "  longest idle stretches:\n";
      for (const auto& w : r.waits)
        out << fmt::format("    {} on {}: {}: {} (at {})\n", ms(w.end_ns - w.start_ns), label_of(w.stream), w.cause,
                           w.detail, site(w.stack));
    }
  }
}

nlohmann::json overlap_to_json(const std::vector<RankOverlap>& ranks, const OverlapOptions& opts) {
  nlohmann::json j = {{"schema", "streamrace-overlap"}, {"version", 1}, {"steps", opts.steps}};
  nlohmann::json arr = nlohmann::json::array();
  for (const RankOverlap& r : ranks) {
    nlohmann::json colls = nlohmann::json::array();
    for (const auto& c : r.per_collective)
      colls.push_back({{"op", c.op}, {"stream", fmt::format("{:#x}", c.stream)}, {"bytes", c.bytes}, {"seq", c.seq},
                       {"start_ns", c.start_ns}, {"end_ns", c.end_ns}, {"overlapped_ns", c.overlapped_ns},
                       {"stack", c.stack}});
    nlohmann::json waits = nlohmann::json::array();
    for (const auto& w : r.waits)
      waits.push_back({{"stream", fmt::format("{:#x}", w.stream)}, {"start_ns", w.start_ns}, {"end_ns", w.end_ns},
                       {"cause", w.cause}, {"detail", w.detail}, {"stack", w.stack}});
    nlohmann::json causes = nlohmann::json::object();
    for (const auto& [c, ns] : r.wait_by_cause) causes[c] = ns;
    arr.push_back({{"trace", r.trace}, {"rank", r.rank}, {"collectives", r.collectives},
                   {"collective_ns", r.collective_ns}, {"overlapped_ns", r.overlapped_ns},
                   {"exposed_ns", r.exposed_ns}, {"compute_ns", r.compute_ns}, {"span_ns", r.span_ns},
                   {"timed_ops", r.timed_ops}, {"untimed_ops", r.untimed_ops}, {"per_collective", colls},
                   {"idle_by_cause_ns", causes}, {"longest_idle", waits}});
  }
  j["ranks"] = arr;
  return j;
}

}  // namespace streamrace::analysis
