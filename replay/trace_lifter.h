// Lifting: a recorded trace becomes a schedule (memcpy/memset/kernel/NCCL ops with their byte
// ranges on their streams, event records and waits, host syncs), each action remembering the
// call seq it came from. Fix edits (analysis::FixEdit: record an event after one call, wait
// on it before another) are applied to the lifted schedule, which is then written back as a
// trace (trace_emitter.h) and re-judged by the analyzer and the CPU simulator.
#pragma once

#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "replay/schedule.h"

namespace streamrace::replay {

struct LiftResult {
  Schedule schedule;
  std::vector<std::string> warnings;  // what the schedule does not model (graphs, groups, ...)
};

// Throws trace::TraceError for an unreadable trace.
LiftResult lift_trace(const std::string& path);

// Applies one edit; throws std::invalid_argument when the seqs or streams are not in the
// schedule or the wait would come before the record. Returns the index of the wait action.
size_t apply_fix_edit(Schedule& s, const analysis::FixEdit& edit, const std::string& name);

// The same edit by action index: record on `record_stream` right after action `after`, and
// make `wait_stream` wait right before action `before` (which must come later).
size_t insert_fix(Schedule& s, size_t after, uint32_t record_stream, size_t before, uint32_t wait_stream,
                  const std::string& name);

}  // namespace streamrace::replay
