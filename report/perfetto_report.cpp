// Writes the trace-event JSON format ("X" slices, "s"/"f" flows, "M" metadata).
#include "report/perfetto_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace streamrace::report {

namespace {

using nlohmann::ordered_json;

double us(uint64_t ns, uint64_t origin) { return static_cast<double>(ns - origin) / 1000.0; }

struct Track {
  int pid = 0;
  int tid = 0;
};

class PerfettoWriter {
 public:
  PerfettoWriter(const analysis::AnalysisResult& result, const Timeline& timeline, const ReportOptions& opts)
      : result_(result), tl_(timeline), opts_(opts) {}

  ordered_json document() {
    assign_tracks();
    mark_races();
    ordered_json events = ordered_json::array();
    metadata(events);
    for (size_t i = 0; i < tl_.ops.size(); ++i) events.push_back(slice(i));
    uint64_t flow_id = 1;
    for (const auto& fl : tl_.flows) {
      const TimelineOp* from = tl_.find(fl.trace, fl.from_seq);
      const TimelineOp* to = tl_.find(fl.trace, fl.to_seq);
      if (from && to) add_flow(events, flow_id++, "event", fl.label, *from, *to);
    }
    for (const auto& [ops, fp] : race_pairs_)
      add_flow(events, flow_id++, "race", "race " + fp, *ops.first, *ops.second);
    ordered_json doc;
    doc["displayTimeUnit"] = "ns";
    doc["otherData"] = ordered_json{{"producer", "streamrace " + opts_.tool_version},
                                    {"timing", "device timestamps where measured, else host issue order (1 us nominal)"}};
    doc["traceEvents"] = std::move(events);
    return doc;
  }

 private:
  void assign_tracks() {
    origin_ = UINT64_MAX;
    for (const auto& op : tl_.ops) origin_ = std::min(origin_, op.start_ns);
    if (origin_ == UINT64_MAX) origin_ = 0;
    for (const auto& op : tl_.ops) {
      auto [p, fresh] = pids_.try_emplace(op.trace, static_cast<int>(pids_.size()) + 1);
      if (fresh) trace_rank_[op.trace] = op.rank;
      auto& streams = tids_[op.trace];
      auto [t, new_stream] = streams.try_emplace(op.stream, static_cast<int>(streams.size()) + 1);
      if (new_stream) stream_labels_[{op.trace, op.stream}] = op.stream_label;
    }
  }

  void mark_races() {
    for (const auto& f : result_.findings) {
      std::string trace = f.where.empty() ? std::string("findings") : f.where.front().trace;
      const TimelineOp* a = tl_.find(trace, f.earlier.seq);
      const TimelineOp* b = tl_.find(trace, f.later.seq);
      if (!a || !b || a == b) continue;
      racing_[a].push_back(f.fingerprint);
      racing_[b].push_back(f.fingerprint);
      race_pairs_.push_back({{a, b}, f.fingerprint});
    }
  }

  Track track(const TimelineOp& op) const {
    return Track{pids_.at(op.trace), tids_.at(op.trace).at(op.stream)};
  }

  void metadata(ordered_json& events) const {
    for (const auto& [trace, pid] : pids_) {
      int rank = trace_rank_.at(trace);
      std::string name = rank >= 0 ? fmt::format("rank {} ({})", rank, trace) : trace;
      events.push_back(ordered_json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
      events.push_back(ordered_json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
                                    {"args", {{"sort_index", rank >= 0 ? rank : 1000 + pid}}}});
      for (const auto& [stream, tid] : tids_.at(trace)) {
        events.push_back(ordered_json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid},
                                      {"args", {{"name", stream_labels_.at({trace, stream})}}}});
        events.push_back(ordered_json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid},
                                      {"args", {{"sort_index", tid}}}});
      }
    }
  }

  ordered_json slice(size_t i) const {
    const auto& op = tl_.ops[i];
    auto t = track(op);
    ordered_json e;
    auto race = racing_.find(&op);
    e["ph"] = "X";
    e["name"] = race == racing_.end() ? op.name : "RACE " + op.name;
    e["cat"] = race == racing_.end() ? op.kind : op.kind + ",race";
    e["pid"] = t.pid;
    e["tid"] = t.tid;
    e["ts"] = us(op.start_ns, origin_);
    e["dur"] = us(op.end_ns, op.start_ns);
    ordered_json args{{"seq", op.seq}, {"stream", op.stream_label}, {"timing", op.device_time ? "device" : "host order"}};
    if (race != racing_.end()) {
      args["races"] = race->second;
      e["cname"] = "terrible";  // red in the legacy viewer
    }
    e["args"] = std::move(args);
    return e;
  }

  void add_flow(ordered_json& events, uint64_t id, const char* cat, const std::string& name, const TimelineOp& from,
                const TimelineOp& to) const {
    auto a = track(from), b = track(to);
    // Flow ends bind to the slice that encloses their timestamp: use each slice's midpoint.
    events.push_back(ordered_json{{"ph", "s"}, {"id", id}, {"cat", cat}, {"name", name}, {"pid", a.pid}, {"tid", a.tid},
                                  {"ts", us(from.start_ns + (from.end_ns - from.start_ns) / 2, origin_)}});
    events.push_back(ordered_json{{"ph", "f"}, {"bp", "e"}, {"id", id}, {"cat", cat}, {"name", name}, {"pid", b.pid},
                                  {"tid", b.tid}, {"ts", us(to.start_ns + (to.end_ns - to.start_ns) / 2, origin_)}});
  }

  const analysis::AnalysisResult& result_;
  const Timeline& tl_;
  const ReportOptions& opts_;
  uint64_t origin_ = 0;
  std::map<std::string, int> pids_;
  std::map<std::string, int> trace_rank_;
  std::map<std::string, std::map<uint64_t, int>> tids_;
  std::map<std::pair<std::string, uint64_t>, std::string> stream_labels_;
  std::map<const TimelineOp*, std::vector<std::string>> racing_;
  std::vector<std::pair<std::pair<const TimelineOp*, const TimelineOp*>, std::string>> race_pairs_;
};

}  // namespace

void write_perfetto(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& timeline,
                    const ReportOptions& opts) {
  if (timeline.empty()) {
    Timeline own = timeline_from_findings(result.findings);
    out << PerfettoWriter(result, own, opts).document().dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
    return;
  }
  out << PerfettoWriter(result, timeline, opts).document().dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
      << "\n";
}

}  // namespace streamrace::report
