// The AVX2 halves of tracer/wide_words.h. This file alone is compiled with -mavx2
// (tracer/CMakeLists.txt); it uses no C++ library function (its headers give types only),
// so no inline function of one can be emitted here with AVX2 code and picked by the linker
// for the rest of the library.
// xxHash's functions are static here (XXH_INLINE_ALL): AVX2 copies of their own.
#include <immintrin.h>

#include "tracer/wide_words.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef __AVX2__
#error "tracer/wide_words.cpp must be compiled with -mavx2"
#endif

namespace streamrace::tracer::wide {

uint32_t next_in_span_avx2(const uint64_t* w, uint32_t from, uint32_t n, uint64_t lo, uint64_t span) {
  // Unsigned w - lo < span as a signed compare of both sides with the sign bit flipped.
  const __m256i sign = _mm256_set1_epi64x(int64_t(0x8000'0000'0000'0000ull));
  const __m256i vlo = _mm256_set1_epi64x(int64_t(lo));
  const __m256i vspan = _mm256_xor_si256(_mm256_set1_epi64x(int64_t(span)), sign);
  uint32_t k = from;
  for (; k + 8 <= n; k += 8) {  // two vectors a turn: one branch per 8 words
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k + 4));
    const __m256i ina = _mm256_cmpgt_epi64(vspan, _mm256_xor_si256(_mm256_sub_epi64(a, vlo), sign));
    const __m256i inb = _mm256_cmpgt_epi64(vspan, _mm256_xor_si256(_mm256_sub_epi64(b, vlo), sign));
    const __m256i any = _mm256_or_si256(ina, inb);
    if (!_mm256_testz_si256(any, any)) [[unlikely]] {
      const unsigned m = unsigned(_mm256_movemask_pd(_mm256_castsi256_pd(ina))) |
                         (unsigned(_mm256_movemask_pd(_mm256_castsi256_pd(inb))) << 4);
      return k + uint32_t(__builtin_ctz(m));
    }
  }
  // The last words, fewer than 8: not through the header's inline baseline, whose copy
  // emitted here would be AVX2 code the linker may pick for every caller.
  for (; k < n; ++k)
    if (w[k] - lo < span) return k;
  return n;
}

uint64_t xxh3_64_avx2(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace streamrace::tracer::wide
