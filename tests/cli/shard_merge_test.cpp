// Issue #17 "every rank" through the built binary: `analyze --shard I/N` analyses one
// consecutive slice of the expanded trace list, and `streamrace merge` of the N findings
// documents gives exactly the report of one `analyze` of every trace (256 generated ranks:
// clean ones, racy ones, fingerprints shared by many ranks), in every report format; bad
// documents and incomplete shard sets exit 2 naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyzer/analyzer.h"
#include "report/report_test_support.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using nlohmann::json;

constexpr int kRanks = 256;
constexpr int kShards = 7;

// Rank r's program. r % 4 == 0: clean (the consumer waits on an event). 1: race A (a copy
// reads what a memset on another stream writes) r % 3 + 1 times. 2: race A once and race B
// (two memsets on two streams). 3: race C<k>, k = r % 5: five fingerprints, each on a
// handful of ranks.
void write_rank(const std::string& path, int r) {
  trace::TraceBuilder b(path, trace::TraceBuilder::default_header(r));
  const uint64_t s1 = b.create_stream(), s2 = b.create_stream();
  auto race_a = [&] {
    const uint64_t src = b.alloc(4096), dst = b.alloc(4096);
    b.at("bucket.py", 10, "fill_bucket");
    b.memset(s1, src, 4096);
    b.at("bucket.py", 20, "reduce_bucket");
    b.memcpy(s2, dst, src, 4096);
  };
  switch (r % 4) {
    case 0: {
      const uint64_t src = b.alloc(4096), dst = b.alloc(4096), ev = b.create_event();
      b.at("bucket.py", 10, "fill_bucket");
      b.memset(s1, src, 4096);
      b.record_event(ev, s1);
      b.wait_event(s2, ev);
      b.at("bucket.py", 20, "reduce_bucket");
      b.memcpy(s2, dst, src, 4096);
      break;
    }
    case 1:
      for (int i = 0; i < r % 3 + 1; ++i) race_a();
      break;
    case 2: {
      race_a();
      const uint64_t p = b.alloc(8192);
      b.at("optimizer.py", 30, "zero_grad");
      b.memset(s1, p, 8192);
      b.at("optimizer.py", 40, "clear_state");
      b.memset(s2, p, 8192);
      break;
    }
    case 3: {
      const uint64_t p = b.alloc(1024), q = b.alloc(1024);
      b.at(fmt::format("layer{}.py", r % 5), 7, "forward");
      b.memcpy(s1, q, p, 1024);
      b.at(fmt::format("layer{}.py", r % 5), 9, "backward");
      b.memset(s2, p, 1024);
      break;
    }
  }
  b.finish();
}

class ShardMerge : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    fs::create_directories(dir_->file("traces"));
    for (int r = 0; r < kRanks; ++r) write_rank(dir_->file(fmt::format("traces/rank{:03}.srace", r)), r);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static CommandResult sr(const std::string& args) {
    return testing::run_command(dir_->path().string(), std::string(STREAMRACE_BIN) + " " + args);
  }
  static json read_json(const std::string& name) { return json::parse(testing::read_file(dir_->file(name))); }
  static std::string file(const std::string& name) { return dir_->file(name); }
  // Writes shard i of kShards to shard<i>.json; returns its exit status.
  static int analyze_shard(int i) {
    auto r = sr(fmt::format("analyze traces --shard {}/{} -f json=shard{}.json", i, kShards, i));
    EXPECT_TRUE(r.status == 0 || r.status == 1) << r.err;
    return r.status;
  }
  // The shard documents, named out of order (as a glob puts shard10 before shard2).
  static std::string shard_docs() {
    std::string s;
    for (int i : {3, 0, 6, 1, 5, 2, 4}) s += fmt::format(" shard{}.json", i);
    return s;
  }
  static testing::TempDir* dir_;
};
testing::TempDir* ShardMerge::dir_ = nullptr;

TEST(ShardOf, ConsecutiveSlicesCoverTheListOnce) {
  std::vector<std::string> paths;
  for (int i = 0; i < 10; ++i) paths.push_back(std::to_string(i));
  std::vector<size_t> sizes;
  std::vector<std::string> joined;
  for (uint32_t i = 0; i < 3; ++i) {
    auto s = analysis::shard_of(paths, i, 3);
    sizes.push_back(s.size());
    joined.insert(joined.end(), s.begin(), s.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 4}));
  EXPECT_EQ(joined, paths);
  EXPECT_EQ(analysis::shard_of({"a", "b"}, 2, 4), std::vector<std::string>{});
  EXPECT_EQ(analysis::shard_of({"a", "b"}, 3, 4), std::vector<std::string>{"b"});
  EXPECT_TRUE(analysis::shard_of(paths, 3, 3).empty());
}

TEST_F(ShardMerge, MergedShardsEqualOneAnalysisOfEveryRank) {
  auto all = sr("analyze traces -f json=all.json -f text=all.txt -f sarif=all.sarif");
  ASSERT_EQ(all.status, 1) << all.err;
  int racy_shards = 0;
  size_t traces_in_shards = 0;
  for (int i = 0; i < kShards; ++i) {
    racy_shards += analyze_shard(i) == 1;
    const json s = read_json(fmt::format("shard{}.json", i));
    EXPECT_EQ(s.at("shard"), (json{{"index", i}, {"count", kShards}, {"of_traces", kRanks}}));
    // Shard i holds ranks [i * 256 / 7, (i + 1) * 256 / 7).
    const int lo = i * kRanks / kShards, hi = (i + 1) * kRanks / kShards;
    ASSERT_EQ(s.at("traces").size(), size_t(hi - lo));
    EXPECT_EQ(s.at("traces").front().at("rank"), lo);
    EXPECT_EQ(s.at("traces").back().at("rank"), hi - 1);
    traces_in_shards += s.at("traces").size();
  }
  EXPECT_EQ(racy_shards, kShards);
  EXPECT_EQ(traces_in_shards, size_t(kRanks));

  auto merged = sr("merge" + shard_docs() + " -f json=merged.json -f text=merged.txt -f sarif=merged.sarif");
  ASSERT_EQ(merged.status, 1) << merged.err;
  EXPECT_EQ(merged.out, "");
  EXPECT_EQ(merged.err, all.err);  // the summary line, the reports having gone to files
  const json want = read_json("all.json"), got = read_json("merged.json");
  // The whole document: findings (fingerprints, kinds, confidence, both accesses, fixes,
  // occurrences, ranks, places), notices, traces and summary.
  EXPECT_EQ(got, want) << "merged:\n" << got.dump(1).substr(0, 4000);
  EXPECT_EQ(testing::read_file(file("merged.txt")), testing::read_file(file("all.txt")));
  EXPECT_EQ(testing::read_file(file("merged.sarif")), testing::read_file(file("all.sarif")));

  // What the single analysis found, spelled out: 7 fingerprints.
  std::vector<int> ranks_a, ranks_b, occ_a_expected;
  uint64_t occ_a = 0;
  std::map<int, std::vector<int>> ranks_c;
  for (int r = 0; r < kRanks; ++r) {
    if (r % 4 == 1) ranks_a.push_back(r), occ_a += r % 3 + 1;
    if (r % 4 == 2) ranks_a.push_back(r), ranks_b.push_back(r), occ_a += 1;
    if (r % 4 == 3) ranks_c[r % 5].push_back(r);
  }
  std::sort(ranks_a.begin(), ranks_a.end());
  const auto& findings = got.at("findings");
  ASSERT_EQ(findings.size(), 7u);
  EXPECT_EQ(got.at("summary").at("traces"), kRanks);
  EXPECT_EQ(got.at("summary").at("certain"), 7);
  std::map<std::string, const json*> by_site;
  for (const auto& f : findings) {
    EXPECT_EQ(f.at("confidence"), "certain");
    by_site[f.at("accesses")[1].at("stack")[0].at("function").get<std::string>() + "@" +
            f.at("accesses")[1].at("stack")[0].at("file").get<std::string>()] = &f;
  }
  const json& a = *by_site.at("reduce_bucket@bucket.py");
  EXPECT_EQ(a.at("kind"), "read-after-write");
  EXPECT_EQ(a.at("occurrences"), occ_a);
  EXPECT_EQ(a.at("ranks").get<std::vector<int>>(), ranks_a);
  EXPECT_EQ(a.at("where").size(), ranks_a.size());
  const json& b = *by_site.at("clear_state@optimizer.py");
  EXPECT_EQ(b.at("kind"), "write-after-write");
  EXPECT_EQ(b.at("occurrences"), ranks_b.size());
  EXPECT_EQ(b.at("ranks").get<std::vector<int>>(), ranks_b);
  for (int k = 0; k < 5; ++k) {
    const json& c = *by_site.at(fmt::format("backward@layer{}.py", k));
    EXPECT_EQ(c.at("kind"), "write-after-read");
    EXPECT_EQ(c.at("occurrences"), ranks_c[k].size());
    EXPECT_EQ(c.at("ranks").get<std::vector<int>>(), ranks_c[k]);
  }
  // Most occurrences first: race A leads.
  EXPECT_EQ(findings[0].at("fingerprint"), a.at("fingerprint"));
}

TEST_F(ShardMerge, EveryAnalyzeFormatAndExitStatus) {
  for (int i = 0; i < kShards; ++i) analyze_shard(i);
  for (const char* fmt_name : {"text", "json", "sarif", "junit", "perfetto", "html"}) {
    auto r = sr(fmt::format("merge{} -f {}=merged.{}", shard_docs(), fmt_name, fmt_name));
    EXPECT_EQ(r.status, 1) << fmt_name << ": " << r.err;
    EXPECT_GT(fs::file_size(file(std::string("merged.") + fmt_name)), 100u) << fmt_name;
  }
  // The text report on stdout ends with the summary line, as analyze's does.
  auto text = sr("merge" + shard_docs() + " --print-limit 1");
  EXPECT_EQ(text.status, 1);
  EXPECT_NE(text.out.find("\nSUMMARY: streamrace: 7 races (7 certain, 0 possible) in 256 traces\n"), std::string::npos)
      << text.out.substr(text.out.size() > 300 ? text.out.size() - 300 : 0);
  EXPECT_EQ(sr("merge" + shard_docs() + " -f json -o m.json --error-exitcode 9").status, 9);
  // A clean document merges to a clean verdict: exit 0.
  ASSERT_EQ(sr("analyze traces/rank000.srace -f json=clean0.json").status, 0);
  ASSERT_EQ(sr("analyze traces/rank004.srace -f json=clean4.json").status, 0);
  auto clean = sr("merge clean0.json clean4.json");
  EXPECT_EQ(clean.status, 0) << clean.err;
  EXPECT_EQ(clean.out,
            "streamrace: no races found in 2 traces (6 accesses checked)\n"
            "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces\n");
  // Documents of single ranks (no shard) merge in the order named; a directory gives its *.json.
  fs::create_directories(file("ranks"));
  ASSERT_EQ(sr("analyze traces/rank001.srace -f json=ranks/r1.json").status, 1);
  ASSERT_EQ(sr("analyze traces/rank005.srace -f json=ranks/r5.json").status, 1);
  ASSERT_EQ(sr("analyze traces/rank001.srace traces/rank005.srace -f json=pair.json").status, 1);
  ASSERT_EQ(sr("merge ranks -f json=ranks.json").status, 1);
  EXPECT_EQ(read_json("ranks.json"), read_json("pair.json"));
}

TEST_F(ShardMerge, BadInputExitsTwoNamingTheFile) {
  for (int i = 0; i < kShards; ++i) analyze_shard(i);
  auto expect_refused = [](const std::string& args, const std::string& message) {
    auto r = sr(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err, message + "\n") << args;
    EXPECT_EQ(r.out, "") << args;
  };
  expect_refused("merge nope.json", "streamrace merge: error: nope.json: no such file or directory");
  testing::write_file(file("broken.json"), "{\"schema\": ");
  auto broken = sr("merge shard0.json broken.json");
  EXPECT_EQ(broken.status, 2);
  EXPECT_EQ(broken.err.rfind("streamrace merge: error: broken.json: not valid JSON: ", 0), 0u) << broken.err;
  testing::write_file(file("other.json"), "{\"schema\": \"something-else\", \"findings\": []}");
  expect_refused("merge other.json",
                 "streamrace merge: error: other.json: not a streamrace findings document (expected \"schema\": "
                 "\"streamrace-findings\")");
  expect_refused("merge traces/rank001.srace",
                 "streamrace merge: error: traces/rank001.srace: not valid JSON: "
                 "[json.exception.parse_error.101] parse error at line 1, column 1: syntax error while parsing value "
                 "- invalid literal; last read: 'S'");
  expect_refused("merge shard0.json shard1.json shard2.json shard4.json shard5.json shard6.json",
                 "streamrace merge: error: shard(s) 3 of 7 missing (6 given); the merged report would not cover every "
                 "trace");
  expect_refused("merge" + shard_docs() + " shard2.json",
                 "streamrace merge: error: shard2.json: shard 2/7 is also shard2.json");
  ASSERT_EQ(sr("analyze traces --shard 0/2 -f json=half0.json").status, 1);
  expect_refused("merge shard0.json half0.json",
                 "streamrace merge: error: half0.json: shard 0/2 of 256 traces does not belong with shard0.json, shard "
                 "0/7 of 256 traces");
  expect_refused("merge shard0.json -f yaml", "streamrace merge: unknown format 'yaml' (choose from: text json sarif "
                                              "junit perfetto html)");
  expect_refused("analyze traces --shard 7/7",
                 "streamrace analyze: error: --shard 7/7: the shard index must be at least 0 and below the count 7");
  expect_refused("analyze traces --shard 1", "streamrace analyze: error: --shard takes I/N (shard I of N, counted "
                                             "from 0), not '1'");
  expect_refused("analyze traces --shard 0/0",
                 "streamrace analyze: error: --shard 0/0: the shard index must be at least 0 and below the count 0");
}

}  // namespace
}  // namespace streamrace
