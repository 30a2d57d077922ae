// Reading and writing trace files: the versioned header, checksummed (optionally zstd
// compressed) chunks of records, and salvage of files cut off mid-chunk. Used by the tracer
// (writing, from its flusher thread) and by the analyzer and tests (reading).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "traceformat/records.h"

struct ZSTD_CCtx_s;
struct iovec;
struct ZSTD_DCtx_s;

namespace streamrace::trace {

// Frees a zstd context (the writer's and the reader's, each reused for every chunk: a context
// per ZSTD_compress/ZSTD_decompress call costs an allocation and its set-up every chunk).
struct ZstdContextFree {
  void operator()(ZSTD_CCtx_s* c) const;
  void operator()(ZSTD_DCtx_s* d) const;
};

// Everything the header carries. Unknown keys read from a newer file land in `extra`.
struct TraceHeader {
  std::string producer;        // "libstreamrace 0.1.0" or "streamrace test builder"
  std::string host;
  int64_t pid = 0;
  int32_t rank = -1;           // from the environment at start; NCCL comms may refine it
  std::string devices;         // "0:NVIDIA H200;1:NVIDIA H200"
  std::string driver_version;  // "13000"
  std::string cuda_version;
  std::string cupti_version;
  std::string nccl_version;
  std::string clock_source = "CLOCK_MONOTONIC";
  std::string capture_status = "ok";  // "ok" or why CUDA events could not be captured
  std::string mode = "default";       // "default" or "precise"
  std::string command;                // the traced program's command line
  std::map<std::string, std::string> extra;
};

// Thrown for input that is not a readable trace. The message names the file and offset.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A record inside a decoded chunk. `body` stays valid until the next chunk is decoded.
struct RecordView {
  RecordKind kind;
  std::span<const uint8_t> body;

  template <FixedRecord T>
  bool is() const { return kind == T::kKind; }
  // Copies the fixed part of the body; bodies from newer writers may be longer.
  template <FixedRecord T>
  T as() const {
    T out{};
    // A copy of constant size compiles to a few moves; a variable one to `rep movs`, whose
    // start-up cost was most of the analyzer's record dispatch.
    if (body.size() >= sizeof(T))
      std::memcpy(&out, body.data(), sizeof(T));
    else
      std::memcpy(&out, body.data(), body.size());
    return out;
  }
  // The bytes after the fixed struct T (strings, frames, pointer lists).
  template <typename T>
  std::span<const uint8_t> tail() const {
    return body.size() > sizeof(T) ? body.subspan(sizeof(T)) : std::span<const uint8_t>{};
  }
};

// Accumulates records into one chunk payload. Not thread-safe: one per producer.
class ChunkBuilder {
 public:
  template <FixedRecord T>
  void add(const T& rec) { add_raw(T::kKind, &rec, sizeof(T), nullptr, 0); }
  void add_string(uint32_t id, std::string_view text);
  void add_stack(uint32_t id, std::span<const StackFrame> frames);
  void add_kernel(const KernelLaunchHead& head, std::span<const uint64_t> ptrs);
  void add_notice(NoticeLevel level, std::string_view text);
  void add_raw(RecordKind kind, const void* fixed, size_t fixed_size, const void* tail, size_t tail_size);

  size_t bytes() const { return buf_.size(); }
  uint32_t records() const { return records_; }
  bool empty() const { return records_ == 0; }
  std::span<const uint8_t> payload() const { return buf_; }
  void clear() { buf_.clear(); records_ = 0; }
  void reserve(size_t bytes) { buf_.reserve(bytes); }
  // Moves this builder's records onto the end of `into` (the flusher merges thread buffers).
  void append_to(ChunkBuilder& into) const;

 private:
  std::vector<uint8_t> buf_;
  uint32_t records_ = 0;
};

struct WriterOptions {
  bool compress = true;
  int zstd_level = 1;
};

// Writes one trace file. write_chunk() may be called from one thread at a time.
class TraceWriter {
 public:
  // Creates `path` exclusively, never following a symlink (O_CREAT|O_EXCL|O_NOFOLLOW).
  TraceWriter(const std::string& path, const TraceHeader& header, WriterOptions opts = {});
  // Writes to an already open descriptor (which the writer then owns).
  TraceWriter(int fd, const std::string& name, const TraceHeader& header, WriterOptions opts = {});
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void write_chunk(const ChunkBuilder& chunk);
  // One chunk whose payload is the concatenation of `pieces` (each a run of whole framed
  // records) holding `records` records: the bytes write_chunk of one builder with that
  // payload writes. A stored chunk goes out from the pieces as they are (checksummed in
  // turn, one writev), a compressed one is gathered first (zstd takes one buffer).
  void write_chunk(std::span<const std::span<const uint8_t>> pieces, uint32_t records);
  // Writes the end-of-trace marker and closes the file. Idempotent.
  void close();
  // For a process about to exec: the end-of-trace marker is written but the file stays open,
  // and nothing may be written after it until remove_end_marker(), which truncates it away
  // again (the exec failed and the process goes on). close() after it only closes the file.
  void write_end_marker();
  void remove_end_marker();
  bool end_marked() const { return marked_; }
  const std::string& path() const { return path_; }
  uint64_t bytes_written() const { return offset_; }

 private:
  void write_all(const void* data, size_t size);
  // Writes the buffers in order, by writev (a stored chunk: its header, then its payload
  // where the caller has it, no copy); `v` is used up.
  void write_all_gathered(std::vector<struct iovec>& v);
  void write_header(const TraceHeader& header);
  void write_framed(uint32_t flags, std::span<const uint8_t> raw, uint32_t records);

  int fd_ = -1;
  std::string path_;
  WriterOptions opts_;
  uint64_t offset_ = 0;
  bool marked_ = false;          // write_end_marker() ran, remove_end_marker() did not
  uint64_t before_marker_ = 0;   // the file's size before the marker
  std::unique_ptr<uint8_t[]> scratch_;  // a compressed chunk, after room for its header
  std::vector<uint8_t> gathered_;        // pieces of a chunk to compress, gathered
  size_t scratch_bytes_ = 0;
  // ZSTD_compressCCtx at the level ignores every other setting: the bytes are ZSTD_compress's.
  std::unique_ptr<ZSTD_CCtx_s, ZstdContextFree> cctx_;
};

struct ReadStats {
  uint64_t chunks = 0;
  uint64_t records = 0;
  bool complete = false;    // the end-of-trace marker was seen
  bool truncated = false;   // the file ends inside a chunk
  uint64_t valid_bytes = 0; // offset just past the last whole chunk
};

// Reads a trace file chunk by chunk. Throws TraceError for foreign or corrupt input; a
// file cut off mid-chunk yields every whole chunk, then sets stats().truncated.
class TraceReader {
 public:
  explicit TraceReader(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const TraceHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Calls fn for every record of the next chunk; false at the end of the file.
  bool next_chunk(const std::function<void(const RecordView&)>& fn);
  // Reads every remaining record.
  void for_each(const std::function<void(const RecordView&)>& fn);
  const ReadStats& stats() const { return stats_; }
  uint64_t file_size() const { return file_size_; }
  // File offset of the chunk whose records next_chunk() is handing out (or last handed out).
  uint64_t chunk_offset() const { return chunk_offset_; }
  // Human-readable warnings gathered while reading (truncation, missing end marker).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  [[noreturn]] void fail(uint64_t offset, const std::string& what) const;
  size_t read_at_most(void* dst, size_t n);
  void read_header();

  std::string path_;
  FILE* file_ = nullptr;
  uint64_t offset_ = 0;
  uint64_t file_size_ = 0;
  uint64_t chunk_offset_ = 0;
  TraceHeader header_;
  ReadStats stats_;
  std::vector<std::string> warnings_;
  std::vector<uint8_t> stored_, raw_;
  std::unique_ptr<ZSTD_DCtx_s, ZstdContextFree> dctx_;
  bool done_ = false;
};

uint32_t checksum(const void* data, size_t size, uint32_t seed = 0);

// Calls fn for each record framed in a chunk's uncompressed payload (a ChunkBuilder's, or a
// chunk read and decompressed), in order. Returns the records handed out, or nothing when the
// framing runs past the payload (the records before that point have been handed out).
std::optional<uint32_t> for_each_framed_record(std::span<const uint8_t> payload,
                                               const std::function<void(const RecordView&)>& fn);

}  // namespace streamrace::trace
