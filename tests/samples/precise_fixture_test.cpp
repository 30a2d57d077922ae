// Precise mode's recordings (issue 7), made on the H200 machine by scripts/gpu/precise_batch.sh
// and committed under tests/data/precise/<case>/ (see the README there):
//
//   - every case's full report, and the report of the same traces analysed as the default tier,
//     are its expected.json and expected.ignore-precise.json: the case runner
//     (tests/support/case_runner.cpp) compares them;
//   - here, independently of those files, the samples' intent: the racy programs are `possible`
//     at most in the default mode and one `certain` race with the exact ranges in precise
//     mode; the clean ones have no finding in precise mode;
//   - one schema, two sources: the CUPTI recording of a program and its Compute Sanitizer
//     recording, analysed as the default tier, give the same findings.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "analyzer/analyzer.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using analysis::AnalysisResult;
using analysis::Confidence;
using analysis::Finding;

const fs::path kRoot = fs::path(SR_PRECISE_DATA_DIR);
constexpr uint64_t kMiB = 1u << 20;

AnalysisResult analyse(const std::string& c, bool ignore_precise = false) {
  analysis::AnalyzerOptions opts;
  opts.ignore_precise = ignore_precise;
  analysis::Analyzer analyzer(opts);
  for (const auto& t : analysis::expand_trace_inputs({(kRoot / c).string()})) analyzer.add_trace(t);
  return analyzer.finish();
}

std::vector<std::string> cases() {
  std::vector<std::string> out;
  if (!fs::is_directory(kRoot)) return out;
  for (auto& e : fs::directory_iterator(kRoot))
    if (e.is_directory() && fs::exists(e.path() / "case.json")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// ---- The samples' intent, independent of the expected reports ----

struct Racy {
  const char* program;
  const char* writer;       // substring of the earlier (writing) kernel's name
  const char* reader;       // substring of the later (reading) kernel's name
  uint64_t write_offset, write_bytes, read_offset, read_bytes, overlap_offset, overlap_bytes;
};

// The CUDA sample writes [0, N/2) of a 4 MiB buffer and reads [N/4, 3N/4); the PyTorch
// narrow() views the same; the raw kernel writes the whole tensor, which the sum reads.
const Racy kRacy[] = {
    {"views_racy", "write_range", "read_range", 0, 2 * kMiB, kMiB, 2 * kMiB, kMiB, kMiB},
    {"torch_views_racy", "FillFunctor", "reduce_kernel", 0, 2 * kMiB, kMiB, 2 * kMiB, kMiB, kMiB},
    {"torch_raw_racy", "raw_fill", "reduce_kernel", 0, 4 * kMiB, 0, 4 * kMiB, 0, 4 * kMiB},
    // The reader moves the buffer with cp.async only (LDGSTS): measured since 2026-12-01.
    {"async_copy_racy", "write_all", "sum_async", 0, 4 * kMiB, 0, 4 * kMiB, 0, 4 * kMiB},
};

TEST(PreciseSamples, RacyProgramsAreCertainWithExactRangesInPreciseMode) {
  for (const Racy& c : kRacy) {
    SCOPED_TRACE(c.program);
    AnalysisResult r = analyse(std::string(c.program) + "_precise");
    ASSERT_EQ(r.findings.size(), 1u);
    const Finding& f = r.findings[0];
    EXPECT_EQ(f.kind, analysis::RaceKind::kReadAfterWrite);
    EXPECT_EQ(f.confidence, Confidence::kCertain);
    EXPECT_EQ(f.mode, "precise");
    EXPECT_NE(f.earlier.op.find(c.writer), std::string::npos) << f.earlier.op;
    EXPECT_NE(f.later.op.find(c.reader), std::string::npos) << f.later.op;
    EXPECT_EQ(f.earlier.direction, "write");
    EXPECT_EQ(f.later.direction, "read");
    EXPECT_TRUE(f.earlier.exact && f.later.exact);
    // The buffer's offsets inside its allocation (a cudaMalloc, or the caching allocator's
    // segment, where the buffer is the first block).
    EXPECT_EQ(f.earlier.addr - f.earlier.alloc_base, c.write_offset);
    EXPECT_EQ(f.earlier.bytes, c.write_bytes);
    EXPECT_EQ(f.later.addr - f.later.alloc_base, c.read_offset);
    EXPECT_EQ(f.later.bytes, c.read_bytes);
    EXPECT_EQ(f.overlap_addr - f.earlier.alloc_base, c.overlap_offset);
    EXPECT_EQ(f.overlap_bytes, c.overlap_bytes);
    EXPECT_EQ(f.fix.find("--precise"), std::string::npos);  // nothing left to confirm
  }
}

TEST(PreciseSamples, RacyProgramsAreAtMostPossibleInTheDefaultMode) {
  for (const Racy& c : kRacy) {
    SCOPED_TRACE(c.program);
    AnalysisResult r = analyse(std::string(c.program) + "_default");
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
    EXPECT_EQ(r.findings[0].mode, "default");
    EXPECT_NE(r.findings[0].fix.find("--precise"), std::string::npos);
  }
}

TEST(PreciseSamples, CleanProgramsHaveNoFindingInPreciseMode) {
  for (const char* c : {"views_clean", "views_readread", "views_disjoint", "torch_views_clean", "torch_raw_clean",
                        "torch_readread", "torch_disjoint", "torch_nccl_clean", "async_copy_clean",
                        "torch_gemm_in_clean", "torch_gemm_out_clean"}) {
    SCOPED_TRACE(c);
    AnalysisResult r = analyse(std::string(c) + "_precise");
    EXPECT_TRUE(r.findings.empty());
    ASSERT_FALSE(r.traces.empty());
    EXPECT_EQ(r.traces[0].mode, "precise");
  }
}

TEST(PreciseSamples, OrderedProgramsHaveNoFindingInTheDefaultMode) {
  for (const char* c : {"views_clean", "torch_views_clean", "torch_raw_clean", "async_copy_clean", "torch_gemm_in_clean",
                        "torch_gemm_out_clean"}) {
    SCOPED_TRACE(c);
    EXPECT_TRUE(analyse(std::string(c) + "_default").findings.empty());
  }
}

// What precise mode is for: pointer arguments alone cannot tell two readers, or two writers of
// disjoint slices, from a race. The default mode reports these clean programs as `possible`
// (and says to confirm with --precise); precise mode clears them (above).
TEST(PreciseSamples, DefaultModeCannotClearReadReadOrDisjointSlices) {
  for (const char* c : {"views_readread", "views_disjoint", "torch_readread", "torch_disjoint"}) {
    SCOPED_TRACE(c);
    AnalysisResult r = analyse(std::string(c) + "_default");
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
    EXPECT_EQ(r.findings[0].earlier.direction, "read or write");
  }
}

// A C++ kernel's `T const*` parameters are reads in the default mode. In the CUDA read-read
// sample both kernels read the 4 MiB buffer through `float const*`: no conflict there any
// more; what remains is their `float* out` arguments, two adjacent floats of one 8-byte
// allocation, whose extents the default mode cannot know (precise mode clears it).
TEST(PreciseSamples, DefaultModeTakesConstPointerParametersAsReads) {
  AnalysisResult rr = analyse("views_readread_default");
  ASSERT_EQ(rr.findings.size(), 1u);
  EXPECT_EQ(rr.findings[0].earlier.alloc_bytes, 8u);
  EXPECT_EQ(rr.findings[0].overlap_bytes, 4u);

  AnalysisResult racy = analyse("views_racy_default");
  ASSERT_EQ(racy.findings.size(), 1u);
  EXPECT_EQ(racy.findings[0].kind, analysis::RaceKind::kReadAfterWrite);
  EXPECT_EQ(racy.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(racy.findings[0].later.direction, "read");
  EXPECT_FALSE(racy.findings[0].later.exact);

  // Without the signature rule every pointer is read-or-write: the buffer itself conflicts.
  analysis::AnalyzerOptions opts;
  opts.kernel_pointers_unknown_direction = true;
  analysis::Analyzer a(opts);
  for (const auto& t : analysis::expand_trace_inputs({(kRoot / "views_readread_default").string()})) a.add_trace(t);
  AnalysisResult unknown = a.finish();
  ASSERT_EQ(unknown.findings.size(), 1u);
  EXPECT_EQ(unknown.findings[0].overlap_bytes, 4u * kMiB);
}

using Key = std::tuple<std::string, std::string, std::string, std::string, uint64_t>;
std::vector<Key> keys(const AnalysisResult& r) {
  std::vector<Key> out;
  for (const auto& f : r.findings)
    out.emplace_back(analysis::to_string(f.kind), analysis::to_string(f.confidence), f.earlier.op, f.later.op,
                     f.overlap_bytes);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PreciseSamples, BothEventSourcesGiveTheSameDefaultTierAnalysis) {
  int pairs = 0;
  for (const auto& c : cases()) {
    const std::string suffix = "_precise";
    if (c.size() <= suffix.size() || c.compare(c.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string program = c.substr(0, c.size() - suffix.size());
    if (!fs::exists(kRoot / (program + "_default"))) continue;
    SCOPED_TRACE(program);
    ++pairs;
    AnalysisResult cupti = analyse(program + "_default");
    AnalysisResult sanitizer = analyse(c, /*ignore_precise=*/true);
    EXPECT_EQ(keys(cupti), keys(sanitizer));
    EXPECT_EQ(cupti.traces.at(0).mode, "default");
    EXPECT_EQ(sanitizer.traces.at(0).mode, "precise");
  }
  EXPECT_EQ(pairs, 16);  // 6 CUDA programs, 10 PyTorch programs
}

// cuBLAS's sm90 GEMMs (nvjet) read their inputs and write their output by bulk tensor copies
// (TMA), which the Sanitizer API cannot instrument: their launches measure nothing through
// those pointers. Precise mode must then keep the default tier's access (possible), never
// report the racy program clean (it did before 2026-12-01: 0 findings).
TEST(PreciseSamples, TmaGemmRacesStayPossibleInPreciseMode) {
  for (const char* c : {"torch_gemm_in_racy", "torch_gemm_out_racy"}) {
    SCOPED_TRACE(c);
    AnalysisResult r = analyse(std::string(c) + "_precise");
    ASSERT_EQ(r.findings.size(), 1u);
    const Finding& f = r.findings[0];
    EXPECT_EQ(f.confidence, Confidence::kPossible);
    EXPECT_EQ(f.mode, "precise");
    const bool in = std::string(c) == "torch_gemm_in_racy";
    const analysis::Access& gemm = in ? f.later : f.earlier;
    const analysis::Access& other = in ? f.earlier : f.later;
    EXPECT_EQ(gemm.op.rfind("nvjet_sm90_", 0), 0u) << gemm.op;
    EXPECT_FALSE(gemm.exact);
    EXPECT_EQ(gemm.direction, "read or write");
    EXPECT_TRUE(other.exact);  // the elementwise kernel on the other side was measured
    EXPECT_EQ(other.direction, in ? "write" : "read");
    EXPECT_EQ(f.overlap_bytes, 2 * kMiB);  // the 1024 x 1024 bf16 matrix
    bool said = false;
    for (const auto& n : r.notices) said |= n.text.find("had no measured access (e.g. nvjet_sm90_") != std::string::npos;
    EXPECT_TRUE(said);
    EXPECT_EQ(analyse(std::string(c) + "_default").findings.size(), 1u);
  }
}

TEST(PreciseSamples, AutoPatchesOnlyTheKernelsOfTheEarlierPossibleFinding) {
  AnalysisResult r = analyse("torch_views_racy_auto");
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kCertain);
  EXPECT_EQ(r.findings[0].overlap_bytes, kMiB);
}

TEST(PreciseSamples, NcclCollectivesKeepTheirCallSemanticsInPreciseMode) {
  AnalysisResult r = analyse("torch_nccl_racy_precise");
  ASSERT_EQ(r.traces.size(), 2u);
  ASSERT_EQ(r.findings.size(), 1u);
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.kind, analysis::RaceKind::kWriteAfterWrite);
  EXPECT_EQ(f.confidence, Confidence::kCertain);
  EXPECT_EQ(f.earlier.op, "ncclAllReduce");
  EXPECT_EQ(f.later.op, "cudaMemcpyAsync");
  EXPECT_EQ(f.ranks, (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace streamrace
