// HappensBefore: the rules of ARCHITECTURE.md's table, one method per CUDA construct.
// Every stream and every host clock owns a slot in the vector clocks; an operation on a
// stream gets the epoch clock@slot and the stream's vector clock at that moment.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/flat_hash_map.h"
#include "analyzer/vector_clock.h"
#include "traceformat/records.h"

namespace streamrace::analysis {

// cudaFree, cudaFreeHost, cudaFreeArray (and cuMemFree, cuMemFreeHost) wait for all work on
// the device before they return: the host joins the device. Stream-ordered frees
// (cudaFreeAsync: ordered on their stream) and unmaps do not synchronise. The tracer records
// only the Free; traces written before 2026-12 also carry a DeviceSynchronize record (same
// api_id) just before such a Free, which joins the same clocks again and changes nothing.
constexpr bool free_synchronizes_device(trace::AllocKind kind) {
  return kind != trace::AllocKind::kAsync && kind != trace::AllocKind::kVmmMap;
}

struct StreamState {
  uint64_t handle = 0;
  uint32_t slot = 0;
  uint32_t device = 0;
  bool legacy = false;      // the legacy default stream of `device`
  bool per_thread = false;  // a per-thread default stream
  bool blocking = true;     // synchronises with the legacy default stream
  bool known = false;       // its creation was traced (or it is implicit)
  // A branch of a CUDA graph (TraceAnalysis::on_graph_launch): a virtual stream named in
  // reports by the launch's stream.
  std::string graph_label;
  uint64_t shown_handle = 0;  // the launch stream
  uint64_t captured_on = 0;   // the stream this branch was captured on
  int32_t priority = 0;
  VectorClock vc;
  uint64_t host_version_seen = 0;
  std::string label() const;
  uint64_t shown() const { return shown_handle ? shown_handle : handle; }
};

struct EventState {
  bool recorded = false;
  uint64_t stream = 0;
  uint64_t record_seq = 0;
  VectorClock snapshot;
};

// Thrown when a trace names more streams than kMaxStreams; the caller adds file and offset.
class StreamLimitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class HappensBefore {
 public:
  // The most clock slots (streams, counting a handle reused after cudaStreamDestroy again) one
  // trace may use. Vector clocks are sparse, but a device synchronisation followed by work on
  // every stream gives every stream an entry for every other: memory is at most
  // kMaxStreams^2 entries (128 MiB) and a legacy-stream op or device sync costs kMaxStreams
  // joins, instead of growing with the square of whatever count a file claims.
  static constexpr uint32_t kMaxStreams = 4096;

  explicit HappensBefore(bool separate_host_threads, bool unknown_streams_blocking)
      : separate_threads_(separate_host_threads), unknown_blocking_(unknown_streams_blocking) {}

  // --- streams and events
  StreamState& stream(uint64_t handle);  // created on first sight when untraced
  void stream_created(uint64_t handle, uint32_t device, uint32_t flags, int32_t priority);
  void stream_destroyed(uint64_t handle);
  void event_created(uint64_t event);
  // cudaEventDestroy(e): the analyzer forgets e. What waits and host syncs joined stays in
  // their clocks (a join copies the snapshot; nothing refers to an event's state later), a
  // wait, sync or query on the destroyed handle orders nothing (CUDA fails it with
  // cudaErrorInvalidResourceHandle), and a later cudaEventCreate that returns the same handle
  // starts unrecorded. So a trace that creates an event per use holds only the live ones.
  void event_destroyed(uint64_t event);
  // cudaEventRecord(e, S): e's snapshot becomes S's clock (replacing any earlier record).
  void event_recorded(uint64_t event, uint64_t stream, uint32_t thread, uint64_t seq);
  // An event record node of a graph launch: e's snapshot becomes `snapshot` (the node's point).
  void event_set(uint64_t event, uint64_t stream, uint64_t seq, const VectorClock& snapshot);
  // cudaStreamWaitEvent(S, e): S joins e's latest snapshot; never recorded = no edge.
  void stream_waits(uint64_t stream, uint64_t event, uint32_t thread);

  // --- host-side synchronisation
  void host_joins_event(uint64_t event, uint32_t thread);   // cudaEventSynchronize, query==success
  void host_joins_stream(uint64_t stream, uint32_t thread); // cudaStreamSynchronize, query==success
  void host_joins_device(uint32_t device, uint32_t thread); // cudaDeviceSynchronize, cudaFree, ...
  // A capture window opens (CaptureMark): every host clock joins every stream, so everything
  // before it is ordered before everything after it (docs/long-runs.md).
  void barrier();
  // What host `thread` has observed (the shared host clock unless threads are kept separate).
  const VectorClock& host_clock(uint32_t thread) { return host(thread); }

  // --- operations
  // Starts an op on `stream` issued by host `thread`: applies the launch-from-host rule and
  // the legacy-stream rules, ticks the stream, and returns the stream (its vc is the op's).
  StreamState& begin_op(uint64_t stream, uint32_t thread);
  // Groups (ncclGroupEnd): every stream waits for all others before and after.
  void join_streams(const std::vector<uint64_t>& streams);

  const std::vector<StreamState*>& streams_by_slot() const { return by_slot_; }
  const EventState* event(uint64_t e) const;

 private:
  VectorClock& host(uint32_t thread);
  void host_changed() { ++host_version_; }
  void apply_host(StreamState& s, uint32_t thread);

  bool separate_threads_;
  bool unknown_blocking_;
  uint32_t next_slot_ = 1;  // slot 0 is the shared host clock
  std::deque<StreamState> states_;             // every slot's stream, by slot - 1 (never moves)
  FlatHashMap<StreamState*> streams_;          // by handle: the stream now named so
  std::vector<StreamState*> by_slot_;          // null: the slot's handle was reused for a new stream
  FlatHashMap<EventState> events_;
  VectorClock host_;
  std::unordered_map<uint32_t, VectorClock> thread_hosts_;
  uint64_t host_version_ = 1;
};

}  // namespace streamrace::analysis
