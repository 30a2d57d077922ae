// VectorClock: one logical clock per clock slot (each stream has a slot, and so does the
// host). Sparse: only the slots a clock has heard of are stored, sorted by slot, so a trace
// with thousands of streams that never meet costs one entry per stream, not a table of every
// stream per stream (a dense table was quadratic in the number of streams).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace streamrace::analysis {

class VectorClock {
 public:
  uint32_t get(uint32_t slot) const {
    auto it = find(slot);
    return it != c_.end() && it->slot == slot ? it->clock : 0;
  }
  void set(uint32_t slot, uint32_t v) { at(slot) = v; }
  uint32_t tick(uint32_t slot) { return ++at(slot); }
  // Pointwise maximum; returns whether anything changed.
  bool join(const VectorClock& o) {
    if (o.c_.empty() || &o == this) return false;
    // Fast path: every slot of `o` is already here (the common case once streams have met).
    bool changed = false;
    auto i = c_.begin();
    bool subset = true;
    for (const Entry& e : o.c_) {
      while (i != c_.end() && i->slot < e.slot) ++i;
      if (i == c_.end() || i->slot != e.slot) {
        subset = false;
        break;
      }
      if (e.clock > i->clock) {
        i->clock = e.clock;
        changed = true;
      }
    }
    if (subset) return changed;
    std::vector<Entry> merged;
    merged.reserve(c_.size() + o.c_.size());
    auto a = c_.cbegin();
    auto b = o.c_.cbegin();
    while (a != c_.cend() || b != o.c_.cend()) {
      if (b == o.c_.end() || (a != c_.end() && a->slot < b->slot)) {
        merged.push_back(*a++);
      } else if (a == c_.end() || b->slot < a->slot) {
        if (b->clock) changed = true;
        merged.push_back(*b++);
      } else {
        if (b->clock > a->clock) changed = true;
        merged.push_back(Entry{a->slot, std::max(a->clock, b->clock)});
        ++a;
        ++b;
      }
    }
    c_ = std::move(merged);
    return changed;
  }
  // Whether the access at (slot, clock) happens before the holder of this clock.
  bool covers(uint32_t slot, uint32_t clock) const { return get(slot) >= clock; }
  bool empty() const {
    return std::all_of(c_.begin(), c_.end(), [](const Entry& e) { return e.clock == 0; });
  }
  // Slots stored (not the highest slot).
  size_t size() const { return c_.size(); }

 private:
  struct Entry {
    uint32_t slot;
    uint32_t clock;
  };
  std::vector<Entry>::const_iterator find(uint32_t slot) const {
    return std::lower_bound(c_.begin(), c_.end(), slot, [](const Entry& e, uint32_t s) { return e.slot < s; });
  }
  uint32_t& at(uint32_t slot) {
    auto it = std::lower_bound(c_.begin(), c_.end(), slot, [](const Entry& e, uint32_t s) { return e.slot < s; });
    if (it == c_.end() || it->slot != slot) it = c_.insert(it, Entry{slot, 0});
    return it->clock;
  }
  std::vector<Entry> c_;
};

}  // namespace streamrace::analysis
