// Word loops of a launch's argument scan, with AVX2 where the CPU has it (checked once at
// load time): the search for words inside the allocation table's bounds, and XXH3 of the
// words hashed. libstreamrace.so is built for baseline x86-64 (SSE2); only
// tracer/wide_words.cpp is compiled for AVX2, and only called where the CPU has it.
// Both give the same answers as their baseline versions (XXH3's value does not depend on the
// vector unit that computed it): tests/tracer/wide_words_test.cpp compares them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace streamrace::tracer::wide {

// Whether this CPU runs the AVX2 versions (what the dispatch below uses).
bool avx2();

// The first index k in [from, n) with w[k] - lo < span (unsigned: w in [lo, lo + span)), or n.
inline uint32_t next_in_span_baseline(const uint64_t* w, uint32_t from, uint32_t n, uint64_t lo, uint64_t span) {
  for (uint32_t k = from; k < n; ++k)
    if (w[k] - lo < span) [[unlikely]]
      return k;
  return n;
}
uint32_t next_in_span_avx2(const uint64_t* w, uint32_t from, uint32_t n, uint64_t lo, uint64_t span);
// XXH3_64bits, seed 0.
uint64_t xxh3_64_baseline(const void* data, size_t bytes);
uint64_t xxh3_64_avx2(const void* data, size_t bytes);

namespace detail {
extern const bool kAvx2;
}

inline uint32_t next_in_span(const uint64_t* w, uint32_t from, uint32_t n, uint64_t lo, uint64_t span) {
  // Short runs (a pointer parameter is one word) stay inline: a call costs more than they do.
  if (n - from < 8 || !detail::kAvx2) return next_in_span_baseline(w, from, n, lo, span);
  return next_in_span_avx2(w, from, n, lo, span);
}

// The caller keeps inputs of up to 240 bytes to its own inline XXH3 (no vector unit there).
inline uint64_t xxh3_64(const void* data, size_t bytes) {
  return detail::kAvx2 ? xxh3_64_avx2(data, bytes) : xxh3_64_baseline(data, bytes);
}

}  // namespace streamrace::tracer::wide
