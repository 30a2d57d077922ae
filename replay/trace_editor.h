// Record-level fix edits on recorded traces. Lifting a real recording into the schedule IR and
// emitting it again loses what the IR does not model (host threads, host syncs, allocation
// history, NCCL groups, ...), so re-analysing the emitted trace reports races the recording
// never had. TraceEditor instead copies every record of the trace byte for byte and only
// inserts the records of the fixes. Call seqs are renumbered densely in the new order.
//
// One fix event per stream pair. Every FixEdit (order call a on stream S before call b on
// stream T) of one (S, T) pair shares one event E_ST: EventCreate right before its first
// record, EventRecord(E_ST, S) right after earlier calls, StreamWaitEvent(T, E_ST) right
// before later calls. A wait before b sees the latest record of E_ST issued before b; that
// record is on S, so it holds every call of S before it. An edit (a, b) therefore needs
//   - a record after a call of S at or after a, before b, to be the latest before b: if the
//     latest record before b is after a call before a, a record goes right after a;
//   - a wait of T before b that sees that record: if T's latest wait before b comes before
//     that record (or T was created anew since), a wait goes right before b.
// Otherwise the edit is already ordered by the insertions of earlier edits and adds nothing.
// Adding a record never undoes an earlier edit (a wait then sees a later record of S, which
// holds more), so every edit stays ordered; the record it follows is dropped when no wait lies
// between the two (no wait would see it any more). Edits given in order of the later call (as
// edit_one_trace gives them: racing pairs come in that order) place a record only after an
// earlier call no earlier record covers and a wait only before a later call no earlier wait
// covers; each may also order a later call b after a later call a' of S recorded before b,
// as a source-level fix with one event does. A trace edited this way holds a handful of fix
// events, not one per edit, and the editor keeps only the insertions it will write.
//
// The editor streams: it checks edits against a CallIndex of the trace (one pass, its own or
// the analysis's) and write() reads the trace once more, record by record (or, for a small
// file, walks the records the index kept), so it holds the insertions (8 bytes each) and
// four bits or a byte per call, never a large trace's records.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "replay/analyzer_verdict.h"
#include "replay/call_index.h"
#include "traceformat/trace_file.h"

namespace streamrace::replay {

class TraceEditor {
 public:
  // Indexes the trace by reading it once (throws trace::TraceError), in the order the
  // analyzer processes it (trace::CallStream).
  explicit TraceEditor(const std::string& path);
  // Edits the trace `index` was built from (index.path()), e.g. while the analysis read it.
  explicit TraceEditor(CallIndex index);

  // Queues one edit; seqs are those of the trace as read. Throws std::invalid_argument when a
  // seq is not a call of the trace, after_seq does not come before before_seq, a stream is
  // neither a legacy or per-thread default stream nor created in the trace, or the editor's
  // limits are passed (seqs below 2^48, 65536 stream pairs). An edit that the insertions
  // queued so far already order adds nothing (see above).
  void add_edit(const analysis::FixEdit& edit);
  // The calls the edits insert: records and waits, and the fix events (one per stream pair).
  size_t edits() const { return records_ + waits_; }
  size_t records() const { return records_; }
  size_t waits() const { return waits_; }
  size_t events() const { return pairs_.size(); }

  // Each chunk of the edited trace as it is written: its offset in the file, its uncompressed
  // payload and its record count (what trace::TraceWriter::write_chunk was given).
  // The payload comes in pieces (consecutive runs of records; see TraceWriter::write_chunk).
  using ChunkSink =
      std::function<void(uint64_t offset, std::span<const std::span<const uint8_t>> payload, uint32_t records)>;
  // Writes the edited trace to `path` (created exclusively), reading the source trace again
  // (throws trace::TraceError if it no longer reads as it did), with edited_header(). `sink`,
  // if set, sees every chunk right after it is written (apply_record_fixes analyses the edited
  // trace from them). Returns the records written.
  uint64_t write(const std::string& path, trace::WriterOptions opts = {}, const ChunkSink& sink = {}) const;
  // The edited trace's header: the source's, its producer and edit count saying it was edited.
  trace::TraceHeader edited_header() const;

  // The options apply_record_fixes writes the edited trace with: stored (uncompressed) chunks
  // when the records the index kept come to at most kStoredTraceBytes, else zstd's level 1.
  // On a small trace the compression was half of the editor's time (a megabyte takes ~2.5 ms at
  // level 1 here, the rest of editing it ~1 ms) to save a megabyte of disk; the format
  // allows either per chunk and every reader takes both. A large trace is compressed: its
  // file would be several times larger, and writing that costs time too.
  static constexpr size_t kStoredTraceBytes = 8u << 20;
  trace::WriterOptions writer_options() const;

  const trace::TraceHeader& header() const { return index_.header(); }
  bool has_stream(uint64_t handle) const { return index_.has_stream(handle); }
  // The stream the call `seq` was issued on, for the calls that access memory on a stream
  // (kernel launches, copies, memsets, NCCL calls); nothing for other calls or unknown seqs.
  std::optional<uint64_t> stream_of_call(uint64_t seq) const { return index_.stream_of_call(seq); }
  const std::vector<std::string>& warnings() const { return index_.warnings(); }
  uint64_t calls() const { return index_.calls(); }
  // The event handle the next stream pair will use.
  uint64_t next_event() const { return next_event_; }

 private:
  // A (record stream, wait stream) pair, its fix event and where it is recorded and waited on:
  // the seqs of the calls the records follow and the waits precede, each sorted.
  struct StreamPair {
    uint64_t record_stream, wait_stream, event;
    std::vector<uint64_t> after, before;
  };
  // Insertion points of all pairs, packed for write(): seq << 16 | pair, sorted by seq, then pair.
  static constexpr int kPairBits = 16;
  static uint64_t pack(uint64_t seq, uint32_t pair) { return seq << kPairBits | pair; }
  static uint64_t seq_of(uint64_t packed) { return packed >> kPairBits; }
  static uint32_t pair_of(uint64_t packed) { return uint32_t(packed & ((1u << kPairBits) - 1)); }
  // Hands each record of the trace, in the analyzer's order, to its argument.
  using RecordSource = std::function<void(const std::function<void(const trace::RecordView&)>&)>;
  // Copies the source's records to `w` with the edits inserted; returns the records written.
  // `kept`: the source is the index's kept records, which are written in place (renumbered
  // while their chunk is written, then put back).
  uint64_t write_records(const RecordSource& source, bool kept, trace::TraceWriter& w, const ChunkSink& sink) const;

  CallIndex index_;
  std::vector<StreamPair> pairs_;
  uint32_t last_pair_ = 0;  // the pair of the last edit (edits of one pair come in runs)
  size_t records_ = 0, waits_ = 0;
  uint64_t next_event_ = kFixEventBase;
};

// Applying fixes at the record level to a set of traces analysed together. A round edits the
// traces and analyses them again. By default a round edits every occurrence of every
// targeted finding (every racing call pair the analysis kept, which analyze_traces keeps all
// of: the stream pair's event recorded after the earlier call, waited on before the later
// one; each round's edits use new events), so
// one round usually removes them all and a second one only takes what the first uncovered:
// the input is analysed once, the edited traces once per round.
struct RecordFixOptions {
  std::vector<std::string> fingerprints;  // empty: every finding of the input
  std::string out_dir;                    // created; the edited traces are <stem>.fixed.srace
  // The cap on rounds. 0 = as many rounds as the targeted findings have occurrences in total
  // (plus one), enough for every one of them even one occurrence per round.
  uint32_t max_rounds = 0;
  // The former method: each round edits only the first occurrence of every targeted finding
  // (one analysis per occurrence on a trace whose edits order nothing else).
  bool one_occurrence_per_round = false;
  bool keep_rounds = false;  // keep every round's traces (<stem>.round<N>.srace)
  // Analyse the edited traces by reading their files back, as before the editors handed
  // their chunks to the analysis as they wrote them (analysis::FedTrace; the same verdict:
  // tests compare the two). Precise-mode traces are always read back.
  bool read_back_edited = false;
  // Called once the input is analysed and after each round's analysis: the rounds done, and
  // the targeted findings' occurrences still there against those of the input.
  std::function<void(uint32_t rounds, uint64_t left, uint64_t total)> progress;
};

struct RecordFixResult {
  struct PerTrace {
    std::string source;
    std::string edited;
    size_t edits = 0;  // records + waits inserted, over all rounds
    size_t events = 0, records = 0, waits = 0;
    std::vector<std::string> warnings;
  };
  std::vector<PerTrace> traces;
  AnalyzerVerdict before;
  AnalyzerVerdict after;
  uint32_t rounds = 0;       // rounds that edited something
  bool hit_round_cap = false;
  uint64_t round_cap = 0;  // the cap in force (max_rounds, or the automatic one)
  FixVerdict verdict;      // targeted, removed, remaining and new fingerprints
  size_t total_edits() const {
    size_t n = 0;
    for (const auto& t : traces) n += t.edits;
    return n;
  }
  size_t total_events() const {
    size_t n = 0;
    for (const auto& t : traces) n += t.events;
    return n;
  }
  bool fixed() const { return verdict.fixed() && !hit_round_cap; }
};

// The racing pairs of the findings in `before` are released (Occurrence::pairs emptied) as
// they are turned into edits: they are the largest part of the input's analysis.
// Throws std::invalid_argument when a requested fingerprint is not among the input's
// findings or an edit does not fit its trace, trace::TraceError for unreadable traces.
RecordFixResult apply_record_fixes(const std::vector<std::string>& traces, const RecordFixOptions& opts);

}  // namespace streamrace::replay
