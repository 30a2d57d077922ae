// ShadowMemory: for every live allocation, an interval map from byte range to the last
// write and the reads since (FastTrack-style epochs: clock@slot). Checking an access against
// it yields the conflicting earlier accesses; applying it updates the map.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyzer/flat_hash_map.h"
#include "analyzer/inline_vector.h"
#include "analyzer/vector_clock.h"

namespace streamrace::analysis {

enum class OpKind : uint8_t { kMemcpy = 0, kMemset = 1, kKernel = 2, kNccl = 3, kFree = 4, kHost = 5 };  // kHost: a HostAccess
const char* op_kind_name(OpKind k);

// One access by one operation, as stored in the shadow. Kept small: segments hold these.
struct AccessEpoch {
  uint64_t seq = 0;       // call sequence number of the op
  uint64_t addr = 0;      // the op's whole access range (not only this segment)
  uint64_t bytes = 0;
  uint32_t slot = 0;      // clock slot of the op's stream
  uint32_t clock = 0;     // the stream's clock at the op
  uint32_t stack_id = 0;
  uint32_t name_id = 0;   // string id: kernel name or API name
  uint32_t thread = 0;
  uint32_t launch = 0;    // a CUDA graph node: 1 + index of its graph launch (TraceAnalysis); 0: not
  OpKind op = OpKind::kMemcpy;
  bool write = false;     // exact write
  bool also_reads = false;   // a write that reads the same bytes first (in-place collectives)
  bool maybe_write = false;  // kernel pointer argument: direction and extent unknown
  bool inexact = false;      // extent not exact: a kernel's `T const*` argument (a read), a precise-mode hull
  bool in_block = false;     // a kernel pointer's extent bounded by the allocator block it points into
  bool by_signature = false;  // exact, from a learned access signature (analyzer/access_signatures.h)
  bool by_call = false;       // from the arguments of the library call that launched the kernel (cuBLAS)
};

struct Segment {
  uint64_t lo = 0, hi = 0;  // offsets in the allocation, [lo, hi)
  bool has_write = false;
  AccessEpoch write;
  // At most one plain, one inexact and one maybe-write entry per slot; nearly always one or two.
  InlineVector<AccessEpoch, 2> reads;
};

struct AllocationShadow {
  uint64_t base = 0;
  uint64_t bytes = 0;
  uint8_t kind = 0;       // trace::AllocKind, 0 = implicit (memory the trace never saw allocated)
  uint64_t alloc_seq = 0;
  uint32_t owner = 0;     // ShadowShard::index of the worker holding its history
  InlineVector<Segment, 2> segs;  // sorted, disjoint; nearly always one or two
};

struct Conflict {
  AccessEpoch earlier;
  bool earlier_is_write;  // false: it was a read (or a maybe-write kernel stored as read)
  uint64_t lo, hi;        // absolute overlapping byte range
  uint32_t piece = 0;     // which allocation of the access (0: the one holding its first byte)
};

// Which allocations a shadow holds the access history of, when one trace is split over
// several workers (`analyze -j`): worker `index` of `count`. Every worker keeps every
// allocation's range (so all of them split an access into the same pieces and find the same
// allocation for a pointer); only the owner of an allocation checks and records accesses
// in it. An allocation's owner is the owner of the 4 MiB region holding its base (a hash of
// the region), except that one inheriting what a stream-ordered free left behind keeps the
// owner of that state; so a worker can tell from an address alone, without the index, that
// it owns nothing there (ShadowMemory::may_own).
struct ShadowShard {
  uint32_t index = 0, count = 1;
  // log2 of the ownership region's size (4 MiB). Tests make it small so that the few, small
  // allocations of a test trace fall to different workers.
  uint32_t region_shift = 22;
};

// A new allocation would inherit stream-ordered state held by two different workers: the
// split cannot go on (the caller analyses the trace unsplit instead).
struct ShardSplitUnsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the index knows of an allocation: enough for a pointer's extent and ownership without
// touching the allocation's own history.
struct AllocationRange {
  uint64_t base = 0, end = 0;
  AllocationShadow* shadow = nullptr;
  uint32_t owner = 0;
  uint8_t kind = 0;  // as AllocationShadow::kind
};

class ShadowMemory {
 public:
  ShadowMemory() = default;
  explicit ShadowMemory(ShadowShard shard) : shard_(shard) {}
  // Registers an allocation. Frees that left stream-ordered state behind (cudaFreeAsync)
  // hand that state to a new allocation at the same addresses.
  void allocate(uint64_t base, uint64_t bytes, uint8_t kind, uint64_t seq);
  // Ends an allocation. With `keep_state`, the range's shadow lives on until reallocated
  // (stream-ordered frees). Returns false when nothing was allocated at `base`.
  bool release(uint64_t base, bool keep_state);
  // Checks `a` (with the issuing stream's vector clock `vc`) over [addr, addr+bytes) and
  // records it, in the allocations this shard owns. Conflicts are appended to `out`.
  // Returns whether the access reaches allocations of more than one owner.
  bool access(const AccessEpoch& a, const VectorClock& vc, std::vector<Conflict>& out);
  // The allocation holding `addr`, or nullptr. (Remembers the answer for the next lookup.)
  const AllocationRange* find(uint64_t addr) { return locate(addr); }
  bool owns(const AllocationRange& r) const { return r.owner == shard_.index; }
  // False when no allocation of this shard holds `addr`: neither is the region's owner this
  // shard, nor does an allocation of this shard reach into the region. (True: look it up.)
  bool may_own(uint64_t addr) const {
    if (shard_.count <= 1 || wide_mine_ > 0) return true;
    const uint64_t region = addr >> shard_.region_shift;
    return owner_of_region(region) == shard_.index || guest_regions_.find(region) != nullptr;
  }
  size_t live_allocations() const { return allocs_.size(); }
  // Starts loading the index slot a lookup of `addr` reads first (an op's accesses start
  // theirs together, so the cache misses overlap).
  void prefetch(uint64_t addr) const { pages_.prefetch(addr >> kPageShift); }

 private:
  const AllocationRange* locate(uint64_t addr);
  AllocationShadow* find_mut(uint64_t addr) {
    const AllocationRange* r = locate(addr);
    return r ? r->shadow : nullptr;
  }
  uint32_t owner_of_region(uint64_t region) const;
  // Keeps guest_regions_ and wide_mine_ up to date as an allocation of this shard comes (+1)
  // or goes (-1).
  void note_guest(const AllocationShadow& al, int delta);
  // A region for memory the trace never allocated, from `addr`'s granule to the one holding
  // `access_end - 1`, shrunk to the gap between real allocations.
  AllocationShadow& implicit_region(uint64_t addr, uint64_t access_end);
  static bool indexed(const AllocationShadow& al);
  void access_in(AllocationShadow& al, uint64_t lo, uint64_t hi, const AccessEpoch& a, const VectorClock& vc,
                 std::vector<Conflict>& out);

  std::map<uint64_t, AllocationShadow>::iterator erase_alloc(std::map<uint64_t, AllocationShadow>::iterator it);
  AllocationShadow& insert_alloc(AllocationShadow al);

  std::map<uint64_t, AllocationShadow> allocs_;   // by base; nodes never move
  std::map<uint64_t, AllocationShadow> retired_;  // stream-ordered frees awaiting reuse
  // Lookup index: every 1 MiB page an allocation touches lists it (sorted by base), with its
  // range, so the scan reads one array and touches only the allocation it finds. One hash
  // probe and a short scan instead of a walk down a tree of 100k allocations.
  // Allocations over kMaxIndexedPages pages (claimed sizes up to 2^64) are not indexed:
  // lookups that miss the index ask `allocs_`, so the index costs at most 64 entries each.
  static constexpr int kPageShift = 20;
  static constexpr uint64_t kMaxIndexedPages = 64;
  FlatHashMap<std::vector<AllocationRange>> pages_;
  size_t unindexed_ = 0;  // allocations left out of `pages_`
  AllocationRange last_;  // one-entry lookup cache (shadow nullptr: empty)
  ShadowShard shard_;
  // Ownership regions (split analyses): regions of other owners into which an allocation of
  // this shard reaches, with how many; allocations of this shard over more than
  // kMaxGuestRegions regions are counted in wide_mine_ instead (may_own is then always true).
  static constexpr uint64_t kMaxGuestRegions = 64;
  FlatHashMap<uint32_t> guest_regions_;
  size_t wide_mine_ = 0;
  std::vector<Segment> merged_;       // access_in's scratch: the segments a read spans, gaps filled
};

}  // namespace streamrace::analysis
