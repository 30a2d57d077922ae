// Timeline: the per-op view of traces that the Perfetto and HTML reports and `explain` draw:
// every op on every stream with its time span, and the event edges between streams. Findings
// only carry the two racing accesses; this is the context around them, read from the traces
// through the same CallStream the analyzer reads.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/finding.h"

namespace streamrace::analysis {

struct TimelineOp {
  std::string trace;         // trace file the op came from
  int rank = -1;
  uint64_t stream = 0;
  uint32_t device = 0;
  std::string stream_label;  // "stream 0x1000 (non-blocking, device 0)", "legacy default stream (device 0)"
  std::string name;          // kernel name, "cudaMemcpyAsync", "ncclAllReduce", ...
  std::string kind;          // "kernel", "memcpy", "memset", "nccl"
  uint64_t seq = 0;          // call sequence number in its trace
  uint64_t correlation = 0;  // joins the op's device timing
  uint64_t host_ns = 0;      // when the host issued it
  uint64_t start_ns = 0;     // device span when measured, else an estimate (see device_time)
  uint64_t end_ns = 0;
  bool device_time = false;  // start/end are device timestamps (OpTiming records)
};

// An ordering edge between two ops of one trace: an event recorded after `from_seq` on one
// stream and waited for before `to_seq` on another.
struct TimelineFlow {
  std::string trace;
  uint64_t from_seq = 0;
  uint64_t to_seq = 0;
  uint64_t event = 0;
  std::string label;  // "event 0x2000"
};

struct Timeline {
  std::vector<TimelineOp> ops;  // grouped by trace, in seq order within a trace
  std::vector<TimelineFlow> flows;
  bool empty() const { return ops.empty(); }
  // The op with `seq` in `trace` (matched by path, then by file name), or null.
  const TimelineOp* find(const std::string& trace, uint64_t seq) const;

 private:
  // trace -> seq -> index in ops; built on the first find() after ops changed size.
  mutable std::unordered_map<std::string, std::unordered_map<uint64_t, size_t>> index_;
  mutable size_t indexed_ops_ = 0;
};

// Reads the traces (in call order) and lays out their ops. Ops without device timestamps are placed at
// their host issue time, after the previous op of their stream, with a nominal 1 µs length,
// so the picture keeps each stream's order. Throws trace::TraceError on unreadable input.
Timeline build_timeline(const std::vector<std::string>& trace_paths);

// A minimal timeline from the findings alone (for results read from JSON or sanitizer
// logs, where no trace is at hand): each finding's two accesses in call order.
Timeline timeline_from_findings(const std::vector<Finding>& findings);

}  // namespace streamrace::analysis
