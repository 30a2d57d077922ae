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
  // A kernel pointer argument's extent in an allocation ending at `alloc_end`: to the end of
  // the live block holding `p` (`in_block`); 0 (no access) for a word pointing into a block
  // that was released and not handed out again: every tensor a kernel is launched with is
  // alive at the launch, so such a word is not a tensor pointer (a stale slot of a by-value
  // argument struct); to `alloc_end` otherwise (no blocks in the trace, memory outside the
  // allocator, or addresses of a segment no block event ever named).
  uint64_t kernel_extent(uint64_t p, uint64_t alloc_end, bool& in_block) const;
  // The latest release of a block that held `addr` before the live one, or nullptr.
  const ReleasedBlock* released(uint64_t addr) const;
  size_t live_blocks() const { return live_.size(); }
  // Whether `addr` lies in a segment the allocator reported.
  bool in_segment(uint64_t addr) const;
  // The address of the first live block above `addr`, or UINT64_MAX.
  uint64_t next_live_after(uint64_t addr) const;
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
