// HappensBefore: how each CUDA construct orders work. See ARCHITECTURE.md's rule table;
// tests/analyzer/rules_test.cpp has one racy program and its clean twin for every rule.
#include "analyzer/happens_before.h"

#include <fmt/format.h>

#include "traceformat/call_stream.h"

namespace streamrace::analysis {

using trace::is_legacy_stream;
using trace::is_per_thread_stream;

std::string StreamState::label() const {
  if (!graph_label.empty()) return graph_label;
  return trace::stream_label(handle, trace::StreamTraits{known, !blocking, device});
}

StreamState& HappensBefore::stream(uint64_t handle) {
  if (StreamState** found = streams_.find(handle)) return **found;
  if (next_slot_ > kMaxStreams)
    throw StreamLimitError(fmt::format("stream {:#x} is one more than the {} streams one trace may use (the analyzer's limit)",
                                       handle, kMaxStreams));
  StreamState& s = states_.emplace_back();
  streams_[handle] = &s;
  s.handle = handle;
  s.slot = next_slot_++;
  if (is_legacy_stream(handle)) {
    s.legacy = true;
    s.known = true;
    s.device = uint32_t(handle & 0xFFFF);
  } else if (is_per_thread_stream(handle)) {
    s.per_thread = true;
    s.known = true;
    s.device = uint32_t(handle & 0xFFFF);
  } else {
    s.blocking = unknown_blocking_;
  }
  by_slot_.resize(s.slot + 1, nullptr);
  by_slot_[s.slot] = &s;
  return s;
}

void HappensBefore::stream_created(uint64_t handle, uint32_t device, uint32_t flags, int32_t priority) {
  StreamState** found = streams_.find(handle);
  if (found && (*found)->known && !(*found)->legacy && !(*found)->per_thread) {
    // A handle value reused after cudaStreamDestroy is a new stream: give it a fresh slot.
    StreamState& old = **found;
    by_slot_[old.slot] = nullptr;
    streams_.erase(handle);
    old = StreamState{};  // its state is no one's now
  }
  StreamState& s = stream(handle);
  s.device = device;
  s.blocking = !(flags & trace::kStreamNonBlocking);
  s.priority = priority;
  s.known = true;
}

void HappensBefore::stream_destroyed(uint64_t handle) {
  // Work already queued still completes in order; keep the state so pending accesses
  // keep their meaning. A later create with the same handle replaces it.
  (void)handle;
}

void HappensBefore::event_created(uint64_t event) { events_[event] = EventState{}; }

void HappensBefore::event_destroyed(uint64_t event) { events_.erase(event); }

void HappensBefore::event_recorded(uint64_t event, uint64_t stream, uint32_t thread, uint64_t seq) {
  StreamState& s = begin_op(stream, thread);
  EventState& e = events_[event];
  e.recorded = true;
  e.stream = stream;
  e.record_seq = seq;
  e.snapshot = s.vc;
}

void HappensBefore::event_set(uint64_t event, uint64_t stream, uint64_t seq, const VectorClock& snapshot) {
  EventState& e = events_[event];
  e.recorded = true;
  e.stream = stream;
  e.record_seq = seq;
  e.snapshot = snapshot;
}

void HappensBefore::stream_waits(uint64_t stream_handle, uint64_t event, uint32_t thread) {
  StreamState& s = stream(stream_handle);
  apply_host(s, thread);
  const EventState* e = events_.find(event);
  if (!e || !e->recorded) return;
  s.vc.join(e->snapshot);
}

const EventState* HappensBefore::event(uint64_t e) const { return events_.find(e); }

VectorClock& HappensBefore::host(uint32_t thread) {
  return separate_threads_ ? thread_hosts_[thread] : host_;
}

void HappensBefore::apply_host(StreamState& s, uint32_t thread) {
  if (!separate_threads_ && s.host_version_seen == host_version_) return;
  s.vc.join(host(thread));
  s.host_version_seen = host_version_;
}

void HappensBefore::host_joins_event(uint64_t event, uint32_t thread) {
  const EventState* e = events_.find(event);
  if (!e || !e->recorded) return;
  if (host(thread).join(e->snapshot)) host_changed();
}

void HappensBefore::host_joins_stream(uint64_t stream_handle, uint32_t thread) {
  StreamState& s = stream(stream_handle);
  VectorClock& h = host(thread);
  bool changed = h.join(s.vc);
  if (s.legacy) {
    // Synchronising the legacy stream waits for the work it waits for: every blocking
    // stream's prior work on the device.
    for (StreamState* b : by_slot_)
      if (b && b != &s && b->blocking && !b->legacy && b->device == s.device) changed |= h.join(b->vc);
  }
  if (changed) host_changed();
}

void HappensBefore::host_joins_device(uint32_t device, uint32_t thread) {
  VectorClock& h = host(thread);
  bool changed = false;
  for (StreamState* s : by_slot_)
    if (s && s->device == device) changed |= h.join(s->vc);
  if (changed) host_changed();
}

void HappensBefore::barrier() {
  for (StreamState* s : by_slot_)
    if (s) {
      host_.join(s->vc);
      for (auto& [t, h] : thread_hosts_) h.join(s->vc);
    }
  host_changed();
}

StreamState& HappensBefore::begin_op(uint64_t handle, uint32_t thread) {
  StreamState& s = stream(handle);
  apply_host(s, thread);
  if (s.legacy) {
    // An op on the legacy stream waits for all prior work on the device's blocking streams.
    for (StreamState* b : by_slot_)
      if (b && b != &s && b->blocking && !b->legacy && b->device == s.device) s.vc.join(b->vc);
  } else if (s.blocking) {
    // Work on a blocking stream waits for all prior work on the legacy stream.
    if (StreamState** legacy = streams_.find(trace::legacy_stream(s.device))) s.vc.join((*legacy)->vc);
  }
  s.vc.tick(s.slot);
  return s;
}

void HappensBefore::join_streams(const std::vector<uint64_t>& handles) {
  VectorClock all;
  for (uint64_t h : handles) all.join(stream(h).vc);
  for (uint64_t h : handles) stream(h).vc.join(all);
}

}  // namespace streamrace::analysis
