// LiveState: see live_state.h.
#include "traceformat/live_state.h"

namespace streamrace::trace {

namespace {

// Erases every entry whose key lies in [begin, begin + bytes) (an unmap of a range).
template <typename Map>
void erase_range(Map& m, uint64_t begin, uint64_t bytes) {
  const uint64_t end = begin + bytes < begin ? ~0ull : begin + bytes;
  m.erase(m.lower_bound(begin), m.lower_bound(end));
}

}  // namespace

void LiveState::observe(const RecordView& r) {
  if (r.body.size() < sizeof(CallInfo)) return;
  switch (r.kind) {
    case RecordKind::kStreamCreate: {
      auto c = r.as<StreamCreate>();
      streams_[c.stream] = c;
      break;
    }
    case RecordKind::kStreamDestroy:
      streams_.erase(r.as<StreamDestroy>().stream);
      break;
    case RecordKind::kEventCreate: {
      auto c = r.as<EventCreate>();
      Event& e = events_[c.event];
      e = Event{};  // a handle reused after destroy starts over
      e.created = true;
      e.create = c;
      break;
    }
    case RecordKind::kEventDestroy:
      events_.erase(r.as<EventDestroy>().event);
      break;
    case RecordKind::kEventRecord: {
      auto rec = r.as<EventRecord>();
      Event& e = events_[rec.event];
      e.recorded = true;
      e.last = rec;
      break;
    }
    case RecordKind::kNcclCommInit: {
      auto c = r.as<NcclCommInit>();
      comms_[c.comm] = c;
      break;
    }
    case RecordKind::kAlloc: {
      auto a = r.as<Alloc>();
      allocs_[a.ptr] = a;
      break;
    }
    case RecordKind::kFree: {
      auto f = r.as<Free>();
      if (f.kind == AllocKind::kArray) break;  // arrays are not tracked
      if (f.kind == AllocKind::kVmmMap && f.bytes != 0)
        erase_range(allocs_, f.ptr, f.bytes);
      else
        allocs_.erase(f.ptr);
      break;
    }
    case RecordKind::kAllocatorBlock: {
      auto b = r.as<AllocatorBlock>();
      switch (b.action) {
        case BlockAction::kAlloc:
          // A block handed out reuses whatever it overlaps: a released block whose free was
          // never completed in the trace (the tracer does not record FREE_COMPLETED), or one
          // whose release was lost.
          erase_blocks(b.addr, b.bytes);
          blocks_[b.addr] = Block{b, false, {}};
          break;
        case BlockAction::kFreeRequested:
          if (auto it = blocks_.find(b.addr); it != blocks_.end()) {
            it->second.free_requested = true;
            it->second.free_request = b;
          }
          break;
        case BlockAction::kFreeCompleted:
          blocks_.erase(b.addr);
          break;
        case BlockAction::kSegmentAlloc:
        case BlockAction::kSegmentMap:
          segments_[b.addr] = b;
          break;
        case BlockAction::kSegmentFree:
          segments_.erase(b.addr);
          erase_blocks(b.addr, b.bytes);
          break;
        case BlockAction::kSegmentUnmap:
          erase_range(segments_, b.addr, b.bytes);
          erase_blocks(b.addr, b.bytes);
          break;
      }
      break;
    }
    default:
      break;
  }
}

void LiveState::erase_blocks(uint64_t addr, uint64_t bytes) {
  if (bytes == 0) return;
  const uint64_t end = bytes > ~uint64_t(0) - addr ? ~uint64_t(0) : addr + bytes;
  auto it = blocks_.lower_bound(addr);
  if (it != blocks_.begin()) {
    auto before = std::prev(it);
    const AllocatorBlock& a = before->second.alloc;
    if (a.bytes > addr - a.addr) it = before;  // it reaches into [addr, end)
  }
  while (it != blocks_.end() && it->first < end) it = blocks_.erase(it);
}

uint64_t LiveState::write_snapshot(ChunkBuilder& out, uint64_t first_seq,
                                   const std::function<void(ChunkBuilder&)>& full) const {
  uint64_t seq = first_seq;
  auto put = [&](auto rec) {
    rec.call.seq = seq++;
    out.add(rec);
    if (full && out.bytes() > (8u << 20)) full(out);
  };
  for (const auto& [h, s] : streams_) put(s);
  for (const auto& [h, e] : events_) {
    if (e.created) put(e.create);
    if (e.recorded) put(e.last);
  }
  for (const auto& [h, c] : comms_) put(c);
  for (const auto& [p, a] : allocs_) put(a);
  for (const auto& [p, s] : segments_) put(s);
  for (const auto& [p, b] : blocks_) {
    put(b.alloc);
    if (b.free_requested) put(b.free_request);
  }
  return seq - first_seq;
}

LiveStateCounts LiveState::counts() const {
  LiveStateCounts c;
  c.streams = streams_.size();
  c.events = events_.size();
  c.comms = comms_.size();
  c.allocations = allocs_.size();
  c.segments = segments_.size();
  c.blocks = blocks_.size();
  return c;
}

}  // namespace streamrace::trace
