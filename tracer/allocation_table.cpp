// AllocationTable: see allocation_table.h.
#include "tracer/allocation_table.h"
#include "tracer/thread_state.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace streamrace::tracer {

namespace {
// Versions of every table of the process: a cached answer is valid only for the table and the
// version it was looked up in, and no two tables (nor two states of one) share a version.
std::atomic<uint64_t> g_next_version{1};
uint64_t new_version() { return g_next_version.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

// The calling thread's recent answers, direct-mapped by 2 MiB granule of the address looked up:
// 4096 granules (8 GiB of memory in use), as a miss takes the shared lock and walks the map
// (with 1024, a launch's 8 pointers into 2000 segments of 2 MiB cost 940 instead of 400 ns).
// An answer is an allocation, or a hole: the gap between two allocations that held the address
// looked up, where every address gets "none" while the table is unchanged. PyTorch's kernels
// pass words inside the table's bounds that point into no allocation (ZeRO-2: about half of
// the 6.7 such words per launch); without holes, each took the lock and walked the map.
// An answer holds for every address of its range while the table keeps the version it was
// found in, whatever the granule: a slot keeps no more than that (32 bytes, two to a cache
// line, never across two).
struct AllocationTable::ThreadCache {
  struct alignas(32) Slot {
    uint64_t version = 0;        // 0: empty (no table has version 0)
    uint64_t base = 0, bytes = 0;  // the allocation, or the hole's range
    uint32_t device = 0;
    trace::AllocKind kind = trace::AllocKind::kDevice;
    bool hole = false;
  };
  static_assert(sizeof(Slot) == 32);
  static constexpr int kBits = 12;
  Slot slots[1 << kBits];
  static uint64_t granule_of(uint64_t addr) { return addr >> 21; }
  Slot& slot_for(uint64_t addr) { return slots[granule_of(addr) & ((1u << kBits) - 1)]; }
};
// 128 KiB: on the heap, and only for threads that look up (a thread_local this large would be
// zeroed into every thread's TLS block at its creation, CUDA-calling or not). The pointer is a
// plain one, so that a hit reads one thread_local and no guard (in libstreamrace.so each is a
// call of __tls_get_addr); its owner, made with the cache, frees it when the thread exits. A
// lookup during the thread's own exit, after that, gets a new cache (leaked, not a crash).
namespace {
thread_local AllocationTable::ThreadCache* t_find_cache = nullptr;
struct FindCacheOwner {
  ~FindCacheOwner() {
    delete t_find_cache;
    t_find_cache = nullptr;
    thread_state().allocation_cache = nullptr;  // a copy of t_find_cache (finder(void*&))
  }
};
__attribute__((noinline)) AllocationTable::ThreadCache& new_find_cache() {
  thread_local FindCacheOwner owner;
  t_find_cache = new AllocationTable::ThreadCache;
  return *t_find_cache;
}
AllocationTable::ThreadCache& find_cache() {
  AllocationTable::ThreadCache* c = t_find_cache;
  return c != nullptr ? *c : new_find_cache();
}
}  // namespace

AllocationTable::AllocationTable() : version_(new_version()) {}

void AllocationTable::insert(const LiveAllocation& given) {
  LiveAllocation a = given;
  a.bytes = std::min(a.bytes, ~uint64_t(0) - a.base);  // an end past 2^64 (a bad size) ends at the top
  if (a.bytes == 0) return;
  std::unique_lock lock(mu_);
  // Logged before the version is published: a launch that reads the new version finds its
  // changes in the log (tracer/deferred_scan.h).
  const uint64_t version = new_version();
  if (log_) {
    if (auto old = by_base_.find(a.base); old != by_base_.end()) log_change(version, old->second, false);
    log_change(version, a, true);
  }
  version_.store(version, std::memory_order_release);
  by_base_[a.base] = a;
  if (a.base < lo_.load()) lo_.store(a.base);
  if (a.base + a.bytes > hi_.load()) hi_.store(a.base + a.bytes);
}

std::optional<LiveAllocation> AllocationTable::erase(uint64_t base) {
  std::unique_lock lock(mu_);
  auto it = by_base_.find(base);
  if (it == by_base_.end()) return std::nullopt;
  const uint64_t version = new_version();
  LiveAllocation a = it->second;
  if (log_) log_change(version, a, false);
  version_.store(version, std::memory_order_release);
  by_base_.erase(it);
  return a;
}

void AllocationTable::erase_range(uint64_t base, uint64_t bytes) {
  std::unique_lock lock(mu_);
  const uint64_t version = new_version();
  auto it = by_base_.lower_bound(base);
  while (it != by_base_.end() && it->first < base + bytes) {
    if (log_) log_change(version, it->second, false);
    it = by_base_.erase(it);
  }
  version_.store(version, std::memory_order_release);
}

void AllocationTable::log_change(uint64_t version, const LiveAllocation& a, bool inserted) {
  std::lock_guard l(log_->mu_);
  log_->pending_.push_back(AllocationChange{version, a, inserted});
}

std::shared_ptr<AllocationChangeLog> AllocationTable::start_change_log() {
  auto log = std::make_shared<AllocationChangeLog>();
  std::unique_lock lock(mu_);
  const uint64_t version = version_.load(std::memory_order_relaxed);
  log->start_version_ = version;
  for (const auto& [base, a] : by_base_) log->pending_.push_back(AllocationChange{version, a, true});
  if (log_) log_->superseded_.store(true, std::memory_order_release);
  log_ = log;
  return log;
}

size_t AllocationChangeLog::size() {
  std::lock_guard l(mu_);
  return pending_.size();
}

bool AllocationChangeLog::take(std::vector<AllocationChange>& out, bool nonblocking) {
  std::unique_lock l(mu_, std::defer_lock);
  if (nonblocking) {
    if (!l.try_lock()) return false;
  } else {
    l.lock();
  }
  if (out.empty()) {
    out.swap(pending_);
  } else {
    out.insert(out.end(), pending_.begin(), pending_.end());
    pending_.clear();
  }
  return true;
}

std::optional<LiveAllocation> AllocationTable::find(uint64_t addr) const { return find_in(find_cache(), addr); }

AllocationTable::Finder AllocationTable::finder() const { return Finder(*this, find_cache()); }

AllocationTable::Finder AllocationTable::finder(void*& slot) const {
  if (slot == nullptr) [[unlikely]]
    slot = &find_cache();
  return Finder(*this, *static_cast<ThreadCache*>(slot));
}

std::optional<LiveAllocation> AllocationTable::find_in(ThreadCache& cache, uint64_t addr) const {
  if (!maybe_contains(addr)) return std::nullopt;
  ThreadCache::Slot& s = cache.slot_for(addr);
  if (s.version == version_.load(std::memory_order_acquire) && addr - s.base < s.bytes) {
    if (s.hole) return std::nullopt;
    return LiveAllocation{s.base, s.bytes, s.kind, s.device};
  }
  uint64_t version = 0;
  Hole hole;
  auto found = find_locked(addr, version, hole);
  s.version = version;
  s.hole = !found;
  if (found) {
    s.base = found->base;
    s.bytes = found->bytes;
    s.kind = found->kind;
    s.device = found->device;
  } else {
    s.base = hole.lo;
    s.bytes = hole.hi - hole.lo;
  }
  return found;
}

std::optional<LiveAllocation> AllocationTable::find_locked(uint64_t addr, uint64_t& version, Hole& hole) const {
  std::shared_lock lock(mu_);
  version = version_.load(std::memory_order_relaxed);
  // Every address of [hole.lo, hole.hi) gets this answer when it is none: the same next
  // allocation above it, the same one (or none) below it, which ends at or before it.
  auto it = by_base_.upper_bound(addr);
  hole.hi = it == by_base_.end() ? ~0ull : it->first;
  if (it == by_base_.begin()) {
    hole.lo = 0;
    return std::nullopt;
  }
  --it;
  if (addr < it->second.base + it->second.bytes) return it->second;
  hole.lo = it->second.base + it->second.bytes;
  return std::nullopt;
}

size_t AllocationTable::size() const {
  std::shared_lock lock(mu_);
  return by_base_.size();
}

trace::MemKind AllocationTable::mem_kind_of(trace::AllocKind k) {
  switch (k) {
    case trace::AllocKind::kDevice:
    case trace::AllocKind::kAsync:
    case trace::AllocKind::kVmmMap: return trace::MemKind::kDevice;
    case trace::AllocKind::kManaged: return trace::MemKind::kManaged;
    case trace::AllocKind::kHostPinned:
    case trace::AllocKind::kHostRegistered: return trace::MemKind::kPinnedHost;
    case trace::AllocKind::kArray: return trace::MemKind::kUnknown;  // never in the table
  }
  return trace::MemKind::kUnknown;
}

}  // namespace streamrace::tracer
