// The ZeRO stage-1 and stage-2 replays recorded on 2 x H200 with `streamrace run`
// (tests/data/replay/gpu-stage<S>/<variant>/, see the README there): real GPU recordings of
// streamrace-replay-gpu, not traces emitted from the IR. Each variant's two traces, analysed
// together, must give exactly the findings expected.json lists (`none`: a certain WAW against the
// bucket's ncclAllReduce and a certain WAR against the copy out of the bucket, both on the copy
// into the bucket; every fix: nothing), and the record-level fix edits (`replay trace
// --apply-fix all`) must remove both `none` findings without adding one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <unistd.h>

#include "analyzer/analyzer.h"
#include "replay/trace_editor.h"

using namespace streamrace;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = std::string(SR_REPLAY_DATA_DIR);

nlohmann::json expected(const std::string& stage_dir) {
  std::ifstream f(kRoot + "/" + stage_dir + "/expected.json");
  return nlohmann::json::parse(f);
}

std::vector<std::string> traces_of(const std::string& stage_dir, const std::string& variant) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kRoot + "/" + stage_dir + "/" + variant))
    if (e.path().extension() == ".srace") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string stream_kind(const std::string& label) {
  if (label.rfind("legacy default stream", 0) == 0) return "legacy default stream";
  if (label.find("non-blocking") != std::string::npos) return "non-blocking";
  return label;
}

// Everything the test pins of one finding, as one comparable string.
std::string describe(const analysis::Finding& f) {
  std::map<int, uint64_t> per_rank;
  for (const auto& w : f.where) per_rank[w.rank] += w.count;
  std::string ranks, counts;
  for (int r : f.ranks) ranks += std::to_string(r) + ",";
  for (const auto& [r, n] : per_rank) counts += std::to_string(r) + ":" + std::to_string(n) + ",";
  return f.fingerprint + " " + analysis::to_string(f.kind) + " " + analysis::to_string(f.confidence) + " | " +
         f.earlier.op + " " + f.earlier.direction + " " + stream_kind(f.earlier.stream_label) + " | " + f.later.op +
         " " + f.later.direction + " " + stream_kind(f.later.stream_label) + " | bytes " +
         std::to_string(f.overlap_bytes) + " alloc " + std::to_string(f.later.alloc_bytes) + " | occurrences " +
         std::to_string(f.occurrences) + " ranks " + ranks + " per rank " + counts;
}

std::string describe(const nlohmann::json& f) {
  std::string ranks, counts;
  for (const auto& r : f.at("ranks")) ranks += std::to_string(r.get<int>()) + ",";
  std::map<int, uint64_t> per_rank;
  for (const auto& [r, n] : f.at("occurrences_per_rank").items()) per_rank[std::stoi(r)] = n.get<uint64_t>();
  for (const auto& [r, n] : per_rank) counts += std::to_string(r) + ":" + std::to_string(n) + ",";
  return f.at("fingerprint").get<std::string>() + " " + f.at("kind").get<std::string>() + " " +
         f.at("confidence").get<std::string>() + " | " + f.at("earlier_op").get<std::string>() + " " +
         f.at("earlier_direction").get<std::string>() + " " + f.at("earlier_stream").get<std::string>() + " | " +
         f.at("later_op").get<std::string>() + " " + f.at("later_direction").get<std::string>() + " " +
         f.at("later_stream").get<std::string>() + " | bytes " + std::to_string(f.at("bytes").get<uint64_t>()) +
         " alloc " + std::to_string(f.at("allocation_bytes").get<uint64_t>()) + " | occurrences " +
         std::to_string(f.at("occurrences").get<uint64_t>()) + " ranks " + ranks + " per rank " + counts;
}

class GpuReplayFixture : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(GpuReplayFixture, EachVariantGivesExactlyTheExpectedFindings) {
  const std::string stage = GetParam();
  auto exp = expected(stage);
  ASSERT_EQ(exp.at("variants").size(), 4u);
  for (const auto& [variant, want] : exp.at("variants").items()) {
    SCOPED_TRACE(stage + "/" + variant);
    auto paths = traces_of(stage, variant);
    ASSERT_EQ(paths.size(), 2u);
    analysis::Analyzer analyzer;
    for (const auto& p : paths) analyzer.add_trace(p);
    auto res = analyzer.finish();

    // The recording itself: both ranks, complete, captured, the files expected.json names.
    ASSERT_EQ(res.traces.size(), 2u);
    std::map<std::string, std::string> rank_files;
    for (const auto& t : res.traces) {
      EXPECT_EQ(t.capture_status, "ok");
      EXPECT_TRUE(t.complete);
      EXPECT_FALSE(t.truncated);
      EXPECT_EQ(t.mode, "default");
      rank_files[std::to_string(t.rank)] = fs::path(t.path).filename().string();
    }
    std::map<std::string, std::string> want_files;
    for (const auto& [r, name] : want.at("traces").items()) want_files[r] = name.get<std::string>();
    EXPECT_EQ(rank_files, want_files);
    EXPECT_EQ(res.records, want.at("records").get<uint64_t>());
    EXPECT_EQ(res.accesses, want.at("accesses").get<uint64_t>());

    uint64_t certain = 0, possible = 0;
    std::multiset<std::string> got, wanted;
    for (const auto& f : res.findings) {
      (f.confidence == analysis::Confidence::kCertain ? certain : possible)++;
      got.insert(describe(f));
    }
    for (const auto& f : want.at("findings")) wanted.insert(describe(f));
    EXPECT_EQ(certain, want.at("certain").get<uint64_t>());
    EXPECT_EQ(possible, want.at("possible").get<uint64_t>());
    EXPECT_EQ(got, wanted);
  }
}

TEST_P(GpuReplayFixture, ApplyFixRemovesTheNoneFindingsAndAddsNone) {
  const std::string stage = GetParam();
  auto exp = expected(stage);
  const auto& want = exp.at("apply_fix_none");
  auto out = fs::temp_directory_path() / ("streamrace_gpu_replay_fix_" + stage + "_" + std::to_string(::getpid()));
  fs::remove_all(out);
  replay::RecordFixOptions opts;
  opts.out_dir = out.string();
  // The rounds and edits recorded in expected.json are the former method's (one occurrence per
  // round); ApplyFixInOneRoundGivesTheSameVerdict below checks today's.
  opts.one_occurrence_per_round = true;
  // The default cap (max_rounds 0): one round per occurrence of the targeted findings, plus one.
  auto r = replay::apply_record_fixes(traces_of(stage, "none"), opts);
  EXPECT_EQ(r.round_cap, 1u + 630u + 630u);

  std::set<std::string> before;
  for (const auto& f : r.before.findings) before.insert(f.fingerprint);
  std::set<std::string> want_removed;
  for (const auto& fp : want.at("removed")) want_removed.insert(fp.get<std::string>());
  EXPECT_EQ(before, want_removed);
  EXPECT_EQ(r.before.certain, 2u);
  EXPECT_EQ(std::set<std::string>(r.verdict.targeted.begin(), r.verdict.targeted.end()), want_removed);
  EXPECT_EQ(std::set<std::string>(r.verdict.removed.begin(), r.verdict.removed.end()), want_removed);
  EXPECT_TRUE(r.verdict.remaining.empty());
  EXPECT_TRUE(r.verdict.introduced.empty());
  EXPECT_FALSE(r.hit_round_cap);
  EXPECT_TRUE(r.fixed());
  EXPECT_TRUE(r.after.clean()) << r.after.findings.size() << " finding(s) after the fix";
  EXPECT_EQ(r.rounds, want.at("rounds").get<uint32_t>());
  // expected.json counts an edit per ordered pair (the former editor's record + wait with an
  // event each); each is now one record and one wait, of one event per stream pair and round.
  EXPECT_EQ(r.total_edits(), 2 * want.at("edits").get<size_t>());
  for (const auto& t : r.traces) EXPECT_TRUE(t.warnings.empty()) << t.source << ": " << t.warnings.front();
  fs::remove_all(out);
}

// Every listed occurrence edited in one round: the same verdict as one occurrence per round.
TEST_P(GpuReplayFixture, ApplyFixInOneRoundGivesTheSameVerdict) {
  const std::string stage = GetParam();
  const auto exp = expected(stage);
  const auto& want = exp.at("apply_fix_none");
  auto out = fs::temp_directory_path() / ("streamrace_gpu_replay_fix1_" + stage + "_" + std::to_string(::getpid()));
  fs::remove_all(out);
  replay::RecordFixOptions opts;
  opts.out_dir = out.string();
  auto r = replay::apply_record_fixes(traces_of(stage, "none"), opts);
  std::set<std::string> want_removed;
  for (const auto& fp : want.at("removed")) want_removed.insert(fp.get<std::string>());
  EXPECT_EQ(std::set<std::string>(r.verdict.targeted.begin(), r.verdict.targeted.end()), want_removed);
  EXPECT_EQ(std::set<std::string>(r.verdict.removed.begin(), r.verdict.removed.end()), want_removed);
  EXPECT_TRUE(r.verdict.remaining.empty());
  EXPECT_TRUE(r.verdict.introduced.empty());
  EXPECT_TRUE(r.fixed());
  EXPECT_TRUE(r.after.clean()) << r.after.findings.size() << " finding(s) after the fix";
  EXPECT_EQ(r.rounds, 1u);
  // Every occurrence pair (630 per finding, 1260) is ordered by one event per stream pair: a
  // record and a wait per pair of the first finding; the second finding's pairs are ordered
  // by them already.
  size_t events = 0, records = 0, waits = 0;
  for (const auto& t : r.traces) events += t.events, records += t.records, waits += t.waits;
  EXPECT_EQ(events, 2u);
  EXPECT_EQ(records, 630u);
  EXPECT_EQ(waits, 630u);
  EXPECT_EQ(r.total_edits(), 1260u);
  for (const auto& t : r.traces) EXPECT_TRUE(t.warnings.empty()) << t.source << ": " << t.warnings.front();
  fs::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Recorded, GpuReplayFixture, ::testing::Values("gpu-stage1", "gpu-stage2"),
                         [](const auto& info) { return info.param == "gpu-stage1" ? "Stage1" : "Stage2"; });

// Stopping early at an explicit round cap below the 630 rounds these traces need (the editor's
// former fixed default was 512) leaves the findings in place but never adds one.
TEST(GpuReplayFixtureCap, PartialEditsAtTheRoundCapAddNoFinding) {
  auto out = fs::temp_directory_path() / ("streamrace_gpu_replay_cap_" + std::to_string(::getpid()));
  fs::remove_all(out);
  replay::RecordFixOptions opts;
  opts.out_dir = out.string();
  opts.max_rounds = 32;
  opts.one_occurrence_per_round = true;  // one round edits them all otherwise
  auto r = replay::apply_record_fixes(traces_of("gpu-stage1", "none"), opts);
  EXPECT_TRUE(r.hit_round_cap);
  EXPECT_FALSE(r.fixed());
  EXPECT_EQ(r.rounds, 32u);
  EXPECT_EQ(r.total_edits(), 128u);  // 32 rounds x 2 findings x (a record and a wait)
  EXPECT_EQ(r.verdict.remaining.size(), 2u);
  EXPECT_TRUE(r.verdict.introduced.empty());
  ASSERT_EQ(r.after.findings.size(), 2u);
  for (const auto& f : r.after.findings) EXPECT_EQ(f.occurrences, 630u - 32u) << f.fingerprint;
  fs::remove_all(out);
}
