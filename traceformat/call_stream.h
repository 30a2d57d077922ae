// CallStream: the one ordered view of a trace that every consumer reads (the analyzer, the
// overlap pass, the replay lifter and editor). It reads the file chunk by chunk, checks each
// record body against its kind's fixed size, keeps the dictionary (strings, stacks, stream
// creations) and hands out records in the order the calls were made: records that come from
// an API call in `seq` order (per-thread buffers reach the file out of order), the others
// (definitions, timings, notices, precise intervals) as they come. Consumers keep only
// their own semantics.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "traceformat/trace_file.h"

namespace streamrace::trace {

// What a stream's creation record said about it.
struct StreamTraits {
  bool known = false;         // a StreamCreate record was seen
  bool non_blocking = false;  // cudaStreamNonBlocking
  uint32_t device = 0;
};

// The one wording for a stream everywhere a stream is named:
// "stream 0x1000 (non-blocking, device 0)", "legacy default stream (device 0)",
// "per-thread default stream (thread 3, device 0)", "stream 0x1000 (untraced creation, device 0)".
std::string stream_label(uint64_t stream, const StreamTraits& traits);

// Strings, stacks and stream creations defined in one trace. Ids come from the file, so the
// tables never grow with an id's value: dense ids stay in a vector, sparse ones in a map.
class TraceDictionary {
 public:
  // The largest string or stack id a trace may use (the tracer assigns them densely from 1).
  static constexpr uint32_t kMaxId = 0x3FFF'FFFFu;

  void define_string(uint32_t id, std::string text);
  void define_stack(uint32_t id, std::vector<StackFrame> frames);
  void define_stream(uint64_t stream, const StreamTraits& traits) { streams_[stream] = traits; }

  // The text of string `id`; empty when it was never defined (0 is "none").
  const std::string& str(uint32_t id) const;
  // The frames of stack `id`, innermost first; null when it was never defined.
  const std::vector<StackFrame>* stack(uint32_t id) const;
  // What is known about `stream` (default traits for a stream never created in the trace).
  StreamTraits stream(uint64_t stream) const;
  // stream_label() with what the trace says about the stream.
  std::string label(uint64_t stream) const;

 private:
  std::vector<std::string> dense_strings_{1};
  std::unordered_map<uint32_t, std::string> sparse_strings_;
  std::unordered_map<uint32_t, std::vector<StackFrame>> stacks_;
  std::unordered_map<uint64_t, StreamTraits> streams_;
};

// The fixed part every body of `kind` must hold (0: unknown kind, skipped by consumers).
size_t record_fixed_size(RecordKind kind);

// A GraphEdit record's parts (CallStream has checked that they fit).
struct GraphEditParts {
  GraphEdit head;
  std::vector<uint64_t> first;   // kAddNode: dependencies; edges: `from`
  std::vector<uint64_t> second;  // edges: `to`
  std::span<const uint8_t> payload;  // the node's work as a record body (kernel, memcpy, memset), or empty
};
GraphEditParts graph_edit_parts(const RecordView& r);
// The record kind a node's parameters are written as (kernel, memcpy, memset nodes, added or set).
std::optional<RecordKind> graph_node_payload_kind(const GraphEdit& g);
const char* graph_node_type_name(GraphNodeType t);

struct CallStreamStats {
  uint64_t delivered = 0;   // records handed to the consumer
  uint64_t calls = 0;       // of those, records carrying CallInfo
  uint64_t seq_gaps = 0;    // call seqs that never came
  uint64_t duplicates = 0;  // call records whose seq was already delivered
};

class CallStream {
 public:
  // Opens `path` and reads its header. Throws TraceError for foreign or corrupt input.
  explicit CallStream(const std::string& path);
  // A stream whose chunks are handed in as they are written instead of read (`replay trace`
  // analyses the traces it edits this way): `path` and `header` are those of the file being
  // written. feed_chunk() and feed_end() then hand out exactly what for_each on the finished
  // file would: the same checks, dictionary, order, stats and warnings.
  CallStream(std::string path, TraceHeader header);

  const std::string& path() const { return reader_ ? reader_->path() : fed_path_; }
  const TraceHeader& header() const { return reader_ ? reader_->header() : fed_header_; }
  const TraceDictionary& dictionary() const { return dict_; }
  // Hands the dictionary over (after for_each) to a consumer that outlives the stream.
  TraceDictionary release_dictionary() { return std::move(dict_); }
  const ReadStats& read_stats() const { return reader_ ? reader_->stats() : fed_stats_; }
  const CallStreamStats& stats() const { return stats_; }
  uint64_t file_size() const { return reader_ ? reader_->file_size() : fed_stats_.valid_bytes; }
  // File offset of the chunk whose records for_each is handing out.
  uint64_t chunk_offset() const { return reader_ ? reader_->chunk_offset() : fed_chunk_offset_; }

  // Hands every record to `fn` in call order (see above). Definitions enter the dictionary
  // before `fn` sees them. Throws TraceError naming the file, offset and field for a body
  // shorter than its kind or a count or id the record cannot hold. `progress`, if set, is
  // called after each chunk with the bytes read so far and the file size.
  void for_each(const std::function<void(const RecordView&)>& fn,
                const std::function<void(uint64_t, uint64_t)>& progress = {});
  // A handed-in stream's next chunk (TraceWriter::write_chunk's): its uncompressed payload,
  // its record count and its offset in the file; its records go to `fn` as for_each would
  // hand them out. Throws TraceError as for_each does.
  void feed_chunk(uint64_t offset, std::span<const uint8_t> payload, uint32_t records,
                  const std::function<void(const RecordView&)>& fn);
  // The same for a payload handed in as consecutive pieces of whole records (see
  // TraceWriter::write_chunk): one chunk, whose records are the pieces' in order.
  void feed_chunk(uint64_t offset, std::span<const std::span<const uint8_t>> payload, uint32_t records,
                  const std::function<void(const RecordView&)>& fn);
  // After the last chunk: the end-of-trace marker TraceWriter::close() writes, and the
  // finished file's size. Hands out any call still waiting for a seq that never came.
  void feed_end(uint64_t file_bytes, const std::function<void(const RecordView&)>& fn);

  // Reader warnings (truncation, missing end marker) and this view's own (seq gaps,
  // duplicates), in that order. Complete after for_each returns.
  std::vector<std::string> warnings() const;

 private:
  void accept(const RecordView& r, const std::function<void(const RecordView&)>& fn);
  void check(const RecordView& r);
  void define(const RecordView& r);
  void drain(const std::function<void(const RecordView&)>& fn);
  void deliver(const RecordView& r, const std::function<void(const RecordView&)>& fn);
  void flush_pending(const std::function<void(const RecordView&)>& fn);

  std::optional<TraceReader> reader_;  // none for a handed-in stream
  std::string fed_path_;
  TraceHeader fed_header_;
  ReadStats fed_stats_;
  uint64_t fed_chunk_offset_ = 0;
  TraceDictionary dict_;
  CallStreamStats stats_;
  uint64_t next_seq_ = 0;
  // Calls that came before an earlier seq: seq -> kind and body.
  std::map<uint64_t, std::pair<RecordKind, std::vector<uint8_t>>> pending_;
};

// A consumer of a CallStream that another consumer drives (the analysis): record() sees each
// record right after the driver, in the order for_each hands them out, end() the stream once
// it is read (its header, warnings and stats are complete then). Lets a second consumer share
// one decode of the file instead of reading it again.
class RecordObserver {
 public:
  virtual ~RecordObserver() = default;
  virtual void record(const RecordView& r) = 0;
  virtual void end(const CallStream& stream) = 0;
};

}  // namespace streamrace::trace
