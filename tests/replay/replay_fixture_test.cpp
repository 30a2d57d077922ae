// The stage-1 seed-preset traces of the GPU batch (tests/data/replay/zero-seed-stage1/, emitted
// on the CPU from the schedules the GPU executor ran; see the README there) give the findings
// expected.json lists: certain bucket-reuse findings for `none`, none for the fixes; and applying
// the suggested fixes to the `none` traces removes every finding without adding one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "replay/analyzer_verdict.h"
#include "replay/trace_editor.h"

using namespace streamrace::replay;
namespace fs = std::filesystem;
using streamrace::analysis::Confidence;

namespace {

const std::string kDir = std::string(SR_REPLAY_DATA_DIR) + "/zero-seed-stage1";

std::vector<std::string> traces_of(const std::string& variant) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir + "/" + variant))
    if (e.path().extension() == ".srace") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json expected() {
  std::ifstream f(kDir + "/expected.json");
  return nlohmann::json::parse(f);
}

}  // namespace

TEST(ReplayFixtures, Stage1SeedTracesGiveTheExpectedFindings) {
  auto exp = expected();
  ASSERT_EQ(exp["variants"].size(), 4u);
  for (const auto& [variant, want] : exp["variants"].items()) {
    auto paths = traces_of(variant);
    ASSERT_EQ(paths.size(), 2u) << variant;
    auto v = analyze_traces(paths);
    EXPECT_EQ(v.certain, want["certain"].get<uint64_t>()) << variant;
    EXPECT_EQ(v.possible, want["possible"].get<uint64_t>()) << variant;
    std::set<std::string> got, wanted;
    for (const auto& f : v.findings) got.insert(f.fingerprint);
    for (const auto& fp : want["fingerprints"]) wanted.insert(fp.get<std::string>());
    EXPECT_EQ(got, wanted) << variant;
    if (variant == "none") {
      bool copy_in = false;
      for (const auto& f : v.findings)
        if (f.confidence == Confidence::kCertain && f.later.op_kind == "memcpy" && !f.later.stack.empty() &&
            f.later.stack[0].line == 950)
          copy_in = true;
      EXPECT_TRUE(copy_in) << "no certain finding whose later access is the copy into ipg_buffer";
    }
  }
}

TEST(ReplayFixtures, SuggestedFixesRemoveTheStage1SeedFindings) {
  auto out = fs::temp_directory_path() / ("streamrace_replay_fixture_" + std::to_string(::getpid()));
  fs::remove_all(out);
  RecordFixOptions opts;
  opts.out_dir = out.string();
  auto r = apply_record_fixes(traces_of("none"), opts);
  EXPECT_EQ(r.before.certain, 2u);
  EXPECT_EQ(r.verdict.removed.size(), r.verdict.targeted.size());
  EXPECT_TRUE(r.verdict.remaining.empty());
  EXPECT_TRUE(r.verdict.introduced.empty());
  EXPECT_TRUE(r.after.clean()) << r.after.findings.size() << " finding(s) after the fix";
  fs::remove_all(out);
}
