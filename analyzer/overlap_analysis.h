// OverlapAnalysis: from device timestamps, how much of each collective's time overlapped
// compute on other streams, how much was exposed, and why compute streams sat idle (a stream
// wait, a host synchronisation, or another collective ahead on the same communicator).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analyzer/finding.h"

namespace streamrace::analysis {

struct CollectiveOverlap {
  std::string op;          // ncclReduceScatter, ...
  uint64_t stream = 0;
  uint64_t comm = 0;
  uint64_t bytes = 0;
  uint64_t seq = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t overlapped_ns = 0;  // time some compute op ran on another stream meanwhile
  std::vector<Frame> stack;
};

// One stretch in which a compute stream sat idle between two of its ops.
struct ComputeWait {
  uint64_t stream = 0;
  uint64_t start_ns = 0, end_ns = 0;
  std::string cause;   // "stream wait", "host synchronize", "event synchronize", "collective ahead", "host launch"
  std::string detail;  // what it waited for
  std::vector<Frame> stack;  // where the waiting call was made
};

struct RankOverlap {
  std::string trace;
  int rank = -1;
  uint64_t collectives = 0;
  uint64_t collective_ns = 0;  // sum of collective durations
  uint64_t overlapped_ns = 0;  // of which overlapped with compute
  uint64_t exposed_ns = 0;     // collective time with no compute running anywhere else
  uint64_t compute_ns = 0;     // union of compute op time
  uint64_t span_ns = 0;        // first op start to last op end
  uint64_t timed_ops = 0, untimed_ops = 0;
  std::vector<CollectiveOverlap> per_collective;
  std::vector<ComputeWait> waits;  // longest first, at most `max_waits`
  // Totals per cause (ns), in the order of first appearance.
  std::vector<std::pair<std::string, uint64_t>> wait_by_cause;
  // How the trace names each stream above (trace::stream_label).
  std::map<uint64_t, std::string> stream_labels;
};

struct OverlapOptions {
  uint64_t min_wait_ns = 20'000;  // idle stretches shorter than this are launch noise
  size_t max_waits = 20;
  int steps = 0;                  // if > 0, per-step figures divide by this
};

// Analyses one trace file. Throws trace::TraceError on unreadable input.
RankOverlap analyze_overlap(const std::string& path, const OverlapOptions& opts);

void write_overlap_text(std::ostream& out, const std::vector<RankOverlap>& ranks, const OverlapOptions& opts);
nlohmann::json overlap_to_json(const std::vector<RankOverlap>& ranks, const OverlapOptions& opts);

}  // namespace streamrace::analysis
