// Report formats by name, for `analyze --format` and `check`: text, json, sarif, junit,
// perfetto, html. One function per format lives in its own file; this is the dispatcher.
#pragma once

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/timeline.h"

namespace streamrace::report {

using analysis::Timeline;
using analysis::TimelineOp;
using analysis::build_timeline;
using analysis::timeline_from_findings;

struct ReportOptions {
  bool color = false;         // text only: ANSI colour
  std::string source_root;    // SARIF/HTML: make file paths relative to this
  std::string tool_version = "0.1.0";
  // Fingerprints accepted by a baseline (`check --baseline`). When `have_baseline` is set,
  // SARIF marks each result "new" or "unchanged" and JUnit fails only on new findings;
  // otherwise every finding counts as new.
  bool have_baseline = false;
  std::set<std::string> baselined;
  // Text only: findings left out of the result because the baseline accepts them (`check`
  // shows only new ones); the summary line names them instead of saying "no races found".
  size_t left_out_baselined = 0;
  size_t max_frames = 8;  // text only: frames shown per stack (--max-frames)
  size_t print_limit = 0;  // text only: findings printed at most, 0 = all (--print-limit)
  // Perfetto and HTML draw ops around the races. Give the traces the result came from and
  // the timeline is built from them on demand (or pass one already built in `timeline`).
  std::vector<std::string> trace_paths;
  const Timeline* timeline = nullptr;
};

// The names --format accepts, in the order --help lists them.
const std::vector<std::string>& format_names();
bool is_format(const std::string& name);
// Writes `result` as `format`. Throws std::invalid_argument for an unknown format.
void write_format(const std::string& format, std::ostream& out, const analysis::AnalysisResult& result,
                  const ReportOptions& opts);

// True when the finding is not accepted by the baseline in `opts`.
bool is_new(const analysis::Finding& f, const ReportOptions& opts);

}  // namespace streamrace::report
