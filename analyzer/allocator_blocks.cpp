// AllocatorBlocks: see allocator_blocks.h.
#include "analyzer/allocator_blocks.h"

#include <algorithm>
#include <iterator>

namespace streamrace::analysis {

namespace {

// The entry of a map of disjoint ranges (by start) that holds `addr`, or end().
template <typename Map, typename End>
auto holding(Map& m, uint64_t addr, End end_of) {
  auto it = m.upper_bound(addr);
  if (it == m.begin()) return m.end();
  --it;
  return addr < end_of(it->second, it->first) ? it : m.end();
}

// Removes the parts of ranges in `m` that overlap [lo, hi) (entries are cut, not kept whole).
void erase_overlap(std::map<uint64_t, ReleasedBlock>& m, uint64_t lo, uint64_t hi) {
  auto it = m.upper_bound(lo);
  if (it != m.begin()) --it;
  while (it != m.end() && it->first < hi) {
    ReleasedBlock r = it->second;
    const uint64_t end = r.addr + r.bytes;
    if (end <= lo) {
      ++it;
      continue;
    }
    it = m.erase(it);
    if (r.addr < lo) {
      ReleasedBlock head = r;
      head.bytes = lo - r.addr;
      m.emplace(head.addr, head);
    }
    if (end > hi) {
      ReleasedBlock tail = r;
      tail.addr = hi;
      tail.bytes = end - hi;
      it = m.emplace(tail.addr, tail).first;
      ++it;
    }
  }
}

}  // namespace

void AllocatorBlocks::apply(const trace::AllocatorBlock& b) {
  using trace::BlockAction;
  active_ = true;
  const uint64_t end = b.bytes > ~uint64_t(0) - b.addr ? ~uint64_t(0) : b.addr + b.bytes;
  last_ = nullptr;
  switch (b.action) {
    case BlockAction::kAlloc: {
      if (b.bytes == 0) return;
      // A block the trace never saw released is replaced (events lost before attaching).
      auto it = live_.lower_bound(b.addr);
      if (it != live_.begin() && std::prev(it)->second.addr + std::prev(it)->second.bytes > b.addr) --it;
      while (it != live_.end() && it->first < end) it = live_.erase(it);
      live_[b.addr] = LiveBlock{b.addr, end - b.addr, b.stream, b.call.seq, b.call.stack_id};
      return;
    }
    case BlockAction::kFreeRequested: {
      auto it = live_.find(b.addr);
      if (it == live_.end()) return;
      const LiveBlock blk = it->second;
      live_.erase(it);
      erase_overlap(released_, blk.addr, blk.addr + blk.bytes);
      released_[blk.addr] = ReleasedBlock{blk.addr, blk.bytes, blk.stream, b.call.seq, b.call.stack_id, b.call.thread,
                                          b.call.api_id};
      return;
    }
    case BlockAction::kFreeCompleted:
      return;
    case BlockAction::kSegmentAlloc:
    case BlockAction::kSegmentMap:
      if (b.bytes) segments_[b.addr] = end;
      return;
    case BlockAction::kSegmentFree:
    case BlockAction::kSegmentUnmap: {
      // A segment (or a mapped range of one) gone: nothing of it is live any more.
      auto it = segments_.find(b.addr);
      if (it != segments_.end() && (b.action == BlockAction::kSegmentFree || it->second <= end)) segments_.erase(it);
      for (auto l = live_.lower_bound(b.addr); l != live_.end() && l->first < end;) l = live_.erase(l);
      erase_overlap(released_, b.addr, end);
      return;
    }
  }
}

void AllocatorBlocks::forget(uint64_t base, uint64_t bytes) {
  if (!active_ || bytes == 0) return;
  const uint64_t end = bytes > ~uint64_t(0) - base ? ~uint64_t(0) : base + bytes;
  last_ = nullptr;
  for (auto s = segments_.lower_bound(base); s != segments_.end() && s->first < end;) s = segments_.erase(s);
  for (auto l = live_.lower_bound(base); l != live_.end() && l->first < end;) l = live_.erase(l);
  erase_overlap(released_, base, end);
}

const LiveBlock* AllocatorBlocks::live(uint64_t addr) const {
  if (last_ && addr >= last_->addr && addr - last_->addr < last_->bytes) return last_;
  auto it = holding(live_, addr, [](const LiveBlock& b, uint64_t) { return b.addr + b.bytes; });
  if (it == live_.end()) return nullptr;
  last_ = &it->second;
  return last_;
}

uint64_t AllocatorBlocks::kernel_extent(uint64_t p, uint64_t alloc_end, bool& in_block) const {
  in_block = false;
  const uint64_t to_end = alloc_end - p;
  if (!active_) return to_end;
  if (const LiveBlock* b = live(p)) {
    in_block = true;
    return std::min(to_end, b->addr + b->bytes - p);
  }
  return released(p) ? 0 : to_end;
}

bool AllocatorBlocks::in_segment(uint64_t addr) const {
  return holding(segments_, addr, [](uint64_t end, uint64_t) { return end; }) != segments_.end();
}

uint64_t AllocatorBlocks::next_live_after(uint64_t addr) const {
  auto it = live_.upper_bound(addr);
  return it == live_.end() ? UINT64_MAX : it->first;
}

const ReleasedBlock* AllocatorBlocks::released(uint64_t addr) const {
  auto it = holding(released_, addr, [](const ReleasedBlock& r, uint64_t) { return r.addr + r.bytes; });
  return it == released_.end() ? nullptr : &it->second;
}

}  // namespace streamrace::analysis
