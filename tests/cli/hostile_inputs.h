// Hostile inputs of issue #13: one writer per input class that used to crash, hang or pass
// silently. The CLI tests (input_hardening_test.cpp) run the binary on them; the fuzz
// regression generator (tests/fuzz/make_regressions.cpp) writes them into the corpus.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "traceformat/trace_builder.h"
#include "traceformat/trace_file.h"

namespace streamrace::testing::hostile {

using trace::ChunkBuilder;
using trace::RecordKind;
using trace::TraceBuilder;
using trace::TraceWriter;
using trace::WriterOptions;

// Chunks written exactly as given, uncompressed (so offsets are easy to state).
inline void write_chunks(const std::string& path, const std::vector<ChunkBuilder>& chunks, bool compress = false) {
  TraceWriter w(path, TraceBuilder::default_header(0), WriterOptions{compress, 1});
  for (const auto& c : chunks) w.write_chunk(c);
  w.close();
}

// A CaptureMark (1.3) whose action is `action`: 1-4 are valid, anything else is refused.
inline ChunkBuilder capture_mark(uint8_t action) {
  ChunkBuilder c;
  trace::CaptureMark m{};
  m.action = trace::CaptureAction(action);
  m.reason = trace::CaptureReason::kRing;
  c.add(m);
  return c;
}

// One record of `kind` with a body of `size` zero bytes.
inline ChunkBuilder short_record(RecordKind kind, size_t size) {
  ChunkBuilder c;
  std::vector<uint8_t> body(size);
  c.add_raw(kind, body.data(), body.size(), nullptr, 0);
  return c;
}

// The offset of the single data chunk of a file made by write_chunks with one chunk of
// `body` bytes of records: chunk header, records, then the 24-byte end marker.
inline uint64_t only_chunk_offset(uint64_t file_size, uint64_t record_bytes) { return file_size - (24 + record_bytes) - 24; }

inline void string_def(const std::string& path, uint32_t id) {
  ChunkBuilder c;
  c.add_string(id, "far");
  write_chunks(path, {c});
}

// A kernel launch (arguments scanned) whose name id is `name_id`, into an allocation.
inline void kernel_name_id(const std::string& path, uint32_t name_id) {
  ChunkBuilder c;
  trace::Alloc a{};
  a.call.seq = 0;
  a.ptr = 0x7f00'0000'0000ull;
  a.bytes = 4096;
  a.kind = trace::AllocKind::kDevice;
  c.add(a);
  trace::KernelLaunchHead k{};
  k.call.seq = 1;
  k.stream = 0x1000;
  k.name_id = name_id;
  k.flags = trace::kKernelArgsScanned;
  c.add_kernel(k, std::vector<uint64_t>{a.ptr});
  write_chunks(path, {c});
}

// 64 MiB of empty records in one zstd chunk (about 2 KB stored).
inline void zstd_bomb(const std::string& path, int chunks = 1) {
  ChunkBuilder c;
  const size_t n = trace::kMaxChunkBytes / 4;
  for (size_t i = 0; i < n; ++i) c.add_raw(RecordKind(0), nullptr, 0, nullptr, 0);
  TraceWriter w(path, TraceBuilder::default_header(0), WriterOptions{true, 1});
  for (int i = 0; i < chunks; ++i) w.write_chunk(c);
  w.close();
}

// An allocation of 2^50 bytes written by two unordered streams, and a memset of 2^56 bytes
// of memory the trace never allocated.
inline void huge_lengths(const std::string& path) {
  TraceBuilder b(path, TraceBuilder::default_header(0));
  uint64_t s1 = b.create_stream(), s2 = b.create_stream();
  uint64_t p = b.alloc(1ull << 50, trace::AllocKind::kDevice, 0, 0, 0x1000'0000'0000ull);
  b.memset(s1, p, 1ull << 50);
  b.memset(s2, p + 4096, 1ull << 49);
  b.memset(s1, 0x4000'0000'0000'0000ull, 1ull << 56);
  b.memset(s2, 0x4000'0000'0000'0000ull + (1ull << 55), 1ull << 20);
  b.memset(s1, ~uint64_t(0) - 100, 1000);  // wraps past the top of the address space
  b.finish();
}

// `n` streams, one kernel on each, then a device synchronisation and one more op on each.
inline void many_streams(const std::string& path, int n) {
  TraceBuilder b(path, TraceBuilder::default_header(0));
  std::vector<uint64_t> s;
  for (int i = 0; i < n; ++i) s.push_back(b.create_stream());
  for (uint64_t h : s) b.memset(h, 0x7000'0000'0000ull, 0);
  b.device_synchronize();
  for (uint64_t h : s) b.memset(h, 0x7000'0000'0000ull, 0);
  b.finish();
}

// A whole trace, then the same bytes cut at `keep` (so inside the header or first chunk).
inline std::string small_trace_bytes(const std::string& scratch) {
  {
    TraceBuilder b(scratch, TraceBuilder::default_header(0), WriterOptions{false, 1});
    uint64_t s = b.create_stream();
    uint64_t p = b.alloc(4096);
    b.memset(s, p, 4096);
    b.finish();
  }
  std::ifstream in(scratch, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The size of the header of a TraceBuilder::default_header(0) trace: fixed part, body, crc.
inline uint64_t header_bytes(const std::string& trace_bytes) {
  uint32_t body;
  std::memcpy(&body, trace_bytes.data() + 12, 4);
  return 16 + body + 4;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace streamrace::testing::hostile
