// cuBLAS call ranges on the H200 (trace format 1.5, tracer/cublas_interposer.cpp), recorded by
// scripts/gpu/cublas_batch.sh and cublas_confirm_batch.sh at da2eb47 and committed under
// tests/data/cublas/ (see the README there). cuBLAS's sm90 GEMMs (nvjet_*) move their matrices
// by TMA, which precise mode cannot measure: before the interposer, their races stayed
// `possible` even after `run --confirm` (tests/data/precise/torch_gemm_*). Now:
//   - default mode: the GEMM's side is exact from its call's arguments (by_library_call), the
//     other kernel is known by its pointers: `possible`, overlapping exactly the 2 MiB matrix;
//   - after `--confirm` (precise mode on the other kernel): `certain`, both sides exact;
//   - the clean twins and the realistic jobs (GPT-2 under ZeRO-2 and FSDP2, 588 GEMM launches
//     with call ranges each): no finding; each of their 1,956 ranges exact and inside the live
//     caching-allocator block of its tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "analyzer/allocator_blocks.h"
#include "analyzer/analyzer.h"
#include "traceformat/call_stream.h"

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

// Every range a GEMM launch carries lies inside one live caching-allocator block (a tensor's
// storage): the call's arithmetic on sizes and leading dimensions never reaches past the
// tensors it was given. Counts: launches with ranges, ranges, ranges inside a live block.
struct RangeCounts {
  uint64_t launches = 0, ranges = 0, in_block = 0, exact = 0;
};
RangeCounts count_ranges(const fs::path& dir) {
  RangeCounts c;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".srace") continue;
    trace::CallStream stream(e.path().string());
    analysis::AllocatorBlocks blocks;
    std::map<uint64_t, uint64_t> allocs;  // base -> end
    stream.for_each([&](const trace::RecordView& r) {
      if (r.kind == trace::RecordKind::kAlloc) {
        auto a = r.as<trace::Alloc>();
        allocs[a.ptr] = a.ptr + a.bytes;
      } else if (r.kind == trace::RecordKind::kFree) {
        auto f = r.as<trace::Free>();
        auto it = allocs.find(f.ptr);
        if (it != allocs.end()) {
          blocks.forget(it->first, it->second - it->first);
          allocs.erase(it);
        }
      } else if (r.kind == trace::RecordKind::kAllocatorBlock) {
        blocks.apply(r.as<trace::AllocatorBlock>());
      } else if (r.kind == trace::RecordKind::kKernelLaunch) {
        auto k = r.as<trace::KernelLaunchHead>();
        if (!(k.flags & trace::kKernelCallAccesses)) return;
        auto tail = r.tail<trace::KernelLaunchHead>();
        auto word = [&](size_t i) {
          uint64_t w = 0;
          if ((i + 1) * 8 <= tail.size()) std::memcpy(&w, tail.data() + i * 8, 8);
          return w;
        };
        const size_t at = k.nptrs + (trace::args_hash_kind(k.flags) != trace::ArgsHashKind::kNone ? 1 : 0);
        ++c.launches;
        for (uint64_t i = 0, n = word(at); i < n; ++i) {
          const uint64_t addr = word(at + 1 + 3 * i), bytes = word(at + 2 + 3 * i), info = word(at + 3 + 3 * i);
          ++c.ranges;
          if (!(info & trace::kCallAccessHull)) ++c.exact;
          const analysis::LiveBlock* b = blocks.live(addr);
          if (b && addr + bytes <= b->addr + b->bytes) ++c.in_block;
        }
      }
    });
  }
  return c;
}

TEST(CublasSamples, EveryGemmRangeLiesInsideALiveTensorBlock) {
  for (const char* c : {"gpt2_zero2_default", "gpt2_fsdp2_default"}) {
    SCOPED_TRACE(c);
    RangeCounts n = count_ranges(kRoot / c);
    std::printf("%s: %lu launches, %lu ranges, %lu exact, %lu inside a live block\n", c, n.launches, n.ranges, n.exact,
                n.in_block);
    EXPECT_EQ(n.launches, 588u);
    EXPECT_EQ(n.ranges, 1956u);  // A, B, D and, where beta or a bias asks, C or the bias
    EXPECT_EQ(n.exact, 1956u);   // every matrix contiguous
    EXPECT_EQ(n.in_block, 1956u);
  }
}

}  // namespace
}  // namespace streamrace
