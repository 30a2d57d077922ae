// NativeUnwinder: the learned walk must give exactly the reference (DWARF) walk's return
// addresses, for frames with and without frame pointers, variable-size (alloca) and large
// frames, at many depths and on several threads, and it must actually be used once learned.
#include "tracer/native_unwind.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace shapes_fp {
int plain(int, void (*)(void*), void*);
int with_alloca(int, size_t, void (*)(void*), void*);
int big_frame(int, void (*)(void*), void*);
int mixed(int, void (*)(void*), void*);
}  // namespace shapes_fp
namespace shapes_nofp {
int plain(int, void (*)(void*), void*);
int with_alloca(int, size_t, void (*)(void*), void*);
int big_frame(int, void (*)(void*), void*);
int mixed(int, void (*)(void*), void*);
}  // namespace shapes_nofp

namespace streamrace::tracer {
namespace {

struct Probe {
  size_t compared = 0;
  size_t differences = 0;
  size_t max = 32;
};

// Both walks from the same call instruction, so the return addresses can be compared whole.
__attribute__((noinline)) void both_walks(void* arg) {
  auto* p = static_cast<Probe*>(arg);
  uint64_t pcs[2][64];
  size_t n[2];
  for (volatile int i = 0; i < 2; i = i + 1) {  // one call instruction for both (no unrolling)
    NativeUnwinder u;
    const int k = i;
    n[k] = u.capture(pcs[k], p->max, nullptr, nullptr, /*fast=*/k == 1);
  }
  ++p->compared;
  if (n[0] != n[1] || std::vector<uint64_t>(pcs[0], pcs[0] + n[0]) != std::vector<uint64_t>(pcs[1], pcs[1] + n[1]))
  {
    if (p->differences++ < 2) {
      fprintf(stderr, "n %zu vs %zu\n", n[0], n[1]);
      for (size_t k = 0; k < 8 && (k < n[0] || k < n[1]); ++k)
        fprintf(stderr, "  %zx %zx\n", k < n[0] ? size_t(pcs[0][k]) : 0, k < n[1] ? size_t(pcs[1][k]) : 0);
    }
  }
}

void run_shapes(Probe& p, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (int depth : {0, 1, 3, 7, 12, 20, 31, 40}) {
      shapes_fp::plain(depth, both_walks, &p);
      shapes_nofp::plain(depth, both_walks, &p);
      shapes_fp::with_alloca(depth % 10, 16 + 8 * r, both_walks, &p);
      shapes_nofp::with_alloca(depth % 10, 24 + 8 * r, both_walks, &p);
      shapes_fp::big_frame(depth % 6, both_walks, &p);
      shapes_nofp::big_frame(depth % 6, both_walks, &p);
      shapes_fp::mixed(depth, both_walks, &p);
      shapes_nofp::mixed(depth, both_walks, &p);
    }
  }
}

TEST(NativeUnwinder, LearnedWalkEqualsTheReferenceWalk) {
  const auto before = NativeUnwinder::counts();
  Probe p;
  run_shapes(p, 40);
  EXPECT_EQ(p.compared, 40u * 8 * 8);
  EXPECT_EQ(p.differences, 0u);
  const auto after = NativeUnwinder::counts();
  EXPECT_EQ(after.mismatches, before.mismatches);
  EXPECT_TRUE(NativeUnwinder::fast_path_on());
#if defined(__x86_64__)
  // Each call site is learned after two reference walks; the rest are fast.
  EXPECT_GT(after.fast - before.fast, p.compared / 2);
#endif
}

TEST(NativeUnwinder, ShortLimitsAndThreadsAgreeToo) {
  Probe shallow;
  shallow.max = 3;
  run_shapes(shallow, 5);
  EXPECT_EQ(shallow.differences, 0u);
  std::vector<Probe> probes(4);
  std::vector<std::thread> threads;
  for (auto& p : probes) threads.emplace_back([&p] { run_shapes(p, 10); });
  for (auto& t : threads) t.join();
  for (auto& p : probes) {
    EXPECT_EQ(p.compared, 10u * 8 * 8);
    EXPECT_EQ(p.differences, 0u);
  }
  EXPECT_EQ(NativeUnwinder::counts().mismatches, 0u);
}

}  // namespace
}  // namespace streamrace::tracer
