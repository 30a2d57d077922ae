// AllocatorBlocks: the tensor storages a framework allocator (PyTorch's caching allocator)
// handed out, from a trace's AllocatorBlock records. The tracer sees only the segments the
// allocator gets from cudaMalloc; a kernel's pointer argument reaches at most to the end of
// the block it points into, and an access to a block's addresses made before the block's
// latest hand-out belongs to an earlier tensor (the allocator reused the memory).
#pragma once

#include <cstdint>
#include <map>

#include "traceformat/records.h"

namespace streamrace::analysis {

struct LiveBlock {
  uint64_t addr = 0;
  uint64_t bytes = 0;   // as requested: the tensor's bytes
  uint64_t stream = 0;  // the block's stream
  uint64_t alloc_seq = 0;
  uint32_t alloc_stack = 0;
};

// Where the previous tensor at some addresses was released.
struct ReleasedBlock {
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint64_t stream = 0;
  uint64_t seq = 0;  // of the free request
  uint32_t stack = 0;
  uint32_t thread = 0;
  uint32_t api = 0;
};

class AllocatorBlocks {
 public:
  // Whether the trace has block events at all (traces without them keep segment extents).
  bool active() const { return active_; }
  void apply(const trace::AllocatorBlock& b);
  // The live block holding `addr`, or nullptr.
  const LiveBlock* live(uint64_t addr) const;
  // For an address inside an allocator segment but in no live block: the bytes from it to
  // the next live block or the segment's end; 0 when `addr` is in no known segment.
  uint64_t gap_extent(uint64_t addr) const;
  // The latest release of a block that held `addr` before the live one, or nullptr.
  const ReleasedBlock* released(uint64_t addr) const;
  size_t live_blocks() const { return live_.size(); }
  // The memory [base, base + bytes) went back to CUDA (a segment's cudaFree): no segment,
  // block or release remains there.
  void forget(uint64_t base, uint64_t bytes);

 private:
  bool active_ = false;
  std::map<uint64_t, LiveBlock> live_;     // by address; blocks are disjoint
  std::map<uint64_t, ReleasedBlock> released_;  // by address; disjoint, latest release wins
  std::map<uint64_t, uint64_t> segments_;       // base -> end
  mutable const LiveBlock* last_ = nullptr;  // one-entry lookup cache
};

}  // namespace streamrace::analysis
