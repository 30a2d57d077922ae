// GraphCaptures: see graph_captures.h.
#include "analyzer/graph_captures.h"

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

void GraphCaptures::graph_call(const GraphCall& g) {
  switch (g.action) {
    case GraphAction::kInstantiate: {
      auto it = graphs_.find(g.graph);
      execs_[g.graph_exec] = Exec{it == graphs_.end() ? nullptr : it->second, next_exec_id_++};
      return;
    }
    case GraphAction::kExecUpdate: {
      // The exec keeps its identity (launches of it stay ordered) and runs the new graph's nodes.
      auto it = graphs_.find(g.graph);
      auto [e, inserted] = execs_.try_emplace(g.graph_exec);
      if (inserted) e->second.id = next_exec_id_++;
      e->second.graph = it == graphs_.end() ? nullptr : it->second;
      return;
    }
    case GraphAction::kExecDestroy:
      execs_.erase(g.graph_exec);
      return;
    case GraphAction::kGraphDestroy:
      graphs_.erase(g.graph);  // execs made from it keep their copy
      return;
    case GraphAction::kCaptureDependencies:
      mark_unsupported(g.stream, "had its capture dependencies replaced (cudaStreamUpdateCaptureDependencies)");
      return;
  }
}

const GraphCaptures::Exec* GraphCaptures::exec(uint64_t handle) const {
  auto it = execs_.find(handle);
  return it == execs_.end() ? nullptr : &it->second;
}

}  // namespace streamrace::analysis
