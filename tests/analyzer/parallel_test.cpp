// Analyzer::add_traces: traces analysed on several threads give exactly the result of
// analysing them one after another (issue 17: `analyze -j N`), and the error of the first
// unreadable trace in input order.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analyzer/analyzer.h"
#include "support/trace_test_support.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;

// Every recorded trace of the DeepSpeed runs and the bundled samples: 16 traces, 4 findings.
std::vector<std::string> recorded_traces() {
  std::vector<std::string> dirs = {STREAMRACE_SOURCE_DIR "/samples/traces/deepspeed-0.14.2",
                                   STREAMRACE_SOURCE_DIR "/samples/traces/zero1-synthetic"};
  for (auto& e : fs::directory_iterator(STREAMRACE_SOURCE_DIR "/tests/data/deepspeed"))
    if (e.is_directory()) dirs.push_back(e.path().string());
  std::sort(dirs.begin() + 2, dirs.end());
  return analysis::expand_trace_inputs(dirs);
}

nlohmann::json result_of(const std::vector<std::string>& paths, unsigned jobs, std::vector<size_t>* done = nullptr) {
  analysis::Analyzer a;
  if (jobs == 1 && !done) {
    for (const auto& p : paths) a.add_trace(p);
  } else {
    a.add_traces(paths, jobs, [&](size_t i) {
      if (done) done->push_back(i);
    });
  }
  nlohmann::json j = a.finish();
  return j;
}

TEST(ParallelAnalysis, SameResultAsOneTraceAfterAnother) {
  auto paths = recorded_traces();
  ASSERT_GE(paths.size(), 16u);
  const nlohmann::json one_by_one = result_of(paths, 1);
  ASSERT_EQ(one_by_one.at("findings").size(), 4u);
  for (unsigned jobs : {2u, 4u, 0u}) {
    std::vector<size_t> done;
    EXPECT_EQ(result_of(paths, jobs, &done), one_by_one) << "jobs " << jobs;
    std::sort(done.begin(), done.end());
    ASSERT_EQ(done.size(), paths.size()) << "jobs " << jobs;
    for (size_t i = 0; i < done.size(); ++i) EXPECT_EQ(done[i], i);
  }
}

TEST(ParallelAnalysis, TheFirstUnreadableTraceInInputOrderIsTheError) {
  testing::TempDir dir;
  const std::string bad1 = dir.file("bad1.srace"), bad2 = dir.file("bad2.srace");
  std::ofstream(bad1) << "not a trace";
  std::ofstream(bad2) << "not a trace either";
  auto paths = recorded_traces();
  paths.insert(paths.begin() + 3, bad2);
  paths.insert(paths.begin() + 9, bad1);
  analysis::Analyzer a;
  try {
    a.add_traces(paths, 4);
    FAIL() << "no error";
  } catch (const trace::TraceError& e) {
    EXPECT_EQ(std::string(e.what()), bad2 + ": offset 0: not a streamrace trace (bad magic)");
  }
}

}  // namespace
}  // namespace streamrace
