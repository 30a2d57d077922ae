// Kernels launched inside a cuBLAS call (trace format 1.5, kKernelCallAccesses): the call's
// matrices, read from its arguments by the tracer, stand for the pointer arguments they touch.
// The racy program (another stream's unordered copy writes bytes the GEMM reads) is `certain`
// with the exact overlap; its clean twin (the copy writes past the matrix, inside the same
// block) has nothing, where the same launch without the call's ranges is `possible`. A strided
// matrix's hull is not exact: `possible`, never certain. A pointer no range touches (cuBLAS's
// workspace) keeps the default tier's access. A malformed range list is ignored, not trusted.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using analysis::Confidence;
using analysis::RaceKind;
using trace::AccessDir;
using trace::CallAccessEntry;
using trace::TraceBuilder;

constexpr uint64_t kBlock = 1 << 20;
constexpr uint64_t kMatrix = 256 << 10;  // A: the block's first 256 KiB

struct Program {
  bool call_ranges = true;      // the launch carries its cuBLAS call's ranges
  uint64_t copy_off = 128 << 10;  // the other stream's 64 KiB copy into the block, from its start
  bool strided = false;         // A's range is a hull (ld above its rows)
  bool malformed = false;       // the range list's direction word is 0
  bool workspace_copy = false;  // the copy goes to the workspace instead
};

analysis::AnalysisResult analyze(const Program& p, uint64_t* a_out = nullptr) {
  testing::TempDir dir;
  const std::string path = dir.file("t.srace");
  {
    TraceBuilder t(path, TraceBuilder::default_header(0));
    const uint64_t compute = t.create_stream(), side = t.create_stream();
    const uint64_t a = t.alloc(kBlock), d = t.alloc(kBlock), work = t.alloc(kBlock), src = t.alloc(kBlock);
    if (a_out) *a_out = a;
    // A GEMM: reads A [a, a + 256 KiB), writes D [d, d + 256 KiB); its parameters point at A, D
    // and the workspace (inside a tensor map, as the default tier finds them).
    std::vector<CallAccessEntry> ranges = {
        {a, kMatrix, uint64_t(AccessDir::kRead) | (p.strided ? trace::kCallAccessHull : 0)},
        {d, kMatrix, p.malformed ? 0 : uint64_t(AccessDir::kWrite)},
    };
    t.at("model.py", 10, "forward");
    if (p.call_ranges)
      t.kernel_in_call(compute, "nvjet_sm90_tst_128x64", {a, d, work}, ranges);
    else
      t.kernel_hashed(compute, "nvjet_sm90_tst_128x64", {a, d, work}, 0x5eed);
    const uint64_t dst = p.workspace_copy ? work : a + p.copy_off;
    t.at("comm.py", 20, "overlap").memcpy(side, dst, src, 64 << 10);
  }  // the builder writes its last chunk
  return testing::analyze_files({path}, {});
}

TEST(CallRanges, ACopyIntoTheMatrixAGemmReadsIsCertainWithTheExactOverlap) {
  uint64_t a = 0;
  auto r = analyze({}, &a);
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.confidence, Confidence::kCertain);
  EXPECT_EQ(f.kind, RaceKind::kWriteAfterRead);
  EXPECT_EQ(f.earlier.op, "nvjet_sm90_tst_128x64");
  EXPECT_TRUE(f.earlier.by_library_call);
  EXPECT_TRUE(f.earlier.exact);
  EXPECT_EQ(f.earlier.direction, "read");
  EXPECT_EQ(f.earlier.addr, a);
  EXPECT_EQ(f.earlier.bytes, kMatrix);
  EXPECT_EQ(f.later.op, "cudaMemcpyAsync");
  EXPECT_FALSE(f.later.by_library_call);
  EXPECT_EQ(f.overlap_addr, a + (128 << 10));
  EXPECT_EQ(f.overlap_bytes, 64u << 10);
  bool noticed = false;
  for (const auto& n : r.notices)
    noticed |= n.text == "cuBLAS: 1 kernel launch took their matrices' byte ranges from the cuBLAS call's arguments "
                         "(exact where a matrix is contiguous)";
  EXPECT_TRUE(noticed);
}

TEST(CallRanges, ACopyPastTheMatrixInsideItsBlockIsClean) {
  Program p;
  p.copy_off = 512 << 10;
  EXPECT_TRUE(analyze(p).findings.empty());
  // The same launch known only by its pointers: from A to its block's end, possible.
  p.call_ranges = false;
  auto r = analyze(p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(r.findings[0].earlier.direction, "read or write");
  EXPECT_FALSE(r.findings[0].earlier.by_library_call);
}

TEST(CallRanges, AStridedMatrixsHullIsPossibleNotCertain) {
  Program p;
  p.strided = true;
  auto r = analyze(p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(r.findings[0].earlier.direction, "read");
  EXPECT_FALSE(r.findings[0].earlier.exact);
  EXPECT_TRUE(r.findings[0].earlier.by_library_call);
}

TEST(CallRanges, APointerNoRangeTouchesKeepsTheDefaultTiersAccess) {
  Program p;
  p.workspace_copy = true;
  auto r = analyze(p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(r.findings[0].earlier.direction, "read or write");
  EXPECT_FALSE(r.findings[0].earlier.by_library_call);
}

TEST(CallRanges, AMalformedRangeListIsIgnoredNotTrusted) {
  Program p;
  p.malformed = true;
  p.copy_off = 512 << 10;  // clean by the ranges, possible by the pointers
  auto r = analyze(p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
  EXPECT_FALSE(r.findings[0].earlier.by_library_call);
  bool warned = false;
  for (const auto& n : r.notices)
    warned |= n.level == "warning" &&
              n.text == "cuBLAS: the call ranges of 1 kernel launch could not be read (a malformed list): they keep "
                        "the default tier's accesses (possible findings at most)";
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace streamrace
