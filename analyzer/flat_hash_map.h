// FlatHashMap: a hash map from uint64_t keys (stream and event handles, shadow pages) to
// values, in one array: open addressing, linear probing, deletion by shifting the rest of the
// run back (no tombstones). A probe costs one or two cache lines, where std::unordered_map
// costs a bucket array and a node. Values move when the table grows or an entry is erased:
// hold keys across inserts and erases, not pointers into the map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "analyzer/prefetch.h"

namespace streamrace::analysis {

template <typename V>
class FlatHashMap {
 public:
  // The value for `key`, or nullptr.
  V* find(uint64_t key) {
    if (used_ == 0) return nullptr;
    for (size_t i = home(key);; i = next(i)) {
      Slot& s = slots_[i];
      if (!s.occupied) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  const V* find(uint64_t key) const { return const_cast<FlatHashMap*>(this)->find(key); }
  // Starts loading the slot where a lookup of `key` begins.
  void prefetch(uint64_t key) const {
    if (!slots_.empty()) prefetch_line(&slots_[home(key)]);
  }

  // The value for `key`, value-initialised when it was not there (like std::map::operator[]).
  V& operator[](uint64_t key) {
    if ((used_ + 1) * 4 > slots_.size() * 3) grow();
    size_t i = home(key);
    for (; slots_[i].occupied; i = next(i))
      if (slots_[i].key == key) return slots_[i].value;
    slots_[i].occupied = true;
    slots_[i].key = key;
    slots_[i].value = V{};
    ++used_;
    return slots_[i].value;
  }

  // Removes `key`; returns whether it was there.
  bool erase(uint64_t key) {
    if (used_ == 0) return false;
    size_t hole = home(key);
    for (;; hole = next(hole)) {
      if (!slots_[hole].occupied) return false;
      if (slots_[hole].key == key) break;
    }
    // Move back every later entry of the run whose home does not lie between the hole and it.
    for (size_t i = next(hole); slots_[i].occupied; i = next(i)) {
      const size_t h = home(slots_[i].key);
      const bool stays = hole < i ? (hole < h && h <= i) : (hole < h || h <= i);
      if (stays) continue;
      slots_[hole].key = slots_[i].key;
      slots_[hole].value = std::move(slots_[i].value);
      hole = i;
    }
    slots_[hole].occupied = false;
    slots_[hole].value = V{};
    --used_;
    return true;
  }

  size_t size() const { return used_; }
  bool empty() const { return used_ == 0; }

 private:
  struct Slot {
    uint64_t key = 0;
    bool occupied = false;
    V value{};
  };

  size_t home(uint64_t key) const {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return size_t(key) & (slots_.size() - 1);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void grow() {
    std::vector<Slot> old(slots_.empty() ? 16 : slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (Slot& s : old)
      if (s.occupied) (*this)[s.key] = std::move(s.value);
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace streamrace::analysis
