// slot_to_accesses: see interval_conversion.h.
#include "tracer/precise/interval_conversion.h"

#include <algorithm>
#include <utility>

namespace streamrace::tracer::precise {

namespace {

using Interval = std::pair<uint64_t, uint64_t>;  // [first, second)

// Sorted, merged (touching or overlapping intervals joined).
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

trace::KernelAccess access(uint64_t correlation, uint64_t lo, uint64_t hi, trace::AccessDir dir, bool overflowed) {
  trace::KernelAccess a{};
  a.correlation = correlation;
  a.addr = lo;
  a.bytes = hi - lo;
  a.dir = dir;
  a.overflowed = overflowed ? 1 : 0;
  return a;
}

}  // namespace

std::vector<trace::KernelAccess> slot_to_accesses(const LaunchIntervals& slot, uint64_t correlation) {
  std::vector<Interval> reads, writes;
  auto take = [&](const GranuleEntry& e) {
    if (e.key_plus1 == 0) return;
    if (e.read_lo_inv != 0 && ~e.read_lo_inv < e.read_hi) reads.emplace_back(~e.read_lo_inv, e.read_hi);
    if (e.write_lo_inv != 0 && ~e.write_lo_inv < e.write_hi) writes.emplace_back(~e.write_lo_inv, e.write_hi);
  };
  for (const GranuleEntry& e : slot.entries) take(e);
  std::vector<Interval> r = merged(std::move(reads));
  std::vector<Interval> w = merged(std::move(writes));

  // Split into read-only, write-only and read-write pieces: sweep over the boundaries.
  std::vector<uint64_t> cuts;
  for (const Interval& iv : r) cuts.insert(cuts.end(), {iv.first, iv.second});
  for (const Interval& iv : w) cuts.insert(cuts.end(), {iv.first, iv.second});
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

  std::vector<trace::KernelAccess> out;
  size_t ri = 0, wi = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    uint64_t lo = cuts[i], hi = cuts[i + 1];
    while (ri < r.size() && r[ri].second <= lo) ++ri;
    while (wi < w.size() && w[wi].second <= lo) ++wi;
    bool rd = ri < r.size() && r[ri].first <= lo;
    bool wr = wi < w.size() && w[wi].first <= lo;
    if (!rd && !wr) continue;
    trace::AccessDir dir = rd && wr ? trace::AccessDir::kReadWrite : rd ? trace::AccessDir::kRead : trace::AccessDir::kWrite;
    if (!out.empty() && out.back().dir == dir && out.back().addr + out.back().bytes == lo) {
      out.back().bytes += hi - lo;
    } else {
      out.push_back(access(correlation, lo, hi, dir, false));
    }
  }

  // Coarse entries: the hull of a launch's reads (writes) inside one 64 MiB region, known in
  // direction but not exact in extent (KernelAccess::overflowed = 2).
  for (const GranuleEntry& e : slot.coarse) {
    if (e.key_plus1 == 0) continue;
    if (e.read_lo_inv != 0 && ~e.read_lo_inv < e.read_hi) {
      out.push_back(access(correlation, ~e.read_lo_inv, e.read_hi, trace::AccessDir::kRead, false));
      out.back().overflowed = trace::kAccessHull;
    }
    if (e.write_lo_inv != 0 && ~e.write_lo_inv < e.write_hi) {
      out.push_back(access(correlation, ~e.write_lo_inv, e.write_hi, trace::AccessDir::kWrite, false));
      out.back().overflowed = trace::kAccessHull;
    }
  }
  if (slot.overflow_dirs != 0 && slot.overflow_lo_inv != 0 && ~slot.overflow_lo_inv < slot.overflow_hi) {
    trace::AccessDir dir = slot.overflow_dirs == kDirRead    ? trace::AccessDir::kRead
                           : slot.overflow_dirs == kDirWrite ? trace::AccessDir::kWrite
                                                             : trace::AccessDir::kReadWrite;
    out.push_back(access(correlation, ~slot.overflow_lo_inv, slot.overflow_hi, dir, true));
  }
  return out;
}

}  // namespace streamrace::tracer::precise
