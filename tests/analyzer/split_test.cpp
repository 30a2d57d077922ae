// One trace split over several workers by allocation (`analyze -j N` on one large trace,
// issue #17): the result equals one unsplit analysis exactly: findings, first occurrences,
// counts, racing pairs, notices and summary. Splitting is forced here (split_min_bytes 0) on
// traces far below the threshold. The case traces are compared by the case runner, the CLI's
// reports on generated traces by tests/cli/split_trace_test.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analyzer/analyzer.h"
#include "support/trace_test_support.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using trace::AllocKind;
using trace::TraceBuilder;

// The result as the JSON report has it, plus the racing pairs it leaves out (kept in
// memory for the timeline reports and apply-fix).
nlohmann::json everything(const analysis::AnalysisResult& r) {
  nlohmann::json j = r;
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& f : r.findings)
    for (const auto& w : f.where) {
      nlohmann::json p = nlohmann::json::array();
      for (const auto& rp : w.pairs) p.push_back({rp.earlier_seq, rp.later_seq});
      pairs.push_back(p);
    }
  j["racing_pairs"] = pairs;
  return j;
}

nlohmann::json analysed(const std::vector<std::string>& paths, unsigned workers_per_trace,
                        uint32_t region_shift = 22) {
  analysis::AnalyzerOptions opts;
  opts.split_min_bytes = 0;
  opts.split_region_shift = region_shift;
  analysis::Analyzer a(opts);
  if (workers_per_trace == 1)
    for (const auto& p : paths) a.add_trace(p);
  else
    a.add_traces(paths, unsigned(paths.size()) * workers_per_trace);
  return everything(a.finish());
}

// Split with the usual 4 MiB regions and with 64 KiB ones (recorded traces hold few, small
// allocations, which 4 MiB regions would mostly give to one worker).
void expect_split_equals_unsplit(const std::vector<std::string>& paths, const std::string& what) {
  const nlohmann::json one = analysed(paths, 1);
  for (uint32_t shift : {22u, 16u})
    for (unsigned workers : {2u, 3u, 7u})
      EXPECT_EQ(analysed(paths, workers, shift), one) << what << ", " << workers << " workers, regions 2^" << shift;
}

// Clear of the builder's own addresses; one allocation per 4 MiB ownership region, so that
// adjacent allocations are in different regions (each region's owner a hash of it).
constexpr uint64_t kBase = 0x500000000000ull, kPiece = 4ull << 20;

// Accesses that reach allocations of several workers: a copy over 16 adjacent allocations
// against a memset of each on another stream and one memset over all of them on a third (all
// conflicts of the copy decided together: per earlier stream the latest, and of the one
// memset's 16 equal conflicts the lowest allocation's), a kernel with a pointer into each (one
// occurrence per launch however many pointers race), repeated so that counts and pairs add up.
TEST(SplitAnalysis, AccessesOverSeveralWorkersAllocationsCountOnce) {
  testing::TempDir dir;
  const std::string path = dir.file("spanning.srace");
  {
    TraceBuilder t(path, TraceBuilder::default_header());
    const uint64_t a = t.create_stream(), b = t.create_stream(), c = t.create_stream(), d = t.create_stream();
    std::vector<uint64_t> ptrs;
    for (uint64_t i = 0; i < 16; ++i) ptrs.push_back(t.alloc(kPiece, AllocKind::kDevice, 0, 0, kBase + i * kPiece));
    const uint64_t src = t.alloc(16 * kPiece);
    for (int step = 0; step < 5; ++step) {
      for (size_t i = 0; i < ptrs.size(); ++i) t.at("fill.py", uint32_t(10 + i % 3), "fill").memset(a, ptrs[i], kPiece);
      t.at("fill.py", 15, "fill_all").memset(d, kBase, 16 * kPiece);
      t.at("copy.py", 20, "copy").memcpy(b, kBase, src, 16 * kPiece, trace::CopyKind::kDeviceToDevice);
      t.at("kern.py", 30, "kern").kernel(c, "touch_all", ptrs);
      t.at("copy.py", 21, "copy_back").memcpy(a, src, kBase + 3 * kPiece, 9 * kPiece, trace::CopyKind::kDeviceToDevice);
      t.device_synchronize();
    }
  }
  const nlohmann::json one = analysed({path}, 1);
  ASSERT_GE(one.at("findings").size(), 3u);
  for (unsigned workers : {2u, 3u, 7u}) EXPECT_EQ(analysed({path}, workers), one) << workers << " workers";
}

// Stream-ordered frees hand their state to the next allocation at those addresses: with the
// same base it stays with its worker; an allocation over two freed ones held by different
// workers cannot be split, and the trace is analysed unsplit (same result either way).
TEST(SplitAnalysis, StreamOrderedReuseKeepsItsStateOrFallsBackToOneWorker) {
  testing::TempDir dir;
  auto write = [&](const std::string& name, bool over_all) {
    const std::string path = dir.file(name);
    TraceBuilder t(path, TraceBuilder::default_header());
    const uint64_t a = t.create_stream(), b = t.create_stream();
    for (uint64_t i = 0; i < 8; ++i) {
      const uint64_t p = t.alloc(kPiece, AllocKind::kAsync, a, 0, kBase + i * kPiece);
      t.at("w.py", 1, "write").memset(a, p, kPiece);
      t.free(p, AllocKind::kAsync, a);
      t.alloc(kPiece, AllocKind::kAsync, b, 0, p);
      t.at("r.py", 2, "reuse").memset(b, p, kPiece);  // after the free on a, unordered: racy
      t.at("r.py", 3, "reuse_again").memset(b, p + kPiece / 2, kPiece / 2);
    }
    // An 8 MiB allocation freed on a; the 4 MiB allocation over its second half, whose base is
    // in the next region, inherits that state and its owner (a guest in that region), and a
    // kernel there on b races with the free.
    const uint64_t wide = kBase + 64 * kPiece;
    t.alloc(2 * kPiece, AllocKind::kAsync, a, 0, wide);
    t.at("w.py", 5, "write_wide").memset(a, wide, 2 * kPiece);
    t.free(wide, AllocKind::kAsync, a);
    t.alloc(kPiece, AllocKind::kAsync, b, 0, wide + kPiece);
    t.at("k.py", 6, "kernel_on_half").kernel(b, "touch", {wide + kPiece + 64});
    if (over_all) {
      for (uint64_t i = 0; i < 8; ++i) t.free(kBase + i * kPiece, AllocKind::kAsync, b);
      t.alloc(8 * kPiece, AllocKind::kAsync, a, 0, kBase);  // over all eight freed ones
      t.at("big.py", 4, "big").memset(a, kBase, 8 * kPiece);
    }
    return path;
  };
  const std::string same_base = write("same_base.srace", false), over_all = write("over_all.srace", true);
  ASSERT_FALSE(analysed({same_base}, 1).at("findings").empty());
  expect_split_equals_unsplit({same_base}, "reuse at the same base");
  ASSERT_FALSE(analysed({over_all}, 1).at("findings").empty());
  expect_split_equals_unsplit({over_all}, "an allocation over eight freed ones");
}

std::vector<std::string> traces_under(const fs::path& root) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().extension() == ".srace") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Every GPU fixture and bundled sample, each trace split on its own and each directory's
// traces together (traces in parallel, each split).
TEST(SplitAnalysis, RecordedTracesGiveTheUnsplitResult) {
  std::vector<std::string> all;
  for (const char* root : {STREAMRACE_SOURCE_DIR "/tests/data/gpu", STREAMRACE_SOURCE_DIR "/samples/traces"}) {
    const auto found = traces_under(root);
    all.insert(all.end(), found.begin(), found.end());
  }
  ASSERT_GE(all.size(), 40u);
  for (const auto& p : all) expect_split_equals_unsplit({p}, p);
  expect_split_equals_unsplit(analysis::expand_trace_inputs({STREAMRACE_SOURCE_DIR "/samples/traces/deepspeed-0.14.2"}),
                              "deepspeed-0.14.2 together");
}

}  // namespace
}  // namespace streamrace
