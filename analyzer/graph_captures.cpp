// GraphCaptures: see graph_captures.h.
#include "analyzer/graph_captures.h"

#include <fmt/format.h>

namespace streamrace::analysis {

using namespace streamrace::trace;

void GraphCaptures::begin(const StreamCapture& c, uint32_t device) {
  if (member_.count(c.stream)) return;  // already capturing: CUDA refuses the second begin
  auto cap = std::make_shared<CapturedGraph>();
  cap->streams.push_back(c.stream);
  cap->device = device;
  if (c.flags & kCaptureToGraph)
    cap->unsupported = "was captured into a graph that may already hold nodes (cudaStreamBeginCaptureToGraph)";
  member_[c.stream] = Membership{std::move(cap), 0};
}

uint64_t GraphCaptures::end(uint64_t stream, uint64_t graph) {
  auto it = member_.find(stream);
  if (it == member_.end() || it->second.branch != 0) return 0;  // not an origin: CUDA refuses
  std::shared_ptr<CapturedGraph> cap = it->second.capture;
  // Every stream of the capture leaves capture mode (CUDA requires them joined back).
  for (uint64_t s : cap->streams) member_.erase(s);
  if (graph == 0) return cap->ops;
  graphs_[graph] = std::move(cap);
  captured_snapshots_.erase(graph);
  return 0;
}

void GraphCaptures::add_node(Membership& m, const RecordView& r) {
  CapturedGraph& g = *m.capture;
  g.nodes.push_back(CapturedNode{r.kind, m.branch, std::vector<uint8_t>(r.body.begin(), r.body.end())});
  if (r.kind != RecordKind::kEventRecord && r.kind != RecordKind::kStreamWaitEvent) ++g.ops;
}

bool GraphCaptures::add_if_capturing(uint64_t stream, const RecordView& r) {
  auto it = member_.find(stream);
  if (it == member_.end()) return false;
  add_node(it->second, r);
  return true;
}

bool GraphCaptures::event_recorded(uint64_t event, uint64_t stream, const RecordView& r) {
  auto it = member_.find(stream);
  if (it == member_.end()) {
    events_.erase(event);  // an eager record replaces any captured one
    return false;
  }
  events_[event] = it->second.capture;
  add_node(it->second, r);
  return true;
}

bool GraphCaptures::stream_waits(uint64_t stream, uint64_t event, const RecordView& r) {
  auto it = member_.find(stream);
  if (it == member_.end()) {
    auto ev = events_.find(event);
    if (ev == events_.end()) return false;
    std::shared_ptr<CapturedGraph> cap = ev->second.lock();
    auto origin = cap ? member_.find(cap->streams[0]) : member_.end();
    if (origin == member_.end() || origin->second.capture != cap) return false;  // that capture ended
    // The fork: `stream` joins the capture as a new branch.
    cap->streams.push_back(stream);
    it = member_.emplace(stream, Membership{cap, uint32_t(cap->streams.size() - 1)}).first;
  }
  add_node(it->second, r);
  return true;
}

void GraphCaptures::mark_unsupported(uint64_t stream, const std::string& why) {
  auto it = member_.find(stream);
  if (it == member_.end()) return;
  if (it->second.capture->unsupported.empty()) it->second.capture->unsupported = why;
}

void GraphCaptures::resolve(uint64_t graph, Exec& e) {
  auto it = graphs_.find(graph);
  e.graph = it == graphs_.end() ? nullptr : it->second;
  auto b = built_.find(graph);
  if (b == built_.end()) {
    e.built = nullptr;
    return;
  }
  BuiltGraph& g = *b->second;
  if (!g.runnable) g.runnable = make_runnable(g, graph_work_budget_);
  e.built = g.runnable;
}

void GraphCaptures::graph_call(const GraphCall& g) {
  switch (g.action) {
    case GraphAction::kInstantiate: {
      Exec e;
      resolve(g.graph, e);
      e.id = next_exec_id_++;
      e.device_launch = (g.flags & kGraphDeviceLaunch) != 0;
      execs_[g.graph_exec] = std::move(e);
      return;
    }
    case GraphAction::kExecUpdate: {
      // The exec keeps its identity (launches of it stay ordered) and runs the new graph's nodes.
      auto [e, inserted] = execs_.try_emplace(g.graph_exec);
      if (inserted) e->second.id = next_exec_id_++;
      resolve(g.graph, e->second);
      e->second.unsupported.clear();  // every node now runs the new graph's parameters
      return;
    }
    case GraphAction::kExecDestroy:
      execs_.erase(g.graph_exec);
      return;
    case GraphAction::kGraphDestroy:
      graphs_.erase(g.graph);  // execs made from it keep their copy
      captured_snapshots_.erase(g.graph);
      built_.erase(g.graph);
      return;
    case GraphAction::kCaptureDependencies:
      mark_unsupported(g.stream, "had its capture dependencies replaced (cudaStreamUpdateCaptureDependencies)");
      return;
  }
}

BuiltGraph& GraphCaptures::built(uint64_t graph) {
  auto it = built_.find(graph);
  if (it != built_.end()) return *it->second;
  auto g = std::make_shared<BuiltGraph>();
  if (auto c = graphs_.find(graph); c != graphs_.end()) {
    // A captured graph edited with the explicit API: its nodes have no handles the trace shows.
    *g = from_capture(*c->second);
    graphs_.erase(c);
    captured_snapshots_.erase(graph);
  } else {
    g->unsupported = "was created before the trace began or by a call the trace does not show (it may hold "
                     "nodes the trace does not show)";
  }
  return *built_.emplace(graph, std::move(g)).first->second;
}

std::shared_ptr<const BuiltGraph> GraphCaptures::child_copy(uint64_t graph) {
  if (auto it = built_.find(graph); it != built_.end()) {
    BuiltGraph& g = *it->second;
    if (!g.snapshot) {
      auto copy = std::make_shared<BuiltGraph>();
      copy->nodes = g.nodes;  // the copy's nodes have handles of their own: by_handle stays empty
      copy->unsupported = g.unsupported;
      g.snapshot = std::move(copy);
    }
    return g.snapshot;
  }
  if (auto it = graphs_.find(graph); it != graphs_.end()) {
    auto& snap = captured_snapshots_[graph];
    if (!snap) snap = std::make_shared<BuiltGraph>(from_capture(*it->second));
    return snap;
  }
  return nullptr;
}

void GraphCaptures::graph_edit(const GraphEditParts& e) {
  const GraphEdit& h = e.head;
  auto note = [](BuiltGraph& g, std::string why) {
    if (g.unsupported.empty()) g.unsupported = std::move(why);
  };
  auto set_work = [&](GraphNode& n) {
    if (h.flags & kEditParamsUnknown) {
      n.work_kind = RecordKind{};
      n.work.clear();
      return;
    }
    if (auto kind = graph_node_payload_kind(h); kind && !e.payload.empty()) {
      n.work_kind = *kind;
      n.work.assign(e.payload.begin(), e.payload.end());
    }
  };
  switch (h.action) {
    case GraphEditAction::kCreate:
      built_[h.graph] = std::make_shared<BuiltGraph>();
      return;
    case GraphEditAction::kClone: {
      auto copy = child_copy(h.other);
      auto g = std::make_shared<BuiltGraph>();
      if (!copy) {
        g->unsupported = "is a clone of a graph the trace does not show";
      } else if (graph_work_budget_ < copy->nodes.size() + 1) {
        graph_work_budget_ = 0;
        g->unsupported = fmt::format("is a clone made after the trace's graph work budget ({} nodes flattened or "
                                     "copied) was spent",
                                     kGraphWorkBudget);
      } else {
        graph_work_budget_ -= copy->nodes.size() + 1;
        g->nodes = copy->nodes;
        g->unsupported = copy->unsupported;
      }
      built_[h.graph] = std::move(g);
      return;
    }
    case GraphEditAction::kAddNode: {
      BuiltGraph& g = built(h.graph);
      touched(g);
      GraphNode n;
      n.type = h.type;
      n.handle = h.node;
      if (h.type == GraphNodeType::kEventRecord || h.type == GraphNodeType::kEventWait) n.event = h.other;
      for (uint64_t d : e.first) {
        auto it = g.by_handle.find(d);
        if (it == g.by_handle.end() || g.nodes[it->second].removed) {
          note(g, "has a node that depends on a node the trace does not show");
          continue;
        }
        n.deps.push_back(it->second);
      }
      set_work(n);
      if (h.type == GraphNodeType::kChildGraph) {
        n.child = child_copy(h.other);
        if (!n.child) note(g, "holds a child graph the trace does not show");
      }
      if (h.flags & kEditEdgeNotFull) note(g, "has an edge that is not a full dependency (programmatic or port edge data)");
      if (h.flags & kEditDepsLeftOut) note(g, "has a node with more dependencies than the trace holds (4096)");
      const uint32_t idx = uint32_t(g.nodes.size());
      g.nodes.push_back(std::move(n));
      if (h.node) {
        g.by_handle[h.node] = idx;
        node_graph_[h.node] = h.graph;
      }
      return;
    }
    case GraphEditAction::kSetNode: {
      auto ng = node_graph_.find(h.node);
      if (ng == node_graph_.end()) {
        // A node the trace never saw added: one of a captured graph's (their nodes have no
        // handles in the trace), or of a graph made before tracing. Which graph is unknown, so
        // every captured graph instantiated from now on may run changed parameters.
        for (auto& [handle, cap] : graphs_) {
          if (!cap->unsupported.empty()) continue;
          if (graph_work_budget_ < cap->nodes.size() + 1) {
            graph_work_budget_ = 0;
          } else {
            graph_work_budget_ -= cap->nodes.size() + 1;
          }
          auto copy = std::make_shared<CapturedGraph>(*cap);
          copy->unsupported = "may have had a node's parameters set (cudaGraph*NodeSetParams on a node the trace "
                              "never saw added)";
          cap = std::move(copy);
          captured_snapshots_.erase(handle);
        }
        return;
      }
      auto gi = built_.find(ng->second);
      if (gi == built_.end()) return;  // its graph was destroyed
      BuiltGraph& g = *gi->second;
      auto it = g.by_handle.find(h.node);
      if (it == g.by_handle.end()) return;
      touched(g);
      GraphNode& n = g.nodes[it->second];
      if (h.type == GraphNodeType::kEventRecord || h.type == GraphNodeType::kEventWait) n.event = h.other;
      if (graph_node_payload_kind(h) || (h.flags & kEditParamsUnknown)) set_work(n);
      if (h.type == GraphNodeType::kChildGraph) note(g, "had a child graph node's graph replaced (not modelled)");
      return;
    }
    case GraphEditAction::kExecSetNode: {
      auto ex = execs_.find(h.graph);
      if (ex == execs_.end()) return;  // an exec the analyzer does not run anyway
      if (!ex->second.built) {
        if (ex->second.graph && ex->second.unsupported.empty())
          ex->second.unsupported = "had node parameters set in the exec (cudaGraphExec*NodeSetParams) on a captured "
                                   "graph's node, which the trace cannot name";
        return;
      }
      std::shared_ptr<RunnableGraph> copy;
      if (graph_work_budget_ < ex->second.built->nodes.size() + 1) {
        copy = std::make_shared<RunnableGraph>();
        copy->unsupported = fmt::format("had node parameters set in the exec after the trace's graph work budget ({} "
                                        "nodes flattened or copied) was spent",
                                        kGraphWorkBudget);
        graph_work_budget_ = 0;
        ex->second.built = std::move(copy);
        return;
      }
      graph_work_budget_ -= ex->second.built->nodes.size() + 1;
      copy = std::make_shared<RunnableGraph>(*ex->second.built);
      auto it = copy->by_handle.find(h.node);
      if (it == copy->by_handle.end()) {
        if (copy->unsupported.empty()) copy->unsupported = "had parameters set on a node the trace does not show";
      } else {
        RunnableGraph::Node& n = copy->nodes[it->second];
        if (h.type == GraphNodeType::kEventRecord || h.type == GraphNodeType::kEventWait) n.event = h.other;
        if (h.flags & kEditParamsUnknown) {
          if (copy->unsupported.empty())
            copy->unsupported = fmt::format("had a {} node's parameters set to ones the trace does not show",
                                            graph_node_type_name(h.type));
        } else if (auto kind = graph_node_payload_kind(h); kind && !e.payload.empty()) {
          n.work_kind = *kind;
          n.work.assign(e.payload.begin(), e.payload.end());
        }
        if (h.type == GraphNodeType::kChildGraph && copy->unsupported.empty())
          copy->unsupported = "had a child graph node's parameters set in the exec (not modelled)";
      }
      ex->second.built = std::move(copy);
      return;
    }
    case GraphEditAction::kDestroyNode: {
      auto ng = node_graph_.find(h.node);
      if (ng == node_graph_.end()) return;
      auto gi = built_.find(ng->second);
      if (gi == built_.end()) {
        node_graph_.erase(ng);
        return;
      }
      BuiltGraph& g = *gi->second;
      touched(g);
      auto it = g.by_handle.find(h.node);
      if (it != g.by_handle.end()) {
        const uint32_t idx = it->second;
        g.nodes[idx].removed = true;
        for (GraphNode& n : g.nodes) std::erase(n.deps, idx);
        g.by_handle.erase(it);
      }
      node_graph_.erase(ng);
      return;
    }
    case GraphEditAction::kAddEdges:
    case GraphEditAction::kRemoveEdges: {
      BuiltGraph& g = built(h.graph);
      touched(g);
      if (h.flags & kEditEdgeNotFull) note(g, "has an edge that is not a full dependency (programmatic or port edge data)");
      for (size_t i = 0; i < e.first.size() && i < e.second.size(); ++i) {
        auto from = g.by_handle.find(e.first[i]), to = g.by_handle.find(e.second[i]);
        if (from == g.by_handle.end() || to == g.by_handle.end()) {
          if (h.action == GraphEditAction::kAddEdges) note(g, "has an edge to or from a node the trace does not show");
          continue;
        }
        std::vector<uint32_t>& deps = g.nodes[to->second].deps;
        std::erase(deps, from->second);
        if (h.action == GraphEditAction::kAddEdges) deps.push_back(from->second);
      }
      return;
    }
  }
}

const GraphCaptures::Exec* GraphCaptures::exec(uint64_t handle) const {
  auto it = execs_.find(handle);
  return it == execs_.end() ? nullptr : &it->second;
}

}  // namespace streamrace::analysis
