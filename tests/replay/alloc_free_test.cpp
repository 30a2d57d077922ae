// Allocation lifetimes in the schedule IR (kAlloc / kFree): the JSON form, validation, the
// trace emitter's Alloc/Free records, and the CPU simulator's view of a freed buffer.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "replay/schedule.h"
#include "replay/stream_simulator.h"
#include "replay/trace_emitter.h"
#include "replay/zero_schedule.h"
#include "traceformat/records.h"
#include "traceformat/trace_file.h"

using namespace streamrace::replay;
namespace tr = streamrace::trace;

namespace {

Action lifetime(ActionKind k, uint32_t buffer, std::string label) {
  Action a;
  a.kind = k;
  a.buffer = buffer;
  a.label = std::move(label);
  return a;
}

Action copy(uint32_t stream, ByteRange from, ByteRange to, std::string label) {
  Action a;
  a.kind = ActionKind::kCopy;
  a.stream = stream;
  a.reads = {from};
  a.writes = {to};
  a.label = std::move(label);
  return a;
}

// One rank: p0's gradient is produced into `grad`, copied through a scratch buffer that the
// program allocates and frees itself, into `out`, which must hold it at the end.
struct Program {
  Schedule s;
  uint32_t compute = 0, side = 0, grad = 0, scratch = 0, out = 0;
};

Program scratch_program() {
  Program p;
  Schedule& s = p.s;
  s.name = "scratch lifetime";
  s.dtype = "fp32";
  s.elem_bytes = 4;
  p.compute = s.add_stream("compute", StreamKind::kNonBlocking);
  p.side = s.add_stream("side", StreamKind::kNonBlocking);
  s.params.push_back(Param{"p0", 4});
  p.grad = s.add_buffer("grad", 16, "gradient");
  p.scratch = s.add_buffer("scratch", 16, "temp");
  p.out = s.add_buffer("out", 16, "output");
  Action produce;
  produce.kind = ActionKind::kProduce;
  produce.stream = p.compute;
  produce.param = 0;
  produce.writes = {s.elems(p.grad, 0, 4)};
  produce.label = "produce p0";
  s.actions.push_back(produce);
  s.actions.push_back(lifetime(ActionKind::kAlloc, p.scratch, "allocate scratch"));
  s.actions.push_back(copy(p.compute, s.elems(p.grad, 0, 4), s.elems(p.scratch, 0, 4), "grad -> scratch"));
  s.actions.push_back(copy(p.compute, s.elems(p.scratch, 0, 4), s.elems(p.out, 0, 4), "scratch -> out"));
  s.actions.push_back(lifetime(ActionKind::kFree, p.scratch, "free scratch"));
  s.expectations.push_back(Expectation{s.elems(p.out, 0, 4), 0, 0, "p0 in out"});
  return p;
}

struct Rec {
  tr::RecordKind kind;
  uint64_t ptr = 0;  // Alloc/Free: the pointer; Memcpy: the source
};

std::vector<Rec> lifetime_records(const std::string& path) {
  std::vector<Rec> out;
  tr::TraceReader r(path);
  r.for_each([&](const tr::RecordView& v) {
    if (v.kind == tr::RecordKind::kAlloc) out.push_back(Rec{v.kind, v.as<tr::Alloc>().ptr});
    if (v.kind == tr::RecordKind::kFree) out.push_back(Rec{v.kind, v.as<tr::Free>().ptr});
    if (v.kind == tr::RecordKind::kMemcpy) out.push_back(Rec{v.kind, v.as<tr::Memcpy>().src});
  });
  return out;
}

std::string temp_path(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("streamrace-alloc-free-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace

TEST(ScheduleLifetime, AllocAndFreeRoundTripThroughJson) {
  Program p = scratch_program();
  EXPECT_TRUE(p.s.validate().empty()) << p.s.validate().front();
  EXPECT_EQ(p.s.live_at_start(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(p.s.live_at_end(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_TRUE(p.s.lifetimes_balanced());
  const std::string text = schedule_to_json_text(p.s);
  EXPECT_NE(text.find("\"kind\": \"alloc\""), std::string::npos);
  EXPECT_NE(text.find("\"kind\": \"free\""), std::string::npos);
  Schedule back = schedule_from_json_text(text);
  ASSERT_EQ(back.actions.size(), p.s.actions.size());
  EXPECT_EQ(back.actions[1].kind, ActionKind::kAlloc);
  EXPECT_EQ(back.actions[1].buffer, p.scratch);
  EXPECT_EQ(back.actions[4].kind, ActionKind::kFree);
  EXPECT_EQ(back.actions[4].buffer, p.scratch);
  EXPECT_EQ(back.actions[2].buffer, kNone);
  EXPECT_EQ(schedule_to_json_text(back), text);
}

TEST(ScheduleLifetime, ValidateNamesEachMisuse) {
  auto first_error = [](const Schedule& s) { return s.validate().empty() ? std::string() : s.validate().front(); };
  {  // a use after the free
    Program p = scratch_program();
    p.s.actions.push_back(copy(p.compute, p.s.elems(p.scratch, 0, 4), p.s.elems(p.out, 0, 4), "late read"));
    EXPECT_NE(first_error(p.s).find("uses buffer scratch after its free (action 4)"), std::string::npos) << first_error(p.s);
    EXPECT_THROW(StreamSimulator{p.s}, std::invalid_argument);
  }
  {  // a use before the allocation
    Program p = scratch_program();
    std::swap(p.s.actions[1], p.s.actions[2]);
    EXPECT_NE(first_error(p.s).find("uses buffer scratch before its allocation"), std::string::npos) << first_error(p.s);
  }
  {  // a double free, an allocation of a live buffer, a buffer that does not exist
    Program p = scratch_program();
    p.s.actions.push_back(lifetime(ActionKind::kFree, p.scratch, "free again"));
    EXPECT_NE(first_error(p.s).find("frees buffer scratch, which is not allocated"), std::string::npos);
    Program q = scratch_program();
    q.s.actions.insert(q.s.actions.begin(), lifetime(ActionKind::kAlloc, q.grad, "allocate grad"));
    q.s.actions.insert(q.s.actions.begin(), lifetime(ActionKind::kAlloc, q.grad, "allocate grad twice"));
    EXPECT_NE(first_error(q.s).find("allocates buffer grad, which is live"), std::string::npos) << first_error(q.s);
    Program r = scratch_program();
    r.s.actions.push_back(lifetime(ActionKind::kFree, 9, "free nothing"));
    EXPECT_NE(first_error(r.s).find("free names buffer 9 of 3"), std::string::npos) << first_error(r.s);
  }
  {  // the expectation's buffer is gone when the program ends; a lifetime of external memory
    Program p = scratch_program();
    p.s.actions.push_back(lifetime(ActionKind::kFree, p.out, "free out"));
    EXPECT_NE(first_error(p.s).find("names buffer out, which is not allocated when the program ends"), std::string::npos);
    EXPECT_FALSE(p.s.lifetimes_balanced());
    Program q = scratch_program();
    q.s.buffers[q.scratch].alloc = "external";
    EXPECT_NE(first_error(q.s).find("allocated as \"external\""), std::string::npos) << first_error(q.s);
  }
}

TEST(ScheduleLifetime, EmittedTraceHasTheAllocAndFreeRecordsInOrder) {
  Program p = scratch_program();
  // Free and allocate `grad` again after its copy: a re-allocation gets a new address.
  p.s.actions.push_back(lifetime(ActionKind::kFree, p.grad, "free grad"));
  p.s.actions.push_back(lifetime(ActionKind::kAlloc, p.grad, "allocate grad again"));
  ASSERT_TRUE(p.s.validate().empty()) << p.s.validate().front();
  const std::string path = temp_path("order.srace");
  EmitOptions eo;
  eo.steps = 2;
  emit_trace(p.s, path, eo);
  const uint64_t grad = emitted_address(p.s, p.grad), scratch = emitted_address(p.s, p.scratch),
                 out = emitted_address(p.s, p.out);
  auto recs = lifetime_records(path);
  std::vector<std::pair<tr::RecordKind, uint64_t>> got;
  for (const auto& r : recs) got.push_back({r.kind, r.ptr});
  using K = tr::RecordKind;
  // Live from the start: grad and out; scratch only between its actions, every step. Every
  // later allocation of a buffer gets a fresh synthetic address (past every first one).
  ASSERT_EQ(got.size(), 16u);
  EXPECT_EQ(got[0], std::make_pair(K::kAlloc, grad));
  EXPECT_EQ(got[1], std::make_pair(K::kAlloc, out));
  EXPECT_EQ(got[2], std::make_pair(K::kAlloc, scratch));
  EXPECT_EQ(got[3], std::make_pair(K::kMemcpy, grad));
  EXPECT_EQ(got[4], std::make_pair(K::kMemcpy, scratch));
  EXPECT_EQ(got[5], std::make_pair(K::kFree, scratch));
  EXPECT_EQ(got[6], std::make_pair(K::kFree, grad));
  EXPECT_EQ(got[7].first, K::kAlloc);
  const uint64_t grad2 = got[7].second;
  EXPECT_GT(grad2, std::max({grad, scratch, out}));
  EXPECT_EQ(got[8].first, K::kAlloc);  // step 2
  const uint64_t scratch2 = got[8].second;
  EXPECT_GT(scratch2, grad2);
  EXPECT_EQ(got[9], std::make_pair(K::kMemcpy, grad2));
  EXPECT_EQ(got[10], std::make_pair(K::kMemcpy, scratch2));
  EXPECT_EQ(got[11], std::make_pair(K::kFree, scratch2));
  EXPECT_EQ(got[12], std::make_pair(K::kFree, grad2));
  EXPECT_EQ(got[13].first, K::kAlloc);
  EXPECT_GT(got[13].second, scratch2);
  EXPECT_EQ(got[14], std::make_pair(K::kFree, got[13].second));  // the end: what is still live
  EXPECT_EQ(got[15], std::make_pair(K::kFree, out));
  std::filesystem::remove(path);
  // A program that ends with other buffers live than it started with cannot be repeated.
  p.s.actions.pop_back();
  p.s.expectations.clear();
  EXPECT_THROW(emit_trace(p.s, temp_path("unbalanced.srace"), eo), std::invalid_argument);
  std::filesystem::remove(temp_path("unbalanced.srace"));
}

TEST(ScheduleLifetime, SimulatorTreatsAFreedBufferAsGone) {
  // In program order and under every interleaving the copies through scratch deliver p0.
  Program p = scratch_program();
  {
    StreamSimulator sim(p.s);
    for (auto pol : {SimPolicy::kProgramOrder, SimPolicy::kRandom, SimPolicy::kAdversarial, SimPolicy::kTimed}) {
      SimOptions o;
      o.policy = pol;
      auto r = sim.run(o);
      EXPECT_FALSE(r.corrupted) << to_string(pol);
      EXPECT_FALSE(r.deadlock) << to_string(pol);
    }
    EXPECT_EQ(sim.search().verdict, SearchResult::Verdict::kNoCorruption);
  }
  // The free synchronises the device: a side-stream copy out of scratch issued just before it,
  // with nothing else ordering it, still reads p0 (cudaFree waits for it).
  Program q = scratch_program();
  q.s.actions.insert(q.s.actions.begin() + 4,
                     copy(q.side, q.s.elems(q.scratch, 0, 4), q.s.elems(q.out, 0, 4), "scratch -> out on side"));
  // ...ordered after the copy into scratch by an event.
  q.s.add_event("copied");
  Action rec;
  rec.kind = ActionKind::kEventRecord;
  rec.stream = q.compute;
  rec.event = 0;
  Action wait = rec;
  wait.kind = ActionKind::kStreamWait;
  wait.stream = q.side;
  q.s.actions.insert(q.s.actions.begin() + 3, rec);
  q.s.actions.insert(q.s.actions.begin() + 4, wait);
  q.s.actions.erase(q.s.actions.begin() + 5);  // the compute stream's own scratch -> out
  ASSERT_TRUE(q.s.validate().empty()) << q.s.validate().front();
  EXPECT_EQ(StreamSimulator(q.s).search().verdict, SearchResult::Verdict::kNoCorruption);
  // A re-allocation has undefined contents: reading scratch after free + alloc loses p0.
  Program r = scratch_program();
  r.s.actions.insert(r.s.actions.begin() + 3, lifetime(ActionKind::kFree, r.scratch, "free scratch early"));
  r.s.actions.insert(r.s.actions.begin() + 4, lifetime(ActionKind::kAlloc, r.scratch, "allocate scratch again"));
  ASSERT_TRUE(r.s.validate().empty()) << r.s.validate().front();
  StreamSimulator sim(r.s);
  SimOptions o;
  o.policy = SimPolicy::kProgramOrder;
  auto out = sim.run(o);
  EXPECT_TRUE(out.corrupted);
  EXPECT_EQ(out.corrupted_cells, 4u);
  ASSERT_FALSE(out.cells.empty());
  EXPECT_EQ(out.cells[0].got >> 32, 0xBAD0u) << "poison, not the old contents";
}

TEST(ScheduleLifetime, TrainingShapeHasTheBenchmarkChurnAndEventPool) {
  ZeroConfig c = synthetic_training_config(2000, 1);
  Schedule s = make_zero_schedule(c);
  EXPECT_TRUE(s.lifetimes_balanced());
  size_t frees = 0, allocs = 0;
  for (size_t i = 0; i < s.actions.size(); ++i) {
    const auto& a = s.actions[i];
    if (a.kind == ActionKind::kFree) {
      ++frees;
      ASSERT_LT(i + 1, s.actions.size());
      EXPECT_EQ(s.actions[i + 1].kind, ActionKind::kAlloc);  // freed and allocated again at once
      EXPECT_EQ(s.actions[i + 1].buffer, a.buffer);
    }
    allocs += a.kind == ActionKind::kAlloc;
  }
  // About one in 64 of the 1000 parameters' copies; 64 pooled events and the 2 of the fix.
  EXPECT_EQ(frees, allocs);
  EXPECT_GT(frees, 5u);
  EXPECT_LT(frees, 40u);
  EXPECT_EQ(s.events.size(), 66u);
  // Same verdict in the simulator on a small copy of the shape: the churn adds no corruption.
  c.param_elements.assign(24, 8);
  c.bucket_elements = 32;
  c.churn = 4;
  Schedule small = make_zero_schedule(c);
  StreamSimulator sim(small);
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SimOptions o;
    o.policy = SimPolicy::kRandom;
    o.seed = seed;
    auto r = sim.run(o);
    EXPECT_FALSE(r.corrupted) << seed;
    EXPECT_FALSE(r.deadlock) << seed;
  }
}

TEST(ScheduleLifetime, StepSchedulesDrawTheirSideTrafficAfresh) {
  // The benchmark's trace generator gives every step its own side-traffic and churn draws;
  // repeating the first step would set the same buffers every step.
  const auto step = [](uint32_t k) { return make_zero_schedule(synthetic_training_config(200, 1 + k)); };
  const Schedule first = step(0);
  const std::string path = temp_path("steps.srace");
  EmitOptions eo;
  eo.precise_kernels = false;
  eo.steps = 4;
  eo.step_schedule = step;
  emit_trace(first, path, eo);
  // Memset targets per step (4 KiB at a buffer's start; churned buffers move, so count
  // targets by step and compare the sets).
  std::vector<std::vector<uint64_t>> memsets(1);
  tr::TraceReader r(path);
  size_t pieces = 0;
  r.for_each([&](const tr::RecordView& v) {
    if (v.kind == tr::RecordKind::kMemset) memsets.back().push_back(v.as<tr::Memset>().dst);
    // Each step ends with the epilogue's device synchronize.
    if (v.kind == tr::RecordKind::kDeviceSynchronize) memsets.emplace_back(), ++pieces;
  });
  EXPECT_EQ(pieces, 4u);
  ASSERT_GE(memsets.size(), 4u);
  EXPECT_NE(memsets[0], memsets[1]);
  EXPECT_NE(memsets[1], memsets[2]);
  std::filesystem::remove(path);
  // A step schedule with other buffers than the first is refused.
  eo.step_schedule = [](uint32_t k) { return make_zero_schedule(synthetic_training_config(202, 1 + k)); };
  EXPECT_THROW(emit_trace(first, path, eo), std::invalid_argument);
  std::filesystem::remove(path);
}
