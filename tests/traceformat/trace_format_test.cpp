// Trace format v1: round trip, compression, and every kind of bad input (truncated,
// corrupt, empty, foreign, wrong version) with the exact error or warning text.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <span>
#include <vector>

#include <zstd.h>

#include "support/trace_test_support.h"
#include "traceformat/trace_file.h"

namespace streamrace {
namespace {

using testing::TempDir;
using trace::TraceBuilder;
using trace::TraceError;
using trace::TraceReader;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// A trace of three chunks: header, two data chunks and the end marker.
std::string make_trace(const TempDir& dir, const std::string& name, bool compress) {
  std::string path = dir.file(name);
  trace::WriterOptions wo;
  wo.compress = compress;
  auto h = TraceBuilder::default_header(3);
  h.host = "node7";
  h.pid = 4242;
  h.nccl_version = "2.28.9";
  h.extra["custom_key"] = "custom value";
  TraceBuilder t(path, h, wo);
  uint64_t a = t.create_stream();
  uint64_t b = t.create_stream();
  uint64_t buf = t.alloc(1024);
  t.at("x.py", 1, "f").memset(a, buf, 1024);
  t.flush();
  t.at("x.py", 2, "f").memset(b, buf, 1024);
  t.finish();
  return path;
}

TEST(TraceFormat, RoundTripKeepsHeaderAndRecords) {
  TempDir dir;
  for (bool compress : {false, true}) {
    std::string path = make_trace(dir, compress ? "c.srace" : "u.srace", compress);
    TraceReader r(path);
    EXPECT_EQ(r.header().host, "node7");
    EXPECT_EQ(r.header().pid, 4242);
    EXPECT_EQ(r.header().rank, 3);
    EXPECT_EQ(r.header().nccl_version, "2.28.9");
    EXPECT_EQ(r.header().producer, "streamrace test builder");
    EXPECT_EQ(r.header().extra.at("custom_key"), "custom value");
    std::vector<trace::RecordKind> kinds;
    r.for_each([&](const trace::RecordView& v) { kinds.push_back(v.kind); });
    EXPECT_TRUE(r.stats().complete);
    EXPECT_FALSE(r.stats().truncated);
    EXPECT_EQ(r.stats().chunks, 3u);  // two data chunks and the end marker
    EXPECT_TRUE(r.warnings().empty());
    // strings and stack definitions precede the calls that use them
    size_t memsets = std::count(kinds.begin(), kinds.end(), trace::RecordKind::kMemset);
    EXPECT_EQ(memsets, 2u);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), trace::RecordKind::kStreamCreate), 2);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), trace::RecordKind::kAlloc), 1);
  }
}

// The writer reuses one zstd context for all its chunks: each chunk's stored bytes are still
// exactly what ZSTD_compress makes of it alone (what the writer wrote before), so readers of
// every version read them; the reader (its own reused context) gives back every record.
TEST(TraceFormat, ChunksOfOneWriterAreEachWhatZstdCompressMakesAlone) {
  TempDir dir;
  const std::string path = dir.file("many.srace");
  std::vector<uint64_t> events;
  {
    trace::TraceWriter w(path, TraceBuilder::default_header(0));
    uint64_t seq = 0;
    for (int c = 0; c < 6; ++c) {
      trace::ChunkBuilder chunk;
      for (int i = 0; i < 20000 + 7000 * c; ++i) {
        trace::EventCreate r{};
        r.call.seq = seq++;
        r.event = 0x1000 + (seq * 2654435761u) % 977;  // compressible, not constant
        events.push_back(r.event);
        chunk.add(r);
      }
      w.write_chunk(chunk);
    }
    w.close();
  }
  const std::string bytes = read_bytes(path);
  uint32_t body = 0;
  std::memcpy(&body, bytes.data() + 12, 4);
  size_t at = 16 + body + 4;  // fixed header, its fields, crc
  size_t compressed = 0, chunks = 0;
  while (at < bytes.size()) {
    uint32_t head[6];  // magic, flags, stored size, raw size, records, crc
    ASSERT_LE(at + sizeof(head), bytes.size());
    std::memcpy(head, bytes.data() + at, sizeof(head));
    ASSERT_EQ(head[0], trace::kChunkMagic);
    const std::string stored = bytes.substr(at + sizeof(head), head[2]);
    if (head[1] & trace::kChunkZstd) {
      std::string raw(head[3], '\0');
      ASSERT_EQ(ZSTD_decompress(raw.data(), raw.size(), stored.data(), stored.size()), raw.size());
      std::string alone(ZSTD_compressBound(raw.size()), '\0');
      alone.resize(ZSTD_compress(alone.data(), alone.size(), raw.data(), raw.size(), 1));
      EXPECT_EQ(stored, alone) << "chunk " << chunks;
      ++compressed;
    }
    ++chunks;
    at += sizeof(head) + head[2];
  }
  EXPECT_EQ(at, bytes.size());
  EXPECT_EQ(chunks, 7u);  // six data chunks and the end marker
  EXPECT_EQ(compressed, 6u);
  TraceReader r(path);
  std::vector<uint64_t> got;
  r.for_each([&](const trace::RecordView& v) { got.push_back(v.as<trace::EventCreate>().event); });
  EXPECT_EQ(got, events);
  EXPECT_TRUE(r.stats().complete);
}

TEST(TraceFormat, TruncatedFileIsReadUpToItsLastWholeChunk) {
  TempDir dir;
  std::string path = make_trace(dir, "t.srace", true);
  std::string bytes = read_bytes(path);
  // Find the second chunk's start by reading the whole-file stats of a copy cut short.
  TraceReader full(path);
  uint64_t first_chunk_end = 0;
  full.next_chunk([](const trace::RecordView&) {});
  first_chunk_end = full.stats().valid_bytes;
  std::string cut = dir.file("cut.srace");
  write_bytes(cut, bytes.substr(0, first_chunk_end + 30));  // inside the second chunk
  TraceReader r(cut);
  uint64_t n = 0;
  r.for_each([&](const trace::RecordView&) { ++n; });
  EXPECT_TRUE(r.stats().truncated);
  EXPECT_EQ(r.stats().chunks, 1u);
  ASSERT_EQ(r.warnings().size(), 1u);
  EXPECT_EQ(r.warnings()[0], cut + ": truncated at offset " + std::to_string(first_chunk_end) +
                                 " inside a chunk; read 1 whole chunks (" + std::to_string(n) + " records)");
  // The analyzer still analyses what is there and says so.
  auto res = testing::analyze_files({cut});
  ASSERT_EQ(res.notices.size(), 1u);
  EXPECT_EQ(res.notices[0].text, r.warnings()[0]);
  EXPECT_TRUE(res.traces[0].truncated);
}

TEST(TraceFormat, FileWithoutEndMarkerWarns) {
  TempDir dir;
  std::string path = make_trace(dir, "t.srace", false);
  std::string bytes = read_bytes(path);
  std::string cut = dir.file("noend.srace");
  write_bytes(cut, bytes.substr(0, bytes.size() - 24));  // drop the 24-byte end-marker chunk
  TraceReader r(cut);
  r.for_each([](const trace::RecordView&) {});
  EXPECT_FALSE(r.stats().complete);
  EXPECT_FALSE(r.stats().truncated);
  ASSERT_EQ(r.warnings().size(), 1u);
  EXPECT_EQ(r.warnings()[0], cut +
                                 ": no end-of-trace marker after 2 chunks (the traced process did not exit cleanly?); "
                                 "analysing what was written");
}

TEST(TraceFormat, CorruptChunkIsAnErrorNamingFileAndOffset) {
  TempDir dir;
  std::string path = make_trace(dir, "t.srace", false);
  TraceReader probe(path);
  uint64_t header_end = 0;
  {
    // The first chunk starts right after the header; find it via the first chunk's end.
    probe.next_chunk([](const trace::RecordView&) {});
    header_end = probe.stats().valid_bytes;
  }
  std::string bytes = read_bytes(path);
  std::string bad = dir.file("bad.srace");
  bytes[header_end + 40] ^= 0x5a;  // a payload byte of the second chunk
  write_bytes(bad, bytes);
  TraceReader r(bad);
  try {
    r.for_each([](const trace::RecordView&) {});
    FAIL() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": offset " + std::to_string(header_end) + ": chunk checksum mismatch (corrupt file)");
  }
}

TEST(TraceFormat, EmptyFileIsAClearError) {
  TempDir dir;
  std::string path = dir.file("empty.srace");
  write_bytes(path, "");
  try {
    TraceReader r(path);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": empty file, not a streamrace trace");
  }
}

TEST(TraceFormat, ForeignFileIsAClearError) {
  TempDir dir;
  std::string path = dir.file("foreign.srace");
  write_bytes(path, "{\"traceEvents\": []}\n");
  try {
    TraceReader r(path);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": offset 0: not a streamrace trace (bad magic)");
  }
}

TEST(TraceFormat, NewerMajorVersionIsRefused) {
  TempDir dir;
  std::string path = make_trace(dir, "t.srace", false);
  std::string bytes = read_bytes(path);
  bytes[8] = 2;   // major version, little-endian
  bytes[10] = 0;  // minor version
  std::string v2 = dir.file("v2.srace");
  write_bytes(v2, bytes);
  try {
    TraceReader r(v2);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), v2 + ": offset 8: unsupported trace format version 2.0 (this build reads 1.x)");
  }
}

TEST(TraceFormat, CorruptHeaderIsAClearError) {
  TempDir dir;
  std::string path = make_trace(dir, "t.srace", false);
  std::string bytes = read_bytes(path);
  bytes[20] ^= 0x01;
  std::string bad = dir.file("hdr.srace");
  write_bytes(bad, bytes);
  try {
    TraceReader r(bad);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": offset 16: header checksum mismatch");
  }
}

TEST(TraceFormat, GarbageAfterHeaderIsCorruptNotTruncated) {
  TempDir dir;
  std::string path = make_trace(dir, "t.srace", false);
  TraceReader probe(path);
  std::string bytes = read_bytes(path);
  // Keep the header (everything before the first chunk), then append garbage.
  probe.next_chunk([](const trace::RecordView&) {});
  std::string hdr = bytes.substr(0, bytes.find("CHNK"));
  std::string bad = dir.file("garbage.srace");
  write_bytes(bad, hdr + std::string(64, 'x'));
  TraceReader r(bad);
  try {
    r.for_each([](const trace::RecordView&) {});
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": offset " + std::to_string(hdr.size()) + ": bad chunk magic (corrupt file?)");
  }
}

TEST(TraceFormat, InputsThatAreNotTraces) {
  TempDir dir;
  try {
    analysis::expand_trace_inputs({dir.file("missing")});
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), dir.file("missing") + ": no such file or directory");
  }
  try {
    analysis::expand_trace_inputs({dir.path().string()});
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), dir.path().string() + ": directory holds no *.srace trace files (its subdirectories included)");
  }
}

// `analyze samples/traces/` finds the traces one level down (and deeper, through links to
// directories as samples/traces/deepspeed-0.14.2 is one), in sorted order; a link loop ends.
TEST(TraceFormat, DirectoriesAreSearchedRecursively) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "run" / "b");
  std::filesystem::create_directories(dir.path() / "run" / "a" / "node0");
  for (const char* f : {"run/b/r1.srace", "run/a/node0/r0.srace", "run/a/notes.txt"})
    std::ofstream(dir.file(f)) << "x";
  std::filesystem::create_directories(dir.path() / "elsewhere");
  std::ofstream(dir.file("elsewhere/r2.srace")) << "x";
  std::filesystem::create_directory_symlink(dir.path() / "run", dir.path() / "run" / "a" / "loop");
  std::filesystem::create_directory_symlink(dir.path() / "elsewhere", dir.path() / "run" / "c");
  auto found = analysis::expand_trace_inputs({dir.file("run")});
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0], dir.file("run/a/node0/r0.srace"));
  EXPECT_EQ(found[1], dir.file("run/b/r1.srace"));
  EXPECT_EQ(found[2], dir.file("run/c/r2.srace"));
}

TEST(TraceFormat, WriterNeverFollowsSymlinksOrOverwrites) {
  TempDir dir;
  std::string target = dir.file("target");
  write_bytes(target, "precious");
  std::string link = dir.file("link.srace");
  std::filesystem::create_symlink(target, link);
  EXPECT_THROW(trace::TraceWriter(link, TraceBuilder::default_header()), TraceError);
  EXPECT_EQ(read_bytes(target), "precious");
  EXPECT_THROW(trace::TraceWriter(target, TraceBuilder::default_header()), TraceError);
}

TEST(TraceFormat, RecordsArriveOutOfOrderAreReordered) {
  // Per-thread buffers may land in chunks out of sequence order; the analyzer orders by seq.
  TempDir dir;
  std::string path = dir.file("ooo.srace");
  {
    trace::TraceWriter w(path, TraceBuilder::default_header());
    trace::ChunkBuilder c1, c2;
    trace::CallInfo ci{};
    ci.seq = 0;
    c1.add(trace::StreamCreate{ci, 0x10, 0, trace::kStreamNonBlocking, 0, 0});
    ci.seq = 1;
    c1.add(trace::StreamCreate{ci, 0x20, 0, trace::kStreamNonBlocking, 0, 0});
    ci.seq = 2;
    c1.add(trace::Alloc{ci, 0x1000, 256, 0, 0, trace::AllocKind::kDevice, 0, 0});
    // seq 4 (a memset on 0x20) arrives before seq 3 (the event wait that orders it)
    trace::Memset m{};
    m.call = ci;
    m.call.seq = 4;
    m.stream = 0x20;
    m.dst = 0x1000;
    m.bytes = 256;
    m.is_async = 1;
    c1.add(m);
    trace::Memset first = m;
    first.call.seq = 3;
    first.stream = 0x10;
    c2.add(first);
    w.write_chunk(c1);
    w.write_chunk(c2);
    w.close();
  }
  auto r = testing::analyze_files({path});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].earlier.seq, 3u);
  EXPECT_EQ(r.findings[0].later.seq, 4u);
  EXPECT_TRUE(r.notices.empty());
}

}  // namespace
// A chunk written from pieces of its payload (runs of whole records, as replay's editor hands
// them over) is the chunk write_chunk of one builder writes, byte for byte, stored or
// compressed, however the payload is cut; the stored file reads back the same records.
TEST(TraceFormat, AChunkWrittenInPiecesIsTheChunkOfItsWholePayload) {
  TempDir dir;
  trace::ChunkBuilder whole;
  std::vector<size_t> ends;  // where each record ends in the payload
  for (int i = 0; i < 3000; ++i) {
    if (i % 7 == 0) {
      whole.add_string(uint32_t(100 + i), "name " + std::to_string(i));
    } else {
      trace::EventRecord r{};
      r.call.seq = uint64_t(i);
      r.event = 0x1000 + uint64_t(i % 13);
      r.stream = 0x2000;
      whole.add(r);
    }
    ends.push_back(whole.bytes());
  }
  const auto payload = whole.payload();
  // Pieces of 1, 2, 3, ... records, and one piece of all of them.
  std::vector<std::span<const uint8_t>> pieces;
  size_t from = 0;
  for (size_t e = 0, take = 1; e < ends.size(); e += take, ++take) {
    const size_t to = ends[std::min(ends.size(), e + take) - 1];
    pieces.push_back(payload.subspan(from, to - from));
    from = to;
  }
  ASSERT_GT(pieces.size(), 50u);
  const std::span<const uint8_t> all[1] = {payload};
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "compressed" : "stored");
    trace::WriterOptions wo;
    wo.compress = compress;
    const std::string a = dir.file(std::string("builder") + (compress ? "z" : "s") + ".srace");
    const std::string b = dir.file(std::string("pieces") + (compress ? "z" : "s") + ".srace");
    const std::string c = dir.file(std::string("one") + (compress ? "z" : "s") + ".srace");
    {
      trace::TraceWriter w(a, TraceBuilder::default_header(0), wo);
      w.write_chunk(whole);
      w.write_chunk(whole);
    }
    {
      trace::TraceWriter w(b, TraceBuilder::default_header(0), wo);
      w.write_chunk(pieces, whole.records());
      w.write_chunk(pieces, whole.records());
      w.write_chunk(std::span<const std::span<const uint8_t>>{}, 0);  // nothing: no chunk
    }
    {
      trace::TraceWriter w(c, TraceBuilder::default_header(0), wo);
      w.write_chunk(all, whole.records());
      w.write_chunk(all, whole.records());
    }
    EXPECT_EQ(read_bytes(b), read_bytes(a));
    EXPECT_EQ(read_bytes(c), read_bytes(a));
    TraceReader r(b);
    size_t n = 0;
    std::string seen;
    r.for_each([&](const trace::RecordView& v) {
      ++n;
      seen.append(reinterpret_cast<const char*>(v.body.data()), v.body.size());
    });
    EXPECT_EQ(n, 6000u);
    EXPECT_EQ(r.stats().chunks, 3u);  // two of records, the end marker
    EXPECT_TRUE(r.stats().complete);
  }
}

// A process about to exec writes the end marker and keeps the file open: read then, the trace
// is complete; if the exec fails, the marker is taken back (nothing may be written while it
// stands) and the records that follow make one trace with the first, complete at close.
TEST(TraceFormat, AnEndMarkerTakenBackLetsTheTraceGoOn) {
  TempDir dir;
  const std::string path = dir.file("exec.srace");
  auto count = [&](bool& complete, size_t& chunks) {
    TraceReader r(path);
    size_t n = 0;
    r.for_each([&](const trace::RecordView&) { ++n; });
    complete = r.stats().complete;
    chunks = r.stats().chunks;
    return n;
  };
  bool complete = false;
  size_t chunks = 0;
  trace::TraceWriter w(path, TraceBuilder::default_header(0));
  trace::ChunkBuilder before;
  before.add_string(1, "before the exec");
  w.write_chunk(before);
  w.write_end_marker();
  EXPECT_EQ(count(complete, chunks), 1u);
  EXPECT_TRUE(complete);
  EXPECT_EQ(chunks, 2u);
  EXPECT_THROW(w.write_chunk(before), TraceError);
  w.remove_end_marker();
  EXPECT_EQ(count(complete, chunks), 1u);
  EXPECT_FALSE(complete);
  trace::ChunkBuilder after;
  after.add_string(2, "after the exec failed");
  w.write_chunk(after);
  w.write_end_marker();
  w.close();  // the marker is there already: not written twice
  EXPECT_EQ(count(complete, chunks), 2u);
  EXPECT_TRUE(complete);
  EXPECT_EQ(chunks, 3u);
}

}  // namespace streamrace
