// Device side of precise mode: the callbacks the Sanitizer API inserts before every global
// load, store and atomic of a patched kernel (SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS), every
// cp.async (MEMCPY_ASYNC) and every non-tensor bulk copy or reduction to or from global memory
// (BULK_COPY_GLOBAL_TO_SHARED, BULK_COPY_SHARED_TO_GLOBAL, BULK_REDUCTION_SHARED_TO_GLOBAL).
// Bulk *tensor* copies (TMA, cp.async.bulk.tensor) have no instrumentation point: a kernel that
// reaches memory only through them measures nothing there, which the analyzer knows (a pointer
// argument with no measured access keeps the default tier's access).
// Built by nvcc in tools-patch mode (--fatbin --compile-as-tools-patch) into a fatbin the
// session loads with sanitizerAddPatchesFromFile; see tracer/CMakeLists.txt.
//
// Nothing is logged per access. The warp's threads that touch the same granule in the same
// direction combine their byte ranges with shuffles, and one of them folds the
// result into the launch's LaunchIntervals slot (interval_buffer.h) with atomicMax. The
// slot is the launch's callback data (sanitizerSetLaunchCallbackData); launches that are
// not selected get none and return at once.
#include <sanitizer_patching.h>

#include <cstdint>

#include "tracer/precise/interval_buffer.h"

using streamrace::tracer::precise::GranuleEntry;
using streamrace::tracer::precise::kCoarseExtraShift;
using streamrace::tracer::precise::kDirRead;
using streamrace::tracer::precise::kDirWrite;
using streamrace::tracer::precise::kMaxCoarse;
using streamrace::tracer::precise::kMaxGranules;
using streamrace::tracer::precise::kProbeLimit;
using streamrace::tracer::precise::LaunchIntervals;

static_assert((kMaxGranules & (kMaxGranules - 1)) == 0, "the probe below needs a power of two");
static_assert((kMaxCoarse & (kMaxCoarse - 1)) == 0, "the probe below needs a power of two");

namespace {

using ull = unsigned long long;

__device__ __forceinline__ ull* as_ull(uint64_t* p) { return reinterpret_cast<ull*>(p); }

__device__ __forceinline__ uint32_t lane_id() {
  uint32_t lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

// The entry of `key` in a table of `capacity` (a power of two) entries, claimed if new; nullptr
// when the kProbeLimit entries it may use hold other keys.
__device__ GranuleEntry* find_entry(GranuleEntry* table, uint32_t capacity, uint64_t key) {
  const ull want = ull(key) + 1;
  const uint32_t start = uint32_t((key * 0x9E3779B97F4A7C15ull) >> 40) & (capacity - 1);
  for (uint32_t i = 0; i < kProbeLimit; ++i) {
    GranuleEntry* e = &table[(start + i) & (capacity - 1)];
    ull seen = *reinterpret_cast<volatile ull*>(&e->key_plus1);
    if (seen == want) return e;
    if (seen == 0) {
      seen = atomicCAS(as_ull(&e->key_plus1), 0ull, want);
      if (seen == 0 || seen == want) return e;
    }
  }
  return nullptr;
}

// atomicMax only when it would change the value. After the first warps of a launch have
// widened an interval, nearly every later access falls inside it: a plain load then decides,
// and the thousands of warps of a large kernel do not serialise on one entry's atomics. (A
// stale load can only be smaller than the current value, so it never skips a needed update.)
__device__ __forceinline__ void widen(uint64_t* p, ull v) {
  if (*reinterpret_cast<volatile ull*>(p) < v) atomicMax(as_ull(p), v);
}

// Folds [first, end) of one granule into the slot (one lane per warp calls it): its entry,
// else its coarse entry, else the overflow hull.
__device__ __forceinline__ void fold(LaunchIntervals* slot, uint64_t key, ull first, ull end, uint32_t dirs) {
  GranuleEntry* e = find_entry(slot->entries, kMaxGranules, key);
  if (e == nullptr) e = find_entry(slot->coarse, kMaxCoarse, key >> kCoarseExtraShift);
  if (e) {
    if (dirs & kDirRead) {
      widen(&e->read_lo_inv, ~first);
      widen(&e->read_hi, end);
    }
    if (dirs & kDirWrite) {
      widen(&e->write_lo_inv, ~first);
      widen(&e->write_hi, end);
    }
  } else {
    if ((*reinterpret_cast<volatile uint32_t*>(&slot->overflow_dirs) & dirs) != dirs)
      atomicOr(&slot->overflow_dirs, dirs);
    widen(&slot->overflow_lo_inv, ~first);
    widen(&slot->overflow_hi, end);
  }
}

// One thread's access of `size` bytes at `addr`: the warp's threads on the same granule in
// the same direction reduce together, and one of them folds the result into the slot.
__device__ __forceinline__ void thread_access(LaunchIntervals* slot, uint64_t addr, uint32_t accessSize, uint32_t dirs) {
  const uint32_t shift = slot->granule_shift;
  const uint64_t key = addr >> shift;
  const uint64_t granule_base = key << shift;

  // Threads of this warp on the same granule with the same direction reduce together.
  const uint32_t active = __activemask();
  const uint32_t peers = __match_any_sync(active, (ull(key) << 2) | dirs);
  // Tools-patch code may not use the redux instructions behind __reduce_*_sync, so the
  // reduction is a walk over the active lanes with shuffles that every active lane joins.
  const uint32_t off_lo = uint32_t(addr - granule_base);  // granule_shift <= 31
  const uint32_t off_hi = off_lo + accessSize;
  uint32_t lo = off_lo, hi = off_hi;
  if (active == 0xffffffffu && peers == active) {
    // The common case (a full warp on one granule, one direction): a butterfly, 10 shuffles.
    for (int d = 16; d > 0; d >>= 1) {
      lo = min(lo, __shfl_xor_sync(active, lo, d));
      hi = max(hi, __shfl_xor_sync(active, hi, d));
    }
  } else {
    for (uint32_t rest = active; rest != 0; rest &= rest - 1) {
      const int src = __ffs(rest) - 1;
      const uint32_t other_lo = __shfl_sync(active, off_lo, src);
      const uint32_t other_hi = __shfl_sync(active, off_hi, src);
      if (peers & (1u << src)) {
        lo = min(lo, other_lo);
        hi = max(hi, other_hi);
      }
    }
  }
  if (lane_id() != uint32_t(__ffs(peers) - 1)) return;
  fold(slot, key, granule_base + lo, granule_base + hi, dirs);
}

// A bulk copy's whole range [addr, addr + bytes), the same for every active thread of the
// warp: the first active lane folds it, granule by granule.
// `userdata` is the launch's slot (none: not measured).
__device__ __forceinline__ void warp_range(void* userdata, uint64_t addr, uint64_t bytes, uint32_t dirs) {
  auto* slot = static_cast<LaunchIntervals*>(userdata);
  if (slot == nullptr || bytes == 0 || lane_id() != uint32_t(__ffs(__activemask()) - 1)) return;
  const uint32_t shift = slot->granule_shift;
  for (uint64_t at = addr, end = addr + bytes; at < end;) {
    const uint64_t key = at >> shift;
    const uint64_t granule_end = (key + 1) << shift;
    const uint64_t to = end < granule_end ? end : granule_end;
    fold(slot, key, at, to, dirs);
    at = to;
  }
}

}  // namespace

extern "C" __device__ __noinline__ SanitizerPatchResult streamrace_global_access(void* userdata, uint64_t pc, void* ptr,
                                                                                 uint32_t accessSize, uint32_t flags,
                                                                                 const void* pData) {
  (void)pc;
  (void)pData;
  auto* slot = static_cast<LaunchIntervals*>(userdata);
  if (slot == nullptr) return SANITIZER_PATCH_SUCCESS;
  if (flags & SANITIZER_MEMORY_DEVICE_FLAG_PREFETCH) return SANITIZER_PATCH_SUCCESS;  // moves no data
  uint32_t dirs = flags & (SANITIZER_MEMORY_DEVICE_FLAG_READ | SANITIZER_MEMORY_DEVICE_FLAG_WRITE);
  if (dirs == 0) dirs = kDirRead | kDirWrite;  // direction not stated: assume both
  thread_access(slot, reinterpret_cast<uint64_t>(ptr), accessSize, dirs);
  return SANITIZER_PATCH_SUCCESS;
}

// cp.async (LDGSTS): a global read into shared memory, per thread, 4 to 16 bytes.
extern "C" __device__ __noinline__ SanitizerPatchResult streamrace_memcpy_async(void* userdata, uint64_t pc, void* src,
                                                                                uint32_t dst, uint32_t accessSize) {
  (void)pc;
  (void)dst;
  auto* slot = static_cast<LaunchIntervals*>(userdata);
  if (slot == nullptr) return SANITIZER_PATCH_SUCCESS;
  // A zero-size copy (src may then be null) still joins the warp's reduction, with no bytes.
  thread_access(slot, reinterpret_cast<uint64_t>(src), src ? accessSize : 0, kDirRead);
  return SANITIZER_PATCH_SUCCESS;
}

// cp.async.bulk global -> shared: 16-byte blocks in bits 0:15 of `data`, read from `src`.
extern "C" __device__ __noinline__ SanitizerPatchResult streamrace_bulk_global_to_shared(void* userdata, uint64_t pc,
                                                                                         uint64_t src, uint32_t dst,
                                                                                         uint32_t barrier, uint32_t data,
                                                                                         uint32_t isMulticast) {
  (void)pc;
  (void)dst;
  (void)barrier;
  (void)isMulticast;
  warp_range(userdata, src, uint64_t(data & 0xffffu) * 16, kDirRead);
  return SANITIZER_PATCH_SUCCESS;
}

// cp.async.bulk shared -> global: numBlocks 16-byte blocks written at `dst`.
extern "C" __device__ __noinline__ SanitizerPatchResult streamrace_bulk_shared_to_global(void* userdata, uint64_t pc,
                                                                                         uint64_t dst, uint32_t src,
                                                                                         uint32_t numBlocks) {
  (void)pc;
  (void)src;
  warp_range(userdata, dst, uint64_t(numBlocks) * 16, kDirWrite);
  return SANITIZER_PATCH_SUCCESS;
}

// cp.reduce.async.bulk shared -> global: reads and writes numBlocks 16-byte blocks at `dst`.
extern "C" __device__ __noinline__ SanitizerPatchResult streamrace_bulk_reduce_to_global(void* userdata, uint64_t pc,
                                                                                         uint64_t dst, uint32_t src,
                                                                                         uint32_t numBlocks) {
  (void)pc;
  (void)src;
  warp_range(userdata, dst, uint64_t(numBlocks) * 16, kDirRead | kDirWrite);
  return SANITIZER_PATCH_SUCCESS;
}
