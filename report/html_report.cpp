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

constexpr const char* kStyle = R"CSS(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9cfdb}main{padding:16px 24px;max-width:1200px}
section.finding{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:0 0 18px;padding:12px 16px}
section.finding h2{font-size:16px;margin:0 0 6px}
.badge{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;font-weight:600;margin-right:6px}
.certain{background:#c62828;color:#fff}.possible{background:#ef8f00;color:#fff}
.new{background:#1d2330;color:#fff}.baselined{background:#dde1e8;color:#1d2330}
code,.mono{font-family:ui-monospace,"SFMono-Regular",Menlo,monospace;font-size:12.5px}
table.accesses{border-collapse:collapse;width:100%;margin:8px 0}
table.accesses th,table.accesses td{border:1px solid #e3e6ec;padding:4px 8px;text-align:left;vertical-align:top}
table.accesses th{background:#f0f2f5;width:130px}
ol.stack{margin:4px 0;padding-left:22px}ol.stack li{margin:1px 0}
.fn{font-weight:600}.loc{color:#5a6475}
.edge{border-left:3px solid #c62828;padding:2px 10px;margin:8px 0}
.fix{border-left:3px solid #2e7d32;padding:2px 10px;margin:8px 0}
.notice{padding:4px 10px;margin:4px 0;border-radius:4px;background:#fff4e5}
.notice.error{background:#fdecea}.notice.info{background:#e8f1fb}
svg.timeline{background:#fff;border:1px solid #e3e6ec;margin:6px 0}
svg .op{fill:#9aa5b8}svg .op.race{fill:#c62828}svg .lane{font-size:11px;fill:#5a6475}
svg .flow{stroke:#5a6475;stroke-width:1;fill:none}svg .raceflow{stroke:#c62828;stroke-width:1.5;stroke-dasharray:4 3;fill:none}
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
    if (result_.findings.empty()) out_ << "<p>No races found.</p>\n";
    for (const auto& f : result_.findings) finding(f);
    if (!result_.traces.empty()) {
      out_ << "<h2>Traces</h2>\n<ul>\n";
      for (const auto& t : result_.traces)
        out_ << "<li><code>" << esc(t.path) << "</code>"
             << esc(fmt::format(" rank {}, host {}, pid {}, {} records{}", t.rank, t.host, t.pid, t.records,
                                t.truncated ? ", truncated" : t.complete ? "" : ", incomplete"))
             << "</li>\n";
      out_ << "</ul>\n";
    }
    out_ << "<p class=\"loc\">streamrace " << esc(opts_.tool_version) << "</p>\n</main>\n</body>\n</html>\n";
  }

 private:
  std::string display_path(const std::string& file) const {
    auto rel = source_uri_path(file, opts_.source_root);
    return rel.empty() ? file : rel;
  }

  void stack(const Access& a) {
    if (a.stack.empty()) {
      out_ << "<p class=\"loc\">no stack recorded</p>\n";
      return;
    }
    out_ << "<ol class=\"stack\">\n";
    for (const auto& fr : a.stack) {
      out_ << "<li><span class=\"fn\">" << esc(fr.function.empty() ? "??" : fr.function) << "</span> <span class=\"loc mono\">"
           << esc(display_path(fr.file));
      if (fr.line > 0) out_ << ":" << fr.line;
      out_ << "</span></li>\n";
    }
    out_ << "</ol>\n";
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
    std::string ranks;
    for (int r : f.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    out_ << "<p class=\"mono\">fingerprint " << esc(f.fingerprint) << " &middot; "
         << esc(fmt::format("{} occurrence{}", f.occurrences, f.occurrences == 1 ? "" : "s"))
         << (ranks.empty() ? "" : " &middot; ranks " + esc(ranks)) << " &middot; mode " << esc(f.mode) << "</p>\n";
    out_ << "<table class=\"accesses\">\n<tr><th></th><th>earlier access</th><th>later access</th></tr>\n";
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
    out_ << "<tr><th>stack</th><td>";
    stack(f.earlier);
    out_ << "</td><td>";
    stack(f.later);
    out_ << "</td></tr>\n</table>\n";
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

  // The ops of the racing region on the two streams: a few before the earlier access, all
  // between (at most kMaxBetween, split around the middle), a few after the later one.
  std::vector<const TimelineOp*> region(const Finding& f, const std::string& trace) const {
    static constexpr size_t kContext = 3, kMaxBetween = 40;
    std::vector<const TimelineOp*> before, between, after;
    const TimelineOp* a = tl_.find(trace, f.earlier.seq);
    const TimelineOp* b = tl_.find(trace, f.later.seq);
    if (!a || !b) return {};
    for (const auto& op : tl_.ops) {
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

  void timeline(const Finding& f) {
    std::string trace = f.where.empty() ? std::string("findings") : f.where.front().trace;
    auto ops = region(f, trace);
    Timeline own;
    bool drawn_from_findings = ops.empty();
    if (drawn_from_findings) {
      own = timeline_from_findings({f});
      for (const auto& op : own.ops) ops.push_back(&op);
      trace = own.ops.empty() ? trace : own.ops.front().trace;
    }
    if (ops.empty()) return;
    const Timeline& src = drawn_from_findings ? own : tl_;
    std::vector<uint64_t> lanes;
    std::map<uint64_t, std::string> labels;
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (const auto* op : ops) {
      if (std::find(lanes.begin(), lanes.end(), op->stream) == lanes.end()) lanes.push_back(op->stream);
      labels[op->stream] = op->stream_label;
      t0 = std::min(t0, op->start_ns);
      t1 = std::max(t1, op->end_ns);
    }
    const double left = 230, width = 900, lane_h = 30;
    const double span = t1 > t0 ? static_cast<double>(t1 - t0) : 1.0;
    auto x = [&](uint64_t t) { return left + (static_cast<double>(t - t0) / span) * (width - left - 10); };
    auto lane_y = [&](uint64_t stream) {
      return 10 + lane_h * static_cast<double>(std::find(lanes.begin(), lanes.end(), stream) - lanes.begin());
    };
    double height = 20 + lane_h * static_cast<double>(lanes.size());
    out_ << fmt::format("<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                        "role=\"img\"><title>racing region</title>\n",
                        width, height);
    for (uint64_t s : lanes)
      out_ << fmt::format("<text class=\"lane\" x=\"4\" y=\"{}\">", lane_y(s) + 15) << esc(labels[s]) << "</text>\n";
    std::map<uint64_t, std::pair<double, double>> centre;  // seq -> (x, y) of the slice centre
    for (const auto* op : ops) {
      bool race = op->seq == f.earlier.seq || op->seq == f.later.seq;
      double x0 = x(op->start_ns), x1 = std::max(x(op->end_ns) - 1, x0 + 3);  // 1 px gap between neighbours
      double y = lane_y(op->stream);
      centre[op->seq] = {(x0 + x1) / 2, y + 10};
      out_ << fmt::format("<rect class=\"op{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"20\"><title>",
                          race ? " race" : "", x0, y, x1 - x0)
           << esc(fmt::format("{} (seq {}{})", op->name, op->seq, race ? ", racing access" : "")) << "</title></rect>\n";
    }
    for (const auto& fl : src.flows) {
      if (fl.trace != ops.front()->trace) continue;
      auto a = centre.find(fl.from_seq), b = centre.find(fl.to_seq);
      if (a == centre.end() || b == centre.end()) continue;
      out_ << fmt::format("<path class=\"flow\" d=\"M{:.1f},{:.1f} L{:.1f},{:.1f}\"><title>", a->second.first, a->second.second,
                          b->second.first, b->second.second)
           << esc(fl.label) << "</title></path>\n";
    }
    auto a = centre.find(f.earlier.seq), b = centre.find(f.later.seq);
    if (a != centre.end() && b != centre.end())
      out_ << fmt::format("<path class=\"raceflow\" d=\"M{:.1f},{:.1f} L{:.1f},{:.1f}\"><title>unordered</title></path>\n",
                          a->second.first, a->second.second, b->second.first, b->second.second);
    out_ << "</svg>\n";
    bool device = std::all_of(ops.begin(), ops.end(), [](const TimelineOp* op) { return op->device_time; });
    out_ << "<p class=\"loc\">Racing region on the two streams (red: the racing accesses; dashed: unordered; grey "
            "lines: event waits). "
         << (device ? "Device timestamps." : "No device timestamps for every op: ops are placed in issue order.")
         << "</p>\n";
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
