// prefetch_line(p): asks the CPU to start loading the cache line holding `p` (any address:
// a prefetch never faults). An asm statement rather than __builtin_prefetch: GCC 12 takes an
// inline function whose only effect is __builtin_prefetch to have no effect at all, and
// drops calls to it.
#pragma once

namespace streamrace::analysis {

inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace streamrace::analysis
