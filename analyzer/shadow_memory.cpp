// ShadowMemory: interval maps per allocation and the per-access race check.
#include "analyzer/shadow_memory.h"

#include <algorithm>

namespace streamrace::analysis {

namespace {

constexpr uint64_t kImplicitGranule = 2ull << 20;

// Splits the segment that strictly contains `off` into two at `off`.
void split_at(InlineVector<Segment, 2>& segs, uint64_t off) {
  auto it = std::upper_bound(segs.begin(), segs.end(), off, [](uint64_t v, const Segment& s) { return v < s.hi; });
  if (it == segs.end() || it->lo >= off || off >= it->hi) return;
  Segment right = *it;
  it->hi = off;
  right.lo = off;
  segs.insert(it + 1, std::move(right));
}

bool ordered(const VectorClock& vc, const AccessEpoch& e, const AccessEpoch& now) {
  return e.slot == now.slot || vc.covers(e.slot, e.clock);
}

}  // namespace

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kMemcpy: return "memcpy";
    case OpKind::kMemset: return "memset";
    case OpKind::kKernel: return "kernel";
    case OpKind::kNccl: return "nccl";
    case OpKind::kFree: return "free";
    case OpKind::kHost: return "host";
  }
  return "op";
}

void ShadowMemory::allocate(uint64_t base, uint64_t bytes, uint8_t kind, uint64_t seq) {
  bytes = std::min(bytes, ~uint64_t(0) - base);  // a range never wraps past the top of the address space
  if (bytes == 0) return;
  uint64_t end = base + bytes;
  // Drop stale or implicit regions the new allocation covers.
  auto it = allocs_.lower_bound(base);
  if (it != allocs_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.base + prev->second.bytes > base) it = prev;
  }
  while (it != allocs_.end() && it->first < end) it = erase_alloc(it);

  AllocationShadow al;
  al.base = base;
  al.bytes = bytes;
  al.kind = kind;
  al.alloc_seq = seq;
  al.owner = owner_of_region(base >> shard_.region_shift);
  // Inherit what stream-ordered frees left at these addresses (and the worker holding it).
  auto r = retired_.lower_bound(base);
  if (r != retired_.begin()) {
    auto prev = std::prev(r);
    if (prev->second.base + prev->second.bytes > base) r = prev;
  }
  if (r != retired_.end() && r->first < end) al.owner = r->second.owner;
  while (r != retired_.end() && r->first < end) {
    if (r->second.owner != al.owner)
      throw ShardSplitUnsupported("an allocation inherits stream-ordered state held by two workers");
    for (const Segment& s : r->second.segs) {
      uint64_t lo = std::max(s.lo + r->second.base, base), hi = std::min(s.hi + r->second.base, end);
      if (lo >= hi) continue;
      Segment c = s;
      c.lo = lo - base;
      c.hi = hi - base;
      al.segs.push_back(std::move(c));
    }
    r = retired_.erase(r);
  }
  std::sort(al.segs.begin(), al.segs.end(), [](const Segment& a, const Segment& b) { return a.lo < b.lo; });
  insert_alloc(std::move(al));
}

bool ShadowMemory::release(uint64_t base, bool keep_state) {
  auto it = allocs_.find(base);
  if (it == allocs_.end()) {
    const AllocationRange* al = locate(base);
    if (!al || al->kind == 0) return false;
    it = allocs_.find(al->base);
  }
  // Retired even when nothing touched it (in this shard or any other), so every worker
  // keeps the same retired ranges; an empty one hands nothing on.
  if (keep_state) {
    AllocationShadow al = std::move(it->second);
    erase_alloc(it);
    uint64_t end = al.base + al.bytes;
    auto r = retired_.lower_bound(al.base);
    while (r != retired_.end() && r->first < end) r = retired_.erase(r);
    retired_[al.base] = std::move(al);
  } else {
    erase_alloc(it);
  }
  return true;
}

bool ShadowMemory::indexed(const AllocationShadow& al) {
  return ((al.base + al.bytes - 1) >> kPageShift) - (al.base >> kPageShift) < kMaxIndexedPages;
}

uint32_t ShadowMemory::owner_of_region(uint64_t region) const {
  if (shard_.count <= 1) return 0;
  uint64_t h = region;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return uint32_t(h % shard_.count);
}

void ShadowMemory::note_guest(const AllocationShadow& al, int delta) {
  if (shard_.count <= 1 || al.owner != shard_.index) return;
  const uint64_t first = al.base >> shard_.region_shift, last = (al.base + al.bytes - 1) >> shard_.region_shift;
  if (last - first >= kMaxGuestRegions) {
    wide_mine_ += size_t(delta);
    return;
  }
  for (uint64_t region = first; region <= last; ++region) {
    if (owner_of_region(region) == shard_.index) continue;
    uint32_t& n = guest_regions_[region];
    n += uint32_t(delta);
    if (n == 0) guest_regions_.erase(region);
  }
}

const AllocationRange* ShadowMemory::locate(uint64_t addr) {
  if (addr >= last_.base && addr < last_.end) return &last_;
  if (const std::vector<AllocationRange>* page = pages_.find(addr >> kPageShift))
    for (const AllocationRange& e : *page)
      if (addr >= e.base && addr < e.end) {
        last_ = e;
        return &last_;
      }
  if (unindexed_ == 0) return nullptr;
  // Allocations too large for the page index: the tree of disjoint allocations answers.
  auto next = allocs_.upper_bound(addr);
  if (next == allocs_.begin()) return nullptr;
  AllocationShadow& al = std::prev(next)->second;
  if (addr < al.base + al.bytes && !indexed(al)) {
    last_ = AllocationRange{al.base, al.base + al.bytes, &al, al.owner, al.kind};
    return &last_;
  }
  return nullptr;
}

AllocationShadow& ShadowMemory::insert_alloc(AllocationShadow al) {
  auto [it, _] = allocs_.emplace(al.base, std::move(al));
  AllocationShadow* p = &it->second;
  note_guest(*p, +1);
  if (!indexed(*p)) {
    ++unindexed_;
    return *p;
  }
  for (uint64_t page = p->base >> kPageShift; page <= (p->base + p->bytes - 1) >> kPageShift; ++page) {
    auto& v = pages_[page];
    v.insert(std::upper_bound(v.begin(), v.end(), p->base,
                              [](uint64_t base, const AllocationRange& e) { return base < e.base; }),
             AllocationRange{p->base, p->base + p->bytes, p, p->owner, p->kind});
  }
  return *p;
}

std::map<uint64_t, AllocationShadow>::iterator ShadowMemory::erase_alloc(std::map<uint64_t, AllocationShadow>::iterator it) {
  AllocationShadow* p = &it->second;
  note_guest(*p, -1);
  if (last_.shadow == p) last_ = AllocationRange{};
  if (!indexed(*p)) {
    --unindexed_;
    return allocs_.erase(it);
  }
  for (uint64_t page = p->base >> kPageShift; page <= (p->base + p->bytes - 1) >> kPageShift; ++page) {
    std::vector<AllocationRange>* v = pages_.find(page);
    if (!v) continue;
    std::erase_if(*v, [p](const AllocationRange& e) { return e.shadow == p; });
    if (v->empty()) pages_.erase(page);
  }
  return allocs_.erase(it);
}

AllocationShadow& ShadowMemory::implicit_region(uint64_t addr, uint64_t access_end) {
  // Whole granules around the access (one region however long the access: the work per
  // access never grows with the length a trace claims).
  uint64_t base = addr & ~(kImplicitGranule - 1);
  uint64_t last = (access_end - 1) & ~(kImplicitGranule - 1);
  uint64_t end = last > ~uint64_t(0) - kImplicitGranule ? ~uint64_t(0) : last + kImplicitGranule;
  // Never overlap a real allocation: shrink the region to the gap around addr.
  auto next = allocs_.upper_bound(addr);
  if (next != allocs_.end()) end = std::min(end, next->first);
  if (next != allocs_.begin()) {
    auto prev = std::prev(next);
    base = std::max(base, prev->second.base + prev->second.bytes);
  }
  AllocationShadow al;
  al.base = base;
  al.bytes = end - base;
  al.kind = 0;
  al.owner = owner_of_region(base >> shard_.region_shift);
  AllocationShadow& inserted = insert_alloc(std::move(al));
  last_ = AllocationRange{inserted.base, inserted.base + inserted.bytes, &inserted, inserted.owner, inserted.kind};
  return inserted;
}

bool ShadowMemory::access(const AccessEpoch& a, const VectorClock& vc, std::vector<Conflict>& out) {
  uint64_t addr = a.addr, end = a.addr + std::min(a.bytes, ~uint64_t(0) - a.addr);
  if (end <= addr) return false;
  uint32_t piece = 0, first_owner = 0;
  bool mixed = false;
  for (; addr < end; ++piece) {
    const AllocationRange* found = locate(addr);
    AllocationRange r;
    if (found) {
      r = *found;
    } else {
      AllocationShadow& implicit = implicit_region(addr, end);
      r = AllocationRange{implicit.base, implicit.base + implicit.bytes, &implicit, implicit.owner, implicit.kind};
    }
    if (piece == 0) first_owner = r.owner;
    mixed |= r.owner != first_owner;
    const uint64_t stop = std::min(end, r.end);
    if (r.owner == shard_.index) {
      const size_t before = out.size();
      access_in(*r.shadow, addr - r.base, stop - r.base, a, vc, out);
      for (size_t i = before; i < out.size(); ++i) out[i].piece = piece;
    }
    addr = stop;
  }
  return mixed;
}

void ShadowMemory::access_in(AllocationShadow& al, uint64_t lo, uint64_t hi, const AccessEpoch& a,
                             const VectorClock& vc, std::vector<Conflict>& out) {
  auto& segs = al.segs;
  const bool writes = a.write || a.maybe_write;
  // 1. Check against what overlaps.
  auto first = std::upper_bound(segs.begin(), segs.end(), lo, [](uint64_t v, const Segment& s) { return v < s.hi; });
  for (auto it = first; it != segs.end() && it->lo < hi; ++it) {
    uint64_t olo = std::max(it->lo, lo) + al.base, ohi = std::min(it->hi, hi) + al.base;
    if (it->has_write && !ordered(vc, it->write, a)) out.push_back(Conflict{it->write, true, olo, ohi});
    for (const AccessEpoch& r : it->reads) {
      if (ordered(vc, r, a)) continue;
      if (writes || r.maybe_write) out.push_back(Conflict{r, r.maybe_write, olo, ohi});
    }
  }
  // 2. Record it. A read replaces the reads of its kind it is ordered after.
  auto merge_read = [&](Segment& s) {
    s.reads.erase_if([&](const AccessEpoch& r) {
      return r.maybe_write == a.maybe_write && r.inexact == a.inexact && ordered(vc, r, a);
    });
    s.reads.push_back(a);
  };
  // Fast path: one segment exactly covering the range.
  if (first != segs.end() && first->lo == lo && first->hi == hi) {
    Segment& s = *first;
    if (a.write) {
      s.has_write = true;
      s.write = a;
      s.reads.clear();
    } else {
      merge_read(s);
    }
    return;
  }
  split_at(segs, lo);
  split_at(segs, hi);
  auto i = std::lower_bound(segs.begin(), segs.end(), lo, [](const Segment& s, uint64_t v) { return s.lo < v; });
  auto j = i;
  while (j != segs.end() && j->hi <= hi) ++j;
  if (a.write || i == j) {
    // One segment for the range: the first one it held, reused, or a new one.
    if (i == j) {
      i = segs.insert(i, Segment{});
      j = i + 1;
    }
    i->lo = lo;
    i->hi = hi;
    i->has_write = a.write;
    i->reads.clear();
    if (a.write)
      i->write = a;
    else
      i->reads.push_back(a);
    segs.erase(i + 1, j);
    return;
  }
  // A read over the segments [i, j): each keeps its own history. Where they tile the range,
  // in place; otherwise the gaps become segments of their own.
  bool tiled = i->lo == lo && (j - 1)->hi == hi;
  for (auto k = i; tiled && k + 1 != j; ++k) tiled = k->hi == (k + 1)->lo;
  if (tiled) {
    for (auto k = i; k != j; ++k) merge_read(*k);
    return;
  }
  std::vector<Segment>& mid = merged_;
  mid.clear();
  uint64_t cursor = lo;
  for (auto k = i; k != j; ++k) {
    if (k->lo > cursor) {
      Segment gap;
      gap.lo = cursor;
      gap.hi = k->lo;
      gap.reads.push_back(a);
      mid.push_back(std::move(gap));
    }
    Segment s = std::move(*k);
    merge_read(s);
    cursor = s.hi;
    mid.push_back(std::move(s));
  }
  if (cursor < hi) {
    Segment gap;
    gap.lo = cursor;
    gap.hi = hi;
    gap.reads.push_back(a);
    mid.push_back(std::move(gap));
  }
  i = segs.erase(i, j);
  segs.insert_moved(i, mid.data(), mid.data() + mid.size());
}

}  // namespace streamrace::analysis
