// Precise tier for kernel nodes of CUDA graph launches (KernelNodeAccess, trace format 1.6):
// the measured intervals of a node, tied to its graph launch and node handle (explicit graph
// API) or to the kernel's name (captured graphs), make its accesses exact. The program is
// samples/cuda/graph_explicit.cu's: a kernel node fills x and a memcpy node copies x out; the
// racy graph has no edge between them, the clean twin has one. Also: a node nobody measured
// keeps the default tier's access (possible), a name two nodes share names neither, and a
// launch's intervals never reach another launch of the same exec.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using analysis::Confidence;
using analysis::RaceKind;
using trace::AccessDir;
using trace::GraphEditAction;
using trace::GraphNodeType;
using trace::TraceBuilder;

constexpr uint64_t kBytes = 1 << 20;
constexpr uint64_t kGraph = 0x6100, kExec = 0x6200, kFill = 0x7001, kCopy = 0x7002;

struct Program {
  bool edge = false;                // the copy node depends on the fill node (the clean twin)
  bool measure = true;              // the trace holds the fill node's intervals
  uint64_t measured_node = kFill;   // the node handle they name
  uint64_t fill_bytes = kBytes;     // how much of x the fill node was measured writing
  int launches = 1;                 // graph launches
  int measured_launch = 0;          // the one whose fill node has intervals
  bool precise = true;              // header mode
};

struct Buffers {
  uint64_t x = 0, dst = 0;
};

analysis::AnalysisResult run(const Program& p, Buffers* out = nullptr) {
  testing::TempDir dir;
  std::string path = dir.file("g.srace");
  {
    auto header = TraceBuilder::default_header(0);
    header.mode = p.precise ? "precise" : "default";
    TraceBuilder t(path, header);
    uint64_t s = t.create_stream();
    // x lies at the start of a larger allocation: the default tier's extent of the kernel's
    // pointer runs to the allocation's end, past the copy's source range.
    uint64_t x = t.alloc(4 * kBytes);
    uint64_t dst = t.alloc(kBytes);
    if (out) *out = {x, dst};
    t.graph_create(kGraph);
    TraceBuilder::NodeWork fill;
    fill.kernel = "slow_fill(float*, unsigned long, long long)";
    fill.ptrs = {x};
    t.at("graph_explicit.cu", 55, "build").graph_node(GraphEditAction::kAddNode, kGraph, kFill, GraphNodeType::kKernel,
                                                       {}, 0, 0, &fill);
    TraceBuilder::NodeWork copy;
    copy.dst = dst;
    copy.src = x + kBytes;  // the bytes after those the fill writes
    copy.bytes = kBytes;
    t.at("graph_explicit.cu", 56, "build")
        .graph_node(GraphEditAction::kAddNode, kGraph, kCopy, GraphNodeType::kMemcpy,
                    p.edge ? std::vector<uint64_t>{kFill} : std::vector<uint64_t>{}, 0, 0, &copy);
    t.graph_call(trace::GraphAction::kInstantiate, kGraph, kExec);
    std::vector<uint64_t> corr;
    for (int i = 0; i < p.launches; ++i) corr.push_back(t.at("graph_explicit.cu", 69, "main").graph_launch(s, kExec));
    t.stream_synchronize(s);
    if (p.measure) t.kernel_node_access(corr[size_t(p.measured_launch)], p.measured_node, fill.kernel, x, p.fill_bytes, AccessDir::kWrite);
  }
  return testing::analyze_files({path});
}

// The copy reads [x + 1 MiB, x + 2 MiB): a fill measured writing 2 MiB from x races with it.
TEST(GraphNodePrecise, AMeasuredKernelNodeRacesCertainlyWithExactRanges) {
  Buffers b;
  auto r = run({.fill_bytes = 2 * kBytes}, &b);
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.kind, RaceKind::kReadAfterWrite);
  EXPECT_EQ(f.confidence, Confidence::kCertain);
  EXPECT_EQ(f.earlier.op, "slow_fill(float*, unsigned long, long long)");
  EXPECT_EQ(f.earlier.direction, "write");
  EXPECT_TRUE(f.earlier.exact);
  EXPECT_EQ(f.earlier.addr, b.x);
  EXPECT_EQ(f.earlier.bytes, 2 * kBytes);
  EXPECT_TRUE(f.earlier.graph_launch);
  EXPECT_EQ(f.later.op_kind, "memcpy");
  EXPECT_EQ(f.overlap_addr, b.x + kBytes);
  EXPECT_EQ(f.overlap_bytes, kBytes);
  ASSERT_EQ(r.traces.size(), 1u);
  EXPECT_EQ(r.traces[0].measured_graph_kernels, std::vector<std::string>{"slow_fill(float*, unsigned long, long long)"});
  EXPECT_TRUE(r.traces[0].measured_kernels.empty());
}

// The clean twin: the copy node waits for the fill node. Nothing.
TEST(GraphNodePrecise, TheOrderedTwinIsClean) {
  EXPECT_TRUE(run({.edge = true, .fill_bytes = 2 * kBytes}).findings.empty());
}

// Measured writing only the first MiB, the fill never touches the copy's source: the
// default tier's possible finding (pointer to the allocation's end) is gone.
TEST(GraphNodePrecise, MeasuredRangesApartGiveNoFindingWhereTheDefaultTierSaysPossible) {
  EXPECT_TRUE(run({}).findings.empty());
  auto unmeasured = run({.measure = false});
  ASSERT_EQ(unmeasured.findings.size(), 1u);
  EXPECT_EQ(unmeasured.findings[0].confidence, Confidence::kPossible);
  EXPECT_TRUE(unmeasured.traces[0].measured_graph_kernels.empty());
  auto default_mode = run({.precise = false});
  ASSERT_EQ(default_mode.findings.size(), 1u);
  EXPECT_EQ(default_mode.findings[0].confidence, Confidence::kPossible);
}

// Intervals naming another node handle: the graph's only slow_fill node takes them by name
// (a captured graph's nodes have no handle in the trace; a child graph's are copies).
TEST(GraphNodePrecise, AnUnknownHandleFallsBackToTheGraphsOnlyNodeWithThatKernel) {
  auto r = run({.measured_node = 0x9999, .fill_bytes = 2 * kBytes});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kCertain);
}

// Two launches of the exec, the second measured (its fill apart from the copy): the first
// launch's fill node is the default tier's (possible), never the second launch's measurement.
TEST(GraphNodePrecise, OneLaunchsIntervalsNeverStandForAnotherLaunch) {
  auto r = run({.launches = 2, .measured_launch = 1});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
}

// A captured graph: two kernel nodes of the same kernel; intervals naming one of them by an
// unknown handle cannot say which, so both keep the default tier's access. With one such
// node, the name decides.
TEST(GraphNodePrecise, ANameTwoCapturedNodesShareNamesNeither) {
  for (bool twice : {false, true}) {
    SCOPED_TRACE(twice);
    testing::TempDir dir;
    std::string path = dir.file("c.srace");
    uint64_t x = 0;
    {
      auto header = TraceBuilder::default_header(0);
      header.mode = "precise";
      TraceBuilder t(path, header);
      uint64_t s = t.create_stream();
      uint64_t side = t.create_stream();
      x = t.alloc(4 * kBytes);
      uint64_t dst = t.alloc(kBytes);
      t.capture(s, true);
      t.kernel(s, "fill", {x}, 0, trace::kKernelArgsScanned);
      if (twice) t.kernel(s, "fill", {x + 3 * kBytes}, 0, trace::kKernelArgsScanned);
      t.capture(s, false, kGraph);
      t.graph_call(trace::GraphAction::kInstantiate, kGraph, kExec);
      uint64_t c = t.graph_launch(s, kExec);
      // Another stream copies from x + 1 MiB while the graph may still run.
      t.memcpy(side, dst, x + kBytes, kBytes);
      t.stream_synchronize(s);
      t.stream_synchronize(side);
      t.kernel_node_access(c, 0x5151, "fill", x, kBytes / 2, AccessDir::kWrite);
    }
    auto r = testing::analyze_files({path});
    if (twice) {
      ASSERT_EQ(r.findings.size(), 1u);  // the first fill's pointer reaches the copy: possible
      EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
    } else {
      EXPECT_TRUE(r.findings.empty()) << r.findings[0].missing_edge;
    }
  }
}

}  // namespace
}  // namespace streamrace
