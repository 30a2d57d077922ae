// RunnableGraph: ordering, branches and the limits that keep a hostile trace's work bounded.
#include "analyzer/built_graph.h"

#include <gtest/gtest.h>

#include "analyzer/graph_captures.h"

namespace streamrace::analysis {
namespace {

using trace::GraphNodeType;

GraphNode node(GraphNodeType type, std::vector<uint32_t> deps) {
  GraphNode n;
  n.type = type;
  n.deps = std::move(deps);
  return n;
}

TEST(RunnableGraph, DiamondRunsOnTwoBranchesJoiningOnlyAcrossThem) {
  BuiltGraph g;
  g.nodes = {node(GraphNodeType::kEmpty, {}), node(GraphNodeType::kHost, {0}), node(GraphNodeType::kHost, {0}),
             node(GraphNodeType::kEmpty, {1, 2})};
  g.by_handle = {{0xA, 0}, {0xD, 3}};
  uint64_t budget = kGraphWorkBudget;
  auto r = make_runnable(g, budget);
  ASSERT_TRUE(r->unsupported.empty()) << r->unsupported;
  ASSERT_EQ(r->nodes.size(), 4u);
  EXPECT_EQ(r->branches, 2u);
  EXPECT_EQ(r->nodes[1].branch, 0u);  // continues the root's branch
  EXPECT_EQ(r->nodes[2].branch, 1u);  // the root's branch was taken: a new one
  EXPECT_EQ(r->nodes[3].branch, 0u);
  EXPECT_EQ(r->nodes[3].deps, (std::vector<uint32_t>{2}));  // node 1 is on its own branch
  EXPECT_TRUE(r->nodes[2].snapshot);
  EXPECT_FALSE(r->nodes[1].snapshot);
  EXPECT_EQ(r->by_handle.at(0xD), 3u);
  EXPECT_EQ(budget, kGraphWorkBudget - 5);
}

TEST(RunnableGraph, UnorderedNodesRunInTheOrderTheyWereAddedAfterTheirDependencies) {
  BuiltGraph g;
  // node 0 depends on node 2 (an edge added later); 1 has none.
  g.nodes = {node(GraphNodeType::kEmpty, {2}), node(GraphNodeType::kEmpty, {}), node(GraphNodeType::kEmpty, {})};
  g.by_handle = {{0xA, 0}, {0xB, 1}, {0xC, 2}};
  uint64_t budget = kGraphWorkBudget;
  auto r = make_runnable(g, budget);
  ASSERT_TRUE(r->unsupported.empty());
  EXPECT_EQ(r->by_handle.at(0xB), 0u);
  EXPECT_EQ(r->by_handle.at(0xC), 1u);
  EXPECT_EQ(r->by_handle.at(0xA), 2u);
}

TEST(RunnableGraph, CyclesConditionalsDeepChildrenAndASpentBudgetAreNamed) {
  uint64_t budget = kGraphWorkBudget;
  BuiltGraph cycle;
  cycle.nodes = {node(GraphNodeType::kEmpty, {1}), node(GraphNodeType::kEmpty, {0})};
  EXPECT_EQ(make_runnable(cycle, budget)->unsupported, "has a dependency cycle");
  BuiltGraph cond;
  cond.nodes = {node(GraphNodeType::kConditional, {})};
  EXPECT_EQ(make_runnable(cond, budget)->unsupported, "holds a conditional node (not modelled)");
  auto deep = std::make_shared<BuiltGraph>();
  deep->nodes = {node(GraphNodeType::kEmpty, {})};
  for (uint32_t i = 0; i < kMaxChildDepth + 2; ++i) {
    auto up = std::make_shared<BuiltGraph>();
    GraphNode c = node(GraphNodeType::kChildGraph, {});
    c.child = deep;
    up->nodes = {c};
    deep = up;
  }
  EXPECT_EQ(make_runnable(*deep, budget)->unsupported, "nests child graphs more than 64 deep");
  // Doubling children: bounded by kMaxRunnableNodes, never exponential.
  auto wide = std::make_shared<BuiltGraph>();
  wide->nodes = {node(GraphNodeType::kEmpty, {})};
  for (int i = 0; i < 30; ++i) {
    auto up = std::make_shared<BuiltGraph>();
    GraphNode c = node(GraphNodeType::kChildGraph, {});
    c.child = wide;
    up->nodes = {c, c};
    wide = up;
  }
  EXPECT_EQ(make_runnable(*wide, budget)->unsupported, "has more than 1048576 nodes (child graphs inlined)");
  uint64_t spent = 0;
  BuiltGraph small;
  small.nodes = {node(GraphNodeType::kEmpty, {})};
  EXPECT_NE(make_runnable(small, spent)->unsupported.find("graph work budget"), std::string::npos);
}

TEST(RunnableGraph, ACapturedGraphBecomesNodesWithItsStreamOrderAndEventEdges) {
  CapturedGraph c;
  c.streams = {0x10, 0x20};
  auto rec = [](trace::RecordKind k, uint32_t branch, uint64_t event) {
    CapturedNode n{k, branch, {}};
    if (k == trace::RecordKind::kEventRecord) {
      trace::EventRecord r{};
      r.event = event;
      n.body.assign(reinterpret_cast<uint8_t*>(&r), reinterpret_cast<uint8_t*>(&r) + sizeof(r));
    } else if (k == trace::RecordKind::kStreamWaitEvent) {
      trace::StreamWaitEvent w{};
      w.event = event;
      n.body.assign(reinterpret_cast<uint8_t*>(&w), reinterpret_cast<uint8_t*>(&w) + sizeof(w));
    } else {
      n.body.assign(sizeof(trace::Memset), 0);
    }
    return n;
  };
  c.nodes = {rec(trace::RecordKind::kEventRecord, 0, 0xE), rec(trace::RecordKind::kStreamWaitEvent, 1, 0xE),
             rec(trace::RecordKind::kMemset, 1, 0), rec(trace::RecordKind::kMemset, 0, 0)};
  BuiltGraph g = from_capture(c);
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.nodes[1].deps, (std::vector<uint32_t>{0}));  // the fork
  EXPECT_EQ(g.nodes[2].deps, (std::vector<uint32_t>{1}));
  EXPECT_EQ(g.nodes[3].deps, (std::vector<uint32_t>{0}));
  EXPECT_EQ(g.nodes[2].type, GraphNodeType::kMemset);
  EXPECT_EQ(g.nodes[0].type, GraphNodeType::kEmpty);
}

}  // namespace
}  // namespace streamrace::analysis
