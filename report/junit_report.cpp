// Writes JUnit XML (the Ant/Jenkins shape that GitHub, GitLab and Jenkins all read), element
// order and attributes as the strict junit-10.xsd allows.
#include "report/junit_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "report/finding_class.h"
#include "report/markup_escape.h"

namespace streamrace::report {

namespace {

using analysis::Access;
using analysis::Finding;

void describe_stack(std::ostream& out, const Access& a) {
  if (a.stack.empty()) out << "      <no stack>\n";
  for (const auto& f : a.stack) {
    out << "      " << (f.function.empty() ? "??" : f.function) << " at " << f.file;
    if (f.line > 0) out << ":" << f.line;
    out << "\n";
  }
}

std::string describe(const Finding& f) {
  std::ostringstream s;
  s << "[" << f.fingerprint << "] " << headline(f) << "\n";
  s << "  occurrences: " << f.occurrences;
  if (!f.ranks.empty()) {
    s << ", ranks:";
    for (int r : f.ranks) s << " " << r;
  }
  s << "\n";
  s << "  later access: " << f.later.op << " on " << f.later.stream_label << "\n";
  describe_stack(s, f.later);
  s << "  earlier access: " << f.earlier.op << " on " << f.earlier.stream_label << "\n";
  describe_stack(s, f.earlier);
  if (!f.missing_edge.empty()) s << "  missing edge: " << f.missing_edge << "\n";
  if (!f.fix.empty()) s << "  fix: " << f.fix << "\n";
  return s.str();
}

// "0.000012" seconds; a window shorter than a microsecond still shows as one.
std::string seconds(uint64_t ns) {
  if (ns > 0 && ns < 1000) ns = 1000;
  return fmt::format("{}.{:06}", ns / 1'000'000'000, (ns % 1'000'000'000) / 1000);
}

// The racing window of a finding's first occurrence: from the start of the earlier access
// to the end of the later one, in the trace it was first seen in. 0 when not in the timeline.
uint64_t window_ns(const Finding& f, const Timeline& tl) {
  if (f.where.empty()) return 0;
  const auto& w = f.where.front();
  analysis::RacingPair p = w.pairs.empty() ? analysis::RacingPair{f.earlier.seq, f.later.seq} : w.pairs.front();
  const TimelineOp* a = tl.find(w.trace, p.earlier_seq);
  const TimelineOp* b = tl.find(w.trace, p.later_seq);
  if (!a || !b || b->end_ns < a->start_ns) return 0;
  return b->end_ns - a->start_ns;
}

// The longest trace's span on the timeline: first op start to last op end.
uint64_t longest_trace_ns(const Timeline& tl) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> span;
  for (const auto& op : tl.ops) {
    auto [it, fresh] = span.try_emplace(op.trace, op.start_ns, op.end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, op.start_ns);
      it->second.second = std::max(it->second.second, op.end_ns);
    }
  }
  uint64_t longest = 0;
  for (const auto& [trace, s] : span) longest = std::max(longest, s.second - s.first);
  return longest;
}

// Stable across runs (a dashboard keys a test's history on it): fingerprint and both sites.
std::string case_name(const Finding& f) {
  return fmt::format("{} {} ({}) vs {} ({})", f.fingerprint, f.later.op, analysis::site_of(f.later), f.earlier.op,
                     analysis::site_of(f.earlier));
}

}  // namespace

void write_junit(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& timeline,
                 const ReportOptions& opts) {
  const auto& classes = finding_classes();
  std::vector<size_t> per_class(classes.size(), 0);
  size_t failures = 0, skipped = 0;
  for (const auto& f : result.findings) {
    ++per_class[finding_class_index(f)];
    (is_new(f, opts) ? failures : skipped) += 1;
  }
  size_t empty_classes = 0;
  for (size_t n : per_class) empty_classes += n == 0;
  size_t tests = result.findings.size() + empty_classes;
  std::string total = seconds(longest_trace_ns(timeline));

  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuites name=\"streamrace\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"{}\">\n", tests,
                     failures, total);
  out << fmt::format(
      "  <testsuite name=\"streamrace.races\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\">\n",
      tests, failures, skipped, total);
  out << "    <properties>\n";
  out << fmt::format("      <property name=\"tool.version\" value=\"{}\"/>\n", escape_markup(opts.tool_version));
  for (const auto& t : result.traces)
    out << fmt::format("      <property name=\"trace\" value=\"{}\"/>\n", escape_markup(t.path));
  out << "    </properties>\n";
  for (size_t i = 0; i < classes.size(); ++i) {
    const auto& c = classes[i];
    std::string classname = fmt::format("streamrace.{}", c.rule_id);
    for (const auto& f : result.findings) {
      if (finding_class_index(f) != i) continue;
      out << fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{}\">\n", classname,
                         escape_markup(case_name(f)), seconds(window_ns(f, timeline)));
      if (is_new(f, opts)) {
        out << fmt::format("      <failure type=\"{}\" message=\"{}\">{}</failure>\n", c.rule_id,
                           escape_markup("new " + headline(f)), escape_markup(describe(f)));
      } else {
        out << fmt::format("      <skipped message=\"{}\"/>\n",
                           escape_markup(opts.baseline_path.empty() ? std::string("accepted by the baseline")
                                                                    : "accepted by the baseline " + opts.baseline_path));
        out << "      <system-out>" << escape_markup(describe(f)) << "</system-out>\n";
      }
      out << "    </testcase>\n";
    }
    if (per_class[i] == 0)
      out << fmt::format("    <testcase classname=\"{}\" name=\"{} {}: no findings\" time=\"0.000000\"/>\n", classname,
                         c.rule_id, escape_markup(c.title));
  }
  if (!result.notices.empty()) {
    std::string body;
    for (const auto& n : result.notices)
      body += n.level + ": " + (n.trace.empty() ? "" : n.trace + ": ") + n.text + "\n";
    out << "    <system-err>" << escape_markup(body) << "</system-err>\n";
  }
  out << "  </testsuite>\n</testsuites>\n";
}

}  // namespace streamrace::report
