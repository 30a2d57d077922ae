// Writes the trace-event JSON format ("X" slices, "s"/"f" flows, "M" metadata), one event per
// line. What is drawn is bounded: ReportOptions::perfetto_max_bytes caps the file, filled in
// priority order (metadata, racing ops, their neighbours on the same stream, the rest).
#include "report/perfetto_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace streamrace::report {

namespace {

using nlohmann::ordered_json;

constexpr size_t kMaxNameBytes = 256;  // longer op names (C++ templates) are cut, with "…"
constexpr size_t kContextOps = 3;      // neighbours kept on each side of a racing op

double us(uint64_t ns, uint64_t origin) { return static_cast<double>(ns - origin) / 1000.0; }

// Cuts `s` to at most kMaxNameBytes on a UTF-8 character boundary.
std::string short_name(const std::string& s) {
  if (s.size() <= kMaxNameBytes) return s;
  size_t cut = kMaxNameBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\xE2\x80\xA6";
}

std::string line(const ordered_json& e) { return e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

struct Track {
  int pid = 0;
  int tid = 0;
};

class PerfettoWriter {
 public:
  PerfettoWriter(const analysis::AnalysisResult& result, const Timeline& timeline, const ReportOptions& opts)
      : result_(result), tl_(timeline), opts_(opts) {}

  void write(std::ostream& out) {
    assign_tracks();
    mark_races();
    std::vector<std::string> meta = metadata();
    size_t budget = opts_.perfetto_max_bytes;
    auto spend = [&](const std::string& l) {
      if (l.size() + 2 > budget) return false;
      budget -= l.size() + 2;  // ",\n"
      return true;
    };
    budget = budget > kHeadBytes ? budget - kHeadBytes : 0;
    for (const auto& l : meta) spend(l);  // the tracks: always written
    // Slices in priority order until the budget is spent (written in timeline order): the
    // racing ops, then the race flows between them, then the other ops, then event flows.
    std::vector<std::string> slices(tl_.ops.size());
    std::vector<bool> kept(tl_.ops.size(), false);
    size_t kept_count = 0;
    auto order = priority_order();
    size_t next = 0;
    bool full = false;
    auto keep_slices = [&](size_t until) {
      for (; next < until && !full; ++next) {
        std::string l = line(slice(order[next]));
        if (!spend(l)) {
          full = true;
          break;
        }
        slices[order[next]] = std::move(l);
        kept[order[next]] = true;
        ++kept_count;
      }
    };
    keep_slices(racing_ops_);
    std::vector<std::string> flows;
    uint64_t flow_id = 1;
    size_t marked = 0, unmarked = unmarked_pairs_;
    for (const auto& p : race_pairs_) {
      if (!kept[p.a] || !kept[p.b]) {
        ++unmarked;
        continue;
      }
      auto [s, f] = flow(flow_id++, "race", "race " + p.fingerprint, tl_.ops[p.a], tl_.ops[p.b]);
      if (!spend(s) || !spend(f)) {
        ++unmarked;
        continue;
      }
      flows.push_back(std::move(s));
      flows.push_back(std::move(f));
      ++marked;
    }
    keep_slices(order.size());
    for (const auto& fl : tl_.flows) {
      const TimelineOp* from = tl_.find(fl.trace, fl.from_seq);
      const TimelineOp* to = tl_.find(fl.trace, fl.to_seq);
      if (!from || !to || !kept[index(from)] || !kept[index(to)]) continue;
      auto [s, f] = flow(flow_id++, "event", fl.label, *from, *to);
      if (!spend(s) || !spend(f)) break;
      flows.push_back(std::move(s));
      flows.push_back(std::move(f));
    }

    ordered_json other{{"producer", "streamrace " + opts_.tool_version},
                       {"timing", "device timestamps where measured, else host issue order (1 us nominal)"},
                       {"markedFindings", marked_findings_},
                       {"markedOccurrences", marked},
                       {"unmarkedOccurrences", unmarked},
                       {"ops", tl_.ops.size()},
                       {"omittedOps", tl_.ops.size() - kept_count}};
    out << "{\"displayTimeUnit\":\"ns\",\"otherData\":" << line(other) << ",\"traceEvents\":[\n";
    bool first = true;
    auto emit = [&](const std::string& l) {
      out << (first ? "" : ",\n") << l;
      first = false;
    };
    for (const auto& l : meta) emit(l);
    for (size_t i = 0; i < slices.size(); ++i)
      if (kept[i]) emit(slices[i]);
    for (const auto& l : flows) emit(l);
    out << "\n]}\n";
  }

 private:
  // The document's fixed head and tail, otherData included, stay well under this.
  static constexpr size_t kHeadBytes = 1024;

  struct RacePair {
    size_t a, b;  // indices into tl_.ops
    std::string fingerprint;
  };

  size_t index(const TimelineOp* op) const { return static_cast<size_t>(op - tl_.ops.data()); }

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

  // Every occurrence of the first perfetto_findings findings, on every trace it was seen in.
  // An occurrence without its call pair (findings read from JSON) is the representative one.
  void mark_races() {
    size_t n = std::min(opts_.perfetto_findings, result_.findings.size());
    for (size_t i = 0; i < n; ++i) {
      const auto& f = result_.findings[i];
      bool any = false;
      std::vector<std::pair<std::string, analysis::RacingPair>> pairs;
      for (const auto& w : f.where) {
        for (const auto& p : w.pairs) pairs.push_back({w.trace, p});
        unmarked_pairs_ += w.count > w.pairs.size() ? w.count - w.pairs.size() : 0;
      }
      if (pairs.empty())
        pairs.push_back({f.where.empty() ? std::string("findings") : f.where.front().trace,
                         analysis::RacingPair{f.earlier.seq, f.later.seq}});
      for (const auto& [trace, p] : pairs) {
        const TimelineOp* a = tl_.find(trace, p.earlier_seq);
        const TimelineOp* b = tl_.find(trace, p.later_seq);
        if (!a || !b || a == b) {
          ++unmarked_pairs_;
          continue;
        }
        auto add = [&](const TimelineOp* op) {
          auto& fps = racing_[index(op)];
          if (std::find(fps.begin(), fps.end(), f.fingerprint) == fps.end()) fps.push_back(f.fingerprint);
        };
        add(a);
        add(b);
        race_pairs_.push_back({index(a), index(b), f.fingerprint});
        any = true;
      }
      marked_findings_ += any;
    }
  }

  // Racing ops (in the order their findings and occurrences come), then up to kContextOps
  // neighbours on each side on the same stream, then every other op in timeline order.
  std::vector<size_t> priority_order() {
    std::vector<size_t> order;
    std::vector<bool> taken(tl_.ops.size(), false);
    auto take = [&](size_t i) {
      if (!taken[i]) {
        taken[i] = true;
        order.push_back(i);
      }
    };
    for (const auto& p : race_pairs_) {
      take(p.a);
      take(p.b);
    }
    racing_ops_ = order.size();
    if (!race_pairs_.empty()) {
      std::map<std::pair<std::string, uint64_t>, std::vector<size_t>> by_stream;
      std::vector<size_t> position(tl_.ops.size());
      for (size_t i = 0; i < tl_.ops.size(); ++i) {
        auto& v = by_stream[{tl_.ops[i].trace, tl_.ops[i].stream}];
        position[i] = v.size();
        v.push_back(i);
      }
      std::vector<size_t> racing(order);
      for (size_t i : racing) {
        const auto& v = by_stream.at({tl_.ops[i].trace, tl_.ops[i].stream});
        size_t at = position[i];
        for (size_t k = 1; k <= kContextOps; ++k) {
          if (at >= k) take(v[at - k]);
          if (at + k < v.size()) take(v[at + k]);
        }
      }
    }
    for (size_t i = 0; i < tl_.ops.size(); ++i) take(i);
    return order;
  }

  Track track(const TimelineOp& op) const { return Track{pids_.at(op.trace), tids_.at(op.trace).at(op.stream)}; }

  std::vector<std::string> metadata() const {
    std::vector<std::string> out;
    for (const auto& [trace, pid] : pids_) {
      int rank = trace_rank_.at(trace);
      std::string name = rank >= 0 ? fmt::format("rank {} ({})", rank, trace) : trace;
      out.push_back(line({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}}));
      out.push_back(line({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0},
                          {"args", {{"sort_index", rank >= 0 ? rank : 1000 + pid}}}}));
      for (const auto& [stream, tid] : tids_.at(trace)) {
        out.push_back(line({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid},
                            {"args", {{"name", stream_labels_.at({trace, stream})}}}}));
        out.push_back(line({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", tid},
                            {"args", {{"sort_index", tid}}}}));
      }
    }
    return out;
  }

  ordered_json slice(size_t i) const {
    const auto& op = tl_.ops[i];
    auto t = track(op);
    auto race = racing_.find(i);
    std::string name = short_name(op.name);
    ordered_json e;
    e["ph"] = "X";
    e["name"] = race == racing_.end() ? name : "RACE " + name;
    e["cat"] = race == racing_.end() ? op.kind : op.kind + ",race";
    e["pid"] = t.pid;
    e["tid"] = t.tid;
    e["ts"] = us(op.start_ns, origin_);
    e["dur"] = us(op.end_ns, op.start_ns);
    ordered_json args{{"seq", op.seq}, {"timing", op.device_time ? "device" : "host order"}};
    if (race != racing_.end()) {
      args["races"] = race->second;
      e["cname"] = "terrible";  // red in the legacy viewer
    }
    e["args"] = std::move(args);
    return e;
  }

  std::pair<std::string, std::string> flow(uint64_t id, const char* cat, const std::string& name,
                                           const TimelineOp& from, const TimelineOp& to) const {
    auto a = track(from), b = track(to);
    // Flow ends bind to the slice that encloses their timestamp: use each slice's midpoint.
    return {line({{"ph", "s"}, {"id", id}, {"cat", cat}, {"name", name}, {"pid", a.pid}, {"tid", a.tid},
                  {"ts", us(from.start_ns + (from.end_ns - from.start_ns) / 2, origin_)}}),
            line({{"ph", "f"}, {"bp", "e"}, {"id", id}, {"cat", cat}, {"name", name}, {"pid", b.pid}, {"tid", b.tid},
                  {"ts", us(to.start_ns + (to.end_ns - to.start_ns) / 2, origin_)}})};
  }

  const analysis::AnalysisResult& result_;
  const Timeline& tl_;
  const ReportOptions& opts_;
  uint64_t origin_ = 0;
  std::map<std::string, int> pids_;
  std::map<std::string, int> trace_rank_;
  std::map<std::string, std::map<uint64_t, int>> tids_;
  std::map<std::pair<std::string, uint64_t>, std::string> stream_labels_;
  std::map<size_t, std::vector<std::string>> racing_;  // op index -> fingerprints
  std::vector<RacePair> race_pairs_;
  size_t marked_findings_ = 0;
  size_t racing_ops_ = 0;  // how many of priority_order() are racing ops
  size_t unmarked_pairs_ = 0;  // occurrences beyond the kept pairs, or whose ops are not in the timeline
};

}  // namespace

void write_perfetto(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& timeline,
                    const ReportOptions& opts) {
  if (timeline.empty()) {
    Timeline own = timeline_from_findings(result.findings);
    PerfettoWriter(result, own, opts).write(out);
    return;
  }
  PerfettoWriter(result, timeline, opts).write(out);
}

}  // namespace streamrace::report
