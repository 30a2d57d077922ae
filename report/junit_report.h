// JUnit XML for CI dashboards: one test case per finding class (always all six, so test
// history stays stable); a class fails when it has findings that are new (not baselined).
#pragma once

#include <ostream>

#include "analyzer/finding.h"
#include "report/formats.h"

namespace streamrace::report {

void write_junit(std::ostream& out, const analysis::AnalysisResult& result, const ReportOptions& opts);

}  // namespace streamrace::report
