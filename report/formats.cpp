// Dispatch from a format name to its writer.
#include "report/formats.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "report/html_report.h"
#include "report/junit_report.h"
#include "report/perfetto_report.h"
#include "report/sarif_report.h"
#include "report/text_report.h"

namespace streamrace::report {

namespace {

// The timeline to draw: the one given, else built from the traces, else none (the
// writers then draw the findings' own accesses).
const Timeline& timeline_for(const ReportOptions& opts, std::optional<Timeline>& storage) {
  if (opts.timeline) return *opts.timeline;
  storage = opts.trace_paths.empty() ? Timeline{} : build_timeline(opts.trace_paths);
  return *storage;
}

}  // namespace

std::string default_docs_url() {
  std::string url = STREAMRACE_DOCS_URL;
  if (!url.empty() && url.back() != '/') url += '/';
  return url;
}

const std::vector<std::string>& format_names() {
  static const std::vector<std::string> names{"text", "json", "sarif", "junit", "perfetto", "html"};
  return names;
}

bool is_format(const std::string& name) {
  for (const auto& n : format_names())
    if (n == name) return true;
  return false;
}

bool is_new(const analysis::Finding& f, const ReportOptions& opts) {
  return !opts.have_baseline || opts.baselined.count(f.fingerprint) == 0;
}

void write_format(const std::string& format, std::ostream& out, const analysis::AnalysisResult& result,
                  const ReportOptions& opts) {
  std::optional<Timeline> storage;
  if (format == "text") {
    TextOptions t;
    t.color = opts.color;
    t.left_out_baselined = opts.left_out_baselined;
    t.max_frames = opts.max_frames;
    t.print_limit = opts.print_limit;
    write_text(out, result, t);
  } else if (format == "json") {
    nlohmann::json j = result;
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (format == "sarif") {
    write_sarif(out, result, opts);
  } else if (format == "junit") {
    write_junit(out, result, timeline_for(opts, storage), opts);
  } else if (format == "perfetto") {
    write_perfetto(out, result, timeline_for(opts, storage), opts);
  } else if (format == "html") {
    write_html(out, result, timeline_for(opts, storage), opts);
  } else {
    throw std::invalid_argument("unknown report format '" + format + "'");
  }
}

}  // namespace streamrace::report
