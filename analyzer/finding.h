// What the analyzer concludes: findings (races), notices, and per-trace summaries. Every
// report format (text, JSON, SARIF, JUnit, Perfetto, HTML) and `check` works from these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analyzer/racing_pairs.h"

namespace streamrace::analysis {

enum class Confidence { kCertain, kPossible };
// Named after the later access against the earlier one.
// kUseAfterReuse: the later access is to a tensor the allocator handed out at addresses an
// earlier tensor had, while work on another stream that used the earlier tensor was not yet
// ordered before it (a missing `record_stream` or event wait before the free).
// kHostWriteDuringCopy / kHostReadDuringCopy (--host-accesses): the host wrote the pinned host
// side of an async copy (its source, or its destination), or read a device-to-host copy's
// destination, before any host synchronisation ordered the host after the copy.
enum class RaceKind { kWriteAfterRead, kWriteAfterWrite, kReadAfterWrite, kUseAfterReuse, kHostWriteDuringCopy,
                      kHostReadDuringCopy };

const char* to_string(Confidence c);    // "certain" / "possible"
const char* to_string(RaceKind k);      // "write-after-read" / ...
const char* short_name(RaceKind k);     // "WAR" / "WAW" / "RAW"

struct Frame {
  std::string file;      // Python source file or native module
  std::string function;
  uint32_t line = 0;
  bool python = false;
  uint64_t pc = 0;       // native frames: offset in module
};

// The cudaGraphLaunch that ran an access of a CUDA graph node (the access's own stack is the
// node's, from when its call was captured).
struct GraphLaunchSite {
  std::string api;           // "cudaGraphLaunch", "cuGraphLaunch"
  uint64_t seq = 0;          // the launch's call sequence number
  uint64_t graph_exec = 0;
  uint64_t stream = 0;       // the stream the graph was launched on
  std::string stream_label;
  uint32_t thread = 0;
  std::vector<Frame> stack;  // innermost first
  bool built = false;        // the graph was built with the explicit API (not captured); not in JSON
};

struct Access {
  std::string op;         // API or kernel name: "cudaMemcpyAsync", "ncclAllReduce", "vectorAdd"
  std::string op_kind;    // "memcpy", "memset", "kernel", "nccl"
  std::string direction;  // "read", "write", or "read or write" (kernel pointer argument)
  bool exact = true;      // byte range and direction known exactly
  bool by_signature = false;  // a kernel's range from a learned access signature (docs/signatures.md)
  bool by_library_call = false;  // a kernel's range from its cuBLAS call's matrix arguments
  uint64_t stream = 0;
  std::string stream_label;  // "stream 0x5581 (non-blocking)", "legacy default stream (device 0)"
  uint64_t addr = 0;      // the access's own byte range
  uint64_t bytes = 0;
  uint64_t alloc_base = 0;
  uint64_t alloc_bytes = 0;
  std::string alloc_kind;  // "cudaMalloc", "cudaMallocAsync", ...
  uint64_t seq = 0;        // call sequence number in its trace
  uint32_t thread = 0;
  std::vector<Frame> stack;  // innermost first
  // A CUDA graph node's access: the launch that ran it (`seq`, `thread` and `stack` are then
  // the captured call's).
  std::optional<GraphLaunchSite> graph_launch;
};

// An edit that would order the two accesses: record an event on `record_stream` right
// after the call with `after_seq`, make `wait_stream` wait on it right before `before_seq`.
struct FixEdit {
  uint64_t record_stream = 0;
  uint64_t after_seq = 0;
  uint64_t wait_stream = 0;
  uint64_t before_seq = 0;
};

struct Occurrence {
  std::string trace;  // file it was found in
  int rank = -1;
  uint64_t count = 0;
  uint64_t first_seq = 0;  // of the later access
  uint64_t last_seq = 0;
  // The first kMaxRacingPairs occurrences' call pairs (AnalyzerOptions::racing_pairs_kept), in
  // call order, so the timeline reports can mark each one and apply-fix can edit each one.
  // Kept in memory only (packed, racing_pairs.h): the JSON report does not carry them.
  static constexpr size_t kMaxRacingPairs = 4096;
  RacingPairs pairs;
};

struct Finding {
  std::string fingerprint;  // stable across runs, ranks and trace files (16 hex digits)
  RaceKind kind = RaceKind::kWriteAfterRead;
  Confidence confidence = Confidence::kCertain;
  std::string mode = "default";  // which tier produced the accesses: "default" or "precise"
  Access earlier;   // the access that was issued first
  Access later;     // the access that conflicts with it
  uint64_t overlap_addr = 0;
  uint64_t overlap_bytes = 0;
  std::string missing_edge;  // one sentence: what would have ordered them
  std::string fix;           // one paragraph: the suggested change
  FixEdit fix_edit;
  // kUseAfterReuse: where the earlier tensor was released (op "free", its stack and seq).
  std::optional<Access> released;
  uint64_t occurrences = 0;  // over all traces
  std::vector<int> ranks;    // sorted, distinct
  std::vector<Occurrence> where;
};

struct Notice {
  std::string level;  // "info", "warning", "error"
  std::string trace;
  std::string text;
};

struct TraceSummary {
  std::string path;
  std::string host;
  int64_t pid = 0;
  int rank = -1;
  std::string capture_status;
  // The process's CUDA calls were not captured (another tool held CUPTI, ...): its trace
  // can show no race, so it can never make a run clean.
  bool blind() const { return !capture_status.empty() && capture_status != "ok"; }
  std::string mode;
  uint64_t records = 0;
  uint64_t accesses = 0;
  bool complete = false;
  bool truncated = false;
  // The trace records only part of the run (a capture window or a ring that dropped steps):
  // what the tracer was told ("steps 10:20", "ring 4"); empty for a whole run.
  std::string capture;
  // Records the tracer itself dropped (its notices "N records dropped: ..." and "N kernel
  // launches dropped: ..."): a race may hide behind them, so the verdict is partial.
  uint64_t dropped_records = 0;
  // Call records missing from the sequence (their numbers never came: lost with a killed
  // process's unwritten buffers, or damage): a race may hide behind them, so the verdict is partial.
  uint64_t missing_records = 0;
  // The file ends without the tracer's end-of-trace marker or inside a chunk (the process was
  // killed, or the file was cut): what came after is unknown, so the verdict is partial.
  bool cut_short() const { return !complete || truncated; }
  // Precise mode: the kernels (names as in findings) with at least one measured launch in
  // this trace. Kept in memory for `run --confirm` (not part of the JSON document).
  std::vector<std::string> measured_kernels;
  // ... and those with a measured kernel node of a CUDA graph launch (KernelNodeAccess).
  std::vector<std::string> measured_graph_kernels;
};

// Which slice of a job's trace list a result covers (`analyze --shard I/N`); count 0: the
// whole list given.
struct ShardInfo {
  uint32_t index = 0;
  uint32_t count = 0;
  uint64_t of_traces = 0;  // traces in the whole list the shard was cut from
};

struct AnalysisResult {
  std::vector<Finding> findings;  // sorted: certain first, then by occurrences
  std::vector<Notice> notices;
  std::vector<TraceSummary> traces;
  uint64_t records = 0;
  uint64_t accesses = 0;
  size_t blind_traces() const {
    size_t n = 0;
    for (const auto& t : traces) n += t.blind();
    return n;
  }
  // CUDA graph launches that were not analysed (graphs not made by a stream capture the trace
  // shows, or holding work it cannot show). Non-zero: the verdict is partial, never clean.
  uint64_t unanalysed_graph_launches = 0;
  // Records the tracer dropped, over all traces (TraceSummary::dropped_records).
  uint64_t dropped_records() const {
    uint64_t n = 0;
    for (const auto& t : traces) n += t.dropped_records;
    return n;
  }
  // Graph launches not analysed or records dropped: the verdict is partial, never clean.
  // Traces cut short (TraceSummary::cut_short) and call records missing over all traces.
  size_t cut_short_traces() const {
    size_t n = 0;
    for (const auto& t : traces) n += t.cut_short();
    return n;
  }
  uint64_t missing_records() const {
    uint64_t n = 0;
    for (const auto& t : traces) n += t.missing_records;
    return n;
  }
  bool partial() const {
    return unanalysed_graph_launches != 0 || dropped_records() != 0 || cut_short_traces() != 0 || missing_records() != 0;
  }
  // Traces that record only part of their run (TraceSummary::capture): their verdict is the
  // recorded part's.
  size_t windowed_traces() const {
    size_t n = 0;
    for (const auto& t : traces) n += !t.capture.empty();
    return n;
  }
  ShardInfo shard;
};

// Stable identity of a finding: race kind, confidence and both sites (op, direction, top
// frames), never addresses, handles or sequence numbers. 16 hex digits.
std::string fingerprint_of(const Finding& f);
// Fills f.missing_edge and f.fix. `seen_clock`: how far the later stream had seen the
// earlier stream when it accessed; `earlier_clock`: the earlier access's clock there.
void describe_missing_edge(Finding& f, uint32_t seen_clock, uint32_t earlier_clock);
// "stage_1_and_2.py:949 in reduce_independent_p_g_buckets_and_remove_grads" for the first
// Python frame outside PyTorch's own package (else the first Python frame, else the first
// frame); "<no stack>" when there is none.
std::string site_of(const Access& a);

void to_json(nlohmann::json& j, const Frame& f);
void from_json(const nlohmann::json& j, Frame& f);
void to_json(nlohmann::json& j, const Access& a);
void from_json(const nlohmann::json& j, Access& a);
void to_json(nlohmann::json& j, const Finding& f);
void from_json(const nlohmann::json& j, Finding& f);
void to_json(nlohmann::json& j, const Notice& n);
void from_json(const nlohmann::json& j, Notice& n);
void to_json(nlohmann::json& j, const TraceSummary& t);
void from_json(const nlohmann::json& j, TraceSummary& t);
void to_json(nlohmann::json& j, const AnalysisResult& r);
// Reads a document written by to_json(AnalysisResult) ("streamrace-findings" schema).
// Throws std::runtime_error with a clear message on a document of another shape.
AnalysisResult result_from_json(const nlohmann::json& j);

}  // namespace streamrace::analysis
