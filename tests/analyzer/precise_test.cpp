// Precise tier in the analyzer: kernel launches with measured read/write intervals
// (KernelAccess records, delivered after the launch) take part in the happens-before checks
// as exact accesses at the launch point. The cases of issue 7's samples, built synthetically:
// overlapping narrow() views (racy) and their ordered twin, read-read (clean), disjoint
// slices (clean); and the same programs in the default tier, where they are only possible.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using analysis::Confidence;
using analysis::RaceKind;
using trace::AccessDir;
using trace::TraceBuilder;

constexpr uint64_t kBuf = 4096;

struct Program {
  bool precise = true;
  bool ordered = false;
  AccessDir first = AccessDir::kWrite, second = AccessDir::kRead;
  uint64_t first_off = 0, first_len = 2048, second_off = 1024, second_len = 2048;
};

analysis::AnalysisResult run(const Program& p, uint64_t* a_out = nullptr, uint64_t* b_out = nullptr,
                             uint64_t* buf_out = nullptr) {
  testing::TempDir dir;
  std::string path = dir.file("p.srace");
  {
    auto header = TraceBuilder::default_header(0);
    header.mode = p.precise ? "precise" : "default";
    TraceBuilder t(path, header);
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBuf);
    if (a_out) *a_out = a;
    if (b_out) *b_out = b;
    if (buf_out) *buf_out = buf;
    uint32_t flags = p.precise ? trace::kKernelPrecise : trace::kKernelArgsScanned;
    // narrow() views: the kernels get pointers to the views' starts.
    uint64_t k1 = t.at("views.py", 10, "produce").kernel(a, "fill_view", {buf + p.first_off}, 0, flags);
    if (p.ordered) {
      uint64_t e = t.create_event();
      t.record_event(e, a);
      t.wait_event(b, e);
    }
    uint64_t k2 = t.at("views.py", 20, "consume").kernel(b, "sum_view", {buf + p.second_off}, 0, flags);
    t.stream_synchronize(a);
    // The measured intervals arrive after the launches, at the synchronisation point.
    if (p.precise) {
      t.kernel_access(k1, buf + p.first_off, p.first_len, p.first);
      t.kernel_access(k2, buf + p.second_off, p.second_len, p.second);
    }
  }
  return testing::analyze_files({path});
}

TEST(Precise, OverlappingViewsAreACertainRaceWithExactRanges) {
  uint64_t a = 0, b = 0, buf = 0;
  auto r = run({}, &a, &b, &buf);
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.kind, RaceKind::kReadAfterWrite);
  EXPECT_EQ(f.confidence, Confidence::kCertain);
  EXPECT_EQ(f.mode, "precise");
  EXPECT_EQ(f.earlier.op, "fill_view");
  EXPECT_EQ(f.earlier.direction, "write");
  EXPECT_EQ(f.earlier.addr, buf);
  EXPECT_EQ(f.earlier.bytes, 2048u);
  EXPECT_EQ(f.later.op, "sum_view");
  EXPECT_EQ(f.later.direction, "read");
  EXPECT_TRUE(f.later.exact);
  EXPECT_EQ(f.overlap_addr, buf + 1024);
  EXPECT_EQ(f.overlap_bytes, 1024u);
  EXPECT_EQ(f.fix.find("--precise"), std::string::npos);  // nothing left to confirm
}

TEST(Precise, OrderedViewsAreClean) {
  Program p;
  p.ordered = true;
  EXPECT_TRUE(run(p).findings.empty());
}

TEST(Precise, ConcurrentReadsAreClean) {
  Program p;
  p.first = AccessDir::kRead;
  EXPECT_TRUE(run(p).findings.empty());
}

TEST(Precise, DisjointSlicesWrittenByTwoStreamsAreClean) {
  Program p;
  p.second = AccessDir::kWrite;
  p.first_len = 1024;
  p.second_off = 1024;
  p.second_len = 1024;
  EXPECT_TRUE(run(p).findings.empty());
}

TEST(Precise, DefaultTierReportsTheRacyViewsOnlyAsPossible) {
  Program p;
  p.precise = false;
  auto r = run(p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(r.findings[0].mode, "default");
  EXPECT_NE(r.findings[0].fix.find("--precise"), std::string::npos);
}

TEST(Precise, DefaultTierAlsoFlagsTheDisjointSlices) {
  // Why precise mode exists: pointer arguments alone cannot tell disjoint slices apart.
  Program p;
  p.precise = false;
  p.second = AccessDir::kWrite;
  p.first_len = 1024;
  p.second_off = 1024;
  p.second_len = 1024;
  auto r = run(p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
}

TEST(Precise, OverflowedIntervalIsARegionOfUnknownDirection) {
  auto program = [](bool overflowed) {
    testing::TempDir dir;
    std::string path = dir.file("o.srace");
    {
      auto header = TraceBuilder::default_header(0);
      header.mode = "precise";
      TraceBuilder t(path, header);
      uint64_t a = t.create_stream(), b = t.create_stream();
      uint64_t buf = t.alloc(kBuf);
      uint64_t k = t.kernel(a, "scatter_kernel", {buf}, 0, trace::kKernelPrecise);
      t.memset(b, buf + 100, 8);
      t.kernel_access(k, buf, kBuf, AccessDir::kWrite, overflowed);
    }
    return testing::analyze_files({path});
  };
  auto exact = program(false);
  ASSERT_EQ(exact.findings.size(), 1u);
  EXPECT_EQ(exact.findings[0].confidence, Confidence::kCertain);
  EXPECT_EQ(exact.findings[0].earlier.direction, "write");
  // The device ran out of intervals for this launch: the region, direction unknown.
  auto degraded = program(true);
  ASSERT_EQ(degraded.findings.size(), 1u);
  EXPECT_EQ(degraded.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(degraded.findings[0].earlier.direction, "read or write");
}

// A coarse hull (kAccessHull: a launch touched more granules than the device table holds)
// keeps its direction but not an exact extent: a write hull against a memset is possible, a
// read hull against another read is nothing.
TEST(Precise, AHullKeepsItsDirectionButIsNotExact) {
  auto program = [](AccessDir dir) {
    testing::TempDir dir_;
    std::string path = dir_.file("h.srace");
    {
      auto header = TraceBuilder::default_header(0);
      header.mode = "precise";
      TraceBuilder t(path, header);
      uint64_t a = t.create_stream(), b = t.create_stream();
      uint64_t buf = t.alloc(kBuf);
      uint64_t k = t.kernel(a, "big_kernel", {buf}, 0, trace::kKernelPrecise);
      uint64_t r = t.kernel(b, "reader", {buf}, 0, trace::kKernelPrecise);
      t.kernel_access(k, buf, kBuf, dir, trace::kAccessHull);
      t.kernel_access(r, buf + 100, 8, AccessDir::kRead);
    }
    return testing::analyze_files({path});
  };
  auto w = program(AccessDir::kWrite);
  ASSERT_EQ(w.findings.size(), 1u);
  EXPECT_EQ(w.findings[0].kind, RaceKind::kReadAfterWrite);
  EXPECT_EQ(w.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(w.findings[0].earlier.direction, "write");
  EXPECT_FALSE(w.findings[0].earlier.exact);
  EXPECT_TRUE(program(AccessDir::kRead).findings.empty());
}

// Precise mode measures no kernel node of a CUDA graph: such a node's accesses fall back to the
// default tier (its pointer arguments, a possible finding), with a notice, and never to none.
analysis::AnalysisResult graph_node_program(bool ordered) {
  testing::TempDir dir;
  std::string path = dir.file("g.srace");
  {
    auto header = TraceBuilder::default_header(0);
    header.mode = "precise";
    TraceBuilder t(path, header);
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBuf);
    const uint64_t graph = 0x6100, exec = 0x6a00;
    t.capture(a, true);
    t.at("step.py", 10, "capture").kernel(a, "fill_kernel", {buf}, 0, trace::kKernelPrecise | trace::kKernelArgsScanned);
    t.capture(a, false, graph);
    t.instantiate(graph, exec, 0);
    t.at("step.py", 20, "replay").graph_launch(a, exec);
    if (ordered) {
      uint64_t e = t.create_event();
      t.record_event(e, a);
      t.wait_event(b, e);
    }
    t.at("step.py", 21, "zero").memset(b, buf + 100, 8);
  }
  return testing::analyze_files({path});
}

TEST(Precise, AGraphKernelNodeFallsBackToItsPointerArgumentsWithANotice) {
  auto r = graph_node_program(false);
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.kind, RaceKind::kWriteAfterWrite);
  EXPECT_EQ(f.confidence, Confidence::kPossible);
  EXPECT_EQ(f.earlier.op, "fill_kernel");
  EXPECT_EQ(f.earlier.direction, "read or write");
  EXPECT_EQ(f.later.op, "cudaMemsetAsync");
  std::vector<std::string> texts;
  for (const auto& n : r.notices) texts.push_back(n.text);
  EXPECT_NE(std::find(texts.begin(), texts.end(),
                      "1 kernel nodes of CUDA graphs ran without measured accesses (none recorded for their launch "
                      "and node: sampled out, no free interval slot, or a node the trace cannot name); their accesses "
                      "are the default tier's (pointer arguments, possible findings at most)"),
            texts.end());
}

TEST(Precise, AGraphKernelNodeOrderedBeforeTheWriteIsClean) {
  auto r = graph_node_program(true);
  EXPECT_TRUE(r.findings.empty());
}

// A pointer argument of a precise launch that none of its measured intervals touches keeps
// the default tier's access (possible): cuBLAS's sm90 GEMMs read and write their matrices by
// bulk tensor copies (TMA), which precise mode cannot see, so their launches measure nothing
// there (recorded on the H200: samples/precise/torch_views.py gemm_in_racy). Stream a fills
// A (measured); stream b's "gemm" takes A and C and measured only its write of C.
struct GemmProgram {
  bool ordered = false;
  bool measures_c = true;       // false: the launch measured no access at all
  bool reader_outside = false;  // a third stream reads C beyond the measured write
};

analysis::AnalysisResult run_gemm(const GemmProgram& p, uint64_t* a_buf = nullptr, uint64_t* c_buf = nullptr) {
  testing::TempDir dir;
  std::string path = dir.file("g.srace");
  {
    auto header = TraceBuilder::default_header(0);
    header.mode = "precise";
    TraceBuilder t(path, header);
    uint64_t a = t.create_stream(), b = t.create_stream(), c = t.create_stream();
    uint64_t A = t.alloc(kBuf), C = t.alloc(kBuf);
    if (a_buf) *a_buf = A;
    if (c_buf) *c_buf = C;
    const uint32_t flags = trace::kKernelPrecise | trace::kKernelArgsScanned;
    uint64_t fill = t.at("gemm.py", 10, "fill").kernel(a, "fill_a", {A}, 0, flags);
    if (p.ordered) {
      uint64_t e = t.create_event();
      t.record_event(e, a);
      t.wait_event(b, e);
    }
    uint64_t gemm = t.at("gemm.py", 20, "matmul").kernel(b, "gemm_tma", {A, C}, 0, flags);
    uint64_t read = 0;
    if (p.reader_outside) {
      uint64_t e = t.create_event();
      t.record_event(e, a);  // orders the reader after the fill of A, not after the GEMM
      t.wait_event(c, e);
      read = t.at("gemm.py", 30, "read").kernel(c, "read_c_tail", {C + kBuf / 2}, 0, flags);
    }
    t.stream_synchronize(a);
    t.kernel_access(fill, A, kBuf, AccessDir::kWrite);
    if (p.measures_c) t.kernel_access(gemm, C, kBuf / 2, AccessDir::kWrite);
    if (read) t.kernel_access(read, C + kBuf / 2, kBuf / 2, AccessDir::kRead);
  }
  return testing::analyze_files({path});
}

std::vector<std::string> notice_texts(const analysis::AnalysisResult& r) {
  std::vector<std::string> out;
  for (const auto& n : r.notices) out.push_back(n.text);
  return out;
}

const char* kUnmeasuredNotice =
    "1 pointer argument of 1 precise-mode launch had no measured access (e.g. gemm_tma): the kernel may reach that "
    "memory by bulk tensor copies (TMA), which precise mode cannot see, or not at all; each keeps the default tier's "
    "access (possible findings at most)";

TEST(Precise, APointerArgumentWithNoMeasuredAccessKeepsTheDefaultTiersAccess) {
  uint64_t A = 0;
  auto r = run_gemm({}, &A);
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.confidence, Confidence::kPossible);
  EXPECT_EQ(f.kind, RaceKind::kWriteAfterWrite);  // the GEMM's A: read or write, unknown
  EXPECT_EQ(f.earlier.op, "fill_a");
  EXPECT_TRUE(f.earlier.exact);
  EXPECT_EQ(f.earlier.direction, "write");
  EXPECT_EQ(f.later.op, "gemm_tma");
  EXPECT_FALSE(f.later.exact);
  EXPECT_EQ(f.later.direction, "read or write");
  EXPECT_EQ(f.later.addr, A);
  EXPECT_EQ(f.later.bytes, kBuf);
  EXPECT_EQ(f.overlap_addr, A);
  EXPECT_EQ(f.overlap_bytes, kBuf);
  auto texts = notice_texts(r);
  EXPECT_NE(std::find(texts.begin(), texts.end(), kUnmeasuredNotice), texts.end());
}

TEST(Precise, APointerArgumentWithNoMeasuredAccessOrderedIsClean) {
  GemmProgram p;
  p.ordered = true;
  auto r = run_gemm(p);
  EXPECT_TRUE(r.findings.empty());
  auto texts = notice_texts(r);
  EXPECT_NE(std::find(texts.begin(), texts.end(), kUnmeasuredNotice), texts.end());
}

TEST(Precise, ALaunchThatMeasuredNothingKeepsEveryPointersAccess) {
  GemmProgram p;
  p.measures_c = false;
  auto r = run_gemm(p);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(r.findings[0].later.op, "gemm_tma");
  auto texts = notice_texts(r);
  EXPECT_NE(std::find(texts.begin(), texts.end(),
                      "2 pointer arguments of 1 precise-mode launch had no measured access (e.g. gemm_tma): the kernel "
                      "may reach that memory by bulk tensor copies (TMA), which precise mode cannot see, or not at "
                      "all; each keeps the default tier's access (possible findings at most)"),
            texts.end());
}

// A measured pointer stays exact: C's measured write [C, C + kBuf/2) does not meet the read of
// [C + kBuf/2, C + kBuf) on an unordered stream, so nothing is reported there (only A's race).
TEST(Precise, AMeasuredPointerArgumentStaysExact) {
  GemmProgram p;
  p.reader_outside = true;
  uint64_t A = 0;
  auto r = run_gemm(p, &A);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].later.addr, A);
  EXPECT_EQ(r.findings[0].later.op, "gemm_tma");
}

// The device keeps one hull per 1 MiB granule of what a launch touched (interval_buffer.h), so
// a kernel reading two small tensors of one caching-allocator segment measures one interval
// over every tensor between them. The part of it in a tensor the launch has no pointer to is a
// hull: possible, never certain (graphed_callables.py's nll_loss reported 3 false certain
// races so). Racy twin: the same interval, the launch pointing into that tensor: certain.
TEST(Precise, AMeasuredHullOverATensorTheKernelHasNoPointerToIsPossibleNotCertain) {
  for (bool points_into_middle : {false, true}) {
    SCOPED_TRACE(points_into_middle);
    testing::TempDir dir;
    std::string path = dir.file("h.srace");
    uint64_t middle = 0;
    {
      using trace::BlockAction;
      auto header = TraceBuilder::default_header(0);
      header.mode = "precise";
      TraceBuilder t(path, header);
      const uint64_t s = t.create_stream(), side = t.create_stream();
      const uint64_t seg = t.alloc(2 << 20);
      t.allocator_block(BlockAction::kSegmentAlloc, seg, 2 << 20, 0);
      const uint64_t target = seg, input = seg + 512 + 65536;
      middle = seg + 512;
      t.allocator_block(BlockAction::kAlloc, target, 512, s);
      t.allocator_block(BlockAction::kAlloc, middle, 65536, side);
      t.allocator_block(BlockAction::kAlloc, input, 2560, s);
      t.memcpy(side, middle, seg + (1 << 20), 65536);  // the side stream fills the middle tensor
      std::vector<uint64_t> ptrs = {target, input};
      if (points_into_middle) ptrs.push_back(middle);
      uint64_t k = t.at("loss.py", 5, "nll").kernel(s, "nll_loss", ptrs, 0, trace::kKernelPrecise);
      t.stream_synchronize(s);
      t.stream_synchronize(side);
      t.kernel_access(k, target, 512 + 65536 + 2560, AccessDir::kRead);  // the granule's hull of reads
    }
    auto r = testing::analyze_files({path});
    ASSERT_EQ(r.findings.size(), 1u);
    const auto& f = r.findings[0];
    EXPECT_EQ(f.kind, RaceKind::kReadAfterWrite);
    EXPECT_EQ(f.overlap_addr, middle);
    EXPECT_EQ(f.overlap_bytes, 65536u);
    EXPECT_EQ(f.later.op, "nll_loss");
    EXPECT_EQ(f.later.direction, "read");
    EXPECT_EQ(f.later.addr, middle);  // the piece in the middle tensor
    EXPECT_EQ(f.later.bytes, 65536u);
    EXPECT_EQ(f.confidence, points_into_middle ? Confidence::kCertain : Confidence::kPossible);
    EXPECT_EQ(f.later.exact, points_into_middle);
    bool noticed = false;
    for (const auto& n : r.notices)
      noticed |= n.text.rfind("1 measured interval of precise-mode launches spanned tensors", 0) == 0;
    EXPECT_EQ(noticed, !points_into_middle);
  }
}

}  // namespace
}  // namespace streamrace
