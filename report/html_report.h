// One self-contained HTML page (inline CSS and SVG, no script, no network at view time):
// the summary, every finding with both stacks, and a timeline of its racing region.
#pragma once

#include <ostream>

#include "analyzer/finding.h"
#include "report/formats.h"
#include "analyzer/timeline.h"

namespace streamrace::report {

// `timeline` gives the ops around each race; when empty, only the two accesses are drawn.
void write_html(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& timeline,
                const ReportOptions& opts);

}  // namespace streamrace::report
