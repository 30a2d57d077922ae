// Record-level fix edits (replay/trace_editor.h): every original record is kept, the fix's
// EventCreate + EventRecord and StreamWaitEvent land exactly where the FixEdit says, seqs are
// dense, and applying every fix to builder traces removes every finding without new ones.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "replay/analyzer_verdict.h"
#include "replay/call_index.h"
#include "replay/stream_simulator.h"
#include "replay/trace_editor.h"
#include "replay/trace_emitter.h"
#include "replay/trace_lifter.h"
#include "replay/zero_schedule.h"
#include "traceformat/trace_builder.h"

using namespace streamrace::replay;
namespace fs = std::filesystem;
namespace tr = streamrace::trace;

namespace {

std::string temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("streamrace_editor_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

struct Call {
  tr::RecordKind kind;
  tr::CallInfo call;
  uint64_t stream = 0, event = 0;
};

struct ReadBack {
  tr::TraceHeader header;
  std::vector<Call> calls;
  std::map<uint32_t, std::string> strings;
  std::vector<std::vector<uint8_t>> bodies;  // every record body, in file order
  std::vector<tr::RecordKind> kinds;          // every record's kind, in file order
};

ReadBack read_back(const std::string& path) {
  ReadBack rb;
  tr::TraceReader r(path);
  rb.header = r.header();
  r.for_each([&](const tr::RecordView& v) {
    rb.bodies.emplace_back(v.body.begin(), v.body.end());
    rb.kinds.push_back(v.kind);
    switch (v.kind) {
      case tr::RecordKind::kStringDef: {
        auto t = v.tail<tr::StringDefHead>();
        rb.strings[v.as<tr::StringDefHead>().id] = std::string(reinterpret_cast<const char*>(t.data()), t.size());
        return;
      }
      case tr::RecordKind::kStackDef:
      case tr::RecordKind::kKernelAccess:
      case tr::RecordKind::kOpTiming:
      case tr::RecordKind::kNotice:
        return;
      default:
        break;
    }
    Call c{v.kind, {}};
    std::memcpy(&c.call, v.body.data(), sizeof(c.call));
    if (v.is<tr::EventCreate>()) c.event = v.as<tr::EventCreate>().event;
    if (v.is<tr::EventRecord>()) c.event = v.as<tr::EventRecord>().event, c.stream = v.as<tr::EventRecord>().stream;
    if (v.is<tr::StreamWaitEvent>())
      c.event = v.as<tr::StreamWaitEvent>().event, c.stream = v.as<tr::StreamWaitEvent>().stream;
    if (v.is<tr::Memset>()) c.stream = v.as<tr::Memset>().stream;
    if (v.is<tr::Memcpy>()) c.stream = v.as<tr::Memcpy>().stream;
    rb.calls.push_back(c);
  });
  return rb;
}

}  // namespace

TEST(TraceEditor, InsertsTheRecordAndTheWaitExactlyWhereTheFixSays) {
  const std::string dir = temp_dir("two_stream");
  const std::string path = dir + "/rank0.srace";
  uint64_t S1, S2, set_seq, copy_seq;
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    S1 = b.create_stream();
    S2 = b.create_stream();
    const uint64_t A = b.alloc(4096), B = b.alloc(4096);
    b.at("train.py", 10, "produce");
    set_seq = b.next_seq();
    b.memset(S1, A, 4096);
    b.at("train.py", 20, "consume");
    copy_seq = b.next_seq();
    b.memcpy(S2, B, A, 4096);  // reads A on another stream: RAW against the memset
    b.at("train.py", 30, "tail");
    b.stream_synchronize(S2);
    b.finish();
  }
  auto before = analyze_traces({path});
  ASSERT_EQ(before.findings.size(), 1u);
  const auto& fe = before.findings[0].fix_edit;
  EXPECT_EQ(fe.record_stream, S1);
  EXPECT_EQ(fe.after_seq, set_seq);
  EXPECT_EQ(fe.wait_stream, S2);
  EXPECT_EQ(fe.before_seq, copy_seq);
  ASSERT_EQ(before.findings[0].where.size(), 1u);
  EXPECT_EQ(before.findings[0].where[0].trace, path);

  TraceEditor ed(path);
  EXPECT_EQ(ed.calls(), 7u);
  ed.add_edit(fe);
  ed.add_edit(fe);  // the same edit again adds nothing
  EXPECT_EQ(ed.events(), 1u);
  EXPECT_EQ(ed.records(), 1u);
  EXPECT_EQ(ed.waits(), 1u);
  EXPECT_EQ(ed.edits(), 2u);
  const std::string out = dir + "/rank0.fixed.srace";
  ed.write(out);

  auto orig = read_back(path);
  auto got = read_back(out);
  EXPECT_EQ(got.header.host, orig.header.host);
  EXPECT_EQ(got.header.rank, orig.header.rank);
  EXPECT_EQ(got.header.producer, orig.header.producer + " (edited by streamrace replay: 2 fix edits)");
  EXPECT_EQ(got.header.extra.at("streamrace_fix_edits"), "2");
  ASSERT_EQ(got.calls.size(), orig.calls.size() + 3);
  for (size_t i = 0; i < got.calls.size(); ++i) EXPECT_EQ(got.calls[i].call.seq, i) << "dense seqs";
  const uint64_t ev = kFixEventBase;
  // Calls up to the memset are unchanged; then the fix; then the copy and the rest.
  const std::vector<tr::RecordKind> kinds = {
      tr::RecordKind::kStreamCreate,  tr::RecordKind::kStreamCreate, tr::RecordKind::kAlloc,
      tr::RecordKind::kAlloc,         tr::RecordKind::kMemset,       tr::RecordKind::kEventCreate,
      tr::RecordKind::kEventRecord,   tr::RecordKind::kStreamWaitEvent, tr::RecordKind::kMemcpy,
      tr::RecordKind::kStreamSynchronize};
  ASSERT_EQ(got.calls.size(), kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ(got.calls[i].kind, kinds[i]) << i;
  EXPECT_EQ(got.calls[5].event, ev);
  EXPECT_EQ(got.calls[6].event, ev);
  EXPECT_EQ(got.calls[6].stream, S1);
  EXPECT_EQ(got.calls[7].event, ev);
  EXPECT_EQ(got.calls[7].stream, S2);
  // The inserted calls carry the stack and thread of the call they attach to, and a synthetic API name.
  EXPECT_EQ(got.calls[5].call.stack_id, got.calls[4].call.stack_id);
  EXPECT_EQ(got.calls[6].call.stack_id, got.calls[4].call.stack_id);
  EXPECT_EQ(got.calls[7].call.stack_id, got.calls[8].call.stack_id);
  EXPECT_NE(got.calls[4].call.stack_id, got.calls[8].call.stack_id);
  EXPECT_EQ(got.strings.at(got.calls[5].call.api_id), "streamrace-fix:cudaEventCreate");
  EXPECT_EQ(got.strings.at(got.calls[6].call.api_id), "streamrace-fix:cudaEventRecord");
  EXPECT_EQ(got.strings.at(got.calls[7].call.api_id), "streamrace-fix:cudaStreamWaitEvent");
  // Every original call is byte for byte the same except its seq.
  const std::vector<size_t> kept = {0, 1, 2, 3, 4, 8, 9};
  for (size_t i = 0; i < kept.size(); ++i) {
    tr::CallInfo a = orig.calls[i].call, b = got.calls[kept[i]].call;
    EXPECT_EQ(a.seq, i);
    b.seq = a.seq;
    EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0) << i;
    EXPECT_EQ(orig.calls[i].stream, got.calls[kept[i]].stream);
  }
  // Non-call records (strings, stacks) are all still there, plus the three API names.
  EXPECT_EQ(got.bodies.size(), orig.bodies.size() + 3 + 3);
  EXPECT_TRUE(analyze_traces({out}).findings.empty());

  // Edits that do not fit the trace are refused.
  TraceEditor bad(path);
  EXPECT_THROW(bad.add_edit({S1, 99, S2, copy_seq}), std::invalid_argument);
  EXPECT_THROW(bad.add_edit({S1, copy_seq, S2, set_seq}), std::invalid_argument);
  EXPECT_EQ(bad.edits(), 0u);
  // A second round continues the fix event handles and reuses the API names.
  TraceEditor again(out);
  EXPECT_EQ(again.next_event(), ev + 1);
}

TEST(TraceEditor, CallsWrittenOutOfSeqOrderComeOutSortedAndDense) {
  const std::string dir = temp_dir("out_of_order");
  const std::string path = dir + "/rank0.srace";
  {
    // Two "thread buffers" flushed in the wrong order: seqs 2,3 in the first chunk, 0,1 after.
    tr::TraceHeader h = tr::TraceBuilder::default_header(0);
    tr::TraceWriter w(path, h);
    tr::ChunkBuilder c1, c2;
    auto ev = [](uint64_t seq, uint64_t e) {
      tr::EventCreate r{};
      r.call.seq = seq;
      r.event = e;
      return r;
    };
    c1.add(ev(2, 0x30));
    c1.add(ev(3, 0x40));
    c2.add(ev(0, 0x10));
    c2.add(ev(1, 0x20));
    w.write_chunk(c1);
    w.write_chunk(c2);
    w.close();
  }
  TraceEditor ed(path);
  EXPECT_EQ(ed.calls(), 4u);
  const std::string out = dir + "/copy.srace";
  ed.write(out);
  auto got = read_back(out);
  ASSERT_EQ(got.calls.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got.calls[i].call.seq, i);
    EXPECT_EQ(got.calls[i].event, 0x10u * (i + 1));
  }
}

// A write-after-read built directly with TraceBuilder: R copies out of A, then a kernel on C
// rewrites A with nothing ordering it after the copy. The record-level edit of the fix, lifted,
// orders the pair on the CPU simulator too.
TEST(TraceEditor, AFixEditBySeqOrdersTheRacingPair) {
  const std::string dir = temp_dir("lifted_fix");
  const std::string path = dir + "/builder_war.srace";
  uint64_t read_seq = 0, write_seq = 0, R = 0;
  uint64_t A = 0, out = 0;
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    const uint64_t C = tr::legacy_stream(0);
    R = b.create_stream(tr::kStreamNonBlocking);
    A = b.alloc(256);
    out = b.alloc(256);
    uint64_t ev = b.create_event();
    const uint32_t precise = tr::kKernelArgsScanned | tr::kKernelPrecise;
    b.at("train.py", 10, "fill");
    b.kernel_access(b.kernel(C, "fill_kernel", {A}, 0, precise), A, 256, tr::AccessDir::kWrite);
    b.record_event(ev, C);
    b.wait_event(R, ev);
    b.at("train.py", 20, "drain");
    read_seq = b.next_seq();
    b.memcpy(R, out, A, 256);
    b.at("train.py", 30, "refill");
    write_seq = b.next_seq();
    b.kernel_access(b.kernel(C, "refill_kernel", {A}, 0, precise), A, 256, tr::AccessDir::kWrite);
    b.finish();
  }
  {
    StreamSimulator sim(lift_trace(path).schedule);
    auto r = sim.search();
    ASSERT_EQ(r.verdict, SearchResult::Verdict::kCorruptionFound);
    EXPECT_EQ(r.outcome.cells[0].expectation, "program-order result");
  }
  streamrace::analysis::FixEdit edit{R, read_seq, tr::legacy_stream(0), write_seq};
  const std::string edited = dir + "/builder_war.fixed.srace";
  {
    TraceEditor ed(path);
    ed.add_edit(edit);
    ed.write(edited);
  }
  // The edited trace numbers calls densely: EventCreate + EventRecord after the copy and the
  // wait before the kernel move it three seqs on.
  Schedule s = lift_trace(edited).schedule;
  size_t wait_at = s.actions.size();
  for (size_t i = 0; i + 1 < s.actions.size(); ++i)
    if (s.actions[i + 1].source_seq == write_seq + 3) wait_at = i;
  ASSERT_LT(wait_at, s.actions.size());
  EXPECT_EQ(s.actions[wait_at].kind, ActionKind::kStreamWait);
  EXPECT_EQ(s.streams[s.actions[wait_at].stream].handle, tr::legacy_stream(0));
  EXPECT_EQ(s.actions[wait_at + 1].api, "refill_kernel");
  StreamSimulator fixed(s);
  EXPECT_EQ(fixed.search().verdict, SearchResult::Verdict::kNoCorruption);
  EXPECT_TRUE(analyze_traces({edited}).clean());

  // Bad edits are named.
  TraceEditor t(path);
  EXPECT_THROW(t.add_edit(streamrace::analysis::FixEdit{R, write_seq, tr::legacy_stream(0), read_seq}), std::invalid_argument);
  EXPECT_THROW(t.add_edit(streamrace::analysis::FixEdit{R, 999999, tr::legacy_stream(0), write_seq}), std::invalid_argument);
  EXPECT_THROW(t.add_edit(streamrace::analysis::FixEdit{0x1234, read_seq, tr::legacy_stream(0), write_seq}),
               std::invalid_argument);
  EXPECT_EQ(t.edits(), 0u);
}

TEST(TraceEditor, ApplyingEveryFixToZeroStage12RemovesEveryFindingWithoutNewOnes) {
  const std::string dir = temp_dir("zero");
  std::vector<std::string> paths;
  for (int r = 0; r < 2; ++r) {
    paths.push_back(dir + "/rank" + std::to_string(r) + ".srace");
    EmitOptions eo;
    eo.steps = 2;
    eo.precise_kernels = false;
    emit_trace(make_zero_schedule(synthetic_bucket_config(ZeroFix::kNone, r)), paths.back(), eo);
  }
  RecordFixOptions o;
  o.out_dir = dir + "/fixed";
  auto res = apply_record_fixes(paths, o);
  // Two WAR findings (copy-back vs the next copy-in), counted per conflicting access pair (32
  // and 16 over both ranks, half per rank). One round edits every listed pair on both ranks
  // and its analysis is the verdict. Per rank and step the reduction stream's all-reduce
  // races with 4 later copy-ins on the legacy stream (first finding) and the copy-back on the
  // compute stream with 2 of them (second): 12 pairs per step, 24 per rank, ordered by one
  // event per stream pair (2 per rank), a record after the all-reduce and after the copy-back
  // and a wait before the first copy-in of each step; the later copy-ins' waits would join
  // the same records again and are left out: 4 records + 4 waits per rank.
  ASSERT_EQ(res.before.findings.size(), 2u);
  const uint64_t occ[2] = {32, 16};
  for (size_t i = 0; i < 2; ++i) {
    const auto& f = res.before.findings[i];
    EXPECT_EQ(f.occurrences, occ[i]);
    ASSERT_EQ(f.where.size(), 2u);
    EXPECT_EQ(f.where[0].count, occ[i] / 2);
    EXPECT_EQ(f.where[1].count, occ[i] / 2);
  }
  EXPECT_EQ(res.verdict.targeted.size(), res.before.findings.size());
  EXPECT_EQ(res.verdict.removed.size(), res.before.findings.size());
  EXPECT_TRUE(res.verdict.remaining.empty());
  EXPECT_TRUE(res.verdict.introduced.empty());
  EXPECT_TRUE(res.after.findings.empty());
  EXPECT_FALSE(res.hit_round_cap);
  EXPECT_TRUE(res.fixed());
  EXPECT_EQ(res.rounds, 1u);
  ASSERT_EQ(res.traces.size(), 2u);
  for (const auto& t : res.traces) {
    EXPECT_EQ(t.events, 2u);
    EXPECT_EQ(t.records, 4u);
    EXPECT_EQ(t.waits, 4u);
    EXPECT_EQ(t.edits, 8u);
  }
  for (const auto& t : res.traces) EXPECT_TRUE(fs::exists(t.edited)) << t.edited;
  // Only the final traces stay in the output directory.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(o.out_dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);
}

TEST(TraceEditor, OneOccurrencePerRoundGivesTheSameVerdictInEightRounds) {
  const std::string dir = temp_dir("zero-one-per-round");
  std::vector<std::string> paths;
  for (int r = 0; r < 2; ++r) {
    paths.push_back(dir + "/rank" + std::to_string(r) + ".srace");
    EmitOptions eo;
    eo.steps = 2;
    eo.precise_kernels = false;
    emit_trace(make_zero_schedule(synthetic_bucket_config(ZeroFix::kNone, r)), paths.back(), eo);
  }
  RecordFixOptions o;
  o.out_dir = dir + "/fixed";
  o.one_occurrence_per_round = true;
  auto res = apply_record_fixes(paths, o);
  // Two WAR findings (copy-back vs the next copy-in), counted per conflicting access pair (32
  // and 16 over both ranks, half per rank). One edit orders several occurrences; one edit per
  // finding per round, in where[0]'s trace (rank 0 until it is clean, then rank 1): 8 rounds,
  // 8 ordered pairs per rank, each a record and a wait of the round's event for its stream
  // pair (2 per round).
  ASSERT_EQ(res.before.findings.size(), 2u);
  const uint64_t occ[2] = {32, 16};
  for (size_t i = 0; i < 2; ++i) {
    const auto& f = res.before.findings[i];
    EXPECT_EQ(f.occurrences, occ[i]);
    ASSERT_EQ(f.where.size(), 2u);
    EXPECT_EQ(f.where[0].count, occ[i] / 2);
    EXPECT_EQ(f.where[1].count, occ[i] / 2);
  }
  EXPECT_EQ(res.verdict.targeted.size(), res.before.findings.size());
  EXPECT_EQ(res.verdict.removed.size(), res.before.findings.size());
  EXPECT_TRUE(res.verdict.remaining.empty());
  EXPECT_TRUE(res.verdict.introduced.empty());
  EXPECT_TRUE(res.after.findings.empty());
  EXPECT_FALSE(res.hit_round_cap);
  EXPECT_TRUE(res.fixed());
  EXPECT_EQ(res.rounds, 8u);
  ASSERT_EQ(res.traces.size(), 2u);
  for (const auto& t : res.traces) {
    EXPECT_EQ(t.events, 8u);
    EXPECT_EQ(t.records, 8u);
    EXPECT_EQ(t.waits, 8u);
    EXPECT_EQ(t.edits, 16u);
  }
  for (const auto& t : res.traces) EXPECT_TRUE(fs::exists(t.edited)) << t.edited;
  // Only the final traces stay in the output directory.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(o.out_dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);
}

TEST(TraceEditor, AFindingThatOccursFiveTimesTakesFiveRecordsAndFiveWaitsOfOneEvent) {
  const std::string dir = temp_dir("five");
  const std::string path = dir + "/rank0.srace";
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    const uint64_t S1 = b.create_stream(), S2 = b.create_stream();
    for (int i = 0; i < 5; ++i) {
      const uint64_t A = b.alloc(4096), B = b.alloc(4096);
      b.at("loop.py", 10, "produce");
      b.memset(S1, A, 4096);
      b.at("loop.py", 20, "consume");
      b.memcpy(S2, B, A, 4096);
      b.at("loop.py", 5, "step");
    }
    b.finish();
  }
  auto before = analyze_traces({path});
  ASSERT_EQ(before.findings.size(), 1u);
  EXPECT_EQ(before.findings[0].occurrences, 5u);
  RecordFixOptions o;
  o.out_dir = dir + "/fixed";
  auto res = apply_record_fixes({path}, o);
  // All five in one round (one analysis of the edited trace), with one event (S1 -> S2):
  // record after each memset, wait before each copy.
  EXPECT_EQ(res.rounds, 1u);
  EXPECT_EQ(res.total_edits(), 10u);
  EXPECT_EQ(res.total_events(), 1u);
  EXPECT_TRUE(res.fixed());
  EXPECT_TRUE(res.after.findings.empty());
  auto got = read_back(res.traces[0].edited);
  size_t creates = 0, records = 0, waits = 0;
  for (const auto& c : got.calls) {
    creates += c.kind == tr::RecordKind::kEventCreate;
    records += c.kind == tr::RecordKind::kEventRecord;
    waits += c.kind == tr::RecordKind::kStreamWaitEvent;
  }
  EXPECT_EQ(creates, 1u);
  EXPECT_EQ(records, 5u);
  EXPECT_EQ(waits, 5u);
  EXPECT_EQ(got.header.extra.at("streamrace_fix_edits"), "10");

  // The former method takes a round per occurrence: the same five records and waits in five
  // rounds, with an event per round.
  o.out_dir = dir + "/one-per-round";
  o.one_occurrence_per_round = true;
  auto slow = apply_record_fixes({path}, o);
  EXPECT_EQ(slow.rounds, 5u);
  EXPECT_EQ(slow.total_edits(), 10u);
  EXPECT_EQ(slow.total_events(), 5u);
  EXPECT_TRUE(slow.fixed());
  EXPECT_EQ(slow.verdict.removed, res.verdict.removed);

  // The round cap stops the loop and says so.
  o.out_dir = dir + "/capped";
  o.max_rounds = 2;
  auto capped = apply_record_fixes({path}, o);
  EXPECT_TRUE(capped.hit_round_cap);
  EXPECT_EQ(capped.rounds, 2u);
  EXPECT_EQ(capped.total_edits(), 4u);
  EXPECT_FALSE(capped.fixed());
  EXPECT_EQ(capped.verdict.remaining.size(), 1u);
}

// One event per stream pair: of the records after earlier calls only the latest before a wait
// is written (the wait would see no other), of the waits only the first after a record (the
// stream already holds it), unless the wait's stream was created anew in between.
TEST(TraceEditor, OneEventPerStreamPairWritesOnlyTheRecordsAndWaitsThatOrderSomething) {
  const std::string dir = temp_dir("one_event");
  const std::string path = dir + "/rank0.srace";
  uint64_t S1, S2, m1, m2, c1, c2, c3;
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    S1 = b.create_stream();
    S2 = b.create_stream();
    const uint64_t A = b.alloc(4096), B = b.alloc(4096), X = b.alloc(4096), Y = b.alloc(4096), Z = b.alloc(4096);
    m1 = b.next_seq();
    b.memset(S1, A, 4096);
    m2 = b.next_seq();
    b.memset(S1, B, 4096);
    c1 = b.next_seq();
    b.memcpy(S2, X, A, 4096);  // reads what m1 wrote
    c2 = b.next_seq();
    b.memcpy(S2, Y, B, 4096);  // reads what m2 wrote
    b.destroy_stream(S2);
    b.create_stream(tr::kStreamNonBlocking, 0, 0, S2);  // the same handle: a new stream
    c3 = b.next_seq();
    b.memcpy(S2, Z, B, 4096);  // reads what m2 wrote, on the new stream
    b.finish();
  }
  size_t occurrences = 0;
  for (const auto& f : analyze_traces({path}).findings) occurrences += f.occurrences;
  EXPECT_EQ(occurrences, 3u);

  TraceEditor ed(path);
  ed.add_edit({S1, m1, S2, c1});
  ed.add_edit({S1, m2, S2, c2});
  ed.add_edit({S1, m2, S2, c3});
  EXPECT_EQ(ed.events(), 1u);
  EXPECT_EQ(ed.records(), 1u);  // after m2: the wait before c1 sees it, and it holds m1
  EXPECT_EQ(ed.waits(), 2u);    // before c1, and before c3 on the new S2 (not before c2)
  ed.write(dir + "/fixed.srace");
  auto got = read_back(dir + "/fixed.srace");
  using K = tr::RecordKind;
  std::vector<K> kinds;
  for (const auto& c : got.calls) kinds.push_back(c.kind);
  const std::vector<K> want = {K::kStreamCreate, K::kStreamCreate,   K::kAlloc,       K::kAlloc,         K::kAlloc,
                               K::kAlloc,        K::kAlloc,          K::kMemset,      K::kMemset,        K::kEventCreate,
                               K::kEventRecord,  K::kStreamWaitEvent, K::kMemcpy,     K::kMemcpy,        K::kStreamDestroy,
                               K::kStreamCreate, K::kStreamWaitEvent, K::kMemcpy};
  EXPECT_EQ(kinds, want);
  ASSERT_EQ(got.calls.size(), want.size());
  EXPECT_EQ(got.calls[10].stream, S1);
  EXPECT_EQ(got.calls[11].stream, S2);
  EXPECT_EQ(got.calls[16].stream, S2);
  for (size_t i : {9, 10, 11, 16}) EXPECT_EQ(got.calls[i].event, kFixEventBase) << i;
  EXPECT_TRUE(analyze_traces({dir + "/fixed.srace"}).clean());
}

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

// The index the analysis builds while it reads the trace (one decode) is the index the editor
// builds on its own: same calls, streams and warnings, and the same edited file, byte for byte.
// The analysis's verdict does not change with an observer.
TEST(TraceEditor, AnIndexBuiltWhileTheAnalysisReadsEditsLikeTheEditorsOwnRead) {
  const std::string dir = temp_dir("shared_decode");
  const std::string path = dir + "/rank0.srace";
  uint64_t S1, S2;
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    S1 = b.create_stream();
    S2 = b.create_stream();
    const uint64_t A = b.alloc(4096), B = b.alloc(4096);
    for (int i = 0; i < 3; ++i) {
      b.at("train.py", 10, "produce");
      b.memset(S1, A, 4096);
      b.at("train.py", 20, "consume");
      b.memcpy(S2, B, A, 4096);
    }
    b.stream_synchronize(S2);
    b.finish();
  }
  std::optional<CallIndex> seen;
  std::vector<std::string> observed;
  auto v = analyze_traces({path}, [&](const std::string& p) -> tr::RecordObserver* {
    observed.push_back(p);
    return &seen.emplace(p);
  });
  EXPECT_EQ(observed, std::vector<std::string>{path});
  ASSERT_TRUE(seen.has_value());
  const auto plain = analyze_traces({path});
  // RAW (each copy reads the memset's bytes) and WAR (the next memset rewrites what a copy read).
  ASSERT_EQ(v.findings.size(), 2u);
  ASSERT_EQ(plain.findings.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(v.findings[i].fingerprint, plain.findings[i].fingerprint);
    EXPECT_EQ(v.findings[i].occurrences, plain.findings[i].occurrences);
  }
  EXPECT_EQ(v.findings[0].occurrences + v.findings[1].occurrences, 5u);
  EXPECT_EQ(v.records, plain.records);
  ASSERT_EQ(v.records.size(), 1u);

  const CallIndex own = CallIndex::read(path);
  EXPECT_EQ(seen->calls(), 11u);  // 2 stream creations, 2 allocations, 6 operations, the sync
  EXPECT_EQ(own.calls(), seen->calls());
  EXPECT_EQ(own.warnings(), seen->warnings());
  EXPECT_EQ(own.first_fix_event(), kFixEventBase);
  for (uint64_t seq = 0; seq < 13; ++seq) {
    EXPECT_EQ(own.is_call(seq), seq < 11) << seq;
    EXPECT_EQ(own.is_call(seq), seen->is_call(seq)) << seq;
    EXPECT_EQ(own.stream_of_call(seq), seen->stream_of_call(seq)) << seq;
  }
  // seqs 4..9 alternate memset on S1, copy on S2; creations, allocations and the sync have no stream.
  for (uint64_t seq : {0, 1, 2, 3, 10}) EXPECT_EQ(seen->stream_of_call(seq), std::nullopt) << seq;
  for (uint64_t seq = 4; seq < 10; ++seq) EXPECT_EQ(seen->stream_of_call(seq), seq % 2 ? S2 : S1) << seq;

  TraceEditor shared(std::move(*seen)), alone(path);
  for (TraceEditor* ed : {&shared, &alone})
    for (const auto& f : v.findings)
      for (const auto& p : f.where[0].pairs)
        ed->add_edit({*ed->stream_of_call(p.earlier_seq), p.earlier_seq, *ed->stream_of_call(p.later_seq), p.later_seq});
  // RAW S1 -> S2: a record after each of the 3 memsets, a wait before each copy; WAR S2 -> S1:
  // a record after the first 2 copies, a wait before the next memset. Two events.
  for (TraceEditor* ed : {&shared, &alone}) {
    EXPECT_EQ(ed->events(), 2u);
    EXPECT_EQ(ed->records(), 5u);
    EXPECT_EQ(ed->waits(), 5u);
  }
  EXPECT_EQ(shared.write(dir + "/shared.srace"), alone.write(dir + "/alone.srace"));
  EXPECT_EQ(file_bytes(dir + "/shared.srace"), file_bytes(dir + "/alone.srace"));
  EXPECT_TRUE(analyze_traces({dir + "/shared.srace"}).clean());

  // An index that keeps the records as the analysis read them edits from them, to the same
  // bytes; one whose records pass its limit gives them up and reads the trace again.
  for (size_t limit : {size_t(1) << 20, size_t(64)}) {
    std::optional<CallIndex> kept;
    analyze_traces({path}, [&](const std::string& p) -> tr::RecordObserver* {
      kept.emplace(p).keep_records(limit);
      return &*kept;
    });
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(kept->has_records(), limit > 64) << limit;
    TraceEditor ed(std::move(*kept));
    for (const auto& f : v.findings)
      for (const auto& p : f.where[0].pairs)
        ed.add_edit({*ed.stream_of_call(p.earlier_seq), p.earlier_seq, *ed.stream_of_call(p.later_seq), p.later_seq});
    const std::string out = dir + "/kept" + std::to_string(limit) + ".srace";
    ed.write(out);
    EXPECT_EQ(file_bytes(out), file_bytes(dir + "/alone.srace")) << limit;
  }
}

// The record after a call goes after the records that belong to the call (its timing and its
// measured accesses, which the tracer writes after it), before the next call's wait.
TEST(TraceEditor, TheRecordGoesAfterTheCallsTimingAndMeasuredAccesses) {
  const std::string dir = temp_dir("trailing");
  const std::string path = dir + "/rank0.srace";
  uint64_t S1, S2, kernel_seq, copy_seq;
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    S1 = b.create_stream();
    S2 = b.create_stream();
    const uint64_t A = b.alloc(4096), B = b.alloc(4096);
    kernel_seq = b.next_seq();
    const uint64_t corr = b.kernel(S1, "fill", {A});
    b.timing(corr, 100, 200);
    b.kernel_access(corr, A, 4096, tr::AccessDir::kWrite);
    copy_seq = b.next_seq();
    b.memcpy(S2, B, A, 4096);
    b.finish();
  }
  TraceEditor ed(path);
  ed.add_edit({S1, kernel_seq, S2, copy_seq});
  ed.write(dir + "/fixed.srace");
  auto got = read_back(dir + "/fixed.srace");
  using K = tr::RecordKind;
  std::vector<K> calls_and_trailing;
  for (K k : got.kinds)
    if (k != K::kStringDef && k != K::kStackDef) calls_and_trailing.push_back(k);
  const std::vector<K> want = {K::kStreamCreate, K::kStreamCreate, K::kAlloc,       K::kAlloc,
                               K::kKernelLaunch, K::kOpTiming,     K::kKernelAccess, K::kEventCreate,
                               K::kEventRecord,  K::kStreamWaitEvent, K::kMemcpy};
  EXPECT_EQ(calls_and_trailing, want);
  ASSERT_EQ(got.calls.size(), 9u);
  EXPECT_EQ(got.calls[6].stream, S1);  // the EventRecord
  EXPECT_EQ(got.calls[7].stream, S2);  // the wait
  EXPECT_EQ(got.calls[5].event, kFixEventBase);
  EXPECT_EQ(got.calls[6].event, kFixEventBase);
  EXPECT_EQ(got.calls[7].event, kFixEventBase);
}

// Calls whose seqs skip (records lost) are indexed as runs: the seqs in between are no calls,
// an edit naming one is refused, and the edited trace numbers the calls densely, with a warning.
TEST(TraceEditor, SeqsThatSkipAreIndexedAsRunsAndRenumbered) {
  const std::string dir = temp_dir("seq_gap");
  const std::string path = dir + "/rank0.srace";
  {
    tr::TraceWriter w(path, tr::TraceBuilder::default_header(0));
    tr::ChunkBuilder c;
    for (uint64_t seq : {0, 1, 5, 6}) {
      tr::EventCreate r{};
      r.call.seq = seq;
      r.event = 0x10 + seq;
      c.add(r);
    }
    w.write_chunk(c);
    w.close();
  }
  const CallIndex index = CallIndex::read(path);
  EXPECT_EQ(index.calls(), 4u);
  for (uint64_t seq = 0; seq < 8; ++seq) EXPECT_EQ(index.is_call(seq), seq < 2 || seq == 5 || seq == 6) << seq;
  EXPECT_EQ(index.warnings(), (std::vector<std::string>{path + ": 3 call records are missing from the sequence (records lost?)",
                                                        path + ": the edited trace numbers calls densely"}));
  TraceEditor ed(path);
  const uint64_t legacy = tr::legacy_stream(0);
  EXPECT_THROW(ed.add_edit({legacy, 1, legacy, 3}), std::invalid_argument);
  ed.add_edit({legacy, 1, legacy, 5});
  ed.write(dir + "/fixed.srace");
  auto got = read_back(dir + "/fixed.srace");
  ASSERT_EQ(got.calls.size(), 7u);
  for (size_t i = 0; i < got.calls.size(); ++i) EXPECT_EQ(got.calls[i].call.seq, i);
  const std::vector<uint64_t> events = {0x10, 0x11, kFixEventBase, kFixEventBase, kFixEventBase, 0x15, 0x16};
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(got.calls[i].event, events[i]) << i;
}

// More accessing streams than the index's table holds: the streams beyond it are still named
// exactly, and edits on them land on them.
TEST(TraceEditor, StreamsBeyondTheIndexTableAreStillExact) {
  const std::string dir = temp_dir("many_streams");
  const std::string path = dir + "/rank0.srace";
  std::vector<uint64_t> streams, seqs;
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    for (int i = 0; i < 300; ++i) streams.push_back(b.create_stream());
    const uint64_t A = b.alloc(4096);
    for (uint64_t s : streams) {
      seqs.push_back(b.next_seq());
      b.memset(s, A, 4096);
    }
    b.finish();
  }
  TraceEditor ed(path);
  for (size_t i = 0; i < streams.size(); ++i) EXPECT_EQ(ed.stream_of_call(seqs[i]), streams[i]) << i;
  ed.add_edit({streams[298], seqs[298], streams[299], seqs[299]});
  ed.write(dir + "/fixed.srace");
  auto got = read_back(dir + "/fixed.srace");
  ASSERT_EQ(got.calls.size(), 300u + 1 + 300 + 3);
  const auto& rec = got.calls[got.calls.size() - 3];
  const auto& wait = got.calls[got.calls.size() - 2];
  EXPECT_EQ(rec.kind, tr::RecordKind::kEventRecord);
  EXPECT_EQ(rec.stream, streams[298]);
  EXPECT_EQ(wait.kind, tr::RecordKind::kStreamWaitEvent);
  EXPECT_EQ(wait.stream, streams[299]);
  EXPECT_EQ(got.calls.back().stream, streams[299]);
}

// The editor reads its trace again when it writes: a trace that changed since it was indexed
// (its calls are gone) is an error naming the file, not a trace with edits left out.
TEST(TraceEditor, ATraceThatChangedSinceItsIndexIsNamed) {
  const std::string dir = temp_dir("changed");
  const std::string path = dir + "/rank0.srace";
  auto build = [&](int memsets) {
    std::filesystem::remove(path);
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    const uint64_t S = b.create_stream();
    const uint64_t A = b.alloc(4096);
    for (int i = 0; i < memsets; ++i) b.memset(S, A, 4096);
    b.finish();
    return S;
  };
  const uint64_t S = build(4);
  TraceEditor ed(path);
  ed.add_edit({S, 2, S, 5});
  build(1);
  try {
    ed.write(dir + "/fixed.srace");
    FAIL() << "no error";
  } catch (const tr::TraceError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": the trace no longer holds the calls its index named (1 of 2 edits placed)");
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/fixed.srace")) << "the partial output is removed";
}

// The edited traces are analysed from the chunks the editors write (analysis::FedTrace), not
// read back: the verdict is exactly the one reading the files back gives (read_back_edited),
// findings, racing pairs and all, when the edited traces still race (one of two findings
// targeted, or one occurrence per round) and when they are clean; the files are the same.
TEST(TraceEditor, EditedTracesAnalysedAsWrittenGiveTheVerdictOfReadingThemBack) {
  const std::string dir = temp_dir("fed-verdict");
  std::vector<std::string> paths;
  for (int r = 0; r < 2; ++r) {
    paths.push_back(dir + "/rank" + std::to_string(r) + ".srace");
    EmitOptions eo;
    eo.steps = 2;
    eo.precise_kernels = false;
    emit_trace(make_zero_schedule(synthetic_bucket_config(ZeroFix::kNone, r)), paths.back(), eo);
  }
  const auto input = analyze_traces(paths);
  ASSERT_EQ(input.findings.size(), 2u);
  auto shown = [](const AnalyzerVerdict& v) {
    nlohmann::json j = {{"certain", v.certain}, {"possible", v.possible}, {"traces", v.traces}, {"records", v.records}};
    for (const auto& f : v.findings) {
      nlohmann::json fj = f;
      for (const auto& w : f.where) {
        nlohmann::json pj = nlohmann::json::array();
        for (const auto& p : w.pairs) pj.push_back({p.earlier_seq, p.later_seq});
        fj["pairs"].push_back(pj);
      }
      j["findings"].push_back(fj);
    }
    return j;
  };
  struct Case {
    const char* name;
    std::vector<std::string> fingerprints;
    bool one_per_round;
    size_t after;  // findings left in the edited traces
  };
  for (const Case& c : {Case{"all", {}, false, 0}, Case{"one", {input.findings[1].fingerprint}, false, 1},
                        Case{"one-per-round", {}, true, 0}}) {
    SCOPED_TRACE(c.name);
    std::optional<RecordFixResult> res[2];
    for (int read_back = 0; read_back < 2; ++read_back) {
      RecordFixOptions o;
      o.fingerprints = c.fingerprints;
      o.one_occurrence_per_round = c.one_per_round;
      o.out_dir = dir + "/" + c.name + (read_back ? "-read" : "-fed");
      o.read_back_edited = read_back;
      res[read_back] = apply_record_fixes(paths, o);
    }
    const RecordFixResult &fed = *res[0], &read = *res[1];
    EXPECT_EQ(fed.after.findings.size(), c.after);
    EXPECT_EQ(read.after.findings.size(), c.after);
    EXPECT_EQ(fed.rounds, read.rounds);
    EXPECT_EQ(fed.verdict.removed, read.verdict.removed);
    EXPECT_EQ(fed.verdict.remaining, read.verdict.remaining);
    EXPECT_EQ(fed.verdict.introduced, read.verdict.introduced);
    // The same but for the output directory's name in the paths.
    std::string fed_j = shown(fed.after).dump(), read_j = shown(read.after).dump();
    for (std::string* s : {&fed_j, &read_j})
      for (const char* tag : {"-fed/", "-read/"})
        for (size_t at; (at = s->find(tag)) != std::string::npos;) s->replace(at, std::strlen(tag), "/");
    EXPECT_EQ(fed_j, read_j);
    ASSERT_EQ(fed.traces.size(), read.traces.size());
    for (size_t t = 0; t < fed.traces.size(); ++t) {
      std::ifstream a(fed.traces[t].edited, std::ios::binary), b(read.traces[t].edited, std::ios::binary);
      EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}))
          << fed.traces[t].edited;
    }
  }
}

namespace {

// The flags of every chunk of a trace file, in file order (the end-of-trace marker last).
std::vector<uint32_t> chunk_flags(const std::string& path) {
  const std::string d = file_bytes(path);
  uint32_t body = 0;
  std::memcpy(&body, d.data() + 12, 4);
  std::vector<uint32_t> flags;
  for (size_t at = 16 + size_t(body) + 4; at + 24 <= d.size();) {
    uint32_t h[6];
    std::memcpy(h, d.data() + at, sizeof(h));
    EXPECT_EQ(h[0], tr::kChunkMagic);
    flags.push_back(h[1]);
    at += 24 + h[2];
  }
  return flags;
}

}  // namespace

// apply_record_fixes writes an edited trace whose kept records come to at most
// kStoredTraceBytes in stored chunks (no zstd: on a small trace its level 1 was half of the
// editor's time) and a larger one compressed; the records are the same either way, and the
// stored file is the one every reader takes.
TEST(TraceEditor, ASmallEditedTraceIsWrittenInStoredChunksWithTheSameRecords) {
  const std::string dir = temp_dir("stored");
  std::vector<std::string> paths;
  for (int r = 0; r < 2; ++r) {
    paths.push_back(dir + "/rank" + std::to_string(r) + ".srace");
    EmitOptions eo;
    eo.steps = 2;
    eo.precise_kernels = false;
    emit_trace(make_zero_schedule(synthetic_bucket_config(ZeroFix::kNone, r)), paths.back(), eo);
  }
  RecordFixOptions o;
  o.out_dir = dir + "/fixed";
  const auto res = apply_record_fixes(paths, o);
  ASSERT_TRUE(res.fixed());
  ASSERT_EQ(res.traces.size(), 2u);
  for (const auto& t : res.traces) {
    const std::vector<uint32_t> flags = chunk_flags(t.edited);
    ASSERT_EQ(flags.size(), 2u) << t.edited;  // the records (a few kB), the end marker
    EXPECT_EQ(flags[0], 0u) << t.edited;
    EXPECT_EQ(flags[1], uint32_t(tr::kChunkEndOfTrace)) << t.edited;
  }
  EXPECT_TRUE(analyze_traces({res.traces[0].edited, res.traces[1].edited}).clean());

  // The rule: kept records of at most kStoredTraceBytes are stored; an editor that read the
  // trace itself (a large trace: the index kept nothing) compresses.
  std::optional<CallIndex> kept;
  const auto v = analyze_traces({paths[0]}, [&](const std::string& p) -> tr::RecordObserver* {
    kept.emplace(p).keep_records(TraceEditor::kStoredTraceBytes);
    return &*kept;
  });
  ASSERT_TRUE(kept && kept->has_records());
  EXPECT_GT(kept->kept_bytes(), 0u);
  TraceEditor small(std::move(*kept)), large(paths[0]);
  EXPECT_FALSE(small.writer_options().compress);
  EXPECT_TRUE(large.writer_options().compress);
  for (TraceEditor* ed : {&small, &large})
    for (const auto& f : v.findings)
      for (const auto& p : f.where[0].pairs)
        ed->add_edit({*ed->stream_of_call(p.earlier_seq), p.earlier_seq, *ed->stream_of_call(p.later_seq), p.later_seq});
  EXPECT_EQ(small.write(dir + "/stored.srace", small.writer_options()), large.write(dir + "/zstd.srace"));
  EXPECT_EQ(chunk_flags(dir + "/stored.srace"), (std::vector<uint32_t>{0u, tr::kChunkEndOfTrace}));
  EXPECT_EQ(chunk_flags(dir + "/zstd.srace"), (std::vector<uint32_t>{tr::kChunkZstd, tr::kChunkEndOfTrace}));
  EXPECT_GT(fs::file_size(dir + "/stored.srace"), fs::file_size(dir + "/zstd.srace"));
  const ReadBack a = read_back(dir + "/stored.srace"), b = read_back(dir + "/zstd.srace");
  EXPECT_EQ(a.kinds, b.kinds);
  EXPECT_EQ(a.bodies, b.bodies);
  EXPECT_EQ(a.header.producer, b.header.producer);
  // The kept records are written in place (renumbered while their chunk goes out, then put
  // back): writing again gives the same file, and it is the file the editor that read the
  // trace itself writes with the same options.
  small.write(dir + "/stored-again.srace", small.writer_options());
  EXPECT_EQ(file_bytes(dir + "/stored-again.srace"), file_bytes(dir + "/stored.srace"));
  large.write(dir + "/stored-large.srace", small.writer_options());
  EXPECT_EQ(file_bytes(dir + "/stored-large.srace"), file_bytes(dir + "/stored.srace"));
  small.write(dir + "/zstd-small.srace");
  EXPECT_EQ(file_bytes(dir + "/zstd-small.srace"), file_bytes(dir + "/zstd.srace"));
}
