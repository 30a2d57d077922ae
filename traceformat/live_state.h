// LiveState: what the calls left out of a windowed or ring trace leave behind, kept so that
// the part that is written can be analysed on its own (docs/long-runs.md). It folds records
// in call order (streams, events and their last record, NCCL communicators, allocations,
// a framework allocator's segments and blocks) and writes them back as a snapshot: one
// record per live object, each with the CallInfo of the call that made it, `seq` renumbered by
// the caller. Everything else a record says (kernels, copies, syncs) is not state and is
// ignored. Used by the tracer's flusher, off the program's threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>

#include "traceformat/trace_file.h"

namespace streamrace::trace {

struct LiveStateCounts {
  size_t streams = 0, events = 0, comms = 0, allocations = 0, segments = 0, blocks = 0;
  size_t records() const { return streams + events + comms + allocations + segments + blocks; }
};

class LiveState {
 public:
  // Folds one record (any kind; only the state kinds change anything).
  void observe(const RecordView& r);
  // Appends the snapshot to `out`, giving the n-th call record seq `first_seq + n`; returns
  // how many records it wrote. Order: streams, events (create, then last record), comms,
  // allocations, allocator segments, blocks (then their pending free requests).
  // `full`, if set, is called whenever `out` holds more than 8 MiB (a chunk holds at most
  // 64 MiB): it writes and clears it.
  uint64_t write_snapshot(ChunkBuilder& out, uint64_t first_seq,
                          const std::function<void(ChunkBuilder&)>& full = {}) const;
  LiveStateCounts counts() const;

 private:
  struct Event {
    bool created = false;
    EventCreate create{};
    bool recorded = false;
    EventRecord last{};
  };
  struct Block {
    AllocatorBlock alloc{};
    bool free_requested = false;
    AllocatorBlock free_request{};
  };
  std::map<uint64_t, StreamCreate> streams_;
  std::map<uint64_t, Event> events_;
  std::map<uint64_t, NcclCommInit> comms_;
  std::map<uint64_t, Alloc> allocs_;
  std::map<uint64_t, AllocatorBlock> segments_;
  std::map<uint64_t, Block> blocks_;
  // Every block overlapping [addr, addr + bytes) goes.
  void erase_blocks(uint64_t addr, uint64_t bytes);
};

}  // namespace streamrace::trace
