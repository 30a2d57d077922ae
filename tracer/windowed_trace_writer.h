// WindowedTraceWriter: the recorder's output when only part of a run is written
// (tracer/capture_options.h, docs/long-runs.md). The flusher hands it what it drained: the
// definitions, the capture boundaries (step markers, window opens and closes, each at the
// seq its marker took) and the records. It puts call records in seq order, decides by seq
// which are written, folds every record that is not into a LiveState, and renumbers the
// written calls so that the trace's seqs stay dense:
//  - windows: a file written as it goes; each window open writes a CaptureMark, the state
//    snapshot, and a kStateEnd mark before the window's first call.
//  - ring: one segment file per step in `<trace>.ring/` (traceformat/ring_trace.h); a segment
//    that falls out of the ring is read back and folded into the state, and deleted once a
//    checkpoint of the state covers it (at most every 10 s or 64 segments, so a killed
//    process's ring can be salvaged). finish() writes a last checkpoint and assembles the
//    trace: definitions, a window-open mark, the snapshot, the kept steps.
// Not thread-safe: the recorder calls it under its flush lock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "traceformat/live_state.h"
#include "traceformat/trace_file.h"
#include "tracer/capture_options.h"

namespace streamrace::tracer {

// A step marker or a window edge, at the seq its marker call took.
struct CaptureBoundary {
  trace::CallInfo call;  // the marker call (its seq is the boundary)
  trace::CaptureAction action = trace::CaptureAction::kStep;  // kStep, kWindowOpen or kWindowClose
  uint64_t step = trace::kNoStep;  // kStep: the step that begins (0, 1, ...)
};

struct CaptureTotals {
  uint64_t steps_seen = 0;      // step markers processed
  uint64_t steps_dropped = 0;   // whole steps not written
  uint64_t calls_left_out = 0;  // call records (and markers) not written
  uint64_t windows = 0;         // windows opened
};

class WindowedTraceWriter {
 public:
  WindowedTraceWriter(CaptureOptions opts, std::string path, std::function<trace::TraceHeader()> header);
  ~WindowedTraceWriter();

  void definitions(const trace::ChunkBuilder& defs);
  void boundary(const CaptureBoundary& b);  // in seq order
  // The flusher's drained buffers; call records with seq >= horizon wait for the next call
  // (a marker below them may not be known yet). `final`: nothing waits.
  void records(const std::vector<trace::ChunkBuilder>& drained, uint64_t horizon, bool final = false);
  // Writes the end (ring: assembles the trace) and removes the segments. Idempotent.
  void finish();

  bool file_created() const { return created_; }
  const CaptureTotals& totals() const { return totals_; }
  const std::string& path() const { return path_; }

 private:
  // A call record of the batch being placed: its body lies in a drained chunk or in the
  // held records' buffer, both alive while records() runs.
  struct Pending {
    uint64_t seq;
    trace::RecordKind kind;
    std::span<const uint8_t> body;
  };
  // A call record waiting for a later flush: its body at `offset` in held_bytes_.
  struct Held {
    uint64_t seq;
    trace::RecordKind kind;
    size_t offset, size;
  };
  void hold(const Pending& p);
  struct Segment {
    uint64_t index = 0;
    std::string path;
    uint64_t step = trace::kNoStep;
    uint64_t begin_seq = 0;
    uint64_t calls = 0;
    trace::CallInfo marker{};  // the step marker's call (prologue: none)
    std::unique_ptr<trace::TraceWriter> writer;
  };
  void process_call(const Pending& p);
  void process_other(trace::RecordKind kind, std::span<const uint8_t> body);
  void apply(const CaptureBoundary& b);
  void open_window(const CaptureBoundary& b);
  void close_window(const CaptureBoundary& b);
  trace::CaptureMark mark(const trace::CallInfo& c, trace::CaptureAction a, uint64_t seq) const;
  bool ensure_file();
  void write_out(const trace::ChunkBuilder& c);
  void flush_pending_out();
  // Ring.
  void new_segment(const CaptureBoundary& b);
  void drop_oldest_segment();
  void assemble_ring();
  bool ensure_ring_files();
  void write_definitions(const trace::ChunkBuilder& c);
  // Writes the state checkpoint and deletes the segments it covers (force: whatever the time).
  void maybe_checkpoint(bool force);
  bool is_ring() const { return opts_.ring > 0; }
  // Written seq of a call written at old seq `s` (windows), or nullopt when `s` is in a gap.
  std::optional<uint64_t> written_seq(uint64_t s) const;

  CaptureOptions opts_;
  std::string path_;
  std::function<trace::TraceHeader()> header_;
  trace::CaptureReason reason_;
  bool created_ = false, failed_ = false, finished_ = false;
  std::unique_ptr<trace::TraceWriter> file_;
  trace::ChunkBuilder out_;   // window mode: records waiting for the next write
  trace::LiveState live_;
  std::vector<Held> held_;
  std::vector<uint8_t> held_bytes_;
  std::vector<Pending> batch_;  // reused: the steady state allocates nothing per record
  std::vector<CaptureBoundary> boundaries_;  // known, not yet applied
  uint64_t step_ = trace::kNoStep;
  bool open_ = false;
  // Window mode: correlations of written precise launches (and graph launches), whose measured intervals
  // (KernelAccess, collected at the next synchronisation) are written even after a close.
  std::unordered_set<uint64_t> precise_written_;
  // Window mode: the written intervals {old begin, old end (exclusive), new begin}.
  struct Interval {
    uint64_t old_begin, old_end, new_begin;
  };
  std::vector<Interval> intervals_;
  uint64_t written_ = 0;  // next written seq
  uint64_t gap_calls_ = 0, gap_steps_ = 0;  // left out since the last window closed
  // Ring.
  std::string ring_dir_;
  std::deque<Segment> segments_;
  trace::ChunkBuilder seg_out_;  // records for the newest segment
  std::unique_ptr<trace::TraceWriter> defs_file_;  // <ring>/definitions.srace
  std::vector<std::string> folded_;  // segments folded into live_, deleted at the next checkpoint
  uint64_t newest_folded_ = ~0ull;   // the index of the newest folded segment
  uint64_t last_checkpoint_ns_ = 0;
  bool prologue_dropped_ = false;
  bool seen_any_ = false;
  uint64_t next_segment_ = 0;
  CaptureTotals totals_;
};

}  // namespace streamrace::tracer
