// Writes the HTML report. Every string from a trace, log or source path goes through
// escape_markup; the page forbids all network loads with a Content-Security-Policy.
#include "report/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "report/finding_class.h"
#include "report/markup_escape.h"

namespace streamrace::report {

namespace {

using analysis::Access;
using analysis::Finding;
using analysis::Occurrence;

// Layout rules the tests check (tests/report: HtmlLayoutRules): no fixed widths, every table in
// a horizontally scrolling wrapper, long names and paths wrap anywhere rather than overflow.
constexpr const char* kStyle = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9cfdb}main{padding:16px 24px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:0 0 18px;padding:12px 16px;min-width:0}
section h2{font-size:16px;margin:0 0 6px}
.badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;font-weight:600;margin-right:6px;white-space:nowrap}
.certain{background:#c62828;color:#fff}.possible{background:#ef8f00;color:#fff}
.new{background:#1d2330;color:#fff}.baselined{background:#dde1e8;color:#1d2330}
code,.mono{font-family:ui-monospace,"SFMono-Regular",Menlo,monospace;font-size:12.5px}
p,li,code,.mono{overflow-wrap:anywhere}
.table-wrap{overflow-x:auto;max-width:100%}
thead th{white-space:nowrap;overflow-wrap:normal;word-break:normal}td.fp{white-space:nowrap}
table{border-collapse:collapse;width:100%;margin:8px 0}
th,td{border:1px solid #e3e6ec;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere;word-break:break-word}
th{background:#f0f2f5}tbody th{white-space:nowrap}
td.num{text-align:right;white-space:nowrap}
.stacks{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,28em),1fr));gap:10px;margin:8px 0}
.stacks>div{border:1px solid #e3e6ec;border-radius:4px;padding:6px 10px;min-width:0}
.stacks h3{font-size:13px;margin:0 0 4px}
ol.stack{margin:4px 0;padding-left:26px}ol.stack li{margin:2px 0}
.fn{font-weight:600}.loc{color:#5a6475}
.edge{border-left:3px solid #c62828;padding:2px 10px;margin:8px 0}
.fix{border-left:3px solid #2e7d32;padding:2px 10px;margin:8px 0}
.notice{padding:4px 10px;margin:4px 0;border-radius:4px;background:#fff4e5;overflow-wrap:anywhere}
.notice.error{background:#fdecea}.notice.info{background:#e8f1fb}
svg.timeline{display:block;width:100%;background:#fff;border:1px solid #e3e6ec;margin:6px 0}
svg .op{fill:#9aa5b8}svg .op.race{fill:#c62828}svg .lane{font-size:11px;fill:#5a6475}svg .rank{font-size:12px;font-weight:600;fill:#1d2330}
svg .tick{stroke:#e3e6ec}svg .axis{stroke:#5a6475}svg .ticklabel{font-size:10px;fill:#5a6475}
svg .flow{stroke:#5a6475;stroke-width:1}svg .raceflow{stroke:#c62828;stroke-width:1.5;stroke-dasharray:4 3}
)CSS";

std::string esc(const std::string& s) { return escape_markup(s); }

class HtmlWriter {
 public:
  HtmlWriter(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& tl, const ReportOptions& opts)
      : out_(out), result_(result), tl_(tl), opts_(opts) {}

  void write() {
    size_t certain = 0;
    for (const auto& f : result_.findings) certain += f.confidence == analysis::Confidence::kCertain;
    out_ << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">\n"
         << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         << "<title>streamrace report</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n";
    out_ << "<header><h1>streamrace report</h1><p>"
         << fmt::format("{} finding{} ({} certain, {} possible) in {} trace{}; {} records, {} accesses",
                        result_.findings.size(), result_.findings.size() == 1 ? "" : "s", certain,
                        result_.findings.size() - certain, result_.traces.size(), result_.traces.size() == 1 ? "" : "s",
                        result_.records, result_.accesses)
         << "</p></header>\n<main>\n";
    for (const auto& n : result_.notices)
      out_ << "<div class=\"notice " << esc(n.level) << "\"><b>" << esc(n.level) << "</b> "
           << esc(n.trace.empty() ? n.text : n.trace + ": " + n.text) << "</div>\n";
    summary();
    for (const auto& f : result_.findings) finding(f);
    if (!result_.traces.empty()) {
      out_ << "<section class=\"traces\"><h2>Traces</h2>\n<div class=\"table-wrap\"><table>\n"
           << "<thead><tr><th>rank</th><th>trace</th><th>host</th><th>pid</th><th>records</th><th>state</th></tr></thead>\n<tbody>\n";
      for (const auto& t : result_.traces)
        out_ << "<tr><td class=\"num\">" << t.rank << "</td><td><code>" << esc(t.path) << "</code></td><td>" << esc(t.host)
             << "</td><td class=\"num\">" << t.pid << "</td><td class=\"num\">" << t.records << "</td><td>"
             << (t.truncated ? "truncated" : t.complete ? "complete" : "incomplete") << "</td></tr>\n";
      out_ << "</tbody></table></div></section>\n";
    }
    out_ << "<p class=\"loc\">streamrace " << esc(opts_.tool_version) << "</p>\n</main>\n</body>\n</html>\n";
  }

 private:
  static std::string ranks_text(const Finding& f) {
    std::string ranks;
    for (int r : f.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return ranks;
  }

  // One row per finding, linking to its section: what a reader scans first.
  void summary() {
    out_ << "<section class=\"summary\"><h2>Summary</h2>\n";
    if (result_.findings.empty()) {
      out_ << "<p>No races found.</p></section>\n";
      return;
    }
    out_ << "<div class=\"table-wrap\"><table class=\"summary\">\n<thead><tr><th>rule</th>"
         << (opts_.have_baseline ? "<th>status</th>" : "")
         << "<th>race</th><th>later access</th><th>earlier access</th><th>occurrences</th><th>ranks</th><th>fingerprint</th></tr></thead>\n<tbody>\n";
    for (const auto& f : result_.findings) {
      bool certain = f.confidence == analysis::Confidence::kCertain;
      out_ << "<tr><td><span class=\"badge " << (certain ? "certain" : "possible") << "\">" << finding_class(f).rule_id
           << "</span></td>";
      if (opts_.have_baseline) out_ << "<td>" << (is_new(f, opts_) ? "new" : "baselined") << "</td>";
      out_ << "<td>" << esc(fmt::format("{}{}", f.confidence == analysis::Confidence::kPossible ? "possible " : "",
                                        analysis::to_string(f.kind)))
           << "</td><td>" << esc(f.later.op) << " <span class=\"loc\">" << esc(analysis::site_of(f.later))
           << "</span></td><td>" << esc(f.earlier.op) << " <span class=\"loc\">" << esc(analysis::site_of(f.earlier))
           << "</span></td><td class=\"num\">" << f.occurrences << "</td><td>" << esc(ranks_text(f))
           << "</td><td class=\"fp\"><a class=\"mono\" href=\"#f-" << esc(f.fingerprint) << "\">" << esc(f.fingerprint)
           << "</a></td></tr>\n";
    }
    out_ << "</tbody></table></div></section>\n";
  }

  std::string display_path(const std::string& file) const {
    auto rel = source_uri_path(file, opts_.source_root);
    return rel.empty() ? file : rel;
  }

  void stack(const char* title, const Access& a) {
    out_ << "<div><h3>" << title << " (" << a.stack.size() << " frame" << (a.stack.size() == 1 ? "" : "s") << ")</h3>\n";
    if (a.stack.empty()) {
      out_ << "<p class=\"loc\">no stack recorded</p></div>\n";
      return;
    }
    out_ << "<ol class=\"stack\">\n";
    for (const auto& fr : a.stack) {
      out_ << "<li><span class=\"fn\">" << esc(fr.function.empty() ? "??" : fr.function) << "</span> <span class=\"loc mono\">"
           << esc(display_path(fr.file));
      if (fr.line > 0) out_ << ":" << fr.line;
      out_ << "</span></li>\n";
    }
    out_ << "</ol></div>\n";
  }

  void access_row(const char* header, const Access& e, const Access& l, const std::function<std::string(const Access&)>& field) {
    out_ << "<tr><th>" << header << "</th><td>" << esc(field(e)) << "</td><td>" << esc(field(l)) << "</td></tr>\n";
  }

  void finding(const Finding& f) {
    const auto& cls = finding_class(f);
    bool certain = f.confidence == analysis::Confidence::kCertain;
    out_ << "<section class=\"finding\" id=\"f-" << esc(f.fingerprint) << "\">\n<h2>"
         << "<span class=\"badge " << (certain ? "certain" : "possible") << "\">" << cls.rule_id << " "
         << (certain ? "certain" : "possible") << "</span>";
    if (opts_.have_baseline)
      out_ << "<span class=\"badge " << (is_new(f, opts_) ? "new\">new" : "baselined\">baselined") << "</span>";
    out_ << esc(cls.title) << "</h2>\n";
    out_ << "<p>" << esc(headline(f)) << "</p>\n";
    std::string ranks = ranks_text(f);
    out_ << "<p class=\"mono\">fingerprint " << esc(f.fingerprint) << " &middot; "
         << esc(fmt::format("{} occurrence{}", f.occurrences, f.occurrences == 1 ? "" : "s"))
         << (ranks.empty() ? "" : " &middot; ranks " + esc(ranks)) << " &middot; mode " << esc(f.mode) << "</p>\n";
    out_ << "<div class=\"table-wrap\"><table class=\"accesses\">\n<thead><tr><th></th><th>earlier access</th><th>later "
            "access</th></tr></thead>\n<tbody>\n";
    access_row("operation", f.earlier, f.later, [](const Access& a) { return a.op + (a.op_kind.empty() ? "" : " (" + a.op_kind + ")"); });
    access_row("direction", f.earlier, f.later, [](const Access& a) { return a.direction + (a.exact ? "" : " (approximate)"); });
    access_row("stream", f.earlier, f.later, [](const Access& a) { return a.stream_label; });
    access_row("bytes", f.earlier, f.later, [](const Access& a) {
      return a.bytes ? fmt::format("{:#x} + {}", a.addr, a.bytes) : fmt::format("{:#x}", a.addr);
    });
    access_row("allocation", f.earlier, f.later, [](const Access& a) {
      return a.alloc_bytes ? fmt::format("{} {:#x} + {}", a.alloc_kind, a.alloc_base, a.alloc_bytes) : a.alloc_kind;
    });
    access_row("call", f.earlier, f.later, [](const Access& a) { return fmt::format("seq {}, thread {}", a.seq, a.thread); });
    out_ << "</tbody></table></div>\n<div class=\"stacks\">\n";
    stack("Earlier access stack", f.earlier);
    stack("Later access stack", f.later);
    out_ << "</div>\n";
    if (!f.missing_edge.empty()) out_ << "<div class=\"edge\"><b>Missing edge.</b> " << esc(f.missing_edge) << "</div>\n";
    if (!f.fix.empty()) out_ << "<div class=\"fix\"><b>Fix.</b> " << esc(f.fix) << "</div>\n";
    timeline(f);
    if (!f.where.empty()) {
      out_ << "<details><summary>" << f.where.size() << " trace" << (f.where.size() == 1 ? "" : "s") << "</summary><ul>\n";
      for (const auto& w : f.where)
        out_ << "<li><code>" << esc(w.trace) << "</code>"
             << esc(fmt::format(" rank {}: {} time{}, seq {}..{}", w.rank, w.count, w.count == 1 ? "" : "s", w.first_seq, w.last_seq))
             << "</li>\n";
      out_ << "</ul></details>\n";
    }
    out_ << "</section>\n";
  }

  // The ops of the racing region on the two streams of one trace: a few before the earlier
  // access, all between (at most kMaxBetween, split around the middle), a few after the later.
  std::vector<const TimelineOp*> region(const Timeline& tl, const TimelineOp* a, const TimelineOp* b) const {
    static constexpr size_t kContext = 3, kMaxBetween = 40;
    std::vector<const TimelineOp*> before, between, after;
    for (const auto& op : tl.ops) {
      if (op.trace != a->trace || (op.stream != a->stream && op.stream != b->stream)) continue;
      if (op.seq < a->seq) before.push_back(&op);
      else if (op.seq <= b->seq) between.push_back(&op);
      else if (after.size() < kContext) after.push_back(&op);
    }
    std::vector<const TimelineOp*> out;
    out.insert(out.end(), before.size() > kContext ? before.end() - kContext : before.begin(), before.end());
    if (between.size() > kMaxBetween) {
      // Keep both racing ops: they are the first and last of `between`.
      out.insert(out.end(), between.begin(), between.begin() + kMaxBetween / 2);
      out.insert(out.end(), between.end() - kMaxBetween / 2, between.end());
    } else {
      out.insert(out.end(), between.begin(), between.end());
    }
    out.insert(out.end(), after.begin(), after.end());
    return out;
  }

  // One rank's part of the picture: its first occurrence's two ops and the region around them.
  struct RankRegion {
    int rank = -1;
    std::string trace;
    const TimelineOp* earlier = nullptr;
    const TimelineOp* later = nullptr;
    std::vector<const TimelineOp*> ops;
  };

  static constexpr size_t kMaxRanksDrawn = 8;

  // A "nice" tick step (1, 2 or 5 times a power of ten) giving about six ticks over `span` ns.
  static uint64_t tick_step(double span) {
    double raw = std::max(span / 6.0, 1.0);
    double p = 1;
    while (p * 10 <= raw) p *= 10;
    double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    return static_cast<uint64_t>(step);
  }

  static std::string time_label(int64_t ns, uint64_t step) {
    if (step >= 1'000'000) return fmt::format("{:g} ms", static_cast<double>(ns) / 1e6);
    if (step >= 1'000) return fmt::format("{:g} \xC2\xB5s", static_cast<double>(ns) / 1e3);
    return fmt::format("{} ns", ns);
  }

  // Every rank's racing region on one time axis: each rank's ops are placed relative to its own
  // earlier access (t = 0), lanes grouped by rank in rank order, the earlier access's stream
  // first, then the later one's.
  void timeline(const Finding& f) {
    std::vector<RankRegion> regions;
    std::vector<const Occurrence*> where;
    for (const auto& w : f.where) where.push_back(&w);
    std::stable_sort(where.begin(), where.end(), [](const Occurrence* a, const Occurrence* b) {
      return a->rank != b->rank ? a->rank < b->rank : a->trace < b->trace;
    });
    for (const Occurrence* w : where) {
      bool representative = w == &f.where.front();
      analysis::RacingPair p = !w->pairs.empty() ? w->pairs.front()
                               : representative  ? analysis::RacingPair{f.earlier.seq, f.later.seq}
                                                 : analysis::RacingPair{};
      const TimelineOp* a = tl_.find(w->trace, p.earlier_seq);
      const TimelineOp* b = tl_.find(w->trace, p.later_seq);
      if (!a || !b || regions.size() == kMaxRanksDrawn) continue;
      regions.push_back(RankRegion{w->rank, w->trace, a, b, region(tl_, a, b)});
    }
    Timeline own;
    bool timed = !regions.empty();
    if (regions.empty()) {
      own = timeline_from_findings({f});
      const TimelineOp* a = own.find(own.ops.empty() ? "" : own.ops.front().trace, f.earlier.seq);
      const TimelineOp* b = own.find(own.ops.empty() ? "" : own.ops.front().trace, f.later.seq);
      if (!a || !b) return;
      regions.push_back(RankRegion{a->rank, a->trace, a, b, region(own, a, b)});
    }
    const Timeline& src = timed ? tl_ : own;
    size_t drawn_traces = regions.size();

    // Each rank has its own window and axis: from a little before the first of its two racing
    // accesses to a little after the last (times relative to its earlier access); ops outside
    // the window are not drawn. One shared scale would squash a rank whose ops are µs apart
    // next to one waiting hundreds of ms (the first step's collective).
    // Times come from the trace: clamped to ±2^61 ns (73 years) so that no sum or difference
    // below can overflow, whatever a (hostile) file holds.
    auto rel = [](const TimelineOp* op, uint64_t t) {
      constexpr __int128 kMax = __int128(1) << 61;
      __int128 d = __int128(t) - __int128(op->start_ns);
      return static_cast<int64_t>(std::clamp(d, -kMax, kMax));
    };
    constexpr double kPad = 1.5;  // % on each side
    constexpr double kRankH = 18, kLaneH = 34, kAxisH = 26;
    double height = 8;
    for (const auto& r : regions) height += kRankH + kLaneH * (r.earlier->stream == r.later->stream ? 1 : 2) + kAxisH;
    out_ << fmt::format("<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" height=\"{}\" role=\"img\"><title>racing "
                        "region on {} rank{}</title>\n",
                        height, regions.size(), regions.size() == 1 ? "" : "s");
    double y = 8;
    for (const auto& r : regions) {
      int64_t lo = std::min<int64_t>(0, rel(r.earlier, r.later->start_ns));
      int64_t hi = std::max(rel(r.earlier, r.later->end_ns), rel(r.earlier, r.earlier->end_ns));
      int64_t margin = std::max<int64_t>((hi - lo) / 8, 1000);
      lo -= margin;
      hi += margin;
      double span = static_cast<double>(hi - lo);
      auto x = [&](int64_t t) { return kPad + (static_cast<double>(t - lo) / span) * (100 - 2 * kPad); };
      double top = y;
      out_ << fmt::format("<text class=\"rank\" x=\"4\" y=\"{}\">", y + 13)
           << esc(r.rank >= 0 ? fmt::format("rank {} ({})", r.rank, r.trace) : r.trace) << "</text>\n";
      y += kRankH;
      std::vector<std::pair<uint64_t, const char*>> lanes{{r.earlier->stream, "earlier access"}};
      if (r.later->stream != r.earlier->stream) lanes.push_back({r.later->stream, "later access"});
      double axis_y = y + kLaneH * static_cast<double>(lanes.size()) + 2;
      if (timed) {
        uint64_t step = tick_step(span);
        int64_t st = static_cast<int64_t>(step);
        int64_t first_tick = (lo / st) * st;
        if (first_tick < lo) first_tick += st;
        for (int64_t t = first_tick; t <= hi; t += st)
          out_ << fmt::format("<line class=\"tick\" x1=\"{0:.2f}%\" x2=\"{0:.2f}%\" y1=\"{1}\" y2=\"{2}\"/>"
                              "<text class=\"ticklabel\" x=\"{0:.2f}%\" y=\"{3}\" text-anchor=\"middle\">",
                              x(t), top + kRankH, axis_y + 4, axis_y + 15)
               << esc(time_label(t, step)) << "</text>\n";
      }
      out_ << fmt::format("<line class=\"axis\" x1=\"{:.2f}%\" x2=\"{:.2f}%\" y1=\"{}\" y2=\"{}\"/>\n", kPad, 100 - kPad,
                          axis_y, axis_y);
      std::map<uint64_t, double> lane_y;
      for (const auto& [stream, role] : lanes) {
        const TimelineOp* any = stream == r.earlier->stream ? r.earlier : r.later;
        out_ << fmt::format("<text class=\"lane\" x=\"4\" y=\"{}\">", y + 11) << esc(any->stream_label) << " &#8212; "
             << role << "</text>\n";
        lane_y[stream] = y + 14;
        y += kLaneH;
      }
      y += kAxisH;
      std::map<uint64_t, std::pair<double, double>> centre;  // seq -> (x %, y) of the slice centre
      for (const auto* op : r.ops) {
        bool race = op == r.earlier || op == r.later;
        if (!race && (rel(r.earlier, op->end_ns) < lo || rel(r.earlier, op->start_ns) > hi)) continue;
        int64_t t0 = std::max(rel(r.earlier, op->start_ns), lo), t1 = std::min(rel(r.earlier, op->end_ns), hi);
        double x0 = x(t0), w = std::max(x(t1) - x0, 0.25);
        double ly = lane_y.at(op->stream);
        centre[op->seq] = {x0 + w / 2, ly + 8};
        out_ << fmt::format("<rect class=\"op{}\" x=\"{:.2f}%\" y=\"{}\" width=\"{:.2f}%\" height=\"16\"><title>",
                            race ? " race" : "", x0, ly, w)
             << esc(fmt::format("{} (seq {}{})", op->name, op->seq, race ? ", racing access" : "")) << "</title></rect>\n";
      }
      for (const auto& fl : src.flows) {
        if (fl.trace != r.trace) continue;
        auto a = centre.find(fl.from_seq), b = centre.find(fl.to_seq);
        if (a == centre.end() || b == centre.end()) continue;
        out_ << fmt::format("<line class=\"flow\" x1=\"{:.2f}%\" y1=\"{}\" x2=\"{:.2f}%\" y2=\"{}\"><title>", a->second.first,
                            a->second.second, b->second.first, b->second.second)
             << esc(fl.label) << "</title></line>\n";
      }
      auto a = centre.at(r.earlier->seq), b = centre.at(r.later->seq);
      out_ << fmt::format("<line class=\"raceflow\" x1=\"{:.2f}%\" y1=\"{}\" x2=\"{:.2f}%\" y2=\"{}\"><title>unordered</title></line>\n",
                          a.first, a.second, b.first, b.second);
    }
    out_ << "</svg>\n";
    bool device = true;
    for (const auto& r : regions)
      for (const auto* op : r.ops) device &= op->device_time;
    std::string more = f.where.size() > drawn_traces && timed
                           ? fmt::format(" {} more trace{} not drawn.", f.where.size() - drawn_traces,
                                         f.where.size() - drawn_traces == 1 ? "" : "s")
                           : std::string();
    out_ << "<p class=\"loc\">Racing region of each rank's first occurrence on the two streams (red: the racing "
            "accesses; dashed: unordered; grey lines: event waits). "
         << (!timed    ? "No traces given: the two accesses in call order, no times."
             : device ? "Each rank on its own axis: time from its earlier access, device timestamps."
                      : "Each rank on its own axis: time from its earlier access; without device timestamps for every op, ops are placed "
                        "in issue order (1 &#181;s nominal).")
         << esc(more) << "</p>\n";
  }

  std::ostream& out_;
  const analysis::AnalysisResult& result_;
  const Timeline& tl_;
  const ReportOptions& opts_;
};

}  // namespace

void write_html(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& timeline,
                const ReportOptions& opts) {
  HtmlWriter(out, result, timeline, opts).write();
}

}  // namespace streamrace::report
