// CallIndex: what the fix editor must know of a trace before it edits it, gathered in one
// pass over the records (its own, or the analysis's through trace::RecordObserver): which
// seqs are calls, the stream of each call that accesses memory on a stream, the streams the
// trace creates, the fix events and API names an earlier round inserted, and the reader's
// warnings. It holds one byte per call and a few words, never the records, so the editor's
// memory is bounded by the edits rather than by the trace.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "traceformat/call_stream.h"
#include "traceformat/trace_file.h"

namespace streamrace::replay {

// Synthetic event handles: kFixEventBase + n; the editor skips any the trace already uses.
inline constexpr uint64_t kFixEventBase = 0x5EED0000'00000000ull;
inline constexpr const char* kFixApiPrefix = "streamrace-fix:";

class CallIndex final : public trace::RecordObserver {
 public:
  // An empty index of `path`, filled by record() and end() as the trace is read.
  explicit CallIndex(std::string path) : path_(std::move(path)) {}
  // Reads `path` (trace::CallStream) and indexes it. Throws trace::TraceError.
  static CallIndex read(const std::string& path);

  void record(const trace::RecordView& r) override;
  void end(const trace::CallStream& stream) override;

  const std::string& path() const { return path_; }
  const trace::TraceHeader& header() const { return header_; }
  // Whether `seq` is a call the analysis saw (calls come in seq order, so for two calls
  // seq order is their order in the trace).
  bool is_call(uint64_t seq) const;
  // The stream the call `seq` was issued on, for the calls that access memory on a stream
  // (kernel launches, copies, memsets, NCCL calls); nothing for other calls or unknown seqs.
  std::optional<uint64_t> stream_of_call(uint64_t seq) const;
  bool has_stream(uint64_t handle) const;
  // Whether the trace creates `handle` (again) by a call whose seq lies in (after, before):
  // a stream created anew starts with a fresh clock, so it must wait again.
  bool created_between(uint64_t handle, uint64_t after, uint64_t before) const;
  uint64_t calls() const { return ncalls_; }
  // "<path>: <warning>" for the reader's warnings, and that seqs are renumbered densely.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The first fix event an edit may use: after those an earlier round inserted.
  uint64_t first_fix_event() const;
  // Whether `event`, at or after first_fix_event(), is used by the trace.
  bool fix_event_used(uint64_t event) const;
  // The string id after the largest the trace defines.
  uint32_t next_string() const { return max_string_ + 1; }
  // Strings defined with kFixApiPrefix (an earlier round's API names), with their ids.
  const std::vector<std::pair<std::string, uint32_t>>& fix_strings() const { return fix_strings_; }

  // Also keep the records themselves as read, up to `max_bytes` of them (a copy of the whole
  // ordered record stream; given up, and freed, past that): on a small trace the editor then
  // writes from them instead of decoding and ordering the trace once more. Call before the
  // first record().
  void keep_records(size_t max_bytes) { keep_limit_ = max_bytes; }
  bool has_records() const { return keep_limit_ != 0 && !kept_dropped_; }
  // The bytes of the kept records (each with its 4-byte framing: a chunk payload's size).
  size_t kept_bytes() const { return has_records() ? kept_bytes_ : 0; }
  // Hands every kept record to fn, in the order they were read (has_records() only).
  void for_each_record(const std::function<void(const trace::RecordView&)>& fn) const;

 private:
  // Per call one code: 0 = no stream, 1..kTableCodes = stream_table_[code - 1], kOverflow =
  // in overflow_ (a trace with more distinct accessing streams than the table holds).
  static constexpr uint8_t kOverflow = 255;
  static constexpr size_t kTableCodes = 254;
  struct Run {
    uint64_t first_seq;
    size_t first_code;  // index of its first call's code
  };
  // The run holding `seq` and its code's index, or nothing.
  std::optional<size_t> code_index(uint64_t seq) const;
  uint8_t stream_code(uint64_t seq, uint64_t stream);
  void note_event(uint64_t event);
  // The editor's events lie in [kFixEventBase, kFixEventRange).
  static constexpr uint64_t kFixEventRange = kFixEventBase + (1ull << 32);

  std::string path_;
  trace::TraceHeader header_;
  std::vector<Run> runs_;       // consecutive seqs, in seq order
  // One code per call, in seq order, in blocks of 64 KiB: no doubling while it grows, no copy
  // to shrink it. Four bits a call while the trace has at most kNibbleCodes accessing streams
  // (the usual case: 2 M calls in 1 MB), widened to a byte a call at the next one.
  static constexpr int kBlockBits = 16;
  static constexpr size_t kBlockBytes = size_t(1) << kBlockBits;
  static constexpr size_t kNibbleCodes = 15;
  void push_code(uint8_t code) {
    const size_t per_block = wide_ ? kBlockBytes : 2 * kBlockBytes;
    const size_t i = ncodes_ % per_block;
    if (i == 0) code_blocks_.push_back(std::make_unique<uint8_t[]>(kBlockBytes));  // zeroed
    uint8_t* block = code_blocks_.back().get();
    if (wide_)
      block[i] = code;
    else
      block[i >> 1] |= uint8_t(code << ((i & 1) * 4));
    ++ncodes_;
  }
  uint8_t code_at(size_t i) const {
    if (wide_) return code_blocks_[i >> kBlockBits][i & (kBlockBytes - 1)];
    const uint8_t b = code_blocks_[i / (2 * kBlockBytes)][(i % (2 * kBlockBytes)) >> 1];
    return uint8_t((b >> ((i & 1) * 4)) & 0xF);
  }
  void widen();  // four bits a call -> a byte a call
  bool wide_ = false;
  std::vector<std::unique_ptr<uint8_t[]>> code_blocks_;
  size_t ncodes_ = 0;
  std::vector<uint64_t> stream_table_;
  std::unordered_map<uint64_t, uint8_t> code_of_stream_;
  uint64_t last_stream_ = 0;
  uint8_t last_code_ = 0;
  std::unordered_map<uint64_t, uint64_t> overflow_;  // seq -> stream
  std::vector<std::pair<uint64_t, uint64_t>> created_streams_;  // (handle, seq of the create), sorted after end()
  // Fix events the trace uses: the largest below kFixEventBase + 2^32 (the editor's range,
  // which it continues after), and those above it (no editor makes them; sorted after end()).
  uint64_t last_fix_event_ = 0;
  std::vector<uint64_t> high_events_;
  std::vector<std::pair<std::string, uint32_t>> fix_strings_;
  std::vector<std::string> warnings_;
  // Kept records, each as u16 kind, u16 body size, body (records are at most 0xFFFF bytes),
  // in blocks of kKeptBlockBytes that no record straddles: no copy while they grow, and
  // pages only touched as records fill them (a doubling vector copied and touched twice as much).
  static constexpr size_t kKeptBlockBytes = 256u << 10;
  struct KeptBlock {
    std::unique_ptr<uint8_t[]> bytes;  // uninitialised past `used`
    size_t used = 0;
  };
  std::vector<KeptBlock> kept_;
  size_t kept_bytes_ = 0;  // over all blocks
  size_t keep_limit_ = 0;
  bool kept_dropped_ = false;
  uint64_t ncalls_ = 0, last_seq_ = 0;
  uint32_t max_string_ = 0;
};

}  // namespace streamrace::replay
