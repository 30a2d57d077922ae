// RacingPairs: the racing call pairs of one occurrence list (Occurrence::pairs), packed. The
// replay's analysis keeps every pair of every finding (apply-fix edits each one), 684,000 on a
// 4 M-record trace pair: as two u64 seqs that was 16 bytes a pair, more than the rest of the
// analysis. Pairs come in the order the analysis found them, the later call's seq rising in
// small steps and the earlier call a little before it, so each pair is stored as two
// variable-length numbers: the later seq's distance from the previous pair's, and the earlier
// seq's distance below the later one (both zigzag-coded, so any order still round-trips).
// About 2-3 bytes a pair. Read it front to back (an iterator that yields RacingPair values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace streamrace::analysis {

// One racing pair of calls: the earlier access's call and the later one's, in one trace.
struct RacingPair {
  uint64_t earlier_seq = 0;
  uint64_t later_seq = 0;
  bool operator==(const RacingPair&) const = default;
};

class RacingPairs {
 public:
  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = RacingPair;
    using difference_type = std::ptrdiff_t;
    using pointer = const RacingPair*;
    using reference = RacingPair;

    const_iterator() = default;
    RacingPair operator*() const { return cur_; }
    const RacingPair* operator->() const { return &cur_; }
    const_iterator& operator++() {
      at_ = next_;
      decode();
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const const_iterator& o) const { return at_ == o.at_; }

   private:
    friend class RacingPairs;
    const_iterator(const uint8_t* at, const uint8_t* end, uint64_t prev_later)
        : at_(at), next_(at), end_(end), prev_later_(prev_later) {
      decode();
    }
    void decode() {
      if (at_ == end_) return;
      next_ = at_;
      const uint64_t later = prev_later_ + uint64_t(unzigzag(read(next_)));
      cur_ = RacingPair{later - uint64_t(unzigzag(read(next_))), later};
      prev_later_ = later;
    }
    static uint64_t read(const uint8_t*& p) {
      uint64_t v = 0;
      for (int shift = 0;; shift += 7) {
        const uint8_t b = *p++;
        v |= uint64_t(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
      }
    }
    const uint8_t* at_ = nullptr;
    const uint8_t* next_ = nullptr;
    const uint8_t* end_ = nullptr;
    uint64_t prev_later_ = 0;
    RacingPair cur_{};
  };

  void push_back(const RacingPair& p) {
    write(zigzag(int64_t(p.later_seq - last_later_)));
    write(zigzag(int64_t(p.later_seq - p.earlier_seq)));
    last_later_ = p.later_seq;
    ++size_;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  RacingPair front() const { return *begin(); }
  const_iterator begin() const { return const_iterator(bytes_.data(), bytes_.data() + bytes_.size(), 0); }
  const_iterator end() const {
    return const_iterator(bytes_.data() + bytes_.size(), bytes_.data() + bytes_.size(), 0);
  }
  void clear() { *this = RacingPairs{}; }
  // Gives back the memory the packed bytes do not use (once no more pairs come).
  void shrink_to_fit() { bytes_.shrink_to_fit(); }
  size_t packed_bytes() const { return bytes_.size(); }
  bool operator==(const RacingPairs& o) const { return size_ == o.size_ && bytes_ == o.bytes_; }

 private:
  static uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
  static int64_t unzigzag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }
  void write(uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(uint8_t(v) | 0x80);
      v >>= 7;
    }
    bytes_.push_back(uint8_t(v));
  }

  std::vector<uint8_t> bytes_;
  size_t size_ = 0;
  uint64_t last_later_ = 0;
};

}  // namespace streamrace::analysis
