// VectorClock: one logical clock per clock slot (each stream has a slot, and so does the
// host). Slot counts are small (tens), so a flat vector beats anything cleverer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace streamrace::analysis {

class VectorClock {
 public:
  uint32_t get(uint32_t slot) const { return slot < c_.size() ? c_[slot] : 0; }
  void set(uint32_t slot, uint32_t v) {
    if (slot >= c_.size()) c_.resize(slot + 1, 0);
    c_[slot] = v;
  }
  uint32_t tick(uint32_t slot) {
    if (slot >= c_.size()) c_.resize(slot + 1, 0);
    return ++c_[slot];
  }
  // Pointwise maximum; returns whether anything changed.
  bool join(const VectorClock& o) {
    if (o.c_.size() > c_.size()) c_.resize(o.c_.size(), 0);
    bool changed = false;
    for (size_t i = 0; i < o.c_.size(); ++i)
      if (o.c_[i] > c_[i]) {
        c_[i] = o.c_[i];
        changed = true;
      }
    return changed;
  }
  // Whether the access at (slot, clock) happens before the holder of this clock.
  bool covers(uint32_t slot, uint32_t clock) const { return get(slot) >= clock; }
  bool empty() const {
    return std::all_of(c_.begin(), c_.end(), [](uint32_t v) { return v == 0; });
  }
  size_t size() const { return c_.size(); }

 private:
  std::vector<uint32_t> c_;
};

}  // namespace streamrace::analysis
