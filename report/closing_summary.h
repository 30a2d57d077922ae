// The line that closes every text report of analyze, check and run, in the shape
// ThreadSanitizer's SUMMARY lines have, for scripts to grep (docs/reports.md, "Text"):
//   SUMMARY: streamrace: N race[s] (C certain, P possible) in T trace[s][; DETAIL]...
// N counts the findings the report is about (for check: the ones that fail it), all of them
// whatever --print-limit left out. The stem never changes; details follow as "; ..." parts.
#pragma once

#include <string>

#include "analyzer/finding.h"

namespace streamrace::report {

struct SummaryCounts {
  size_t baselined = 0;   // check: findings the baseline accepts (not counted in N)
  size_t suppressed = 0;  // check: findings a suppression took (not counted in N)
};

std::string closing_summary(const analysis::AnalysisResult& result, const SummaryCounts& counts = {});

}  // namespace streamrace::report
