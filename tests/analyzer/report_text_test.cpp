// Golden test: the bundled ZeRO-1 trace in, the exact text report out.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "report/text_report.h"
#include "support/trace_test_support.h"

namespace streamrace {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(TextReport, BundledZeroTraceMatchesGolden) {
  const std::string dir = std::string(STREAMRACE_SOURCE_DIR) + "/samples/traces/zero1-synthetic";
  auto r = testing::analyze_files(analysis::expand_trace_inputs({dir}));
  for (auto& t : r.traces) t.path = t.path.substr(t.path.rfind('/') + 1);
  std::ostringstream out;
  report::write_text(out, r);
  const std::string golden_path = std::string(STREAMRACE_SOURCE_DIR) + "/tests/golden/zero1-synthetic.txt";
  if (std::getenv("STREAMRACE_UPDATE_GOLDEN")) std::ofstream(golden_path) << out.str();
  std::string golden = slurp(golden_path);
  EXPECT_EQ(out.str(), golden);
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
