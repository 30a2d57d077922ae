// The trace's host clock (tracer/host_clock.h): clock_gettime by default; with the counter, on
// the same clock within microseconds, never stepping back, and an error caught up, not stepped.
#include "tracer/host_clock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace streamrace::tracer {
namespace {

// A reading lies between two clock_gettime readings around it, give or take `tol` ns.
::testing::AssertionResult on_the_clock(int64_t tol) {
  const uint64_t before = host_clock::clock_ns();
  const uint64_t v = host_clock::now_ns();
  const uint64_t after = host_clock::clock_ns();
  if (int64_t(v - before) >= -tol && int64_t(after - v) >= -tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "reading " << v << " outside [" << before << ", " << after << "] by more than "
                                       << tol << " ns";
}

class HostClock : public ::testing::Test {
 protected:
  void SetUp() override { host_clock::stop(); }
  void TearDown() override { host_clock::stop(); }
  // Starts the counter and waits for its first scale; false where it cannot be used here.
  bool start() {
    if (!host_clock::tsc_usable(&why_)) return false;
    const uint64_t t0 = host_clock::clock_ns();
    host_clock::start_tsc();
    host_clock::adjust();  // too early: no baseline yet
    if (host_clock::clock_ns() - t0 < uint64_t(host_clock::kMinBaselineNs)) {
      EXPECT_FALSE(host_clock::on_tsc());
    }
    usleep(useconds_t(host_clock::kMinBaselineNs / 1000 + 10000));
    host_clock::adjust();
    EXPECT_TRUE(host_clock::on_tsc());
    return true;
  }
  // Readings for `ms`, adjusting every `every_ms`: each on the clock within `tol`, none before
  // the one read before it.
  void follow(int ms, int every_ms, int64_t tol) {
    uint64_t last = 0;
    const uint64_t end = host_clock::clock_ns() + uint64_t(ms) * 1000000;
    uint64_t next_adjust = host_clock::clock_ns() + uint64_t(every_ms) * 1000000;
    while (host_clock::clock_ns() < end) {
      ASSERT_TRUE(on_the_clock(tol));
      for (int i = 0; i < 100; ++i) {
        const uint64_t v = host_clock::now_ns();
        ASSERT_GE(v, last);
        last = v;
      }
      if (host_clock::clock_ns() >= next_adjust) {
        // Read right before and after: a step back at the adjustment is not hidden by time passing.
        const uint64_t before = host_clock::now_ns();
        host_clock::adjust();
        const uint64_t after = host_clock::now_ns();
        ASSERT_GE(after, before);
        last = after;
        next_adjust += uint64_t(every_ms) * 1000000;
      }
      usleep(200);
    }
  }
  std::string why_;
};

TEST_F(HostClock, ReadsClockGettimeUnlessTheCounterIsScaled) {
  EXPECT_FALSE(host_clock::on_tsc());
  EXPECT_TRUE(on_the_clock(0));
  host_clock::adjust();  // not started: nothing changes
  EXPECT_FALSE(host_clock::on_tsc());
}

TEST_F(HostClock, TheCounterStaysOnTheClockWithoutGoingBack) {
  if (!start()) GTEST_SKIP() << "the counter cannot stand in for the clock here: " << why_;
  follow(400, 120, 50000);
}

TEST_F(HostClock, AnErrorIsCaughtUpByRateNotByAStepBack) {
  if (!start()) GTEST_SKIP() << "the counter cannot stand in for the clock here: " << why_;
  // The counter's readings 100 us ahead of the clock: the next scales run slower until they are
  // back on it (within a second or so), without a reading going back.
  static host_clock::Scale ahead;
  ahead = *host_clock::detail::g_scale.load();
  ahead.base_ns += 100000;
  host_clock::detail::g_scale.store(&ahead);
  const uint64_t before = host_clock::clock_ns();
  EXPECT_GT(int64_t(host_clock::now_ns() - before), 90000);  // ahead (a hold-up only adds to it)
  follow(1500, 120, 150000);  // within the error while it is caught up
  follow(200, 120, 40000);    // caught up: the error decays by e in a second (100 us -> ~22)
}

TEST_F(HostClock, ReadingsFarBehindTheClockCatchUpAtOnce) {
  if (!start()) GTEST_SKIP() << "the counter cannot stand in for the clock here: " << why_;
  static host_clock::Scale behind;
  behind = *host_clock::detail::g_scale.load();
  behind.base_ns -= 5000000;  // 5 ms behind: more than a millisecond is not slewed
  host_clock::detail::g_scale.store(&behind);
  const uint64_t v = host_clock::now_ns();
  EXPECT_GT(int64_t(host_clock::clock_ns() - v), 4000000);  // behind (a hold-up only adds to it)
  usleep(110000);  // adjustments are at least 100 ms apart
  host_clock::adjust();
  EXPECT_TRUE(on_the_clock(50000));
  follow(300, 120, 50000);
}

}  // namespace
}  // namespace streamrace::tracer
