// Happens-before rule tests whose programs need C++ (loops, computed values). Every other
// rule's racy program and clean twin is a case: tests/analyzer/cases/<rule>/*.trace with the
// full report it must give (tests/README.md).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using testing::run_program;
using trace::TraceBuilder;

constexpr uint64_t kBytes = 4096;

// --- deduplication: the same race repeated is one finding with a count
TEST(Dedup, RepeatedRaceIsOneFindingWithOccurrences) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    for (int step = 0; step < 5; ++step) {
      t.at("loop.py", 3, "step").memset(a, buf, kBytes);
      t.at("loop.py", 4, "step").memset(b, buf, kBytes);
    }
  });
  ASSERT_EQ(r.findings.size(), 2u);  // B after A, and A (next step) after B
  EXPECT_EQ(r.findings[0].occurrences + r.findings[1].occurrences, 9u);
  EXPECT_NE(r.findings[0].fingerprint, r.findings[1].fingerprint);
}

// --- caching-allocator blocks: a missing record_stream in a training loop is one certain
// use-after-reuse finding per site pair, naming the free; the JSON report keeps it whole.
TEST(AllocatorBlocks, MissingRecordStreamInALoopIsOneCertainUseAfterReuse) {
  auto r = run_program([&](TraceBuilder& t) {
    using trace::BlockAction;
    const uint64_t legacy = trace::legacy_stream(0), side = t.create_stream();
    const uint64_t seg = t.alloc(1 << 20);
    t.allocator_block(BlockAction::kSegmentAlloc, seg, 1 << 20, 0);
    const uint64_t ready = t.create_event();
    for (int step = 0; step < 4; ++step) {
      t.at("train.py", 10, "step").allocator_block(BlockAction::kAlloc, seg, 4000, legacy);
      t.kernel(legacy, "produce", {seg});
      t.record_event(ready, legacy);
      t.wait_event(side, ready);
      t.at("train.py", 12, "step").kernel(side, "consume", {seg});
      t.at("train.py", 14, "step").allocator_block(BlockAction::kFreeRequested, seg, 4000, legacy);
      t.allocator_block(BlockAction::kFreeCompleted, seg, 4000, legacy);
    }
  });
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.kind, analysis::RaceKind::kUseAfterReuse);
  EXPECT_EQ(f.confidence, analysis::Confidence::kCertain);
  EXPECT_EQ(f.occurrences, 3u);  // steps 2, 3 and 4 reuse step 1's, 2's and 3's block
  EXPECT_EQ(f.earlier.op, "consume");
  EXPECT_EQ(f.later.op, "produce");
  EXPECT_EQ(f.overlap_bytes, 4000u);
  EXPECT_EQ(f.later.alloc_kind, "PyTorch caching allocator block");
  EXPECT_EQ(f.later.alloc_bytes, 4000u);
  ASSERT_TRUE(f.released.has_value());
  EXPECT_EQ(f.released->op, "CUDACachingAllocator free_requested");
  ASSERT_EQ(f.released->stack.size(), 1u);
  EXPECT_EQ(f.released->stack[0].line, 14u);
  EXPECT_NE(f.missing_edge.find("freed at train.py:14 in step"), std::string::npos) << f.missing_edge;
  EXPECT_NE(f.fix.find("record_stream"), std::string::npos) << f.fix;

  nlohmann::json j = r;
  auto back = analysis::result_from_json(j);
  ASSERT_EQ(back.findings.size(), 1u);
  EXPECT_EQ(back.findings[0].kind, analysis::RaceKind::kUseAfterReuse);
  ASSERT_TRUE(back.findings[0].released.has_value());
  EXPECT_EQ(back.findings[0].released->seq, f.released->seq);
  EXPECT_EQ(back.findings[0].released->stack[0].line, 14u);
  EXPECT_EQ(back.findings[0].fingerprint, f.fingerprint);
}

// --- host accesses (--host-accesses): a loop refilling one pinned buffer after each copy, with
// the sync in the clean twin; and the bound on copies kept in flight.
TEST(HostAccesses, RefillInALoopIsOneFindingPerSiteAndTheSyncedLoopIsClean) {
  for (bool synced : {false, true}) {
    SCOPED_TRACE(synced ? "synced" : "racy");
    auto r = run_program([&](TraceBuilder& t) {
      uint64_t s = t.create_stream();
      uint64_t host = t.alloc(1 << 16, trace::AllocKind::kHostPinned), dev = t.alloc(1 << 16);
      for (int step = 0; step < 4; ++step) {
        t.at("loader.py", 10, "copy").memcpy(s, dev, host, 1 << 16, trace::CopyKind::kHostToDevice, true,
                                             trace::MemKind::kPinnedHost, trace::MemKind::kDevice);
        if (synced) t.stream_synchronize(s);
        for (uint64_t page = 0; page < 16; ++page) t.at("loader.py", 11, "refill").host_access(host + page * 4096 + 8, trace::AccessDir::kWrite);
      }
    });
    if (synced) {
      EXPECT_TRUE(r.findings.empty());
      continue;
    }
    ASSERT_EQ(r.findings.size(), 1u);
    EXPECT_EQ(r.findings[0].kind, analysis::RaceKind::kHostWriteDuringCopy);
    EXPECT_EQ(r.findings[0].occurrences, 64u);  // 16 pages x 4 steps, one site pair
  }
}

TEST(HostAccesses, CopiesBeyondTheInFlightBoundAreDroppedOldestFirstWithANotice) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t s = t.create_stream();
    uint64_t host = t.alloc(9000 * 64, trace::AllocKind::kHostPinned), dev = t.alloc(64);
    for (uint64_t i = 0; i < 9000; ++i)
      t.at("loader.py", 10, "copy").memcpy(s, dev, host + i * 64, 64, trace::CopyKind::kHostToDevice, true,
                                           trace::MemKind::kPinnedHost, trace::MemKind::kDevice);
    t.at("loader.py", 11, "first").host_access(host + 8, trace::AccessDir::kWrite);  // the oldest copy: dropped
    t.at("loader.py", 12, "last").host_access(host + 8999 * 64 + 8, trace::AccessDir::kWrite);
  });
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].later.stack.at(0).line, 12u);
  bool noticed = false;
  for (const auto& n : r.notices)
    noticed |= n.text.find("async copies to or from pinned host memory were left out of the host-access check") !=
               std::string::npos;
  EXPECT_TRUE(noticed);
}

}  // namespace
}  // namespace streamrace
