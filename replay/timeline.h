// Per-stream timeline of a schedule: one row per host action in issue order, one column per
// stream (plus the host), so a reader sees which stream each operation runs on and where the
// cross-stream edges (records, waits, syncs) are.
#pragma once

#include <ostream>

#include "replay/schedule.h"

namespace streamrace::replay {

struct TimelineOptions {
  size_t column_width = 34;
  bool show_ranges = false;  // print the byte ranges under each operation
};

void print_timeline(std::ostream& out, const Schedule& s, const TimelineOptions& opts = {});

// "ipg_buffer[0][8, 16)" style text of a range.
std::string describe_range(const Schedule& s, const ByteRange& r);

}  // namespace streamrace::replay
