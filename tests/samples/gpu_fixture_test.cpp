// Checks on the real recordings that their expected reports cannot make: every
// tests/data/gpu/<case>/ holds the traces that `streamrace run` wrote for one sample on the GPU
// machine, and the case runner (tests/support/case_runner.cpp) compares its full report with
// the case's expected.json; here the Python lines those reports name are checked against the
// samples' sources.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "analyzer/analyzer.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;

// The PyTorch recordings (made with the tracer that takes Python frames for ops run with the
// GIL released): the racy finding must name the user's Python lines for both accesses, as
// PyTorch's own sanitizer does. Each line is also checked against the sample's source, so a
// sample edited without re-recording fails here.
struct PythonSite {
  const char* case_name;
  const char* sample;  // under samples/torch/
  uint32_t earlier_line;
  const char* earlier_code;
  uint32_t later_line;
  const char* later_code;
};

class TorchPythonFrames : public ::testing::TestWithParam<PythonSite> {};

std::string source_line(const fs::path& file, uint32_t line) {
  std::ifstream in(file);
  std::string text;
  for (uint32_t i = 0; i < line && std::getline(in, text); ++i) {
  }
  return text;
}

::testing::AssertionResult has_python_frame(const analysis::Access& a, const std::string& sample, uint32_t line) {
  const std::string want = "samples/torch/" + sample;
  std::string seen;
  for (const auto& fr : a.stack) {
    if (fr.python && fr.file.size() >= want.size() && fr.file.compare(fr.file.size() - want.size(), want.size(), want) == 0 &&
        fr.line == line)
      return ::testing::AssertionSuccess();
    seen += "\n  " + fr.file + ":" + std::to_string(fr.line) + (fr.python ? " (python)" : "");
  }
  return ::testing::AssertionFailure() << a.op << " has no Python frame " << want << ":" << line << "; stack:" << seen;
}

TEST_P(TorchPythonFrames, RacyFindingNamesTheSamplesPythonLines) {
  const PythonSite& site = GetParam();
  fs::path dir = fs::path(SR_GPU_DATA_DIR) / site.case_name;
  ASSERT_TRUE(fs::exists(dir / "case.json")) << dir;
  fs::path source = fs::path(SR_SOURCE_DIR) / "samples/torch" / site.sample;
  EXPECT_NE(source_line(source, site.earlier_line).find(site.earlier_code), std::string::npos) << source;
  EXPECT_NE(source_line(source, site.later_line).find(site.later_code), std::string::npos) << source;

  analysis::Analyzer analyzer;
  for (const auto& t : analysis::expand_trace_inputs({dir.string()})) analyzer.add_trace(t);
  auto result = analyzer.finish();
  ASSERT_EQ(result.findings.size(), 1u);
  const auto& f = result.findings[0];
  EXPECT_TRUE(has_python_frame(f.earlier, site.sample, site.earlier_line));
  EXPECT_TRUE(has_python_frame(f.later, site.sample, site.later_line));
  // The user's line is the innermost frame of the sample's file: nothing native above it.
  ASSERT_FALSE(f.later.stack.empty());
  EXPECT_TRUE(f.later.stack[0].python) << f.later.stack[0].file;
}

INSTANTIATE_TEST_SUITE_P(
    Recorded, TorchPythonFrames,
    ::testing::Values(PythonSite{"torch_two_streams_racy", "two_streams.py", 26, "x.copy_(src)", 29, "y.copy_(x)"},
                      PythonSite{"torch_nccl_allreduce_racy", "nccl_allreduce.py", 29,
                                 "work = dist.all_reduce(grad, async_op=True)", 32, "grad.copy_(next_grad)"}),
    [](const auto& info) { return std::string(info.param.case_name); });

}  // namespace
}  // namespace streamrace
