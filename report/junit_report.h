// JUnit XML for CI dashboards: one test case per finding (failing when new, skipped when the
// baseline accepts it), plus one passing case per finding class without findings, so every
// class stays in the test history. Valid against the strict junit-10.xsd shape
// (tests/report/schema/junit-strict.xsd).
#pragma once

#include <ostream>

#include "analyzer/finding.h"
#include "analyzer/timeline.h"
#include "report/formats.h"

namespace streamrace::report {

// `timeline` gives the test cases' times (each finding's racing window); when empty, they are 0.
void write_junit(std::ostream& out, const analysis::AnalysisResult& result, const Timeline& timeline,
                 const ReportOptions& opts);

}  // namespace streamrace::report
