// The device-side aggregation buffer of precise mode: one fixed-size LaunchIntervals slot per
// patched launch, in a ring allocated once per context. Shared by the device callbacks
// (access_aggregator.cu, nvcc) and the host (C++), so it holds only fixed-width integers.
//
// An all-zero slot is empty, so the host resets a whole ring with one memset:
//   - an entry's key is stored plus one (0 = free entry);
//   - interval starts are stored bit-inverted (`~lo`), so the minimum of the starts is the
//     maximum of the stored values and both ends of an interval are updated with atomicMax.
// An entry covers one granule of the address space (2^granule_shift bytes, aligned): the
// device keeps, per granule, the smallest start and the largest end of the reads and of the
// writes the launch made there. An access whose granule finds no entry within kProbeLimit
// probes (more distinct granules in one launch than the table holds) goes to a coarse entry
// (2^kCoarseExtraShift granules, 64 MiB with the default granule), and only when that table is
// full too, to the slot's overflow hull. Coarse entries are intervals like the others, with
// their direction; the hull is one region of unknown extent inside it. (Before the coarse
// table, a launch touching more than 128 MiB made the hull span every address between its
// buffers, and each access past the 128th granule probed all 128 entries.)
#pragma once

#include <cstdint>

namespace streamrace::tracer::precise {

inline constexpr uint32_t kMaxGranules = 128;       // entries per launch slot
inline constexpr uint32_t kMaxCoarse = 64;          // coarse entries per launch slot
inline constexpr uint32_t kCoarseExtraShift = 6;    // a coarse entry covers 64 granules
inline constexpr uint32_t kProbeLimit = 32;         // probes before an access goes coarser
inline constexpr uint32_t kDefaultGranuleShift = 20;  // 1 MiB granules

inline constexpr uint32_t kDirRead = 1u;
inline constexpr uint32_t kDirWrite = 2u;

struct GranuleEntry {
  uint64_t key_plus1;     // (address >> granule_shift) + 1; 0 = free
  uint64_t read_lo_inv;   // ~(lowest byte read); 0 = no read
  uint64_t read_hi;       // one past the highest byte read
  uint64_t write_lo_inv;  // ~(lowest byte written); 0 = no write
  uint64_t write_hi;      // one past the highest byte written
};
static_assert(sizeof(GranuleEntry) == 40);

struct LaunchIntervals {
  uint32_t granule_shift;  // written by the host when the ring is created, never reset
  uint32_t overflow_dirs;  // kDirRead | kDirWrite of the accesses that overflowed; 0 = none
  uint64_t overflow_lo_inv;
  uint64_t overflow_hi;
  uint64_t reserved;
  GranuleEntry entries[kMaxGranules];
  GranuleEntry coarse[kMaxCoarse];  // keys: address >> (granule_shift + kCoarseExtraShift)
};
static_assert(sizeof(LaunchIntervals) == 32 + 40 * (kMaxGranules + kMaxCoarse));

}  // namespace streamrace::tracer::precise
