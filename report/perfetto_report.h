// Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): one
// process per rank (per trace file), one track per stream, ops as slices, event edges as
// flows, the racing pair of each finding highlighted and joined by a "race" flow.
#pragma once

#include <ostream>

#include "analyzer/finding.h"
#include "report/formats.h"
#include "analyzer/timeline.h"

namespace streamrace::report {

// `timeline` holds the ops to draw; when it is empty the findings' own accesses are drawn.
void write_perfetto(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& timeline,
                    const ReportOptions& opts);

}  // namespace streamrace::report
