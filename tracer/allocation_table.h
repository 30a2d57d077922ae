// AllocationTable: the live device, pinned-host, managed and mapped allocations of the
// process, as the tracer saw them created. Kernel argument scanning asks it whether a
// parameter word points into live memory; memcpy records ask it what kind of memory an
// address is. Reads vastly outnumber writes, hence the shared lock, and a per-thread cache of
// recent answers in front of it: a launch's pointer arguments fall into the same few
// caching-allocator segments again and again, and allocations change rarely once a training
// loop runs. A cached answer is used only while the table is unchanged since it was looked up
// (a version every insert and erase takes anew, unique across the process's tables).
#pragma once

#include <cstdint>
#include <map>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

#include "traceformat/records.h"

namespace streamrace::tracer {

struct LiveAllocation {
  uint64_t base = 0;
  uint64_t bytes = 0;
  trace::AllocKind kind = trace::AllocKind::kDevice;
  uint32_t device = 0;
};

// One change of a table, as a reader elsewhere (the deferred scan's copy of the table,
// tracer/deferred_scan.h) replays it: `a` was inserted, or erased, when the table took
// `version`. An insert at a base that held another allocation logs the erase of the old one
// first, under the same version.
struct AllocationChange {
  uint64_t version = 0;
  LiveAllocation a;
  bool inserted = false;
};

// The changes of one table since the last take, in the order (and so the version order) the
// table made them. Shared between the table, which appends under its own lock, and the
// reader, which may outlive it.
class AllocationChangeLog {
 public:
  // Appends the changes logged since the last take to `out`. False, and nothing taken, when
  // `nonblocking` and the log's lock is held (a signal handler must not wait).
  bool take(std::vector<AllocationChange>& out, bool nonblocking);
  // The table's version when the log started: no change before it is in the log.
  uint64_t start_version() const { return start_version_; }
  // A later start_change_log() of the table took over: this log gets no more changes.
  bool superseded() const { return superseded_.load(std::memory_order_acquire); }
  // Changes logged and not yet taken.
  size_t size();

 private:
  friend class AllocationTable;
  uint64_t start_version_ = 0;
  std::atomic<bool> superseded_{false};
  std::mutex mu_;
  std::vector<AllocationChange> pending_;
};

class AllocationTable {
 public:
  AllocationTable();
  void insert(const LiveAllocation& a);
  // Removes the allocation starting at `base`; returns it if there was one.
  std::optional<LiveAllocation> erase(uint64_t base);
  // Removes every allocation inside [base, base + bytes) (cuMemUnmap of a range).
  void erase_range(uint64_t base, uint64_t bytes);
  // The allocation containing `addr`, if any.
  std::optional<LiveAllocation> find(uint64_t addr) const;
  // The calling thread's cache of recent answers (allocation_table.cpp).
  struct ThreadCache;
  // For lookups made in a row by one thread (a launch's pointer words): the thread's cache is
  // found once, not per lookup (in libstreamrace.so finding it is a call of __tls_get_addr).
  class Finder {
   public:
    std::optional<LiveAllocation> find(uint64_t addr) const { return table_.find_in(cache_, addr); }

   private:
    friend class AllocationTable;
    Finder(const AllocationTable& table, ThreadCache& cache) : table_(table), cache_(cache) {}
    const AllocationTable& table_;
    ThreadCache& cache_;
  };
  Finder finder() const;
  // The same, with the cache's address kept by the caller (the thread state's
  // allocation_cache: no thread_local to look up); `slot` is filled on first use.
  Finder finder(void*& slot) const;
  // Cheap pre-filter: false when `addr` lies outside every allocation's address range.
  bool maybe_contains(uint64_t addr) const {
    const Bounds b = bounds();
    return addr >= b.lo && addr < b.hi;
  }
  // The range maybe_contains() checks, read once for a run of checks (a launch's words).
  struct Bounds {
    uint64_t lo, hi;
  };
  Bounds bounds() const { return Bounds{lo_.load(std::memory_order_relaxed), hi_.load(std::memory_order_relaxed)}; }
  // Changes with every insert and erase, to a value no table of the process had before: an
  // answer got at one version holds while the version is the same.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  size_t size() const;
  // Every live allocation, in address order, under the shared lock (`f` must not call back).
  template <typename F>
  void for_each(F&& f) const {
    std::shared_lock lock(mu_);
    for (const auto& [base, a] : by_base_) f(a);
  }

  static trace::MemKind mem_kind_of(trace::AllocKind k);

  // From now on every change is logged (AllocationChangeLog) for the one reader that asked;
  // the log starts with the live allocations, inserted at the table's current version. A
  // second call starts a new log, and the old one gets no more changes.
  std::shared_ptr<AllocationChangeLog> start_change_log();

 private:
  // Requires the unique lock.
  void log_change(uint64_t version, const LiveAllocation& a, bool inserted);
  std::optional<LiveAllocation> find_in(ThreadCache& cache, uint64_t addr) const;
  // The range around an address no allocation holds, where every address gets that answer.
  struct Hole {
    uint64_t lo = 0, hi = 0;
  };
  std::optional<LiveAllocation> find_locked(uint64_t addr, uint64_t& version, Hole& hole) const;

  // What every lookup reads, in one cache line: a launch's scan reads the bounds and the
  // version, and a line the launch need not touch is one PyTorch's work may have evicted.
  // version_: set anew under the unique lock by every change, from a counter of the process
  // (tells this table's cached answers from another table's as well).
  alignas(64) std::atomic<uint64_t> version_;
  std::atomic<uint64_t> lo_{~0ull};
  std::atomic<uint64_t> hi_{0};
  alignas(64) mutable std::shared_mutex mu_;
  std::map<uint64_t, LiveAllocation> by_base_;
  std::shared_ptr<AllocationChangeLog> log_;  // under mu_; null: nothing logged
};

}  // namespace streamrace::tracer
