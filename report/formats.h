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

// A finding that a suppression file took out of the result (`check --suppressions`): SARIF
// still lists it, with a `suppressions` entry saying which line took it.
// STREAMRACE_DOCS_URL as configured (default: file:// of the source tree's docs/), ending in '/'.
std::string default_docs_url();

struct SuppressedFinding {
  analysis::Finding finding;
  std::string by;  // "sup.txt:1 race:_copy_into_bucket"
};

struct ReportOptions {
  bool color = false;         // text only: ANSI colour
  std::string source_root;    // SARIF/HTML: make file paths relative to this (SARIF: default the current directory)
  // SARIF rules' helpUri: this URI + "reports.md#sr1001" (configure-time STREAMRACE_DOCS_URL).
  std::string docs_url = default_docs_url();
  std::string tool_version = "0.1.0";
  // Fingerprints accepted by a baseline (`check --baseline`). When `have_baseline` is set,
  // SARIF marks each result "new" or "unchanged" and JUnit fails only on new findings;
  // otherwise every finding counts as new.
  bool have_baseline = false;
  std::set<std::string> baselined;
  std::string baseline_path;  // named in SARIF's suppression justification
  std::vector<SuppressedFinding> suppressed;  // SARIF only; every other format leaves them out
  // Text only: findings left out of the result because the baseline accepts them (`check`
  // shows only new ones); the summary line names them instead of saying "no races found".
  size_t left_out_baselined = 0;
  size_t max_frames = 8;  // text only: frames shown per stack (--max-frames)
  size_t print_limit = 0;  // text only: findings printed at most, 0 = all (--print-limit)
  // Perfetto and HTML draw ops around the races. Give the traces the result came from and
  // the timeline is built from them on demand (or pass one already built in `timeline`).
  std::vector<std::string> trace_paths;
  const Timeline* timeline = nullptr;
  // Perfetto: every occurrence (on every rank) of the first `perfetto_findings` findings is
  // marked (--perfetto-findings); the file never exceeds `perfetto_max_bytes`: when the ops do
  // not all fit, racing ops go first, then their neighbours, then the rest in time order.
  size_t perfetto_findings = 20;
  size_t perfetto_max_bytes = size_t{32} << 20;
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
