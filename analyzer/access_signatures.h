// Learned kernel access signatures (docs/signatures.md).
//
// A kernel's reads and writes, relative to its pointer arguments, are a function of the kernel,
// its launch shape and its scalar arguments; a training job repeats the same launches every
// step. Precise mode measures a launch's exact intervals; the analyzer attributes each to the
// pointer argument it lies behind (the nearest one below it whose allocator block or allocation
// holds the whole interval) and keeps them, keyed by the kernel's name, grid, block, pointer
// count and the hash of its scalar arguments (trace format 1.4 or 1.5: the hash's kind is part
// of the key, so values of two hash functions are never compared). A later
// launch with the same key in the default tier then takes those intervals, shifted to its own
// pointers, as exact accesses: its findings can be `certain`.
//
// A signature is trusted only once two measured launches agreed on it exactly (kMinSeen), and
// never again once two disagreed (a data-dependent kernel: gathers, scatters, embedding
// lookups). A launch is learnt from only when its whole measurement is exact: no overflowed or
// coarse interval, no pointer argument left unmeasured (a TMA kernel), and every interval
// attributable to a pointer argument.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"

namespace streamrace::analysis {

struct SignatureInterval {
  uint32_t pointer = 0;  // index into the launch's pointer arguments
  uint64_t offset = 0;   // bytes after that pointer
  uint64_t bytes = 0;
  trace::AccessDir dir = trace::AccessDir::kRead;
  bool operator==(const SignatureInterval&) const = default;
};

// A key either names the arguments' hash (`any_args` false) or stands for every launch of the
// kernel with that shape (`any_args`, args_hash 0). Many kernels pass by-value structs with
// members the host leaves unset (PyTorch's reduce_kernel: `dst[1]` of a one-output reduction,
// struct padding), so their hash differs from launch to launch while their accesses do not; a
// shape key is trusted only once launches with different hashes agreed on the same intervals
// (so what varied did not change what the kernel touched) and none disagreed. A shape key too
// has a hash kind: its first_hash and hashes_differ are about hashes of that kind.
struct SignatureKey {
  std::string kernel;  // the trace's kernel name (demangled where the tracer demangled it)
  std::array<uint32_t, 3> grid{}, block{};
  uint32_t pointers = 0;
  uint64_t args_hash = 0;
  bool any_args = false;
  trace::ArgsHashKind hash_kind = trace::ArgsHashKind::kXxh3;  // which function args_hash is
  bool operator==(const SignatureKey&) const = default;
};

// The same key without owning its name, for lookups on the analysis's hot path.
struct SignatureKeyView {
  std::string_view kernel;
  std::array<uint32_t, 3> grid{}, block{};
  uint32_t pointers = 0;
  uint64_t args_hash = 0;
  bool any_args = false;
  trace::ArgsHashKind hash_kind = trace::ArgsHashKind::kXxh3;
};

struct LearnedSignature {
  std::vector<SignatureInterval> intervals;  // canonical: sorted by pointer and offset, merged
  uint32_t seen = 0;                         // measured launches that agreed on these intervals
  bool conflicting = false;                  // two measured launches with this key disagreed
  // A shape key's: the first arguments' hash observed, and whether another one was too.
  uint64_t first_hash = 0;
  bool hashes_differ = false;
};

class SignatureBook {
 public:
  static constexpr uint32_t kMinSeen = 2;

  // One measured launch with arguments' hash `key.args_hash`: its intervals in any order
  // (canonicalised here), under its own key and its shape key.
  void observe(const SignatureKey& key, std::vector<SignatureInterval> intervals);
  // Another book's observations, as if observed here (seen counts add up; disagreement conflicts).
  void merge(const SignatureBook& other);
  // The trusted signature for a launch: its own key's (seen >= kMinSeen, never conflicting),
  // else its shape key's (the same, and hashes_differ), else null.
  const LearnedSignature* trusted(const SignatureKeyView& key) const;

  // Launch keys (kernel, shape, arguments' hash) observed, and how many of them a trusted
  // signature (their own or their shape's) covers.
  size_t size() const;
  size_t trusted_count() const;
  bool empty() const { return map_.empty(); }
  // Launch keys whose arguments' hash is of this kind.
  size_t size(trace::ArgsHashKind kind) const;

  // The documented JSON file (docs/signatures.md). load() throws trace::InputFileError naming
  // the file and what is wrong; save() throws std::runtime_error naming the file.
  std::string to_json_text() const;
  static SignatureBook from_json_text(std::string_view text, const std::string& path);
  static SignatureBook load(const std::string& path);
  void save(const std::string& path) const;

  // Sorted by pointer and offset, touching or overlapping intervals of one pointer and
  // direction merged (the device's interval tables split and order them as its threads ran).
  static void canonicalise(std::vector<SignatureInterval>& intervals);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(const SignatureKey& k) const { return (*this)(view(k)); }
    size_t operator()(const SignatureKeyView& k) const;
  };
  struct Equal {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::string_view(a.kernel) == std::string_view(b.kernel) && a.grid == b.grid && a.block == b.block &&
             a.pointers == b.pointers && a.args_hash == b.args_hash && a.any_args == b.any_args &&
             a.hash_kind == b.hash_kind;
    }
  };
  static SignatureKeyView view(const SignatureKey& k) {
    return {k.kernel, k.grid, k.block, k.pointers, k.args_hash, k.any_args, k.hash_kind};
  }
  const LearnedSignature* trusted_entry(const SignatureKeyView& key) const;
  void add(const SignatureKey& key, const LearnedSignature& sig);
  std::unordered_map<SignatureKey, LearnedSignature, Hash, Equal> map_;
};

}  // namespace streamrace::analysis
