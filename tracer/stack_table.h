// StackTable: interns host stacks so each distinct stack is written once (StackDef) and
// records carry only its id. Native stacks are kept as raw return addresses until the
// flusher symbolizes them (module path + offset, dladdr); Python stacks arrive already as
// frames (file, function, line), since code objects must be read while the GIL is held.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"
#include "tracer/string_table.h"

namespace streamrace::tracer {

struct PendingStack {
  uint32_t id = 0;
  std::vector<uint64_t> pcs;                 // native stack, innermost first
  std::vector<trace::StackFrame> frames;     // Python stack (or symbolized native stack)
};

class StackTable {
 public:
  uint32_t intern_native(std::span<const uint64_t> pcs);
  uint32_t intern_frames(std::span<const trace::StackFrame> frames);
  // Moves out stacks interned since the last call, native ones symbolized into frames
  // (interning module paths and function names in `strings`).
  std::vector<PendingStack> take_pending(StringTable& strings);

 private:
  uint32_t intern(uint64_t hash, bool native, std::span<const uint64_t> words);
  uint32_t intern_shared(uint64_t hash, bool native, std::span<const uint64_t> words);

  std::mutex mu_;
  // hash -> (id, content) so that a hash collision never merges two stacks.
  struct Entry {
    uint32_t id;
    bool native;
    std::vector<uint64_t> words;
  };
  std::unordered_map<uint64_t, Entry> by_hash_;
  std::vector<PendingStack> pending_;
  uint32_t next_ = 1;
  // Tells tables apart in the per-thread front caches (an address may be reused by a new one).
  const uint64_t uid_ = next_uid();
  static uint64_t next_uid();
};

// 64-bit FNV-1a over 64-bit words.
uint64_t hash_words(std::span<const uint64_t> words, uint64_t seed);

// Turns one return address into a frame: module path (interned), offset in the module,
// and the dynamic symbol name when the module exports one.
trace::StackFrame symbolize_native_pc(uint64_t pc, StringTable& strings, bool is_return_address);

}  // namespace streamrace::tracer
