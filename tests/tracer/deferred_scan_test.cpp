// DeferredScan (tracer/deferred_scan.h) on deferred launch records made by hand: each launch
// scanned against the allocation table as it was at the launch's version, also when the launch
// reaches the scanner after later changes were replayed; a launch older than the changes kept
// is scanned against a later table and reported. And the recorder without a scanner.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/tracer/trace_contents.h"
#include "tracer/deferred_scan.h"
#include "tracer/thread_state.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace streamrace::tracer {
namespace {

// A deferred record's body: one parameter of `words.size()` words, scanned whole.
std::vector<uint8_t> deferred_body(uint64_t version, const std::vector<uint64_t>& words, uint64_t correlation) {
  trace::KernelLaunchHead h{};
  h.correlation = correlation;
  h.grid[0] = h.grid[1] = h.grid[2] = 1;
  DeferredLaunchTail t;
  t.version = version;
  t.nparams = 1;
  t.nwords = uint32_t(1 + words.size());
  std::vector<uint8_t> body(sizeof(h) + sizeof(t) + t.nwords * sizeof(uint64_t));
  std::memcpy(body.data(), &h, sizeof(h));
  std::memcpy(body.data() + sizeof(h), &t, sizeof(t));
  const uint64_t size = words.size() * sizeof(uint64_t);
  std::memcpy(body.data() + sizeof(h) + sizeof(t), &size, sizeof(size));
  std::memcpy(body.data() + sizeof(h) + sizeof(t) + 8, words.data(), size);
  return body;
}

struct Resolved {
  trace::KernelLaunchHead head;
  std::vector<uint64_t> tail;
};

std::vector<Resolved> resolve(DeferredScan& scan, const std::vector<std::vector<uint8_t>>& bodies) {
  std::vector<DeferredResolver::Item> items;
  for (const auto& b : bodies) items.push_back({b.data(), uint32_t(b.size())});
  std::vector<uint8_t> out;
  scan.resolve(items, out, false);
  std::vector<Resolved> r;
  for (const auto& item : items) {
    EXPECT_GE(item.out_size, sizeof(trace::KernelLaunchHead));
    Resolved one;
    std::memcpy(&one.head, out.data() + item.out_offset, sizeof(one.head));
    one.tail.resize((item.out_size - sizeof(one.head)) / 8);
    std::memcpy(one.tail.data(), out.data() + item.out_offset + sizeof(one.head), one.tail.size() * 8);
    r.push_back(one);
  }
  return r;
}

// The arguments' hash the launching thread's scan gives: XXH3 of the size word and the
// words, each pointer replaced by its mark (0x5A17 << 48 plus its index).
uint64_t hash_of(std::vector<uint64_t> words) {
  words.insert(words.begin(), words.size() * 8);
  return XXH3_64bits(words.data(), words.size() * 8);
}
constexpr uint64_t kMark = 0x5A17'0000'0000'0000ull;

TEST(DeferredScan, ALaunchIsScannedAgainstTheTableAtItsVersionEvenAfterLaterChanges) {
  AllocationTable table;
  const uint64_t x = 0x7000'0000, y = 0x7100'0000;
  table.insert({x, 4096, trace::AllocKind::kDevice, 0});  // before the log: its seed
  DeferredScan scan(table.start_change_log());
  const uint64_t v1 = table.version();  // x live
  table.erase(x);
  table.insert({y, 4096, trace::AllocKind::kDevice, 0});
  const uint64_t v3 = table.version();  // y live, x gone
  const std::vector<uint64_t> words{x + 16, y + 32, 77};
  // In one drain, out of version order: each gets its own version's table.
  auto both = resolve(scan, {deferred_body(v3, words, 1), deferred_body(v1, words, 2)});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].head.nptrs, 1u);
  EXPECT_EQ(both[0].tail, (std::vector<uint64_t>{y + 32, hash_of({x + 16, kMark + 0, 77})}));
  EXPECT_EQ(both[1].head.nptrs, 1u);
  EXPECT_EQ(both[1].tail, (std::vector<uint64_t>{x + 16, hash_of({kMark + 0, y + 32, 77})}));
  EXPECT_EQ(both[1].head.flags, uint32_t(trace::kKernelArgsScanned) | uint32_t(trace::kKernelArgsHash2));
  EXPECT_EQ(scan.rebuilt(), 0u);  // replayed forwards
  // A later drain brings a launch of v1 after v3's changes were replayed: the table rebuilt at v1.
  auto late = resolve(scan, {deferred_body(v1, words, 3)});
  EXPECT_EQ(late[0].tail, both[1].tail);
  EXPECT_EQ(scan.rebuilt(), 1u);
  EXPECT_EQ(scan.inexact(), 0u);
  EXPECT_EQ(scan.take_notice(), "");
  EXPECT_EQ(scan.resolved(), 3u);
}

TEST(DeferredScan, ALaunchOlderThanTheChangesKeptIsScannedAgainstALaterTableAndReported) {
  AllocationTable table;
  const uint64_t x = 0x7000'0000, z = 0x7200'0000;
  DeferredScan scan(table.start_change_log());
  table.insert({x, 4096, trace::AllocKind::kDevice, 0});
  const uint64_t v1 = table.version();
  // More changes than are kept, replayed by a drain.
  for (size_t i = 0; i < DeferredScan::kHistory / 2 + 1; ++i) {
    table.insert({z, 4096, trace::AllocKind::kDevice, 0});
    table.erase(z);
  }
  table.erase(x);
  const std::vector<uint64_t> words{x + 8};
  auto now = resolve(scan, {deferred_body(table.version(), words, 1)});
  EXPECT_EQ(now[0].head.nptrs, 0u);
  auto old = resolve(scan, {deferred_body(v1, words, 2)});
  EXPECT_EQ(old[0].head.nptrs, 0u);  // x was live at v1, but that table cannot be rebuilt
  EXPECT_EQ(scan.inexact(), 1u);
  EXPECT_EQ(scan.take_notice(),
            "1 kernel launches' arguments were scanned against the allocation table of a later moment than "
            "theirs (their changes were no longer kept): a pointer into memory allocated or freed just then "
            "may be missing or extra");
  EXPECT_EQ(scan.take_notice(), "");  // reported once
}

// Late launches of one drain at two versions: the table rebuilt once, then rolled forwards.
TEST(DeferredScan, LateLaunchesAtTwoVersionsAreEachScannedAtTheirOwn) {
  AllocationTable table;
  const uint64_t x = 0x7000'0000, y = 0x7100'0000, z = 0x7200'0000;
  DeferredScan scan(table.start_change_log());
  table.insert({x, 4096, trace::AllocKind::kDevice, 0});
  const uint64_t v1 = table.version();  // x
  table.insert({y, 4096, trace::AllocKind::kDevice, 0});
  const uint64_t v2 = table.version();  // x, y
  table.erase(x);
  table.insert({z, 4096, trace::AllocKind::kDevice, 0});
  const std::vector<uint64_t> words{x, y, z};
  auto now = resolve(scan, {deferred_body(table.version(), words, 1)});  // y, z: every change replayed
  EXPECT_EQ(now[0].tail, (std::vector<uint64_t>{y, z, hash_of({x, kMark + 0, kMark + 1})}));
  auto late = resolve(scan, {deferred_body(v2, words, 3), deferred_body(v1, words, 2)});
  EXPECT_EQ(late[0].tail, (std::vector<uint64_t>{x, y, hash_of({kMark + 0, kMark + 1, z})}));
  EXPECT_EQ(late[1].tail, (std::vector<uint64_t>{x, hash_of({kMark + 0, y, z})}));
  EXPECT_EQ(scan.rebuilt(), 2u);
  EXPECT_EQ(scan.inexact(), 0u);
}

// A launch older than the scanner's log (it read the table before the log began), and one of a
// log another reader's start_change_log() cut off, cannot be scanned at their version: counted.
TEST(DeferredScan, LaunchesBeforeTheLogOrAfterItWasSupersededAreCountedInexact) {
  AllocationTable table;
  const uint64_t x = 0x7000'0000, y = 0x7100'0000;
  table.insert({x, 4096, trace::AllocKind::kDevice, 0});
  const uint64_t before = table.version();
  table.insert({y, 4096, trace::AllocKind::kDevice, 0});
  DeferredScan scan(table.start_change_log());
  auto old = resolve(scan, {deferred_body(before, {x, y}, 1)});
  EXPECT_EQ(old[0].head.nptrs, 2u);  // the table at the log's start
  EXPECT_EQ(scan.inexact(), 1u);
  auto other = table.start_change_log();  // a second reader: this scanner's log gets no more
  table.erase(y);
  auto after = resolve(scan, {deferred_body(table.version(), {x, y}, 2)});
  EXPECT_EQ(scan.inexact(), 2u);
  EXPECT_NE(scan.take_notice(), "");
  EXPECT_EQ(other->size(), 3u);  // its seeds (x, y) and y's erase, taken by no one yet
}

// A record that is not what a launching thread writes (a count that disagrees with its size)
// becomes nothing, not a launch with made-up pointers, and the trace says a launch was dropped.
TEST(DeferredScan, AMalformedDeferredRecordBecomesNoLaunch) {
  AllocationTable table;
  DeferredScan scan(table.start_change_log());
  auto body = deferred_body(table.version(), {1, 2, 3}, 1);
  body.resize(body.size() - 8);
  std::vector<DeferredResolver::Item> items{{body.data(), uint32_t(body.size())}};
  std::vector<uint8_t> out;
  scan.resolve(items, out, false);
  EXPECT_EQ(items[0].out_size, 0u);
  EXPECT_EQ(scan.resolved(), 0u);
  EXPECT_EQ(scan.take_notice(),
            "1 kernel launches dropped: their deferred argument scan could not be read (please report this)");
}

// Without a scanner, a deferred record is dropped, and the trace says how many were.
TEST(DeferredScan, ARecorderWithoutAScannerDropsDeferredLaunchesAndSaysSo) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("sr_deferred_" + std::to_string(getpid()) + ".srace")).string();
  {
    RecorderOptions o;
    o.path = path;
    o.background_flusher = false;
    TraceRecorder rec(o);
    thread_state() = TracerThreadState{};
    trace::KernelLaunchHead h{};
    auto body = deferred_body(1, {5}, 1);
    std::vector<uint64_t> tail((body.size() - sizeof(h)) / 8);
    std::memcpy(tail.data(), body.data() + sizeof(h), tail.size() * 8);
    rec.add_deferred_kernel(thread_state(), h, 0, 0, tail);
    rec.close();
  }
  auto t = testing::read_trace(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(t.of(trace::RecordKind::kKernelLaunch).empty());
  auto notices = t.of(trace::RecordKind::kNotice);  // the file made for it alone
  ASSERT_EQ(notices.size(), 1u);
  auto text = [](const testing::RecordCopy& r) {
    return std::string(reinterpret_cast<const char*>(r.body.data()) + sizeof(trace::NoticeLevel),
                       r.body.size() - sizeof(trace::NoticeLevel));
  };
  EXPECT_EQ(text(notices[0]), "1 kernel launches dropped: their argument scan had no one to finish it");
}

}  // namespace
}  // namespace streamrace::tracer
