// Host side of precise mode's aggregation: one launch's LaunchIntervals slot, copied back
// from the device, becomes the KernelAccess records of that launch. Pure function, no CUDA.
#pragma once

#include <cstdint>
#include <vector>

#include "traceformat/records.h"
#include "tracer/precise/interval_buffer.h"

namespace streamrace::tracer::precise {

// Records for the launch with `correlation`, sorted by address:
//   - per direction, the granules' intervals, with intervals that touch or overlap (a
//     contiguous range crossing granule boundaries) merged into one record;
//   - where a range was both read and written, one kReadWrite record for the common bytes
//     and kRead / kWrite records for the rest;
//   - the overflow hull, if any accesses overflowed, as one record with `overflowed` = 1
//     (the analyzer treats it as a region of unknown direction).
// A slot with no accesses gives no records (the launch touched no global memory).
std::vector<trace::KernelAccess> slot_to_accesses(const LaunchIntervals& slot, uint64_t correlation);

}  // namespace streamrace::tracer::precise
