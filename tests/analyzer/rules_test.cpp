// Happens-before rule tests whose programs need C++ (loops, computed values). Every other
// rule's racy program and clean twin is a case: tests/analyzer/cases/<rule>/*.trace with the
// full report it must give (tests/README.md).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace streamrace
