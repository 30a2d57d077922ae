// The arguments' hash of a kernel launch (trace format 1.5, `kKernelArgsHash2`): XXH3_64bits,
// seed 0, of the words the tracer's scan of the parameters feeds it, as little-endian bytes
// (tracer/cuda_call_handler.cpp says which words). It only keys learned access signatures
// (analyzer/access_signatures.h), so it need not be cryptographic, only fast and well mixed.
//
// 1.4's hash of the same words was one multiply-xor chain: every word waited ~10 cycles for the
// last one's multiply, and PyTorch's kernels pass structs of 50-100 words. Here the scan only
// stores its words; XXH3 then hashes them at once, with independent lanes (SSE2 on x86-64).
// xxHash is used header-only (XXH_INLINE_ALL): libstreamrace.so gains no runtime dependency.
// XXH3's values are stable across xxHash releases since 0.8.0; recorded traces and learnt
// signature files hold them, so the function and the words fed to it never change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "tracer/wide_words.h"

namespace streamrace::tracer {

// A pointer argument enters the arguments' hash as this mark plus its index among the launch's
// pointers, not as its address, which changes from step to step.
constexpr uint64_t kPointerMark = 0x5A17'0000'0000'0000ull;

// The scan of words w[0, n) of one parameter, as copied for the hash (the launching thread's
// scan and the flusher's, tracer/deferred_scan.h, are this one loop): a word inside [lo, lo +
// span), aligned as `misaligned` (a mask) allows, that is a pointer already in `ptrs` or one
// `live(word)` accepts (then appended to `ptrs`) is replaced by its mark. A word already found
// is the same argument again (cuBLAS's parameter blocks repeat their pointers): no second
// lookup. The list is read once per word, not through the vector.
template <typename Live>
inline __attribute__((always_inline)) void mark_pointers(uint64_t* w, uint32_t n, uint64_t lo, uint64_t span,
                                                         uint64_t misaligned, std::vector<uint64_t>& ptrs, Live&& live) {
  for (uint32_t k = 0; (k = wide::next_in_span(w, k, n, lo, span)) < n; ++k) {
    const uint64_t v = w[k];
    if ((v & misaligned) != 0) continue;
    const uint64_t* const seen = ptrs.data();
    const size_t nseen = ptrs.size();
    size_t index = 0;
    while (index < nseen && seen[index] != v) ++index;
    if (index == nseen) {
      if (!live(v)) continue;
      ptrs.push_back(v);
    }
    w[k] = kPointerMark + index;
  }
}

// The caller writes the words into words() itself, counting them in a local: a count kept
// here would live in memory across the scan's calls (the object's address escapes), and each
// word would wait for the last one's store of it.
class ArgsHash {
 public:
  // Words held on the stack: 4 KiB, every parameter struct of the classic 4 KiB limit. Longer
  // parameter lists (CUDA 12.1 allows 32 KiB) go on through XXH3's streaming state, which
  // gives the same value as hashing all the words at once.
  static constexpr size_t kBufferWords = 512;

  ArgsHash() = default;
  ArgsHash(const ArgsHash&) = delete;
  ArgsHash& operator=(const ArgsHash&) = delete;

  uint64_t* words() { return words_; }
  // words()[0, n) is full (n == kBufferWords): they go into the streaming state; the count
  // starts again at 0.
  __attribute__((noinline)) size_t spill(size_t n) {
    if (!streaming_) {
      XXH3_64bits_reset(&state_);
      streaming_ = true;
    }
    XXH3_64bits_update(&state_, words_, n * sizeof(uint64_t));
    return 0;
  }
  // The hash of n words held at once.
  static uint64_t of(const uint64_t* words, size_t n) {
    const size_t bytes = n * sizeof(uint64_t);
    // Up to 240 bytes XXH3 uses no vector unit: inline here; longer, AVX2 where there is.
    return bytes <= 240 ? XXH3_64bits(words, bytes) : wide::xxh3_64(words, bytes);
  }
  // The hash of every word written, words()[0, n) the last of them.
  uint64_t value(size_t n) {
    if (!streaming_) return of(words_, n);
    XXH3_64bits_update(&state_, words_, n * sizeof(uint64_t));
    return XXH3_64bits_digest(&state_);
  }

 private:
  uint64_t words_[kBufferWords];  // not initialised: only what the caller wrote is read
  bool streaming_ = false;
  XXH3_state_t state_;  // only once streaming_
};

}  // namespace streamrace::tracer
