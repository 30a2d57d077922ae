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
// The same lift without what only a reader of the schedule needs: its streams, events,
// buffers and every action's kind, stream, event and byte ranges are lift_trace's, but no
// action has a label, API name, call stack or kernel pointers. Several times cheaper (most of
// a lift is those strings and stacks, allocated and freed once per action), and enough to
// size the schedule (StreamSimulator::cells_needed gives what it gives for lift_trace's).
LiftResult lift_trace_shape(const std::string& path);

}  // namespace streamrace::replay
