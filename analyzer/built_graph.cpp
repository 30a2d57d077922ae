// BuiltGraph, RunnableGraph: see built_graph.h.
#include "analyzer/built_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>

#include "analyzer/graph_captures.h"
#include "traceformat/call_stream.h"

namespace streamrace::analysis {

using trace::GraphNodeType;
using trace::RecordKind;

namespace {

// One flat node before ordering: indices refer to the flat list.
struct FlatNode {
  const GraphNode* src;
  GraphNodeType type;
  std::vector<uint32_t> deps;
};

class Flattener {
 public:
  std::vector<FlatNode> nodes;
  std::string unsupported;

  // Appends g's live nodes; `entry` (if any) is the node every root of g waits for. Returns, for
  // each node of g, the flat index dependents wait for (its exit, for a child graph node).
  std::vector<uint32_t> add(const BuiltGraph& g, const uint32_t* entry, uint32_t depth) {
    std::vector<uint32_t> exit_of(g.nodes.size(), UINT32_MAX);
    if (!unsupported.empty()) return exit_of;
    if (!g.unsupported.empty()) {
      unsupported = depth ? "holds a child graph that " + g.unsupported : g.unsupported;
      return exit_of;
    }
    if (depth > kMaxChildDepth) {
      unsupported = fmt::format("nests child graphs more than {} deep", kMaxChildDepth);
      return exit_of;
    }
    // Nodes may depend on later nodes (cudaGraphAddDependencies): place every node first.
    std::vector<uint32_t> first(g.nodes.size(), UINT32_MAX);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const GraphNode& n = g.nodes[i];
      if (n.removed) continue;
      if (nodes.size() >= kMaxRunnableNodes) {
        unsupported = fmt::format("has more than {} nodes (child graphs inlined)", kMaxRunnableNodes);
        return exit_of;
      }
      first[i] = uint32_t(nodes.size());
      nodes.push_back(FlatNode{&n, n.type == GraphNodeType::kChildGraph ? GraphNodeType::kEmpty : n.type, {}});
      if (n.type == GraphNodeType::kChildGraph) {
        // entry marker (this node), the child's nodes after it, then an exit marker.
        const uint32_t e = first[i];
        if (!n.child) {
          unsupported = "holds a child graph the trace does not show";
          return exit_of;
        }
        std::vector<uint32_t> inner = add(*n.child, &e, depth + 1);
        if (!unsupported.empty()) return exit_of;
        const uint32_t x = uint32_t(nodes.size());
        nodes.push_back(FlatNode{nullptr, GraphNodeType::kEmpty, {e}});
        for (uint32_t k : inner)
          if (k != UINT32_MAX) nodes[x].deps.push_back(k);
        exit_of[i] = x;
      } else {
        exit_of[i] = first[i];
      }
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (first[i] == UINT32_MAX) continue;
      std::vector<uint32_t>& deps = nodes[first[i]].deps;
      for (uint32_t d : g.nodes[i].deps)
        if (d < exit_of.size() && exit_of[d] != UINT32_MAX) deps.push_back(exit_of[d]);
      if (deps.empty() && entry) deps.push_back(*entry);
    }
    return exit_of;
  }
};

}  // namespace

std::shared_ptr<const RunnableGraph> make_runnable(const BuiltGraph& g, uint64_t& budget) {
  auto r = std::make_shared<RunnableGraph>();
  if (budget == 0) {
    r->unsupported = fmt::format("was instantiated after the trace's graph work budget ({} nodes flattened or "
                                 "copied) was spent",
                                 kGraphWorkBudget);
    return r;
  }
  Flattener f;
  std::vector<uint32_t> exit_of = f.add(g, nullptr, 0);
  budget -= std::min<uint64_t>(budget, f.nodes.size() + 1);
  if (!f.unsupported.empty()) {
    r->unsupported = f.unsupported;
    return r;
  }
  for (size_t i = 0; i < f.nodes.size(); ++i) {
    const GraphNode* src = f.nodes[i].src;
    if (!src) continue;
    const bool work = src->type == GraphNodeType::kKernel || src->type == GraphNodeType::kMemcpy ||
                      src->type == GraphNodeType::kMemset;
    if (work && src->work.empty()) {
      r->unsupported = fmt::format("holds a {} node whose parameters the trace does not show (a symbol or array copy, "
                                   "or parameters the tracer could not read)",
                                   trace::graph_node_type_name(src->type));
      return r;
    }
    if (src->type == GraphNodeType::kConditional || src->type == GraphNodeType::kUnknown) {
      r->unsupported = fmt::format("holds a {} node (not modelled)", trace::graph_node_type_name(src->type));
      return r;
    }
  }
  // Kahn's order; what is left over is a cycle (CUDA refuses to instantiate one).
  const size_t n = f.nodes.size();
  std::vector<uint32_t> indegree(n, 0);
  std::vector<std::vector<uint32_t>> out(n);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t d : f.nodes[i].deps) {
      out[d].push_back(uint32_t(i));
      ++indegree[i];
    }
  // Among the nodes whose dependencies have run, the one added first runs next: nodes with no
  // path between them run in the order the program added them (a race names the later-added
  // node's access as the later one).
  std::vector<uint32_t> order, pos(n, UINT32_MAX);
  order.reserve(n);
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<uint32_t>> ready;
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(uint32_t(i));
  while (!ready.empty()) {
    const uint32_t k = ready.top();
    ready.pop();
    order.push_back(k);
    for (uint32_t m : out[k])
      if (--indegree[m] == 0) ready.push(m);
  }
  if (order.size() != n) {
    r->unsupported = "has a dependency cycle";
    return r;
  }
  for (size_t k = 0; k < n; ++k) pos[order[k]] = uint32_t(k);
  std::vector<uint32_t> tail;  // branch -> its last node (run order index)
  r->nodes.reserve(n);
  for (uint32_t i : order) {
    const FlatNode& fn = f.nodes[i];
    RunnableGraph::Node node;
    node.type = fn.type;
    if (fn.src && fn.type != GraphNodeType::kEmpty) {
      node.handle = fn.src->handle;
      node.event = fn.src->event;
      node.work_kind = fn.src->work_kind;
      node.work = fn.src->work;
    }
    std::vector<uint32_t> deps;
    for (uint32_t d : fn.deps) deps.push_back(pos[d]);
    const uint32_t me = uint32_t(r->nodes.size());
    node.branch = UINT32_MAX;
    for (uint32_t d : deps)
      if (tail[r->nodes[d].branch] == d) {
        node.branch = r->nodes[d].branch;
        break;
      }
    if (node.branch == UINT32_MAX) {
      node.branch = uint32_t(tail.size());
      tail.push_back(me);
    }
    tail[node.branch] = me;
    for (uint32_t d : deps)
      if (r->nodes[d].branch != node.branch && std::find(node.deps.begin(), node.deps.end(), d) == node.deps.end()) {
        node.deps.push_back(d);
        r->nodes[d].snapshot = true;
      }
    node.snapshot |= node.type == GraphNodeType::kEventRecord;
    r->nodes.push_back(std::move(node));
  }
  r->branches = uint32_t(tail.size());
  for (const auto& [handle, idx] : g.by_handle)
    if (idx < g.nodes.size() && !g.nodes[idx].removed && g.nodes[idx].type != GraphNodeType::kChildGraph &&
        exit_of[idx] != UINT32_MAX)
      r->by_handle[handle] = pos[exit_of[idx]];
  return r;
}

BuiltGraph from_capture(const CapturedGraph& c) {
  BuiltGraph g;
  g.unsupported = c.unsupported;
  std::vector<uint32_t> last(c.streams.size(), UINT32_MAX);
  std::unordered_map<uint64_t, uint32_t> recorded;  // event -> its latest record node
  for (const CapturedNode& cn : c.nodes) {
    GraphNode n;
    const uint32_t me = uint32_t(g.nodes.size());
    if (cn.branch < last.size() && last[cn.branch] != UINT32_MAX) n.deps.push_back(last[cn.branch]);
    const trace::RecordView r{cn.kind, std::span<const uint8_t>(cn.body)};
    switch (cn.kind) {
      case RecordKind::kEventRecord:
        recorded[r.as<trace::EventRecord>().event] = me;
        break;
      case RecordKind::kStreamWaitEvent:
        if (auto it = recorded.find(r.as<trace::StreamWaitEvent>().event); it != recorded.end())
          n.deps.push_back(it->second);
        break;
      case RecordKind::kKernelLaunch:
        n.type = GraphNodeType::kKernel;
        break;
      case RecordKind::kMemcpy:
        n.type = GraphNodeType::kMemcpy;
        break;
      case RecordKind::kMemset:
        n.type = GraphNodeType::kMemset;
        break;
      default:
        n.type = GraphNodeType::kKernel;  // an NCCL call: a kernel whose accesses its record gives
        break;
    }
    if (n.type != GraphNodeType::kEmpty) {
      n.work_kind = cn.kind;
      n.work = cn.body;
    }
    if (cn.branch < last.size()) last[cn.branch] = me;
    g.nodes.push_back(std::move(n));
  }
  return g;
}

}  // namespace streamrace::analysis
