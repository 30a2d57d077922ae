// Writes JUnit XML (the Ant/Jenkins shape that GitHub, GitLab and Jenkins all read).
#include "report/junit_report.h"

#include <fmt/format.h>

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

}  // namespace

void write_junit(std::ostream& out, const analysis::AnalysisResult& result, const ReportOptions& opts) {
  const auto& classes = finding_classes();
  std::vector<std::vector<const Finding*>> fresh(classes.size()), known(classes.size());
  for (const auto& f : result.findings)
    (is_new(f, opts) ? fresh : known)[finding_class_index(f)].push_back(&f);
  size_t failures = 0;
  for (const auto& v : fresh) failures += v.empty() ? 0 : 1;

  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuites name=\"streamrace\" tests=\"{}\" failures=\"{}\" errors=\"0\" time=\"0\">\n",
                     classes.size(), failures);
  out << fmt::format(
      "  <testsuite name=\"streamrace.races\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\" time=\"0\">\n",
      classes.size(), failures);
  out << "    <properties>\n";
  out << fmt::format("      <property name=\"tool.version\" value=\"{}\"/>\n", escape_markup(opts.tool_version));
  for (const auto& t : result.traces)
    out << fmt::format("      <property name=\"trace\" value=\"{}\"/>\n", escape_markup(t.path));
  out << "    </properties>\n";
  for (size_t i = 0; i < classes.size(); ++i) {
    const auto& c = classes[i];
    out << fmt::format("    <testcase classname=\"streamrace.races\" name=\"{} {}\" time=\"0\"",
                       c.rule_id, escape_markup(c.title));
    if (fresh[i].empty() && known[i].empty()) {
      out << "/>\n";
      continue;
    }
    out << ">\n";
    if (!fresh[i].empty()) {
      std::string body;
      for (const Finding* f : fresh[i]) body += describe(*f);
      out << fmt::format("      <failure type=\"{}\" message=\"{} new finding{}\">{}</failure>\n", c.rule_id,
                         fresh[i].size(), fresh[i].size() == 1 ? "" : "s", escape_markup(body));
    }
    if (!known[i].empty()) {
      std::string body = fmt::format("{} baselined finding{} (not failing):\n", known[i].size(),
                                     known[i].size() == 1 ? "" : "s");
      for (const Finding* f : known[i]) body += describe(*f);
      out << "      <system-out>" << escape_markup(body) << "</system-out>\n";
    }
    out << "    </testcase>\n";
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
