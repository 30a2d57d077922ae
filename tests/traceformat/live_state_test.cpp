// LiveState: what the calls left out of a windowed or ring trace leave live, and its snapshot
// (one record per live object, in a fixed order, seqs renumbered).
#include <gtest/gtest.h>

#include <vector>

#include "traceformat/live_state.h"

namespace streamrace::trace {
namespace {

template <FixedRecord R>
void feed(LiveState& s, R r, uint64_t seq) {
  r.call.seq = seq;
  s.observe(RecordView{R::kKind, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&r), sizeof r)});
}

struct Written {
  RecordKind kind;
  uint64_t seq;
  uint64_t key;  // the record's object: stream, event, comm, pointer, block
};

std::vector<Written> snapshot(const LiveState& s, uint64_t first_seq) {
  ChunkBuilder c;
  s.write_snapshot(c, first_seq);
  std::vector<Written> out;
  size_t at = 0;
  auto p = c.payload();
  while (at < p.size()) {
    RecordPrefix rp;
    std::memcpy(&rp, p.data() + at, sizeof rp);
    RecordView v{RecordKind(rp.kind), p.subspan(at + sizeof rp, rp.body_size)};
    uint64_t key = 0;
    std::memcpy(&key, v.body.data() + sizeof(CallInfo), sizeof key);  // the first field after CallInfo
    out.push_back({v.kind, v.as<StreamDestroy>().call.seq, key});
    at += sizeof rp + rp.body_size;
  }
  return out;
}

TEST(LiveState, KeepsWhatIsLiveAndForgetsWhatWasReleased) {
  LiveState s;
  StreamCreate sc{};
  sc.stream = 0x10;
  feed(s, sc, 0);
  sc.stream = 0x11;
  feed(s, sc, 1);
  StreamDestroy sd{};
  sd.stream = 0x11;
  feed(s, sd, 2);
  EventCreate ec{};
  ec.event = 0xE0;
  feed(s, ec, 3);
  EventRecord er{};
  er.event = 0xE0;
  er.stream = 0x10;
  feed(s, er, 4);
  feed(s, er, 5);  // the last record is the one kept
  ec.event = 0xE1;
  feed(s, ec, 6);
  EventDestroy ed{};
  ed.event = 0xE1;
  feed(s, ed, 7);
  NcclCommInit ci{};
  ci.comm = 0xC0;
  feed(s, ci, 8);
  Alloc a{};
  a.ptr = 0x1000;
  a.bytes = 64;
  feed(s, a, 9);
  a.ptr = 0x2000;
  feed(s, a, 10);
  Free f{};
  f.ptr = 0x2000;
  feed(s, f, 11);
  // Expandable segments: an unmap of a range releases every mapping inside it.
  a.kind = AllocKind::kVmmMap;
  for (uint64_t p : {0x9000ull, 0xA000ull, 0xB000ull}) {
    a.ptr = p;
    feed(s, a, 12);
  }
  f.kind = AllocKind::kVmmMap;
  f.ptr = 0x9000;
  f.bytes = 0x2000;
  feed(s, f, 13);
  f.kind = AllocKind::kArray;  // arrays are not tracked: nothing changes
  f.ptr = 0x1000;
  f.bytes = 0;
  feed(s, f, 14);
  AllocatorBlock b{};
  b.addr = 0x1000;
  b.bytes = 64;
  b.action = BlockAction::kSegmentAlloc;
  feed(s, b, 15);
  b.action = BlockAction::kAlloc;
  b.bytes = 16;
  feed(s, b, 16);
  b.action = BlockAction::kFreeRequested;
  feed(s, b, 17);  // free requested, not completed: still live, with its request
  b.addr = 0x1020;
  b.action = BlockAction::kAlloc;
  feed(s, b, 18);
  b.action = BlockAction::kFreeCompleted;
  feed(s, b, 19);
  auto c = s.counts();
  EXPECT_EQ(c.streams, 1u);
  EXPECT_EQ(c.events, 1u);
  EXPECT_EQ(c.comms, 1u);
  EXPECT_EQ(c.allocations, 2u);
  EXPECT_EQ(c.segments, 1u);
  EXPECT_EQ(c.blocks, 1u);
  auto w = snapshot(s, 100);
  std::vector<std::pair<RecordKind, uint64_t>> got;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].seq, 100 + i);
    got.emplace_back(w[i].kind, w[i].key);
  }
  EXPECT_EQ(got, (std::vector<std::pair<RecordKind, uint64_t>>{
                     {RecordKind::kStreamCreate, 0x10},   {RecordKind::kEventCreate, 0xE0},
                     {RecordKind::kEventRecord, 0xE0},    {RecordKind::kNcclCommInit, 0xC0},
                     {RecordKind::kAlloc, 0x1000},        {RecordKind::kAlloc, 0xB000},
                     {RecordKind::kAllocatorBlock, 0x1000}, {RecordKind::kAllocatorBlock, 0x1000},
                     {RecordKind::kAllocatorBlock, 0x1000}}));
}

// The tracer does not record FREE_COMPLETED: a released block stays, with its request, until
// a block handed out overlaps it or its segment goes; a live block a new one overlaps (its
// release lost) goes too.
TEST(LiveState, AReleasedBlockGoesWhenANewBlockOverlapsItOrItsSegmentGoes) {
  LiveState s;
  AllocatorBlock b{};
  auto block = [&](BlockAction a, uint64_t addr, uint64_t bytes, uint64_t seq) {
    b.action = a;
    b.addr = addr;
    b.bytes = bytes;
    feed(s, b, seq);
  };
  block(BlockAction::kSegmentAlloc, 0x10000, 0x10000, 1);
  block(BlockAction::kSegmentAlloc, 0x40000, 0x1000, 2);
  block(BlockAction::kAlloc, 0x10000, 0x100, 3);
  block(BlockAction::kFreeRequested, 0x10000, 0x100, 4);  // released, never completed
  block(BlockAction::kAlloc, 0x10100, 0x100, 5);
  block(BlockAction::kFreeRequested, 0x10100, 0x100, 6);
  block(BlockAction::kAlloc, 0x10200, 0x100, 7);          // live
  block(BlockAction::kAlloc, 0x40000, 0x80, 8);
  block(BlockAction::kFreeRequested, 0x40000, 0x80, 9);
  EXPECT_EQ(s.counts().blocks, 4u);
  EXPECT_EQ(snapshot(s, 0).size(), 2u + 7u);  // two segments; three released blocks with their requests, one live
  block(BlockAction::kAlloc, 0x10080, 0x100, 10);         // reaches into both released blocks
  EXPECT_EQ(s.counts().blocks, 3u);
  block(BlockAction::kSegmentFree, 0x40000, 0x1000, 11);  // its released block goes with it
  EXPECT_EQ(s.counts().blocks, 2u);
  block(BlockAction::kAlloc, 0x10200, 0x40, 12);          // over a live block (its release lost)
  EXPECT_EQ(s.counts().segments, 1u);
  EXPECT_EQ(s.counts().blocks, 2u);
  auto w = snapshot(s, 0);  // the segment, then the two live blocks
  std::vector<std::pair<RecordKind, uint64_t>> got;
  for (const auto& r : w) got.emplace_back(r.kind, r.key);
  EXPECT_EQ(got, (std::vector<std::pair<RecordKind, uint64_t>>{{RecordKind::kAllocatorBlock, 0x10000},
                                                               {RecordKind::kAllocatorBlock, 0x10080},
                                                               {RecordKind::kAllocatorBlock, 0x10200}}));
}

// A snapshot larger than a chunk should hold is handed out in pieces.
TEST(LiveState, LargeSnapshotsComeInChunksOfAtMost8MiB) {
  LiveState s;
  constexpr uint64_t kAllocs = 200'000;  // 68 bytes each: 13.6 MB
  Alloc a{};
  a.bytes = 16;
  for (uint64_t i = 0; i < kAllocs; ++i) {
    a.ptr = 0x10000 + i * 16;
    feed(s, a, i);
  }
  ChunkBuilder c;
  size_t pieces = 0, records = 0;
  const uint64_t n = s.write_snapshot(c, 0, [&](ChunkBuilder& full) {
    EXPECT_LE(full.bytes(), (8u << 20) + 128);
    ++pieces;
    records += full.records();
    full.clear();
  });
  records += c.records();
  EXPECT_EQ(n, kAllocs);
  EXPECT_EQ(records, kAllocs);
  EXPECT_EQ(pieces, 1u);
}

}  // namespace
}  // namespace streamrace::trace
