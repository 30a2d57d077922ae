// The baseline XXH3 of tracer/wide_words.h and the dispatch (the baseline search is inline).
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

uint64_t xxh3_64_baseline(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace streamrace::tracer::wide
