// The baseline halves of tracer/wide_words.h and the dispatch.
#include "tracer/wide_words.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace streamrace::tracer::wide {

namespace detail {
namespace {
bool cpu_has_avx2() {
  __builtin_cpu_init();  // may run before the library's other constructors
  return __builtin_cpu_supports("avx2");
}
}  // namespace
const bool kAvx2 = cpu_has_avx2();
}  // namespace detail

bool avx2() { return detail::kAvx2; }

uint32_t next_in_span_baseline(const uint64_t* w, uint32_t from, uint32_t n, uint64_t lo, uint64_t span) {
  for (uint32_t k = from; k < n; ++k)
    if (w[k] - lo < span) return k;
  return n;
}

uint64_t xxh3_64_baseline(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace streamrace::tracer::wide
