// tracer/wide_words.h: the AVX2 loops give the baseline's answers (where this CPU has AVX2).
#include "tracer/wide_words.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace streamrace::tracer::wide {
namespace {

// Words in and around [lo, lo + span) at every position of runs of every length up to 40, so
// each vector lane, the 8-word turn and the scalar tail all see the first hit.
TEST(WideWords, NextInSpanFindsTheFirstWordInsideAsTheBaselineDoes) {
  const uint64_t lo = 0x7f00'0000'0000ull, span = 0x1000'0000ull;
  const uint64_t probes[] = {lo, lo + span - 1, lo + 12345};
  const uint64_t misses[] = {0, 1, lo - 1, lo + span, ~uint64_t(0), uint64_t(1) << 63, (uint64_t(1) << 63) + lo};
  for (uint32_t n = 0; n <= 40; ++n) {
    std::vector<uint64_t> w(n);
    for (uint32_t i = 0; i < n; ++i) w[i] = misses[i % 7];
    EXPECT_EQ(next_in_span_baseline(w.data(), 0, n, lo, span), n);
    EXPECT_EQ(next_in_span(w.data(), 0, n, lo, span), n);
    if (avx2()) {
      EXPECT_EQ(next_in_span_avx2(w.data(), 0, n, lo, span), n);
    }
    for (uint32_t at = 0; at < n; ++at) {
      for (uint64_t p : probes) {
        std::vector<uint64_t> v = w;
        v[at] = p;
        if (at + 1 < n) v[n - 1] = p;  // a later hit must not be the one found
        for (uint32_t from : {0u, at}) {
          EXPECT_EQ(next_in_span_baseline(v.data(), from, n, lo, span), at) << n << " " << at;
          EXPECT_EQ(next_in_span(v.data(), from, n, lo, span), at) << n << " " << at;
          if (avx2()) {
      EXPECT_EQ(next_in_span_avx2(v.data(), from, n, lo, span), at) << n << " " << at;
    }
        }
      }
    }
  }
  // span 0 (an empty table): nothing is inside.
  std::vector<uint64_t> w(20, lo);
  EXPECT_EQ(next_in_span(w.data(), 0, 20, lo, 0), 20u);
  if (avx2()) {
      EXPECT_EQ(next_in_span_avx2(w.data(), 0, 20, lo, 0), 20u);
    }
}

// The AVX2 build of XXH3 gives xxHash's values (traces and signature files hold them).
TEST(WideWords, Xxh3OfAnyLengthIsXxHashsValue) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> data(5000);
  for (auto& b : data) b = uint8_t(rng());
  for (size_t n : {0, 1, 16, 17, 128, 129, 240, 241, 256, 1000, 1024, 4096, 5000}) {
    const uint64_t want = XXH3_64bits(data.data(), n);
    EXPECT_EQ(xxh3_64_baseline(data.data(), n), want) << n;
    EXPECT_EQ(xxh3_64(data.data(), n), want) << n;
    if (avx2()) {
      EXPECT_EQ(xxh3_64_avx2(data.data(), n), want) << n;
    }
  }
  // A fixed value, so that a change of xxHash's function itself shows here.
  EXPECT_EQ(xxh3_64(data.data(), 0), 0x2D06800538D394C2ull);
}

}  // namespace
}  // namespace streamrace::tracer::wide
