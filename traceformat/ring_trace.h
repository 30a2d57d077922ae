// A ring in progress on disk (`--ring N`, docs/long-runs.md), and its assembly into one trace.
// The tracer writes `<trace>.ring/`:
//   definitions.srace  the trace's header, then every string and stack definition and notice
//                      (never dropped: it grows with distinct call sites, not with steps)
//   segment-<n>.srace  one per step (n = 0, 1, ...; the calls before the first step marker
//                      are a segment too), header keys ring_segment, ring_step, ring_begin_seq
//   state.srace        a checkpoint: the live state (a LiveState snapshot) left by segments
//                      0..ring_covers_segment, which were folded and deleted
// assemble_ring() makes the trace: definitions, a window-open mark, the checkpoint's snapshot,
// its end, then every segment after the checkpoint, the calls renumbered densely. The tracer
// calls it at exit (after a last checkpoint); `streamrace run` calls it for a ring a killed
// process left behind (salvage: the steps after the last checkpoint are kept whole, the last
// one may be cut).
#pragma once

#include <cstdint>
#include <string>

#include "traceformat/trace_file.h"

namespace streamrace::trace {

struct RingFiles {
  static std::string definitions(const std::string& dir) { return dir + "/definitions.srace"; }
  static std::string segment(const std::string& dir, uint64_t n) { return dir + "/segment-" + std::to_string(n) + ".srace"; }
  static std::string state(const std::string& dir) { return dir + "/state.srace"; }
  static std::string state_tmp(const std::string& dir) { return dir + "/state.tmp"; }
};

struct RingAssembly {
  uint64_t steps_seen = 0, steps_kept = 0, steps_dropped = 0;
  uint64_t calls_dropped = 0;  // seqs before the first kept step
  uint64_t late_calls = 0;     // calls of a dropped step found in a kept segment, left out
};

// Writes `out` from the ring in `dir`. `header`: the trace's header (null: the one in
// definitions.srace); `salvaged`: the process died, say so in the trace. Throws TraceError
// naming the file when a piece cannot be read; a segment cut off mid-chunk gives its whole
// chunks. Does not delete `dir` (remove_ring does).
RingAssembly assemble_ring(const std::string& dir, const std::string& out, const TraceHeader* header, bool salvaged);
// Deletes the ring's files and its directory.
void remove_ring(const std::string& dir);

}  // namespace streamrace::trace
