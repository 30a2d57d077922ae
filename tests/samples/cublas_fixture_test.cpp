// cuBLAS call ranges on the H200 (trace format 1.5, tracer/cublas_interposer.cpp), recorded by
// scripts/gpu/cublas_batch.sh and cublas_confirm_batch.sh at da2eb47 and committed under
// tests/data/cublas/ (see the README there). cuBLAS's sm90 GEMMs (nvjet_*) move their matrices
// by TMA, which precise mode cannot measure: before the interposer, their races stayed
// `possible` even after `run --confirm` (tests/data/precise/torch_gemm_*). Now:
//   - default mode: the GEMM's side is exact from its call's arguments (by_library_call), the
//     other kernel is known by its pointers: `possible`, overlapping exactly the 2 MiB matrix;
//   - after `--confirm` (precise mode on the other kernel): `certain`, both sides exact;
//   - the clean twins and the realistic jobs (GPT-2 under ZeRO-2 and FSDP2, 588 GEMM launches
//     with call ranges each): no finding.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "analyzer/analyzer.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using analysis::AnalysisResult;
using analysis::Confidence;
using analysis::RaceKind;

const fs::path kRoot = fs::path(SR_CUBLAS_DATA_DIR);
constexpr uint64_t kMatrix = 2u << 20;  // 1024 x 1024 bf16

AnalysisResult analyse(const std::string& c) {
  analysis::Analyzer analyzer;
  for (const auto& t : analysis::expand_trace_inputs({(kRoot / c).string()})) analyzer.add_trace(t);
  return analyzer.finish();
}

std::string call_range_notice(const AnalysisResult& r) {
  for (const auto& n : r.notices)
    if (n.text.rfind("cuBLAS: ", 0) == 0) return n.text;
  return "";
}

std::string launches(int n) {
  return "cuBLAS: " + std::to_string(n) + " kernel launch" + (n == 1 ? "" : "es") +
         " took their matrices' byte ranges from the cuBLAS call's arguments (exact where a matrix is contiguous)";
}

struct Racy {
  const char* name;
  bool gemm_reads;  // gemm_in: a fill on the side stream, the GEMM reads it; gemm_out: the GEMM writes, a sum reads
};
constexpr Racy kRacy[] = {{"gemm_in_racy", true}, {"gemm_out_racy", false}};

TEST(CublasSamples, TheGemmsSideIsExactFromItsCallInTheDefaultMode) {
  for (const Racy& c : kRacy) {
    SCOPED_TRACE(c.name);
    AnalysisResult r = analyse(std::string(c.name) + "_default");
    ASSERT_EQ(r.findings.size(), 1u);
    const auto& f = r.findings[0];
    EXPECT_EQ(f.confidence, Confidence::kPossible);
    EXPECT_EQ(f.kind, c.gemm_reads ? RaceKind::kReadAfterWrite : RaceKind::kWriteAfterWrite);
    const auto& gemm = c.gemm_reads ? f.later : f.earlier;
    const auto& other = c.gemm_reads ? f.earlier : f.later;
    EXPECT_EQ(gemm.op, "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT");
    EXPECT_TRUE(gemm.by_library_call);
    EXPECT_TRUE(gemm.exact);
    EXPECT_EQ(gemm.direction, c.gemm_reads ? "read" : "write");
    EXPECT_EQ(gemm.bytes, kMatrix);
    EXPECT_EQ(gemm.addr, f.overlap_addr);
    EXPECT_FALSE(other.by_library_call);
    EXPECT_EQ(other.direction, "read or write");  // the elementwise kernel: its pointer only
    EXPECT_EQ(f.overlap_bytes, kMatrix);
    EXPECT_EQ(call_range_notice(r), launches(1));
  }
}

TEST(CublasSamples, TheRacyGemmsAreCertainAfterConfirm) {
  for (const Racy& c : kRacy) {
    SCOPED_TRACE(c.name);
    AnalysisResult r = analyse(std::string(c.name) + "_confirm");
    ASSERT_EQ(r.findings.size(), 1u);
    const auto& f = r.findings[0];
    EXPECT_EQ(f.confidence, Confidence::kCertain);
    EXPECT_EQ(f.mode, "precise");
    EXPECT_EQ(f.kind, RaceKind::kReadAfterWrite);
    const auto& gemm = c.gemm_reads ? f.later : f.earlier;
    const auto& other = c.gemm_reads ? f.earlier : f.later;
    EXPECT_TRUE(gemm.by_library_call);
    EXPECT_TRUE(gemm.exact);
    EXPECT_EQ(gemm.direction, c.gemm_reads ? "read" : "write");
    EXPECT_EQ(gemm.bytes, kMatrix);
    EXPECT_TRUE(other.exact);  // measured by precise mode
    EXPECT_FALSE(other.by_library_call);
    EXPECT_EQ(other.direction, c.gemm_reads ? "write" : "read");
    EXPECT_EQ(other.bytes, kMatrix);
    EXPECT_EQ(f.overlap_addr, gemm.addr);
    EXPECT_EQ(f.overlap_bytes, kMatrix);
  }
}

TEST(CublasSamples, TheCleanTwinsHaveNoFinding) {
  for (const char* c : {"gemm_in_clean_default", "gemm_out_clean_default"}) {
    SCOPED_TRACE(c);
    AnalysisResult r = analyse(c);
    EXPECT_TRUE(r.findings.empty());
    EXPECT_EQ(call_range_notice(r), launches(1));
  }
}

TEST(CublasSamples, TheRealisticJobsHaveNoFindingWithTheirGemmsExact) {
  for (const char* c : {"gpt2_zero2_default", "gpt2_fsdp2_default"}) {
    SCOPED_TRACE(c);
    AnalysisResult r = analyse(c);
    EXPECT_TRUE(r.findings.empty());
    EXPECT_EQ(call_range_notice(r), launches(588));  // 3 timed steps after 1, GPT-2 124M
  }
}

}  // namespace
}  // namespace streamrace
