// CallStream: records in call order, the dictionary, the one stream label, and the checks on
// each record body (exact error texts).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "support/trace_test_support.h"
#include "traceformat/call_stream.h"

namespace streamrace {
namespace {

using testing::TempDir;
using trace::CallInfo;
using trace::CallStream;
using trace::ChunkBuilder;
using trace::RecordKind;
using trace::RecordView;
using trace::TraceBuilder;
using trace::TraceError;
using trace::TraceWriter;

CallInfo call(uint64_t seq) {
  CallInfo c{};
  c.seq = seq;
  return c;
}

trace::StreamSynchronize sync_of(uint64_t seq, uint64_t stream) {
  trace::StreamSynchronize s{};
  s.call = call(seq);
  s.stream = stream;
  return s;
}

// Writes chunks of records exactly as given (the order and bodies a test wants).
std::string write_chunks(const TempDir& dir, const std::vector<ChunkBuilder>& chunks) {
  std::string path = dir.file("t.srace");
  TraceWriter w(path, TraceBuilder::default_header(0));
  for (const auto& c : chunks) w.write_chunk(c);
  w.close();
  return path;
}

struct Seen {
  RecordKind kind;
  uint64_t seq_or_stream;  // a call's seq, else 0
};

std::vector<Seen> read_all(CallStream& s) {
  std::vector<Seen> out;
  s.for_each([&](const RecordView& r) {
    uint64_t seq = 0;
    if (trace::has_call_info(r.kind)) std::memcpy(&seq, r.body.data(), sizeof(seq));
    out.push_back({r.kind, seq});
  });
  return out;
}

TEST(CallStream, CallsComeInSeqOrderOtherRecordsAsTheyCome) {
  TempDir dir;
  ChunkBuilder a, b;
  a.add(sync_of(0, 0x10));
  a.add(sync_of(2, 0x10));  // another thread's buffer holds seq 1
  a.add_string(1, "cudaStreamSynchronize");
  b.add(sync_of(1, 0x10));
  b.add(sync_of(3, 0x10));
  CallStream s(write_chunks(dir, {a, b}));
  auto seen = read_all(s);
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0].seq_or_stream, 0u);
  EXPECT_EQ(seen[1].kind, RecordKind::kStringDef);  // not held back behind seq 2
  EXPECT_EQ(seen[2].seq_or_stream, 1u);
  EXPECT_EQ(seen[3].seq_or_stream, 2u);
  EXPECT_EQ(seen[4].seq_or_stream, 3u);
  EXPECT_EQ(s.dictionary().str(1), "cudaStreamSynchronize");
  EXPECT_EQ(s.stats().calls, 4u);
  EXPECT_EQ(s.stats().seq_gaps, 0u);
  EXPECT_TRUE(s.warnings().empty());
}

TEST(CallStream, DuplicatesAreLeftOutAndGapsAreCounted) {
  TempDir dir;
  ChunkBuilder a;
  a.add(sync_of(0, 0x10));
  a.add(sync_of(0, 0x10));
  a.add(sync_of(3, 0x10));  // 1 and 2 never come
  a.add(sync_of(4, 0x10));
  CallStream s(write_chunks(dir, {a}));
  auto seen = read_all(s);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].seq_or_stream, 3u);
  EXPECT_EQ(seen[2].seq_or_stream, 4u);
  EXPECT_EQ(s.stats().duplicates, 1u);
  EXPECT_EQ(s.stats().seq_gaps, 2u);
  auto w = s.warnings();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], "2 call records are missing from the sequence (records lost?)");
  EXPECT_EQ(w[1], "1 call records repeat a sequence number already read and were left out");
}

TEST(CallStream, ShortBodyIsAnErrorNamingFileOffsetAndKind) {
  TempDir dir;
  ChunkBuilder a;
  uint8_t six[6] = {};
  a.add_raw(RecordKind::kStackDef, six, 6, nullptr, 0);
  std::string path = write_chunks(dir, {a});
  CallStream s(path);
  try {
    read_all(s);
    FAIL() << "no error";
  } catch (const TraceError& e) {
    // The chunk: 24 bytes of chunk header, a 4-byte record prefix and the 6-byte body (too
    // small to compress); the end marker's 24 bytes follow it.
    const uint64_t chunk_at = s.file_size() - (24 + 4 + 6) - 24;
    EXPECT_EQ(std::string(e.what()), path + ": chunk at offset " + std::to_string(chunk_at) +
                                         ": StackDef record: body of 6 bytes is shorter than the 8 bytes of its fixed part");
  }
}

TEST(CallStream, ShortStringAndNoticeBodiesAreErrors) {
  for (RecordKind kind : {RecordKind::kStringDef, RecordKind::kNotice}) {
    TempDir dir;
    ChunkBuilder a;
    uint8_t two[2] = {};
    a.add_raw(kind, two, 2, nullptr, 0);
    CallStream s(write_chunks(dir, {a}));
    EXPECT_THROW(read_all(s), TraceError);
  }
}

// Format 1.1 appended `graph` to StreamCapture: a 1.0 body (48 bytes) still reads, with graph
// 0; one shorter than that is refused.
TEST(CallStream, StreamCaptureFromFormat10ReadsWithoutItsGraph) {
  TempDir dir;
  ChunkBuilder a;
  trace::StreamCapture c{};
  c.call = call(0);
  c.stream = 0x5551;
  c.begin = 0;
  c.graph = 0x6b00;  // not written: the body stops before it
  a.add_raw(RecordKind::kStreamCapture, &c, trace::kStreamCaptureFixed10, nullptr, 0);
  trace::GraphCall g{};
  g.call = call(1);
  g.graph = 0x6b00;
  g.graph_exec = 0x6a00;
  g.action = trace::GraphAction::kInstantiate;
  a.add(g);
  CallStream s(write_chunks(dir, {a}));
  std::vector<RecordView> seen;
  s.for_each([&](const RecordView& r) {
    if (r.kind == RecordKind::kStreamCapture) {
      auto got = r.as<trace::StreamCapture>();
      EXPECT_EQ(got.stream, 0x5551u);
      EXPECT_EQ(got.graph, 0u);
      EXPECT_EQ(r.body.size(), trace::kStreamCaptureFixed10);
    }
    if (r.kind == RecordKind::kGraphCall) {
      auto got = r.as<trace::GraphCall>();
      EXPECT_EQ(got.graph_exec, 0x6a00u);
      EXPECT_EQ(got.action, trace::GraphAction::kInstantiate);
    }
    seen.push_back(r);
  });
  EXPECT_EQ(seen.size(), 2u);

  std::filesystem::remove(dir.file("t.srace"));
  ChunkBuilder b;
  b.add_raw(RecordKind::kStreamCapture, &c, trace::kStreamCaptureFixed10 - 8, nullptr, 0);
  CallStream short_one(write_chunks(dir, {b}));
  EXPECT_THROW(short_one.for_each([](const RecordView&) {}), TraceError);
}

// Format 1.2: GraphEdit. Its parts split as written; a count or node payload that does not fit
// is an error naming the record and the field.
TEST(CallStream, GraphEditPartsAndBadCounts) {
  auto message = [](ChunkBuilder& a) {
    TempDir dir;
    CallStream s(write_chunks(dir, {a}));
    try {
      read_all(s);
    } catch (const TraceError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  {
    TempDir dir;
    ChunkBuilder a;
    trace::GraphEdit g{call(0), 0x6b00, 0x6e01, 0, 2, trace::GraphEditAction::kAddNode, trace::GraphNodeType::kMemset, 0};
    trace::Memset m{};
    m.dst = 0x7000;
    m.bytes = 64;
    std::vector<uint8_t> tail(16 + sizeof(m));
    const uint64_t deps[2] = {0x6e00, 0x6e02};
    std::memcpy(tail.data(), deps, 16);
    std::memcpy(tail.data() + 16, &m, sizeof(m));
    a.add_raw(RecordKind::kGraphEdit, &g, sizeof(g), tail.data(), tail.size());
    CallStream s(write_chunks(dir, {a}));
    int n = 0;
    s.for_each([&](const RecordView& r) {
      if (r.kind != RecordKind::kGraphEdit) return;
      ++n;
      auto p = trace::graph_edit_parts(r);
      EXPECT_EQ(p.head.node, 0x6e01u);
      EXPECT_EQ(p.first, (std::vector<uint64_t>{0x6e00, 0x6e02}));
      ASSERT_EQ(p.payload.size(), sizeof(m));
      EXPECT_EQ(trace::graph_node_payload_kind(p.head), RecordKind::kMemset);
    });
    EXPECT_EQ(n, 1);
  }
  {
    ChunkBuilder a;
    trace::GraphEdit g{call(0), 0x6b00, 0, 0, 5, trace::GraphEditAction::kAddEdges, trace::GraphNodeType::kEmpty, 0};
    uint64_t words[4] = {};
    a.add_raw(RecordKind::kGraphEdit, &g, sizeof(g), words, sizeof(words));
    EXPECT_NE(message(a).find("GraphEdit record: count 5 does not fit in its 32 bytes of edges"), std::string::npos)
        << message(a);
  }
  {
    ChunkBuilder a;
    trace::GraphEdit g{call(0), 0x6b00, 0x6e00, 0, 0, trace::GraphEditAction::kAddNode, trace::GraphNodeType::kMemcpy, 0};
    uint8_t short_body[8] = {};
    a.add_raw(RecordKind::kGraphEdit, &g, sizeof(g), short_body, sizeof(short_body));
    EXPECT_NE(message(a).find("GraphEdit record: memcpy node parameters of 8 bytes are shorter than the"), std::string::npos)
        << message(a);
  }
  {
    ChunkBuilder a;
    trace::GraphEdit g{call(0), 0x6b00, 0x6e00, 0, 0, trace::GraphEditAction::kAddNode, trace::GraphNodeType::kKernel, 0};
    trace::KernelLaunchHead k{};
    k.nptrs = 3;
    a.add_raw(RecordKind::kGraphEdit, &g, sizeof(g), &k, sizeof(k));
    EXPECT_NE(message(a).find("GraphEdit record: kernel node nptrs 3 does not fit in its 0 bytes of pointers"),
              std::string::npos)
        << message(a);
  }
}

TEST(CallStream, CountsMustFitTheirRecord) {
  {
    TempDir dir;
    ChunkBuilder a;
    trace::StackDefHead h{};
    h.id = 1;
    h.nframes = 3;
    trace::StackFrame one{};
    a.add_raw(RecordKind::kStackDef, &h, sizeof(h), &one, sizeof(one));
    CallStream s(write_chunks(dir, {a}));
    try {
      read_all(s);
      FAIL() << "no error";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find("StackDef record: nframes 3 does not fit in its 24 bytes of frames"),
                std::string::npos)
          << e.what();
    }
  }
  {
    TempDir dir;
    ChunkBuilder a;
    trace::KernelLaunchHead k{};
    k.nptrs = 1000;
    uint64_t p = 0x1000;
    a.add_raw(RecordKind::kKernelLaunch, &k, sizeof(k), &p, sizeof(p));
    CallStream s(write_chunks(dir, {a}));
    try {
      read_all(s);
      FAIL() << "no error";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find("KernelLaunch record: nptrs 1000 does not fit in its 8 bytes of pointers"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(CallStream, LargeIdsCostAnEntryNotATable) {
  TempDir dir;
  ChunkBuilder a;
  a.add_string(0x3FFF'FFFFu, "far");
  a.add_string(2, "near");
  CallStream s(write_chunks(dir, {a}));
  read_all(s);
  EXPECT_EQ(s.dictionary().str(0x3FFF'FFFFu), "far");
  EXPECT_EQ(s.dictionary().str(2), "near");
  EXPECT_EQ(s.dictionary().str(3), "");

  TempDir dir2;
  ChunkBuilder b;
  b.add_string(0x4000'0000u, "too far");
  CallStream t(write_chunks(dir2, {b}));
  try {
    read_all(t);
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("StringDef record: string id 0x40000000 exceeds the limit 0x3fffffff"),
              std::string::npos)
        << e.what();
  }
}

// CaptureMark (1.3): a mark whose action, reason or counts cannot be is an error naming the
// file, the chunk and the field; a short body is refused like every other kind's.
TEST(CallStream, MalformedCaptureMarksAreErrors) {
  auto message = [](const TempDir& dir, const trace::CaptureMark& m, size_t body) -> std::string {
    ChunkBuilder a;
    a.add_raw(RecordKind::kCaptureMark, &m, body, nullptr, 0);
    std::string path = write_chunks(dir, {a});
    CallStream s(path);
    try {
      read_all(s);
    } catch (const TraceError& e) {
      std::string w = e.what();
      std::filesystem::remove(path);
      // "FILE: chunk at offset N: CaptureMark record: ..."
      EXPECT_EQ(w.rfind(path + ": chunk at offset ", 0), 0u) << w;
      return w.substr(w.find(": CaptureMark record") + 2);
    }
    std::filesystem::remove(path);
    return "no error";
  };
  TempDir dir;
  trace::CaptureMark good{};
  good.action = trace::CaptureAction::kWindowOpen;
  good.reason = trace::CaptureReason::kRing;
  good.steps_dropped = 3;
  good.calls_left_out = 40;
  EXPECT_EQ(message(dir, good, sizeof good), "no error");
  auto bad_action = good;
  bad_action.action = trace::CaptureAction(9);
  EXPECT_EQ(message(dir, bad_action, sizeof good),
            "CaptureMark record: action 9 is not one of 1 (step), 2 (window open), 3 (state end), 4 (window close)");
  auto bad_reason = good;
  bad_reason.reason = trace::CaptureReason(0);
  EXPECT_EQ(message(dir, bad_reason, sizeof good),
            "CaptureMark record: reason 0 is not one of 1 (steps), 2 (NVTX range), 3 (profiler), 4 (ring)");
  auto bad_counts = good;
  bad_counts.steps_dropped = 41;
  EXPECT_EQ(message(dir, bad_counts, sizeof good),
            "CaptureMark record: 41 steps dropped but only 40 calls left out (every step has its marker)");
  EXPECT_EQ(message(dir, good, 40), "CaptureMark record: body of 40 bytes is shorter than the 64 bytes of its fixed part");
}

TEST(CallStream, OneStreamLabel) {
  using trace::stream_label;
  using trace::StreamTraits;
  EXPECT_EQ(stream_label(trace::legacy_stream(1), {}), "legacy default stream (device 1)");
  EXPECT_EQ(stream_label(trace::per_thread_stream(3, 0), {}), "per-thread default stream (thread 3, device 0)");
  EXPECT_EQ(stream_label(0x1000, StreamTraits{true, true, 0}), "stream 0x1000 (non-blocking, device 0)");
  EXPECT_EQ(stream_label(0x1000, StreamTraits{true, false, 2}), "stream 0x1000 (blocking, device 2)");
  EXPECT_EQ(stream_label(0x1000, {}), "stream 0x1000 (untraced creation, device 0)");

  TempDir dir;
  std::string path = dir.file("s.srace");
  uint64_t s1;
  {
    TraceBuilder b(path, TraceBuilder::default_header(0));
    s1 = b.create_stream(0, 1);
  }
  CallStream s(path);
  read_all(s);
  EXPECT_EQ(s.dictionary().label(s1), fmt::format("stream {:#x} (blocking, device 1)", s1));
  EXPECT_EQ(s.dictionary().label(0x9999), "stream 0x9999 (untraced creation, device 0)");
}

}  // namespace
}  // namespace streamrace
