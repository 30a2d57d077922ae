// Trace emission and lifting: a schedule written as a trace and lifted back keeps its
// operations, ranges, edges and stacks, and the simulator reaches the same verdicts on it.
// (A fix edit on a recorded trace, judged on its lifted schedule: trace_editor_test.cpp.)
#include <gtest/gtest.h>

#include <filesystem>

#include "replay/stream_simulator.h"
#include "replay/trace_emitter.h"
#include "replay/trace_lifter.h"
#include "replay/zero_schedule.h"
#include "traceformat/trace_builder.h"

using namespace streamrace::replay;
namespace fs = std::filesystem;
namespace tr = streamrace::trace;

namespace {

std::string temp_path(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("streamrace_replay_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto p = dir / name;
  fs::remove(p);
  return p.string();
}

Schedule tiny(int stage, const std::string& v) {
  ZeroConfig c;
  c.stage = stage;
  apply_zero_preset("tiny", c);
  EXPECT_TRUE(set_zero_variant(c, v));
  return make_zero_schedule(c);
}

size_t count(const Schedule& s, ActionKind k) {
  size_t n = 0;
  for (const auto& a : s.actions) n += a.kind == k;
  return n;
}

}  // namespace

TEST(TraceLifting, EmitThenLiftKeepsOperationsRangesEdgesAndStacks) {
  Schedule s = tiny(1, "event");
  auto path = temp_path("emit_lift.srace");
  auto emitted = emit_trace(s, path);
  auto lifted = lift_trace(path);
  const Schedule& l = lifted.schedule;
  EXPECT_TRUE(lifted.warnings.empty());
  EXPECT_EQ(l.world, 2);
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.dtype, "fp16");
  // produce and divide kernels come back as opaque compute ops; cudaFree adds device syncs.
  EXPECT_EQ(count(l, ActionKind::kCompute), count(s, ActionKind::kProduce) + count(s, ActionKind::kDivide));
  EXPECT_EQ(count(l, ActionKind::kCopy), count(s, ActionKind::kCopy) + count(s, ActionKind::kCopyBack));
  EXPECT_EQ(count(l, ActionKind::kCollective), count(s, ActionKind::kCollective));
  EXPECT_EQ(count(l, ActionKind::kEventRecord), count(s, ActionKind::kEventRecord));
  EXPECT_EQ(count(l, ActionKind::kStreamWait), count(s, ActionKind::kStreamWait));
  // Every original action maps to a lifted one with the same ranges and stack.
  size_t j = 0;
  for (size_t i = 0; i < s.actions.size(); ++i) {
    while (j < l.actions.size() && l.actions[j].source_seq != emitted.seq_of_action[i]) ++j;
    ASSERT_LT(j, l.actions.size()) << "action " << i << " (" << s.actions[i].label << ") was not lifted";
    const Action& a = s.actions[i];
    const Action& b = l.actions[j];
    EXPECT_EQ(b.stack, a.stack) << a.label;
    ASSERT_EQ(b.reads.size(), a.reads.size()) << a.label;
    ASSERT_EQ(b.writes.size(), a.writes.size()) << a.label;
    for (size_t k = 0; k < a.reads.size(); ++k) {
      EXPECT_EQ(l.buffers[b.reads[k].buffer].address, emitted_address(s, a.reads[k].buffer)) << a.label;
      EXPECT_EQ(b.reads[k].offset, a.reads[k].offset);
      EXPECT_EQ(b.reads[k].bytes, a.reads[k].bytes);
    }
    for (size_t k = 0; k < a.writes.size(); ++k) {
      EXPECT_EQ(b.writes[k].offset, a.writes[k].offset);
      EXPECT_EQ(b.writes[k].bytes, a.writes[k].bytes);
    }
    if (is_device_op(a.kind) || a.kind == ActionKind::kEventRecord || a.kind == ActionKind::kStreamWait) {
      EXPECT_EQ(l.streams[b.stream].kind, s.streams[a.stream].kind) << a.label;
    }
  }
}

TEST(TraceLifting, LiftedSchedulesGetTheSameSimulatorVerdicts) {
  for (const char* v : {"none", "event", "wait-stream", "sync"}) {
    Schedule s = tiny(2, v);
    auto path = temp_path(std::string("lift_verdict_") + v + ".srace");
    emit_trace(s, path);
    auto l = lift_trace(path).schedule;
    EXPECT_TRUE(l.expectations.empty());
    StreamSimulator sim(l);
    auto r = sim.search();
    EXPECT_EQ(r.verdict, std::string(v) == "none" ? SearchResult::Verdict::kCorruptionFound
                                                  : SearchResult::Verdict::kNoCorruption)
        << v << " states " << r.states;
  }
}

TEST(TraceLifting, ReEmittingALiftedScheduleKeepsItsHandlesAndAddresses) {
  Schedule s = tiny(3, "current-stream");
  auto p1 = temp_path("reemit_1.srace"), p2 = temp_path("reemit_2.srace");
  emit_trace(s, p1);
  auto l1 = lift_trace(p1).schedule;
  auto e2 = emit_trace(l1, p2);
  auto l2 = lift_trace(p2).schedule;
  ASSERT_EQ(l2.actions.size(), l1.actions.size());
  for (size_t i = 0; i < l1.actions.size(); ++i) {
    EXPECT_EQ(l2.actions[i].kind, l1.actions[i].kind) << i;
    EXPECT_EQ(l2.actions[i].api, l1.actions[i].api) << i;
    EXPECT_EQ(l2.actions[i].reads, l1.actions[i].reads) << i;
    EXPECT_EQ(l2.actions[i].writes, l1.actions[i].writes) << i;
    EXPECT_EQ(l2.actions[i].stack, l1.actions[i].stack) << i;
  }
  for (size_t i = 0; i < l1.streams.size(); ++i) EXPECT_EQ(l2.streams[i].handle, l1.streams[i].handle);
  for (size_t i = 0; i < l1.buffers.size(); ++i) EXPECT_EQ(l2.buffers[i].address, l1.buffers[i].address);
}

// lift_trace_shape, which the simulator's size check uses: lift_trace's streams, events,
// buffers and every action's kind, stream, event and byte ranges, with no labels, API names,
// stacks or kernel pointers, so the same cells; on recorded traces (the bundled DeepSpeed
// recording, a precise-mode trace with measured intervals) and an emitted ZeRO schedule.
TEST(TraceLifting, TheShapeLiftSizesTheScheduleAsTheWholeLiftDoes) {
  const std::string emitted = temp_path("shape_zero.srace");
  emit_trace(tiny(2, "none"), emitted);
  for (const std::string& path :
       {std::string(SR_REPLAY_DATA_DIR "/../../../samples/traces/deepspeed-0.14.2/vm-1230.srace"),
        std::string(SR_REPLAY_DATA_DIR "/../precise/async_copy_racy_precise/vm-574.srace"), emitted}) {
    SCOPED_TRACE(path);
    const Schedule whole = lift_trace(path).schedule, shape = lift_trace_shape(path).schedule;
    ASSERT_FALSE(whole.actions.empty());
    EXPECT_EQ(StreamSimulator::cells_needed(shape), StreamSimulator::cells_needed(whole));
    EXPECT_EQ(shape.cell_bytes(), whole.cell_bytes());
    ASSERT_EQ(shape.buffers.size(), whole.buffers.size());
    for (size_t i = 0; i < whole.buffers.size(); ++i) {
      EXPECT_EQ(shape.buffers[i].bytes, whole.buffers[i].bytes);
      EXPECT_EQ(shape.buffers[i].address, whole.buffers[i].address);
    }
    EXPECT_EQ(shape.streams.size(), whole.streams.size());
    EXPECT_EQ(shape.events.size(), whole.events.size());
    ASSERT_EQ(shape.actions.size(), whole.actions.size());
    size_t labelled = 0;
    for (size_t i = 0; i < whole.actions.size(); ++i) {
      const Action &s = shape.actions[i], &w = whole.actions[i];
      EXPECT_EQ(s.kind, w.kind) << i;
      EXPECT_EQ(s.stream, w.stream) << i;
      EXPECT_EQ(s.event, w.event) << i;
      EXPECT_EQ(s.reads, w.reads) << i;
      EXPECT_EQ(s.writes, w.writes) << i;
      EXPECT_EQ(s.source_seq, w.source_seq) << i;
      EXPECT_TRUE(s.label.empty() && s.api.empty() && s.stack.empty() && s.kernel_ptrs.empty()) << i;
      labelled += !w.label.empty();
    }
    EXPECT_GT(labelled, 0u);
  }
}
