// AddressLengthMap: address -> length, open addressing with linear probing. The analyzer
// asks it once per kernel pointer argument and updates it once per exact access, so it must
// cost one or two cache lines, not a node allocation (std::unordered_map did, ~30 % of the
// analysis). Address 0 is never a key.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/prefetch.h"

namespace streamrace::analysis {

class AddressLengthMap {
 public:
  AddressLengthMap() : slots_(1024) {}

  void set(uint64_t addr, uint64_t length) {
    if (addr == 0) return;
    if ((used_ + 1) * 2 > slots_.size()) grow();
    Slot& s = probe(addr);
    if (s.key == 0) {
      s.key = addr;
      ++used_;
    }
    s.value = length;
  }

  // 0 when the address was never set.
  uint64_t get(uint64_t addr) const {
    if (addr == 0) return 0;
    const Slot& s = const_cast<AddressLengthMap*>(this)->probe(addr);
    return s.key == addr ? s.value : 0;
  }

  // Starts loading the slot where a lookup of `addr` begins.
  void prefetch(uint64_t addr) const { prefetch_line(&slots_[mix(addr) & (slots_.size() - 1)]); }

  size_t size() const { return used_; }

 private:
  struct Slot {
    uint64_t key = 0;
    uint64_t value = 0;
  };

  static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }

  Slot& probe(uint64_t addr) {
    size_t mask = slots_.size() - 1;
    for (size_t i = mix(addr) & mask;; i = (i + 1) & mask)
      if (slots_[i].key == addr || slots_[i].key == 0) return slots_[i];
  }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    used_ = 0;
    for (const Slot& s : old)
      if (s.key) set(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace streamrace::analysis
