// Capture windows and ring mode (docs/long-runs.md), through the recorder as the call handler
// drives it: a long synthetic job (two streams, a buffer written on one and copied on the
// other, an event between them, allocations made and freed along the way) recorded in ring
// mode or inside a window, then analysed. Each racy job has a clean twin.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "analyzer/analyzer.h"
#include "tests/tracer/trace_contents.h"
#include "traceformat/call_stream.h"
#include "traceformat/ring_trace.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer {
namespace {

using trace::RecordKind;

constexpr uint64_t kS1 = 0x1000, kS2 = 0x2000, kEvent = 0xE0;
constexpr uint64_t kBuf = 0x7000'0000, kLate = 0x9000'0000;

std::filesystem::path temp_dir(const char* name) {
  auto d = std::filesystem::temp_directory_path() / (std::string("sr_cap_") + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// The calls a training step makes, as the handler would record them.
class SyntheticJob {
 public:
  explicit SyntheticJob(RecorderOptions o) : rec_(std::move(o)) {}

  void prologue() {
    trace::StreamCreate s{};
    s.flags = trace::kStreamNonBlocking;
    s.stream = kS1;
    put(s, "cudaStreamCreateWithFlags");
    s.stream = kS2;
    put(s, "cudaStreamCreateWithFlags");
    trace::EventCreate e{};
    e.event = kEvent;
    put(e, "cudaEventCreate");
    alloc(kBuf, 1 << 20);
  }
  // One step: write `buf` on s1, record the event, (wait on it on s2), copy it on s2, sync.
  // Every 7th step allocates and frees a scratch buffer (state that comes and goes).
  void step(uint64_t i, bool racy, uint64_t buf = kBuf) {
    rec_.mark_step(api("nvtxRangePushA"));
    if (i % 7 == 3) alloc(0x5000'0000 + i * 0x10000, 4096);
    trace::Memset m{};
    m.stream = kS1;
    m.dst = buf;
    m.bytes = 4096;
    m.is_async = 1;
    m.dst_mem = trace::MemKind::kDevice;
    put(m, "cudaMemsetAsync");
    trace::EventRecord r{};
    r.event = kEvent;
    r.stream = kS1;
    put(r, "cudaEventRecord");
    if (!racy) {
      trace::StreamWaitEvent w{};
      w.stream = kS2;
      w.event = kEvent;
      put(w, "cudaStreamWaitEvent");
    }
    trace::Memcpy c{};
    c.stream = kS2;
    c.src = buf;
    c.dst = buf + 65536;
    c.bytes = 4096;
    c.copy_kind = trace::CopyKind::kDeviceToDevice;
    c.is_async = 1;
    c.src_mem = c.dst_mem = trace::MemKind::kDevice;
    put(c, "cudaMemcpyAsync");
    trace::StreamSynchronize q{};
    q.stream = kS2;
    put(q, "cudaStreamSynchronize");
    q.stream = kS1;
    put(q, "cudaStreamSynchronize");
    if (i % 7 == 3) {
      trace::Free f{};
      f.ptr = 0x5000'0000 + i * 0x10000;
      f.kind = trace::AllocKind::kDevice;
      put(f, "cudaFree");
    }
  }
  void alloc(uint64_t ptr, uint64_t bytes) {
    trace::Alloc a{};
    a.ptr = ptr;
    a.bytes = bytes;
    a.kind = trace::AllocKind::kDevice;
    put(a, "cudaMalloc");
  }
  TraceRecorder& recorder() { return rec_; }
  uint32_t api(const char* name) { return rec_.strings().intern(name); }

 private:
  template <typename R>
  void put(R r, const char* name) {
    r.call = rec_.call(api(name), 0);
    rec_.add(r);
  }
  TraceRecorder rec_;
};

RecorderOptions options(const std::filesystem::path& file, std::string steps, std::string window, std::string ring) {
  RecorderOptions o;
  o.path = file.string();
  o.background_flusher = false;
  std::string error;
  auto c = parse_capture_options(steps, window, ring, "step", &error);
  EXPECT_TRUE(c) << error;
  if (c) o.capture = *c;
  return o;
}

analysis::AnalysisResult analyse(const std::string& path) {
  analysis::Analyzer a(analysis::AnalyzerOptions{});
  a.add_trace(path);
  return a.finish();
}

std::vector<std::string> texts(const analysis::AnalysisResult& r) {
  std::vector<std::string> out;
  for (const auto& n : r.notices) out.push_back(n.level + ": " + n.text);
  return out;
}

// A job of `steps` steps in ring mode (4 steps kept); `racy_step` lacks its wait, and so
// does step 10 (dropped); from step 500 on, the steps use a buffer allocated at step 500
// (its allocation is in a dropped step, so only the snapshot has it).
std::string ring_job(const std::filesystem::path& dir, const char* name, uint64_t steps, uint64_t racy_step) {
  auto file = dir / name;
  SyntheticJob job(options(file, "", "", "4"));
  job.prologue();
  for (uint64_t i = 0; i < steps; ++i) {
    if (i == steps / 2) job.alloc(kLate, 1 << 20);
    job.step(i, i == racy_step || i == 10, i >= steps / 2 ? kLate : kBuf);
    if (i % 10 == 0) job.recorder().flush();  // as the flusher would, every so often
  }
  job.recorder().close();
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".ring")) << "segments left behind";
  return file.string();
}

TEST(RingMode, LongRunKeepsTheLastStepsAndFindsTheirRace) {
  auto dir = temp_dir("ring");
  const std::string racy = ring_job(dir, "racy.srace", 1000, 998);
  auto r = analyse(racy);
  ASSERT_EQ(r.findings.size(), 1u);
  const auto& f = r.findings[0];
  EXPECT_EQ(f.kind, analysis::RaceKind::kReadAfterWrite);
  EXPECT_EQ(f.confidence, analysis::Confidence::kCertain);
  EXPECT_EQ(f.earlier.op, "cudaMemsetAsync");
  EXPECT_EQ(f.later.op, "cudaMemcpyAsync");
  EXPECT_EQ(f.earlier.stream, kS1);
  EXPECT_EQ(f.later.stream, kS2);
  EXPECT_EQ(f.overlap_addr, kLate);
  EXPECT_EQ(f.overlap_bytes, 4096u);
  EXPECT_EQ(f.earlier.alloc_kind, "cudaMalloc");  // the snapshot's allocation, made 498 steps earlier
  EXPECT_EQ(f.occurrences, 1u);                   // step 10's race was dropped with its step
  // The snapshot (2 streams, the event and its last record, 2 live allocations) and the mark
  // come first; each kept step has 6 calls and its marker: seqs stay dense.
  auto c = testing::read_trace(racy);
  EXPECT_EQ(c.header.extra.at("capture"), "ring 4");
  EXPECT_EQ(c.header.extra.at("ring_steps_seen"), "1000");
  EXPECT_EQ(c.header.extra.at("ring_steps_kept"), "4");
  EXPECT_EQ(c.header.extra.at("ring_steps_dropped"), "996");
  auto marks = c.of(RecordKind::kCaptureMark);
  ASSERT_EQ(marks.size(), 6u);
  auto open = marks[0].as<trace::CaptureMark>();
  EXPECT_EQ(open.action, trace::CaptureAction::kWindowOpen);
  EXPECT_EQ(open.reason, trace::CaptureReason::kRing);
  EXPECT_EQ(open.step, 996u);
  EXPECT_EQ(open.steps_dropped, 996u);
  EXPECT_EQ(marks[1].as<trace::CaptureMark>().action, trace::CaptureAction::kStateEnd);
  EXPECT_EQ(marks[1].as<trace::CaptureMark>().call.seq, 7u);  // 0 the mark, 1-6 the snapshot
  EXPECT_EQ(c.of(RecordKind::kAlloc).size(), 2u + 1u);  // snapshot: kBuf and kLate; step 997 allocates scratch
  trace::CallStream s(racy);
  s.for_each([](const trace::RecordView&) {});
  EXPECT_TRUE(s.warnings().empty());
  EXPECT_EQ(s.stats().calls, 8u + 4u * 7u - 1u + 2u);  // 998 has no wait; 997 allocates and frees
  EXPECT_EQ(texts(r), std::vector<std::string>{
                          "warning: ring trace (ring 4): the first 996 steps and " + std::to_string(open.calls_left_out) +
                          " calls in all were dropped; the trace holds a snapshot of their live state, then steps 996 "
                          "to the end. Races between a dropped call and a kept one are not reported"});
  // The prologue's 4 calls, 7 per step (step 10 has no wait), steps 3, 10, ..., 990 allocate and
  // free, step 500 allocates the late buffer.
  EXPECT_EQ(open.calls_left_out, 4u + 996u * 7u - 1u + 2u * 142u + 1u);

  // The clean twin: nothing.
  const std::string clean = ring_job(dir, "clean.srace", 1000, ~0ull);
  EXPECT_TRUE(analyse(clean).findings.empty());
  std::filesystem::remove_all(dir);
}

// A process killed before its exit leaves its ring on disk (segments since the last state
// checkpoint, the checkpoint, the definitions); assembling it later gives a trace of those steps
// that finds the race of the last steps and says it was salvaged.
TEST(RingMode, AKilledProcessRingIsSalvaged) {
  auto dir = temp_dir("salvage");
  auto file = dir / "t.srace";
  const std::string ring = file.string() + ".ring";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    SyntheticJob job(options(file, "", "", "4"));
    job.prologue();
    for (uint64_t i = 0; i < 300; ++i) {
      job.step(i, i == 297);
      if (i % 10 == 0 || i == 299) job.recorder().flush();
    }
    _exit(0);  // no exit handler, no close: as if killed after its last flush
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(std::filesystem::exists(file));
  ASSERT_TRUE(std::filesystem::exists(trace::RingFiles::state(ring)));
  trace::RingAssembly a = trace::assemble_ring(ring, file.string(), nullptr, true);
  trace::remove_ring(ring);
  EXPECT_FALSE(std::filesystem::exists(ring));
  // Checkpoints come every 64 folded segments: the salvaged trace holds the 4 kept steps and
  // the folded ones not yet checkpointed.
  EXPECT_EQ(a.steps_seen, 300u);
  EXPECT_GE(a.steps_kept, 4u);
  EXPECT_LE(a.steps_kept, 4u + 64u);
  auto r = analyse(file.string());
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].occurrences, 1u);
  EXPECT_EQ(r.findings[0].kind, analysis::RaceKind::kReadAfterWrite);
  const uint64_t first = 300 - a.steps_kept;
  EXPECT_EQ(texts(r), (std::vector<std::string>{
                          "warning: ring salvaged after the traced process died: steps " + std::to_string(first) +
                              " to the last are kept, the last may be cut short, and calls not yet flushed are missing",
                          "warning: ring trace (ring 4): the first " + std::to_string(first) + " steps and " +
                              std::to_string(a.calls_dropped) +
                              " calls in all were dropped; the trace holds a snapshot of their live state, then steps " +
                              std::to_string(first) + " to the end. Races between a dropped call and a kept one are "
                              "not reported"}));
  EXPECT_EQ(testing::read_trace(file.string()).header.extra.at("ring_salvaged"), "1");
  std::filesystem::remove_all(dir);
}

// The disk budget: a ring's trace does not grow with the run. 100 and 1000 steps write the
// same kilobyte or two, a tenth of the full trace of the same 1000 steps or less.
TEST(RingMode, TraceSizeDoesNotGrowWithTheRun) {
  auto dir = temp_dir("budget");
  auto size = [](const std::string& p) { return std::filesystem::file_size(p); };
  const auto short_run = size(ring_job(dir, "short.srace", 100, ~0ull));
  const auto long_run = size(ring_job(dir, "long.srace", 1000, ~0ull));
  RecorderOptions full;
  full.path = (dir / "full.srace").string();
  full.background_flusher = false;
  SyntheticJob job(full);
  job.prologue();
  for (uint64_t i = 0; i < 1000; ++i) {
    job.step(i, false);
    if (i % 10 == 0) job.recorder().flush();
  }
  job.recorder().close();
  EXPECT_LT(long_run * 10, size(full.path)) << long_run << " vs " << size(full.path);
  EXPECT_LT(long_run > short_run ? long_run - short_run : short_run - long_run, 256u);
  std::filesystem::remove_all(dir);
}

// A ring that never saw its step marker keeps everything and says so.
TEST(RingMode, NoStepMarkerKeepsEverythingAndSaysSo) {
  auto dir = temp_dir("nomarker");
  auto file = dir / "t.srace";
  RecorderOptions o = options(file, "", "", "2");
  SyntheticJob job(o);
  job.prologue();
  job.recorder().close();
  auto r = analyse(file.string());
  EXPECT_EQ(texts(r), (std::vector<std::string>{
                          "warning: ring mode: no step marker (NVTX range 'step') was seen, so nothing was dropped: the "
                          "whole run is one step",
                          "info: ring trace (ring 2): nothing was dropped (0 steps seen)"}));
  EXPECT_EQ(testing::read_trace(file.string()).of(RecordKind::kStreamCreate).size(), 2u);
  std::filesystem::remove_all(dir);
}

// --steps 3:5 writes steps 3 and 4 only: a race in step 4 is found, one in step 1 or 7 is not
// in the trace at all.
TEST(CaptureWindow, StepsWindowWritesOnlyItsSteps) {
  auto dir = temp_dir("steps");
  auto run = [&](const char* name, bool race_inside) {
    auto file = dir / name;
    SyntheticJob job(options(file, "3:5", "", ""));
    job.prologue();
    for (uint64_t i = 0; i < 10; ++i) {
      job.step(i, i == 1 || i == 7 || (race_inside && i == 4));
      job.recorder().flush();
    }
    job.recorder().close();
    return file.string();
  };
  const std::string racy = run("racy.srace", true);
  auto r = analyse(racy);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].kind, analysis::RaceKind::kReadAfterWrite);
  EXPECT_EQ(r.findings[0].earlier.op, "cudaMemsetAsync");
  EXPECT_EQ(r.findings[0].later.op, "cudaMemcpyAsync");
  EXPECT_EQ(r.findings[0].occurrences, 1u);
  auto c = testing::read_trace(racy);
  auto marks = c.of(RecordKind::kCaptureMark);
  ASSERT_EQ(marks.size(), 4u);  // open (step 3), state end, step 4, close (step 5)
  auto open = marks[0].as<trace::CaptureMark>();
  EXPECT_EQ(open.action, trace::CaptureAction::kWindowOpen);
  EXPECT_EQ(open.reason, trace::CaptureReason::kSteps);
  EXPECT_EQ(open.step, 3u);
  EXPECT_EQ(open.steps_dropped, 3u);
  EXPECT_EQ(open.calls_left_out, 4u + 3u * 7u - 1u);  // the prologue, steps 0-2 (step 1 has no wait)
  EXPECT_EQ(marks[1].as<trace::CaptureMark>().action, trace::CaptureAction::kStateEnd);
  EXPECT_EQ(marks[2].as<trace::CaptureMark>().action, trace::CaptureAction::kStep);
  EXPECT_EQ(marks[2].as<trace::CaptureMark>().step, 4u);
  EXPECT_EQ(marks[3].as<trace::CaptureMark>().action, trace::CaptureAction::kWindowClose);
  EXPECT_EQ(marks[3].as<trace::CaptureMark>().step, 5u);
  EXPECT_EQ(c.of(RecordKind::kMemset).size(), 2u);
  EXPECT_EQ(c.header.extra.at("capture"), "steps 3:5");
  trace::CallStream s(racy);
  s.for_each([](const trace::RecordView&) {});
  EXPECT_TRUE(s.warnings().empty());
  EXPECT_EQ(texts(r), std::vector<std::string>{
                          "warning: windowed trace (steps 3:5): 1 window recorded; 24 calls (3 steps) before it were "
                          "not recorded and count as complete at each window's start. Races that involve an "
                          "unrecorded call are not reported"});
  EXPECT_TRUE(analyse(run("clean.srace", false)).findings.empty());
  std::filesystem::remove_all(dir);
}

// An NVTX-range or profiler window opens and closes more than once: each opening is a
// barrier, so a write in the first window and an unordered read in the second are not a
// finding (the calls between them are not known), while a race inside the second is.
TEST(CaptureWindow, ReopenedWindowIsABarrierAndItsRaceIsFound) {
  auto dir = temp_dir("profiler");
  auto file = dir / "t.srace";
  SyntheticJob job(options(file, "", "profiler", ""));
  const uint32_t start = job.api("cudaProfilerStart"), stop = job.api("cudaProfilerStop");
  job.prologue();
  job.recorder().mark_window(true, start);
  job.step(0, false);
  job.recorder().mark_window(true, start);  // already open: no edge
  job.recorder().mark_window(false, stop);
  job.step(1, true);  // outside: not written
  job.recorder().mark_window(true, start);
  job.step(2, true);
  job.recorder().mark_window(false, stop);
  job.recorder().close();
  auto r = analyse(file.string());
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].occurrences, 1u);
  auto c = testing::read_trace(file.string());
  auto marks = c.of(RecordKind::kCaptureMark);
  ASSERT_EQ(marks.size(), 8u);  // (open, state end, step, close) twice
  auto reopen = marks[4].as<trace::CaptureMark>();
  EXPECT_EQ(reopen.action, trace::CaptureAction::kWindowOpen);
  EXPECT_EQ(reopen.reason, trace::CaptureReason::kProfiler);
  EXPECT_EQ(reopen.steps_dropped, 1u);
  EXPECT_EQ(reopen.calls_left_out, 6u);  // step 1: its marker and 5 calls
  trace::CallStream s(file.string());
  s.for_each([](const trace::RecordView&) {});
  EXPECT_TRUE(s.warnings().empty());
  std::filesystem::remove_all(dir);
}

// Precise mode: a launch's measured intervals come at the next synchronisation, which may be
// after the window closed: they are written with their launch, and never without it.
TEST(CaptureWindow, PreciseIntervalsFollowTheirLaunch) {
  auto dir = temp_dir("precise");
  auto file = dir / "t.srace";
  SyntheticJob job(options(file, "1:2", "", ""));
  TraceRecorder& rec = job.recorder();
  auto launch = [&](uint64_t correlation) {
    trace::KernelLaunchHead k{};
    k.stream = kS1;
    k.correlation = correlation;
    k.flags = trace::kKernelPrecise;
    k.call = rec.call(job.api("cudaLaunchKernel"), 0);
    rec.add_kernel(k, {});
  };
  auto access = [&](uint64_t correlation) {
    trace::KernelAccess a{};
    a.correlation = correlation;
    a.addr = kBuf;
    a.bytes = 64;
    a.dir = trace::AccessDir::kWrite;
    rec.add(a);
  };
  job.prologue();
  rec.mark_step(job.api("nvtxRangePushA"));  // step 0: outside
  launch(10);
  access(10);
  rec.mark_step(job.api("nvtxRangePushA"));  // step 1: the window
  launch(11);
  rec.flush();
  rec.mark_step(job.api("nvtxRangePushA"));  // step 2: closed again
  launch(12);
  access(11);
  access(12);
  rec.close();
  auto c = testing::read_trace(file.string());
  ASSERT_EQ(c.of(RecordKind::kKernelLaunch).size(), 1u);
  EXPECT_EQ(c.of(RecordKind::kKernelLaunch)[0].as<trace::KernelLaunchHead>().correlation, 11u);
  auto accesses = c.of(RecordKind::kKernelAccess);
  ASSERT_EQ(accesses.size(), 1u);
  EXPECT_EQ(accesses[0].as<trace::KernelAccess>().correlation, 11u);
  std::filesystem::remove_all(dir);
}

// A window that never opens still leaves a trace that says so.
TEST(CaptureWindow, WindowThatNeverOpensSaysSo) {
  auto dir = temp_dir("never");
  auto file = dir / "t.srace";
  SyntheticJob job(options(file, "50:60", "", ""));
  job.prologue();
  for (uint64_t i = 0; i < 5; ++i) job.step(i, false);
  job.recorder().close();
  auto r = analyse(file.string());
  EXPECT_EQ(texts(r), (std::vector<std::string>{
                          "warning: capture window (steps 50:60) never opened: 5 step markers were seen (NVTX range "
                          "'step'); no call was written",
                          "warning: windowed trace (steps 50:60): the window never opened, so no call was recorded"}));
  std::filesystem::remove_all(dir);
}

// Threads calling while another marks steps, with the background flusher draining every
// millisecond: each call is either dropped with its step or kept, never both or neither, and
// the kept seqs stay dense (a call taken before a marker but drained after it is still placed
// by its seq).
TEST(RingMode, ConcurrentCallsAndMarkersLoseNothing) {
  auto dir = temp_dir("threads");
  auto file = dir / "t.srace";
  RecorderOptions o = options(file, "", "", "3");
  o.background_flusher = true;
  o.period_ms = 1;
  o.handoff_bytes = 2048;
  uint64_t calls = 0, markers = 0;
  {
    TraceRecorder rec(o);
    constexpr int kThreads = 3;
    std::atomic<bool> done{false};
    std::atomic<uint64_t> made{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&rec, &done, &made, t] {
        const uint32_t api = rec.strings().intern("cudaStreamSynchronize");
        uint64_t n = 0;
        while (!done.load(std::memory_order_relaxed)) {
          trace::StreamSynchronize r{};
          r.stream = uint64_t(t + 1);
          r.call = rec.call(api, 0);
          rec.add(r);
          if (++n % 64 == 0) std::this_thread::yield();
        }
        made += n;
      });
    const uint32_t api = rec.strings().intern("nvtxRangePushA");
    for (; markers < 20; ++markers) {
      rec.mark_step(api);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    done.store(true);
    for (auto& th : threads) th.join();
    rec.close();
    calls = made.load();
  }
  auto c = testing::read_trace(file.string());
  trace::CallStream s(file.string());
  uint64_t kept_syncs = 0, kept_steps = 0, snapshot = 0;
  bool in_snapshot = false;
  s.for_each([&](const trace::RecordView& r) {
    if (r.kind == RecordKind::kStreamSynchronize) ++kept_syncs;
    if (r.kind == RecordKind::kCaptureMark) {
      auto m = r.as<trace::CaptureMark>();
      if (m.action == trace::CaptureAction::kStep) ++kept_steps;
      in_snapshot = m.action == trace::CaptureAction::kWindowOpen;
    } else if (in_snapshot) {
      ++snapshot;
    }
  });
  EXPECT_TRUE(s.warnings().empty()) << s.warnings()[0];
  EXPECT_EQ(snapshot, 0u);  // no live state in this job
  EXPECT_EQ(kept_steps, 3u);
  EXPECT_EQ(c.header.extra.at("ring_steps_seen"), std::to_string(markers));
  EXPECT_EQ(c.header.extra.at("ring_steps_dropped"), std::to_string(markers - 3));
  EXPECT_EQ(std::stoull(c.header.extra.at("ring_calls_dropped")) + kept_syncs + kept_steps, calls + markers);
  std::filesystem::remove_all(dir);
}

TEST(CaptureOptions, SettingsParseOrSayWhy) {
  std::string e;
  EXPECT_FALSE(parse_capture_options("5", "", "", "step", &e));
  EXPECT_EQ(e, "steps '5' is not A:B (steps A to B-1, counted from 0) or A:");
  EXPECT_FALSE(parse_capture_options("5:5", "", "", "step", &e));
  EXPECT_EQ(e, "steps '5:5' is empty (B must be greater than A)");
  EXPECT_FALSE(parse_capture_options("", "", "0", "step", &e));
  EXPECT_EQ(e, "ring '0' is not a number of steps from 1 to 1000000");
  EXPECT_FALSE(parse_capture_options("", "nvtx:", "", "", &e));
  EXPECT_EQ(e, "window 'nvtx:' is not nvtx:NAME or profiler");
  EXPECT_FALSE(parse_capture_options("1:2", "", "", "", &e));
  EXPECT_EQ(e, "steps counts steps: name the step marker with step_range=NAME (the NVTX range pushed once per step)");
  EXPECT_FALSE(parse_capture_options("", "profiler", "3", "step", &e));
  EXPECT_EQ(e, "ring cannot be combined with a window (steps, nvtx, profiler): a ring keeps the last N steps");
  auto o = parse_capture_options("7:", "", "", "train_step", &e);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->describe(), "steps 7:");
  auto n = parse_capture_options("", "nvtx:fwd", "", "", &e);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->describe(), "nvtx range 'fwd'");
  EXPECT_FALSE(parse_capture_options("", "", "", "", &e)->active());
}

}  // namespace
}  // namespace streamrace::tracer
