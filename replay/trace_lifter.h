// Lifting: a recorded trace becomes a schedule (memcpy/memset/kernel/NCCL ops with their byte
// ranges on their streams, event records and waits, host syncs), each action remembering the
// call seq it came from, for the CPU simulator's second opinion on a trace. Fixes are applied
// to the recorded trace itself (trace_editor.h), not to the lifted schedule.
#pragma once

#include <string>
#include <vector>

#include "replay/schedule.h"

namespace streamrace::replay {

struct LiftResult {
  Schedule schedule;
  std::vector<std::string> warnings;  // what the schedule does not model (graphs, groups, ...)
};

// Throws trace::TraceError for an unreadable trace.
LiftResult lift_trace(const std::string& path);

}  // namespace streamrace::replay
