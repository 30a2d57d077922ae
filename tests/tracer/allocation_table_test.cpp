// AllocationTable: lookups, and the per-thread cache in front of them never answering from
// a table state that has changed (erase, insert over a freed range, unmapped ranges, another
// table, another thread), including its cached "none" answers (holes between allocations).
#include <gtest/gtest.h>

#include <thread>

#include "tracer/allocation_table.h"

namespace streamrace::tracer {
namespace {

LiveAllocation dev(uint64_t base, uint64_t bytes, uint32_t device = 0) {
  return LiveAllocation{base, bytes, trace::AllocKind::kDevice, device};
}

TEST(AllocationTable, FindsTheAllocationHoldingAnAddressAndNothingOutside) {
  AllocationTable t;
  t.insert(dev(0x10000, 0x1000));
  t.insert(dev(0x20000, 0x100));
  for (int pass = 0; pass < 2; ++pass) {  // the second pass is answered from the cache
    ASSERT_TRUE(t.find(0x10000).has_value());
    EXPECT_EQ(t.find(0x10fff)->base, 0x10000u);
    EXPECT_FALSE(t.find(0x11000).has_value());
    EXPECT_FALSE(t.find(0xffff).has_value());
    EXPECT_EQ(t.find(0x200ff)->base, 0x20000u);
    EXPECT_FALSE(t.find(0x20100).has_value());
  }
}

TEST(AllocationTable, AnEraseIsSeenAtOnceThoughTheAnswerWasCached) {
  AllocationTable t;
  t.insert(dev(0x7000'0000, 1 << 20));
  ASSERT_TRUE(t.find(0x7000'0100).has_value());
  ASSERT_TRUE(t.find(0x7000'0100).has_value());
  ASSERT_TRUE(t.erase(0x7000'0000).has_value());
  EXPECT_FALSE(t.find(0x7000'0100).has_value());
  // The same bytes handed out again, smaller and on another device.
  t.insert(dev(0x7000'0000, 0x80, 3));
  ASSERT_TRUE(t.find(0x7000'0040).has_value());
  EXPECT_EQ(t.find(0x7000'0040)->device, 3u);
  EXPECT_FALSE(t.find(0x7000'0100).has_value());
  t.erase_range(0x7000'0000, 0x1000);
  EXPECT_FALSE(t.find(0x7000'0040).has_value());
}

TEST(AllocationTable, TwoTablesInOneThreadKeepTheirOwnAnswers) {
  auto a = std::make_unique<AllocationTable>();
  a->insert(dev(0x9000'0000, 0x1000, 1));
  ASSERT_EQ(a->find(0x9000'0010)->device, 1u);
  a.reset();
  AllocationTable b;  // may well live where `a` did
  EXPECT_FALSE(b.find(0x9000'0010).has_value());
  b.insert(dev(0x9000'0000, 0x1000, 2));
  EXPECT_EQ(b.find(0x9000'0010)->device, 2u);
}

// The cache is direct-mapped by 2 MiB granule (4096 slots): addresses 8 GiB apart share a
// slot, and one allocation spans many granules. Each lookup still gets its own answer, kind
// and device included, whichever address filled the slot before.
TEST(AllocationTable, AddressesSharingACacheSlotGetTheirOwnAnswers) {
  AllocationTable t;
  constexpr uint64_t kApart = 4096ull << 21;
  t.insert(LiveAllocation{0x7000'0000'0000, 0x1000, trace::AllocKind::kManaged, 1});
  t.insert(LiveAllocation{0x7000'0000'0000 + kApart, 0x1000, trace::AllocKind::kHostPinned, 2});
  t.insert(LiveAllocation{0x7100'0000'0000, 64ull << 21, trace::AllocKind::kDevice, 3});  // 64 granules
  for (int pass = 0; pass < 3; ++pass) {
    auto a = t.find(0x7000'0000'0010);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->kind, trace::AllocKind::kManaged);
    EXPECT_EQ(a->device, 1u);
    auto b = t.find(0x7000'0000'0010 + kApart);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->base, 0x7000'0000'0000 + kApart);
    EXPECT_EQ(b->kind, trace::AllocKind::kHostPinned);
    EXPECT_EQ(b->device, 2u);
    EXPECT_FALSE(t.find(0x7000'0000'1000).has_value());          // past the first, same slot
    EXPECT_FALSE(t.find(0x7000'0000'1000 + kApart).has_value());  // a hole cached, then the other
    for (uint64_t g = 0; g < 64; ++g) {
      auto c = t.find(0x7100'0000'0000 + (g << 21) + 8);
      ASSERT_TRUE(c.has_value());
      EXPECT_EQ(c->base, 0x7100'0000'0000u);
      EXPECT_EQ(c->bytes, 64ull << 21);
      EXPECT_EQ(c->device, 3u);
    }
    EXPECT_FALSE(t.find(0x7100'0000'0000 + (64ull << 21)).has_value());
  }
}

TEST(AllocationTable, AnotherThreadsEraseReachesThisThreadsCache) {
  AllocationTable t;
  t.insert(dev(0x5000'0000, 0x1000));
  ASSERT_TRUE(t.find(0x5000'0010).has_value());
  std::thread([&] {
    ASSERT_TRUE(t.find(0x5000'0010).has_value());
    t.erase(0x5000'0000);
  }).join();
  EXPECT_FALSE(t.find(0x5000'0010).has_value());
}

// A word that points between allocations is answered from the thread's cache the next time
// (a hole): every address of the gap gets "none", both neighbours are still found, in the same
// 2 MiB granule as the hole, and from either side of it.
TEST(AllocationTable, AHoleBetweenAllocationsAnswersNoneAndKeepsItsNeighbours) {
  AllocationTable t;
  t.insert(dev(0x4000'0000, 0x1000));
  t.insert(dev(0x4000'3000, 0x1000));
  for (int pass = 0; pass < 3; ++pass) {
    EXPECT_FALSE(t.find(0x4000'2000).has_value());  // the hole [0x4000'1000, 0x4000'3000)
    EXPECT_FALSE(t.find(0x4000'1000).has_value());
    EXPECT_FALSE(t.find(0x4000'2fff).has_value());
    ASSERT_TRUE(t.find(0x4000'0fff).has_value());
    EXPECT_EQ(t.find(0x4000'0fff)->base, 0x4000'0000u);
    ASSERT_TRUE(t.find(0x4000'3000).has_value());
    EXPECT_EQ(t.find(0x4000'3000)->base, 0x4000'3000u);
    EXPECT_FALSE(t.find(0x4000'4000).has_value());  // above the last one: a hole up to the top
    EXPECT_FALSE(t.find(0x3fff'ffff).has_value());  // below the first one, outside the bounds
  }
}

// A size whose end would pass 2^64 ends at the top of the address space: the allocation holds
// the addresses above its base, and the holes below it stay below it (a wrapped end would have
// made a hole reach down over an allocation of the same granule).
TEST(AllocationTable, ASizePastTheTopOfTheAddressSpaceEndsThere) {
  AllocationTable t;
  t.insert(dev(0x4000'0100, 0x100));
  t.insert(dev(0x4000'1000, ~0ull - 0xf7f));
  t.insert(dev(0x4000'3000, 0x100));
  ASSERT_TRUE(t.find(0x4000'0150).has_value());
  EXPECT_EQ(t.find(0x4000'2000)->base, 0x4000'1000u);
  EXPECT_FALSE(t.find(0x4000'0800).has_value());  // the hole [0x4000'0200, 0x4000'1000)
  ASSERT_TRUE(t.find(0x4000'0150).has_value());
  EXPECT_EQ(t.find(0x4000'0150)->base, 0x4000'0100u);
}

// An allocation made inside a hole some thread had cached is found at once, by that thread and
// by another; a hole below the lowest allocation, once the bounds include it, too.
TEST(AllocationTable, AnInsertIntoACachedHoleIsSeenAtOnce) {
  AllocationTable t;
  t.insert(dev(0x6000'0000, 0x1000));
  t.insert(dev(0x6100'0000, 0x1000));
  ASSERT_FALSE(t.find(0x6080'0000).has_value());
  ASSERT_FALSE(t.find(0x6080'0000).has_value());  // from the cache
  t.insert(dev(0x6080'0000, 0x100, 5));
  ASSERT_TRUE(t.find(0x6080'0010).has_value());
  EXPECT_EQ(t.find(0x6080'0010)->device, 5u);
  EXPECT_FALSE(t.find(0x6080'0100).has_value());  // the new hole above it
  std::thread([&] {
    ASSERT_TRUE(t.find(0x6080'0010).has_value());
    EXPECT_FALSE(t.find(0x6080'0200).has_value());
    t.erase(0x6080'0000);
  }).join();
  EXPECT_FALSE(t.find(0x6080'0010).has_value());
}

}  // namespace
}  // namespace streamrace::tracer
