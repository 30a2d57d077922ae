// Real recordings as CI tests: every tests/data/gpu/<case>/ holds the traces that
// `streamrace run` wrote for one sample on the GPU machine and an expected.json naming the
// exact findings (kind, confidence, the two operations) the analyzer must report for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "analyzer/analyzer.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using Key = std::tuple<std::string, std::string, std::string, std::string>;  // kind, confidence, earlier, later

std::vector<std::string> cases() {
  std::vector<std::string> out;
  fs::path root(SR_GPU_DATA_DIR);
  if (!fs::is_directory(root)) return out;
  for (auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "expected.json")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class GpuFixture : public ::testing::TestWithParam<std::string> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuFixture);

TEST_P(GpuFixture, AnalyzerReportsExactlyTheExpectedFindings) {
  fs::path dir = fs::path(SR_GPU_DATA_DIR) / GetParam();
  nlohmann::json expected;
  std::ifstream(dir / "expected.json") >> expected;

  analysis::Analyzer analyzer;
  auto traces = analysis::expand_trace_inputs({dir.string()});
  ASSERT_EQ(traces.size(), expected.at("traces").get<size_t>());
  for (const auto& t : traces) analyzer.add_trace(t);
  auto result = analyzer.finish();

  std::vector<Key> got, want;
  for (const auto& f : result.findings)
    got.emplace_back(analysis::short_name(f.kind), analysis::to_string(f.confidence), f.earlier.op, f.later.op);
  for (const auto& f : expected.at("findings"))
    want.emplace_back(f.at("kind"), f.at("confidence"), f.at("earlier_op"), f.at("later_op"));
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  if (expected.contains("ranks")) {
    std::vector<int> ranks;
    for (const auto& t : result.traces) ranks.push_back(t.rank);
    std::sort(ranks.begin(), ranks.end());
    EXPECT_EQ(ranks, expected.at("ranks").get<std::vector<int>>());
  }
  if (expected.contains("capture_status")) {
    ASSERT_FALSE(result.traces.empty());
    EXPECT_EQ(result.traces[0].capture_status.rfind(expected.at("capture_status").get<std::string>(), 0), 0u)
        << result.traces[0].capture_status;
  }
  for (const auto& t : result.traces) EXPECT_TRUE(t.complete) << t.path;
}

INSTANTIATE_TEST_SUITE_P(Recorded, GpuFixture, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace streamrace
