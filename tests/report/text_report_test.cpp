// Golden test: the bundled ZeRO-1 trace in, the exact text report out.
#include <gtest/gtest.h>

#include <sstream>

#include "report/text_report.h"
#include "report_test_support.h"

namespace streamrace {
namespace {

TEST(TextReport, BundledZeroTraceMatchesGolden) {
  const std::string dir = std::string(STREAMRACE_SOURCE_DIR) + "/samples/traces/zero1-synthetic";
  auto r = testing::analyze_files(analysis::expand_trace_inputs({dir}));
  for (auto& t : r.traces) t.path = t.path.substr(t.path.rfind('/') + 1);
  std::ostringstream out;
  report::write_text(out, r);
  testing::expect_golden("zero1-synthetic.txt", out.str());
}

TEST(TextReport, CleanSummaryLine) {
  analysis::AnalysisResult r;
  r.traces.resize(2);
  r.accesses = 12;
  EXPECT_EQ(report::summary_line(r), "streamrace: no races found in 2 traces (12 accesses checked)");
}

}  // namespace
}  // namespace streamrace

namespace streamrace {
namespace {

TEST(TextReport, TraceThatCapturedNothingGivesNoVerdict) {
  analysis::AnalysisResult r;
  r.traces.resize(2);
  r.traces[0].capture_status = "ok";
  r.traces[1].capture_status = "cupti-busy: another tool holds CUPTI's only subscriber slot";
  EXPECT_EQ(report::summary_line(r), "streamrace: no verdict: 1 of 2 traces captured no CUDA calls (see the errors above)");
}

}  // namespace
}  // namespace streamrace
