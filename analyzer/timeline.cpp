// Timeline: trace files read a second time through CallStream (the analysis keeps no per-op data).
#include "analyzer/timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <unordered_map>

#include "traceformat/call_stream.h"

namespace streamrace::analysis {

namespace {

constexpr uint64_t kNominalOpNs = 1000;

// State of one trace while reading it.
class TraceLayout {
 public:
  TraceLayout(const std::string& path, int rank, const trace::TraceDictionary& dict, Timeline& out)
      : path_(path), rank_(rank), dict_(dict), out_(out) {}

  void on_record(const trace::RecordView& r) {
    using namespace trace;
    switch (r.kind) {
      case RecordKind::kKernelLaunch: {
        auto k = r.as<KernelLaunchHead>();
        add_op(k.call, k.stream, k.device, k.correlation, string(k.name_id, "kernel"), "kernel");
        break;
      }
      case RecordKind::kMemcpy: {
        auto m = r.as<Memcpy>();
        add_op(m.call, m.stream, m.device, m.correlation, string(m.call.api_id, "memcpy"), "memcpy");
        break;
      }
      case RecordKind::kMemset: {
        auto m = r.as<Memset>();
        add_op(m.call, m.stream, m.device, m.correlation, string(m.call.api_id, "memset"), "memset");
        break;
      }
      case RecordKind::kNcclCall: {
        auto n = r.as<NcclCall>();
        add_op(n.call, n.stream, n.device, n.correlation, nccl_op_name(n.op), "nccl");
        break;
      }
      case RecordKind::kEventRecord: {
        auto e = r.as<EventRecord>();
        auto last = last_op_.find(e.stream);
        if (last == last_op_.end())
          event_source_.erase(e.event);  // records nothing we can draw an edge from
        else
          event_source_[e.event] = last->second;
        break;
      }
      case RecordKind::kStreamWaitEvent: {
        auto w = r.as<StreamWaitEvent>();
        auto src = event_source_.find(w.event);
        if (src != event_source_.end()) pending_waits_[w.stream].push_back({src->second, w.event});
        break;
      }
      case RecordKind::kOpTiming: {
        auto t = r.as<OpTiming>();
        timings_[t.correlation] = {t.start_ns, t.end_ns};
        break;
      }
      default:
        break;
    }
  }

  // Places the ops: device spans where measured, else estimated in stream order.
  void finish(size_t first_op, const trace::TraceDictionary& dict) {
    std::unordered_map<uint64_t, uint64_t> stream_end;
    for (size_t i = first_op; i < out_.ops.size(); ++i) {
      auto& op = out_.ops[i];
      trace::StreamTraits traits = dict.stream(op.stream);
      if (!traits.known) traits.device = op.device;
      op.stream_label = trace::stream_label(op.stream, traits);
      auto t = timings_.find(op.correlation);
      if (t != timings_.end() && t->second.second >= t->second.first) {
        op.start_ns = t->second.first;
        op.end_ns = t->second.second;
        op.device_time = true;
      } else {
        op.start_ns = std::max(op.host_ns, stream_end[op.stream]);
        op.end_ns = op.start_ns + kNominalOpNs;
      }
      stream_end[op.stream] = std::max(stream_end[op.stream], op.end_ns);
    }
  }

 private:
  std::string string(uint32_t id, const char* fallback) const {
    const std::string& s = dict_.str(id);
    return s.empty() ? fallback : s;
  }

  void add_op(const trace::CallInfo& call, uint64_t stream, uint32_t device, uint64_t correlation, std::string name,
              const char* kind) {
    TimelineOp op;
    op.trace = path_;
    op.rank = rank_;
    op.stream = stream;
    op.device = device;
    op.name = std::move(name);
    op.kind = kind;
    op.seq = call.seq;
    op.host_ns = call.host_ts_ns;
    op.correlation = correlation;
    out_.ops.push_back(std::move(op));
    auto pending = pending_waits_.find(stream);
    if (pending != pending_waits_.end()) {
      for (const auto& [from_seq, event] : pending->second)
        out_.flows.push_back(TimelineFlow{path_, from_seq, call.seq, event, fmt::format("event {:#x}", event)});
      pending_waits_.erase(pending);
    }
    last_op_[stream] = call.seq;
  }

  std::string path_;
  int rank_;
  const trace::TraceDictionary& dict_;
  Timeline& out_;
  std::unordered_map<uint64_t, uint64_t> last_op_;       // stream -> seq of its latest op
  std::unordered_map<uint64_t, uint64_t> event_source_;  // event -> seq of the op it follows
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> pending_waits_;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> timings_;
};

}  // namespace

const TimelineOp* Timeline::find(const std::string& trace, uint64_t seq) const {
  if (indexed_ops_ != ops.size() || (index_.empty() && !ops.empty())) {
    index_.clear();
    for (size_t i = 0; i < ops.size(); ++i) index_[ops[i].trace].emplace(ops[i].seq, i);
    indexed_ops_ = ops.size();
  }
  auto by_trace = index_.find(trace);
  if (by_trace == index_.end()) {
    // Same file reached by another path (relative vs absolute): match by file name.
    auto base = std::filesystem::path(trace).filename().string();
    for (auto it = index_.begin(); it != index_.end(); ++it)
      if (std::filesystem::path(it->first).filename().string() == base) {
        by_trace = it;
        break;
      }
    if (by_trace == index_.end()) return nullptr;
  }
  auto op = by_trace->second.find(seq);
  return op == by_trace->second.end() ? nullptr : &ops[op->second];
}

Timeline timeline_from_findings(const std::vector<Finding>& findings) {
  Timeline out;
  std::map<std::tuple<std::string, uint64_t, uint64_t, std::string>, bool> seen;
  auto add = [&](const Access& a, const std::string& trace, int rank) {
    if (!seen.emplace(std::make_tuple(trace, a.seq, a.stream, a.op), true).second) return;
    TimelineOp op;
    op.trace = trace;
    op.rank = rank;
    op.stream = a.stream;
    op.stream_label = a.stream_label.empty() ? trace::stream_label(a.stream, {}) : a.stream_label;
    op.name = a.op;
    op.kind = a.op_kind;
    op.seq = a.seq;
    op.host_ns = a.seq * kNominalOpNs * 2;
    op.start_ns = op.host_ns;
    op.end_ns = op.start_ns + kNominalOpNs;
    out.ops.push_back(std::move(op));
  };
  for (const auto& f : findings) {
    std::string trace = f.where.empty() ? std::string("findings") : f.where.front().trace;
    int rank = f.where.empty() ? (f.ranks.empty() ? -1 : f.ranks.front()) : f.where.front().rank;
    add(f.earlier, trace, rank);
    add(f.later, trace, rank);
  }
  std::stable_sort(out.ops.begin(), out.ops.end(), [](const auto& a, const auto& b) {
    return a.trace != b.trace ? a.trace < b.trace : a.seq < b.seq;
  });
  return out;
}

Timeline build_timeline(const std::vector<std::string>& trace_paths) {
  Timeline out;
  for (const auto& path : trace_paths) {
    trace::CallStream stream(path);
    size_t first = out.ops.size();
    TraceLayout layout(path, stream.header().rank, stream.dictionary(), out);
    stream.for_each([&](const trace::RecordView& r) { layout.on_record(r); });
    layout.finish(first, stream.dictionary());
  }
  return out;
}

}  // namespace streamrace::analysis
