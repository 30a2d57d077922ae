// InlineVector: a vector whose first N elements live inside the object itself; only a longer
// one takes heap memory. The shadow holds one of these per allocation (its segments) and per
// segment (its reads): nearly every allocation has one or two segments and every segment one
// or two reads, so an access finds them in the allocation's own cache lines, and recording
// one allocates nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <utility>

namespace streamrace::analysis {

template <typename T, uint32_t N>
class InlineVector {
  static_assert(N > 0);

 public:
  using iterator = T*;
  using const_iterator = const T*;

  InlineVector() = default;
  InlineVector(const InlineVector& o) { append_copies(o); }
  InlineVector(InlineVector&& o) noexcept { take(std::move(o)); }
  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) {
      clear();
      append_copies(o);
    }
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      clear();
      release_heap();
      take(std::move(o));
    }
    return *this;
  }
  ~InlineVector() {
    clear();
    release_heap();
  }

  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }

  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  template <typename... A>
  T& emplace_back(A&&... args) {
    if (size_ == cap_) {
      T tmp(std::forward<A>(args)...);  // `args` may refer into this vector
      grow(size_t(cap_) * 2);
      return *::new (data_ + size_++) T(std::move(tmp));
    }
    return *::new (data_ + size_++) T(std::forward<A>(args)...);
  }

  // Inserts before `pos`; returns an iterator to the inserted element.
  T* insert(T* pos, T v) {
    const size_t at = size_t(pos - data_);
    if (at == size_) return &emplace_back(std::move(v));
    emplace_back(std::move(back()));
    std::move_backward(data_ + at, data_ + size_ - 2, data_ + size_ - 1);
    data_[at] = std::move(v);
    return data_ + at;
  }
  // Inserts [first, last) (moved from) before `pos`.
  void insert_moved(T* pos, T* first, T* last) {
    const size_t at = size_t(pos - data_), old = size_;
    reserve(size_ + size_t(last - first));
    for (T* p = first; p != last; ++p) ::new (data_ + size_++) T(std::move(*p));
    std::rotate(data_ + at, data_ + old, data_ + size_);
  }
  // Removes [first, last); returns the position after the removed ones.
  T* erase(T* first, T* last) {
    if (first == last) return first;  // std::move onto itself would empty a std::string
    T* new_end = std::move(last, end(), first);
    shrink_to(size_t(new_end - data_));
    return first;
  }
  template <typename Pred>
  void erase_if(Pred pred) {
    shrink_to(size_t(std::remove_if(begin(), end(), pred) - data_));
  }
  void clear() { shrink_to(0); }
  void reserve(size_t n) {
    if (n > cap_) grow(std::max(n, size_t(cap_) * 2));
  }

 private:
  void shrink_to(size_t n) {
    std::destroy(data_ + n, data_ + size_);
    size_ = uint32_t(n);
  }
  void grow(size_t cap) {
    T* fresh = static_cast<T*>(::operator new(cap * sizeof(T), std::align_val_t(alignof(T))));
    std::uninitialized_move(data_, data_ + size_, fresh);
    std::destroy(data_, data_ + size_);
    release_heap();
    data_ = fresh;
    cap_ = uint32_t(cap);
  }
  void release_heap() {
    if (data_ != local()) ::operator delete(data_, std::align_val_t(alignof(T)));
    data_ = local();
    cap_ = N;
  }
  void append_copies(const InlineVector& o) {
    reserve(o.size_);
    for (const T& v : o) ::new (data_ + size_++) T(v);
  }
  // Leaves `o` empty. This vector is empty and inline.
  void take(InlineVector&& o) {
    if (o.data_ != o.local()) {
      data_ = o.data_;
      size_ = o.size_;
      cap_ = o.cap_;
      o.data_ = o.local();
      o.size_ = 0;
      o.cap_ = N;
      return;
    }
    for (T& v : o) ::new (data_ + size_++) T(std::move(v));
    o.clear();
  }
  T* local() { return reinterpret_cast<T*>(inline_); }

  T* data_ = local();
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

}  // namespace streamrace::analysis
