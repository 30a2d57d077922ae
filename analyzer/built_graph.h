// BuiltGraph: a CUDA graph made with the explicit graph API (cudaGraphCreate, cudaGraphAdd*Node,
// cudaGraphAddDependencies, ...), rebuilt from the trace's GraphEdit records; RunnableGraph:
// what an exec instantiated from one runs (child graphs inlined, nodes in an order where each
// follows its dependencies, each node on a branch that TraceAnalysis runs as a virtual stream).
// Pure data and graph algorithms; what a launch orders is TraceAnalysis::on_built_graph_launch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"

namespace streamrace::analysis {

struct CapturedGraph;
struct BuiltGraph;

struct GraphNode {
  trace::GraphNodeType type = trace::GraphNodeType::kEmpty;
  uint64_t handle = 0;         // 0: not addressable (a node of a clone or of a capture)
  uint64_t event = 0;          // event record and wait nodes
  std::vector<uint32_t> deps;  // indices of the nodes this one waits for
  trace::RecordKind work_kind{};  // the node's work as a record: KernelLaunch, Memcpy, Memset, NcclCall; 0 none
  std::vector<uint8_t> work;      // that record's body (its stream is replaced when it runs)
  std::shared_ptr<const BuiltGraph> child;  // kChildGraph: CUDA copies the child when the node is added
  bool removed = false;                     // cudaGraphDestroyNode
};

struct RunnableGraph;

struct BuiltGraph {
  std::vector<GraphNode> nodes;
  std::unordered_map<uint64_t, uint32_t> by_handle;
  // Non-empty: the graph holds something the analyzer does not model; its launches are not analysed.
  std::string unsupported;
  // Made once per version of the graph (every edit clears them): what instantiating it runs,
  // and the copy a child graph node takes.
  std::shared_ptr<const RunnableGraph> runnable;
  std::shared_ptr<const BuiltGraph> snapshot;
};

struct RunnableGraph {
  struct Node {
    trace::GraphNodeType type;
    uint64_t event = 0;
    // Indices into nodes (all smaller than this node's) of the dependencies on other branches:
    // those on its own branch ran before it there.
    std::vector<uint32_t> deps;
    trace::RecordKind work_kind{};
    std::vector<uint8_t> work;
    uint32_t branch = 0;
    bool snapshot = false;  // a node on another branch depends on it, or it records an event
    uint64_t handle = 0;    // the node's handle in its graph (GraphNode::handle; 0: none)
  };
  std::vector<Node> nodes;  // in run order
  std::unordered_map<uint64_t, uint32_t> by_handle;  // the graph's own (not inlined) nodes
  uint32_t branches = 0;
  std::string unsupported;
};

// The limits that keep a hostile trace's work bounded: child graphs nest at most this deep,
// and an exec runs at most this many nodes (inlined children counted).
inline constexpr uint32_t kMaxChildDepth = 64;
inline constexpr size_t kMaxRunnableNodes = 1u << 20;
// Nodes one trace may flatten or copy over all its instantiations and exec parameter updates;
// past it graphs are not analysed (said so), so a trace's work stays bounded.
inline constexpr uint64_t kGraphWorkBudget = 1ull << 26;

// Child graphs inlined, nodes ordered after their dependencies, branches assigned (a node
// continues the branch of a dependency that no other node continued yet, else opens one).
// Charges the nodes it makes to `budget`.
std::shared_ptr<const RunnableGraph> make_runnable(const BuiltGraph& g, uint64_t& budget);
// A graph made by stream capture as explicit nodes: stream order within a branch and
// record/wait pairs are the edges; the capture's event records and waits become empty nodes.
BuiltGraph from_capture(const CapturedGraph& c);

}  // namespace streamrace::analysis
