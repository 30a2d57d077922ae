// DeferredScan: see deferred_scan.h.
#include "tracer/deferred_scan.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "tracer/args_hash.h"
#include "tracer/wide_words.h"

namespace streamrace::tracer {

namespace {
uint64_t version_of(const DeferredResolver::Item& item) {
  DeferredLaunchTail t;
  std::memcpy(&t, item.body + sizeof(trace::KernelLaunchHead), sizeof(t));
  return t.version;
}

// The allocation holding `addr` in `table`, as AllocationTable::find answers: the one with
// the greatest base at or below it, if it reaches that far.
bool live_in(const std::map<uint64_t, LiveAllocation>& table, uint64_t addr) {
  auto it = table.upper_bound(addr);
  if (it == table.begin()) return false;
  --it;
  return addr < it->second.base + it->second.bytes;
}

// `c` made on `table` (forwards), or undone (backwards).
void replay(std::map<uint64_t, LiveAllocation>& table, const AllocationChange& c, bool forwards) {
  if (c.inserted == forwards) {
    table[c.a.base] = c.a;
  } else {
    table.erase(c.a.base);
  }
}
}  // namespace

void DeferredScan::apply(const AllocationChange& c) {
  replay(live_, c, true);
  if (c.inserted) {
    lo_ = std::min(lo_, c.a.base);
    hi_ = std::max(hi_, c.a.base + c.a.bytes);
  }
  version_ = std::max(version_, c.version);
  history_.push_back(c);
  if (history_.size() > kHistory) {
    history_floor_ = history_.front().version;
    history_.pop_front();
  }
  rebuilt_valid_ = false;
}

const DeferredScan::Table& DeferredScan::table_at(uint64_t version) {
  if (version >= version_) return live_;
  if (version < history_floor_) {
    // Changes it needs are gone (a launch held back across kHistory changes).
    ++inexact_;
    return live_;
  }
  ++rebuilt_;
  if (rebuilt_valid_ && rebuilt_version_ <= version) {
    // Forwards from the table rebuilt for an earlier late launch: the changes in between.
    auto it = std::upper_bound(history_.begin(), history_.end(), rebuilt_version_,
                               [](uint64_t v, const AllocationChange& c) { return v < c.version; });
    for (; it != history_.end() && it->version <= version; ++it) replay(rebuilt_table_, *it, true);
  } else {
    rebuilt_table_ = live_;
    for (auto it = history_.rbegin(); it != history_.rend() && it->version > version; ++it)
      replay(rebuilt_table_, *it, false);
    rebuilt_valid_ = true;
  }
  rebuilt_version_ = version;
  return rebuilt_table_;
}

void DeferredScan::resolve(std::vector<Item>& items, std::vector<uint8_t>& out, bool nonblocking) {
  out.clear();
  // Every change a launch of this drain saw is in the log by now: it was logged before the
  // table published its version, which the launch read before it committed its record.
  const bool took = log_->take(pending_, nonblocking);
  // Superseded (another reader started the table's log): changes after it are not here.
  const bool cut_off = log_->superseded();
  // Oldest version first; a thread's own launches keep their order.
  order_.resize(items.size());
  std::iota(order_.begin(), order_.end(), 0u);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](uint32_t a, uint32_t b) { return version_of(items[a]) < version_of(items[b]); });
  for (const uint32_t i : order_) {
    const uint64_t version = version_of(items[i]);
    // (The log's seeds, at its start, for every launch: one older than them is scanned against them.)
    const uint64_t upto = std::max(version, log_->start_version());
    while (pending_at_ < pending_.size() && pending_[pending_at_].version <= upto) apply(pending_[pending_at_++]);
    if ((!took || cut_off) && version > version_) ++inexact_;  // its changes may not be in the log
    scan(items[i], table_at(version), out, items[i]);
    if (items[i].out_size == 0) ++unfinished_;  // not what a launching thread writes: never silently gone
  }
  while (pending_at_ < pending_.size()) apply(pending_[pending_at_++]);
  pending_.clear();
  pending_at_ = 0;
}

void DeferredScan::scan(const Item& item, const Table& table, std::vector<uint8_t>& out, Item& result) {
  result.out_size = 0;
  trace::KernelLaunchHead h;
  DeferredLaunchTail t;
  if (item.size < sizeof(h) + sizeof(t)) return;
  std::memcpy(&h, item.body, sizeof(h));
  std::memcpy(&t, item.body + sizeof(h), sizeof(t));
  const size_t words_at = sizeof(h) + sizeof(t);
  const size_t need = words_at + (size_t(t.nwords) + size_t(t.blas_count) * 3) * sizeof(uint64_t);
  if (need != item.size) return;
  words_.resize(t.nwords);
  if (t.nwords != 0) std::memcpy(words_.data(), item.body + words_at, size_t(t.nwords) * sizeof(uint64_t));
  const auto* signature = reinterpret_cast<const KernelSignature*>(t.signature);
  const uint64_t lo = lo_, span = hi_ > lo_ ? hi_ - lo_ : 0;
  const uint64_t misaligned = t.misaligned;
  ptrs_.clear();
  // The launching thread's scan (tracer/args_hash.h), looked up in the table at the launch's version.
  auto scan_words = [&](uint64_t* w, uint32_t n) {
    mark_pointers(w, n, lo, span, misaligned, ptrs_, [&](uint64_t v) { return live_in(table, v); });
  };
  bool by_signature = false;
  size_t at = 0;
  for (uint32_t i = 0; i < t.nparams; ++i) {
    if (at >= words_.size()) return;  // not what the launching thread wrote
    const uint64_t size = words_[at++];
    const uint64_t padded = (size + 7) / 8;
    if (padded > words_.size() - at) return;
    const uint32_t all_words = uint32_t(size / 8);
    const uint32_t n = signature ? pointer_words(signature, i, all_words, h.grid) : all_words;
    by_signature |= n < all_words;
    scan_words(words_.data() + at, n);
    at += padded;
  }
  if (at != words_.size()) return;
  const uint64_t hash = ArgsHash::of(words_.data(), words_.size());
  h.nptrs = uint32_t(ptrs_.size());
  h.flags = (h.flags & trace::kKernelPrecise) | trace::kKernelArgsScanned | trace::kKernelArgsHash2 |
            (by_signature ? uint32_t(trace::kKernelArgsBySignature) : 0u) |
            (t.blas_count != 0 ? uint32_t(trace::kKernelCallAccesses) : 0u);
  const size_t tail_words = ptrs_.size() + 1 + (t.blas_count != 0 ? 1 + size_t(t.blas_count) * 3 : 0);
  const size_t body = sizeof(h) + tail_words * sizeof(uint64_t);
  if (body > 0xFFFF) return;
  const size_t offset = out.size();
  out.resize(offset + body);
  uint8_t* p = out.data() + offset;
  std::memcpy(p, &h, sizeof(h));
  p += sizeof(h);
  if (!ptrs_.empty()) std::memcpy(p, ptrs_.data(), ptrs_.size() * sizeof(uint64_t));
  p += ptrs_.size() * sizeof(uint64_t);
  std::memcpy(p, &hash, sizeof(hash));
  p += sizeof(hash);
  if (t.blas_count != 0) {
    const uint64_t count = t.blas_count;
    std::memcpy(p, &count, sizeof(count));
    p += sizeof(count);
    std::memcpy(p, item.body + words_at + size_t(t.nwords) * sizeof(uint64_t), size_t(t.blas_count) * 3 * sizeof(uint64_t));
  }
  result.out_offset = uint32_t(offset);
  result.out_size = uint32_t(body);
  ++resolved_;
}

std::string DeferredScan::take_notice() {
  std::string notice;
  if (inexact_ != inexact_reported_) {
    notice = std::to_string(inexact_ - inexact_reported_) +
             " kernel launches' arguments were scanned against the allocation table of a later moment than "
             "theirs (their changes were no longer kept): a pointer into memory allocated or freed just "
             "then may be missing or extra";
    inexact_reported_ = inexact_;
  }
  if (unfinished_ != unfinished_reported_) {
    if (!notice.empty()) notice += "; ";
    notice += std::to_string(unfinished_ - unfinished_reported_) +
              " kernel launches dropped: their deferred argument scan could not be read (please report this)";
    unfinished_reported_ = unfinished_;
  }
  return notice;
}

}  // namespace streamrace::tracer
