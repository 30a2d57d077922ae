// AllocationTable: see allocation_table.h.
#include "tracer/allocation_table.h"

#include <atomic>
#include <mutex>

namespace streamrace::tracer {

void AllocationTable::insert(const LiveAllocation& a) {
  if (a.bytes == 0) return;
  std::unique_lock lock(mu_);
  by_base_[a.base] = a;
  if (a.base < lo_.load()) lo_.store(a.base);
  if (a.base + a.bytes > hi_.load()) hi_.store(a.base + a.bytes);
}

std::optional<LiveAllocation> AllocationTable::erase(uint64_t base) {
  std::unique_lock lock(mu_);
  auto it = by_base_.find(base);
  if (it == by_base_.end()) return std::nullopt;
  LiveAllocation a = it->second;
  by_base_.erase(it);
  return a;
}

void AllocationTable::erase_range(uint64_t base, uint64_t bytes) {
  std::unique_lock lock(mu_);
  auto it = by_base_.lower_bound(base);
  while (it != by_base_.end() && it->first < base + bytes) it = by_base_.erase(it);
}

std::optional<LiveAllocation> AllocationTable::find(uint64_t addr) const {
  if (!maybe_contains(addr)) return std::nullopt;
  std::shared_lock lock(mu_);
  auto it = by_base_.upper_bound(addr);
  if (it == by_base_.begin()) return std::nullopt;
  --it;
  if (addr < it->second.base + it->second.bytes) return it->second;
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
