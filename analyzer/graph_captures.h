// GraphCaptures: which streams are capturing, the graphs their captures made, and which
// graph each executable graph (cudaGraphExec_t) runs. Pure bookkeeping over the trace's
// records; what a launch of such a graph orders is TraceAnalysis::on_graph_launch.
//
// A capture begins on its origin stream. Another stream joins it when it waits on an event
// recorded inside the capture (the fork of torch.cuda.graph's side streams); every stream of
// the capture is a branch. Each call issued on a capturing stream (kernel, copy, set, NCCL,
// event record, stream wait) is a node, kept in issue order with its branch: stream order
// within a branch and record/wait pairs inside the capture are the graph's edges. The
// capture ends on its origin stream, and cudaStreamEndCapture names the graph it made.
//
// Graphs built with the explicit graph API (GraphEdit records) are BuiltGraphs
// (analyzer/built_graph.h); an exec instantiated from one runs its RunnableGraph.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/built_graph.h"
#include "traceformat/call_stream.h"
#include "traceformat/records.h"
#include "traceformat/trace_file.h"

namespace streamrace::analysis {

struct CapturedNode {
  trace::RecordKind kind;
  uint32_t branch = 0;        // index into CapturedGraph::streams
  std::vector<uint8_t> body;  // the record's body as read (stream still the capturing one)
};

struct CapturedGraph {
  std::vector<uint64_t> streams;  // branch -> capturing stream; branch 0 is the origin
  uint32_t device = 0;
  std::vector<CapturedNode> nodes;
  uint64_t ops = 0;  // nodes that access memory (not event records and waits)
  // Non-empty: the graph holds work the trace does not show; its launches are not analysed.
  std::string unsupported;
};

class GraphCaptures {
 public:
  void begin(const trace::StreamCapture& c, uint32_t device);
  // Ends the capture whose origin is `stream`. Returns the capture's memory-accessing ops
  // when no graph handle names it (a failed end, or a trace written before format 1.1).
  uint64_t end(uint64_t stream, uint64_t graph);
  // Whether `stream` is capturing now.
  bool capturing(uint64_t stream) const { return member_.count(stream) != 0; }
  // A record issued on `stream`: when the stream is capturing it becomes a node (true).
  bool add_if_capturing(uint64_t stream, const trace::RecordView& r);
  // cudaEventRecord(event, stream): a node when capturing (true); remembers which open
  // capture the event's latest record belongs to.
  bool event_recorded(uint64_t event, uint64_t stream, const trace::RecordView& r);
  // cudaStreamWaitEvent(stream, event): a node when `stream` is capturing, or when the event
  // was recorded inside an open capture, which `stream` then joins as a new branch (true).
  bool stream_waits(uint64_t stream, uint64_t event, const trace::RecordView& r);
  // cudaEventDestroy(event): its record belongs to no capture any more (a wait on it forks none).
  void event_destroyed(uint64_t event) { events_.erase(event); }
  // A call that makes the capture on `stream` (if any) unsupported.
  void mark_unsupported(uint64_t stream, const std::string& why);
  void graph_call(const trace::GraphCall& g);
  // The explicit graph API: a graph created or cloned, a node added, set, destroyed, edges.
  void graph_edit(const trace::GraphEditParts& e);

  struct Exec {
    std::shared_ptr<const CapturedGraph> graph;  // null: not made by a capture the trace shows
    std::shared_ptr<const RunnableGraph> built;  // or made with the explicit graph API
    uint32_t id = 0;                             // dense, one per instantiation
    bool device_launch = false;                  // may be launched from the device (unseen)
    std::string unsupported;                     // non-empty: this exec's launches are not analysed
  };
  const Exec* exec(uint64_t handle) const;

 private:
  struct Membership {
    std::shared_ptr<CapturedGraph> capture;
    uint32_t branch = 0;
  };
  void add_node(Membership& m, const trace::RecordView& r);
  // The explicit graph `graph` (one made by a capture becomes one; an unknown one is created,
  // marked as possibly holding nodes the trace does not show).
  BuiltGraph& built(uint64_t graph);
  // A snapshot of `graph` as a child graph node's copy; null when the trace does not show it.
  std::shared_ptr<const BuiltGraph> child_copy(uint64_t graph);
  // What `graph` runs when instantiated now.
  void resolve(uint64_t graph, Exec& e);

  std::unordered_map<uint64_t, Membership> member_;                    // capturing stream -> capture
  std::unordered_map<uint64_t, std::weak_ptr<CapturedGraph>> events_;  // event -> open capture
  std::unordered_map<uint64_t, std::shared_ptr<const CapturedGraph>> graphs_;
  std::unordered_map<uint64_t, std::shared_ptr<BuiltGraph>> built_;  // explicit graphs, being edited
  std::unordered_map<uint64_t, uint64_t> node_graph_;                 // node handle -> its graph
  // Captured graphs as a child graph node's copy, made once per graph.
  std::unordered_map<uint64_t, std::shared_ptr<const BuiltGraph>> captured_snapshots_;
  uint64_t graph_work_budget_ = kGraphWorkBudget;  // see built_graph.h
  // An edit of `g`: what was made from its previous version is stale.
  static void touched(BuiltGraph& g) {
    g.runnable.reset();
    g.snapshot.reset();
  }
  std::unordered_map<uint64_t, Exec> execs_;
  uint32_t next_exec_id_ = 0;
};

}  // namespace streamrace::analysis
