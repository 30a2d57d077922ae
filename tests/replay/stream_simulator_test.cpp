// CPU stream simulator: program-order correctness of every generated schedule, seeded random /
// adversarial / timed runs, and the non-atomic op model on hand-built schedules.
#include <gtest/gtest.h>

#include "replay/gradient_values.h"
#include "replay/stream_simulator.h"
#include "replay/zero_schedule.h"

using namespace streamrace::replay;

namespace {

ZeroConfig cfg(int stage, const std::string& variant, const std::string& preset = "tiny") {
  ZeroConfig c;
  c.stage = stage;
  EXPECT_TRUE(apply_zero_preset(preset, c));
  EXPECT_TRUE(set_zero_variant(c, variant));
  return c;
}

// Runs `runs` seeded steps with a policy; returns how many corrupted.
int corrupt_runs(const Schedule& s, SimPolicy p, int runs, uint64_t delay_seed = 0) {
  StreamSimulator sim(s);
  int bad = 0;
  for (int i = 0; i < runs; ++i) {
    SimOptions o;
    o.policy = p;
    o.seed = uint64_t(i) + 1 + delay_seed;
    o.step = uint32_t(i % 3);
    auto r = sim.run(o);
    EXPECT_FALSE(r.deadlock);
    bad += r.corrupted;
  }
  return bad;
}

}  // namespace

TEST(StreamSimulator, ProgramOrderMeetsEveryExpectation) {
  for (int stage : {1, 2, 3})
    for (const auto& v : zero_variant_names(stage))
      for (int world : {1, 2, 4})
        for (bool rs : {true, false}) {
          ZeroConfig c = cfg(stage, v);
          c.world = world;
          c.rank = world - 1;
          c.reduce_scatter = rs;
          c.param_elements = {3, 5, 2, 7, 1, 4};
          c.bucket_elements = 8;
          auto s = make_zero_schedule(c);
          StreamSimulator sim(s);
          for (uint32_t step : {0u, 5u}) {
            SimOptions o;
            o.policy = SimPolicy::kProgramOrder;
            o.step = step;
            auto r = sim.run(o);
            EXPECT_FALSE(r.corrupted) << s.name << " world " << world << " rs " << rs << ": "
                                      << (r.cells.empty() ? "" : r.cells[0].where);
            EXPECT_FALSE(r.deadlock);
          }
        }
}

// The stage-1/2 options of the synthetic traces (bench/'s generator): bucket-share partition,
// the process group's NCCL stream, weights and side traffic keep every expectation in program
// order, and only the unfixed variant corrupts under random and adversarial timing.
TEST(StreamSimulator, SyntheticTraceOptionsKeepTheVerdicts) {
  for (const auto& v : zero_variant_names(1))
    for (int rank : {0, 1}) {
      ZeroConfig c = cfg(1, v);
      c.rank = rank;
      c.partition = ZeroPartition::kBucketShare;
      c.nccl_stream = true;
      c.weights = true;
      c.side_streams = 2;
      auto s = make_zero_schedule(c);
      ASSERT_EQ(s.streams.size(), 5u) << s.name;
      StreamSimulator sim(s);
      SimOptions o;
      o.policy = SimPolicy::kProgramOrder;
      auto r = sim.run(o);
      EXPECT_FALSE(r.corrupted) << s.name << ": " << (r.cells.empty() ? "" : r.cells[0].where);
      EXPECT_FALSE(r.deadlock);
      const int bad = corrupt_runs(s, SimPolicy::kRandom, 200) + corrupt_runs(s, SimPolicy::kAdversarial, 200);
      if (v == "none")
        EXPECT_GT(bad, 0) << s.name;
      else
        EXPECT_EQ(bad, 0) << s.name;
    }
  ZeroConfig odd = cfg(1, "none");
  odd.partition = ZeroPartition::kBucketShare;
  odd.param_elements = {3, 2};
  EXPECT_THROW(make_zero_schedule(odd), std::invalid_argument);
}

TEST(StreamSimulator, RandomAndAdversarialTimingCorruptOnlyTheUnfixedVariant) {
  for (int stage : {1, 2}) {
    auto none = make_zero_schedule(cfg(stage, "none"));
    EXPECT_GT(corrupt_runs(none, SimPolicy::kRandom, 200), 0) << none.name;
    EXPECT_GT(corrupt_runs(none, SimPolicy::kAdversarial, 200), 0) << none.name;
    for (const char* fix : {"event", "wait-stream", "sync"}) {
      auto s = make_zero_schedule(cfg(stage, fix));
      EXPECT_EQ(corrupt_runs(s, SimPolicy::kRandom, 200), 0) << s.name;
      EXPECT_EQ(corrupt_runs(s, SimPolicy::kAdversarial, 200), 0) << s.name;
    }
  }
}

TEST(StreamSimulator, RunsAreReproducibleFromTheSeed) {
  auto s = make_zero_schedule(cfg(1, "none"));
  StreamSimulator sim(s);
  SimOptions o;
  o.policy = SimPolicy::kRandom;
  o.record_order = true;
  for (uint64_t seed : {3u, 11u, 42u}) {
    o.seed = seed;
    auto a = sim.run(o), b = sim.run(o);
    ASSERT_EQ(a.order.size(), b.order.size());
    for (size_t i = 0; i < a.order.size(); ++i) {
      EXPECT_EQ(a.order[i].action, b.order[i].action);
      EXPECT_EQ(a.order[i].finish, b.order[i].finish);
    }
    EXPECT_EQ(a.corrupted_cells, b.corrupted_cells);
  }
}

TEST(StreamSimulator, TimedDelayOnTheReductionStreamCorruptsOnlyTheUnfixedVariant) {
  // A spin on the reduction stream before each flush (the GPU run's delay injection) lets
  // the compute stream refill buffer 0 while bucket 0's flush is still queued.
  for (int stage : {1, 2}) {
    for (const auto& v : zero_variant_names(stage)) {
      ZeroConfig c = cfg(stage, v, "small");
      c.delay_ns = 500'000;
      auto s = make_zero_schedule(c);
      StreamSimulator sim(s);
      SimOptions o;
      o.policy = SimPolicy::kTimed;
      o.seed = 7;
      auto r = sim.run(o);
      EXPECT_EQ(r.corrupted, v == "none") << s.name;
      EXPECT_GT(r.step_ns, 0u);
      EXPECT_GT(r.collective_ns, 0u);
      if (v == "none") {
        ASSERT_FALSE(r.cells.empty());
        EXPECT_EQ(r.cells[0].where.rfind("averaged_gradients[", 0), 0u) << r.cells[0].where;
      }
    }
  }
}

TEST(StreamSimulator, TimedOverlapShrinksWithEachStricterFix) {
  // The same model costs for every variant: the event fix keeps at least the overlap of
  // wait-stream, and a host sync per flush keeps the least.
  auto overlap = [](const std::string& v) {
    ZeroConfig c = cfg(1, v, "small");
    auto s = make_zero_schedule(c);
    StreamSimulator sim(s);
    SimOptions o;
    o.policy = SimPolicy::kTimed;
    o.jitter = 0;
    auto r = sim.run(o);
    EXPECT_FALSE(r.corrupted) << v;
    return std::make_pair(r.overlapped_ns, r.step_ns);
  };
  auto ev = overlap("event"), ws = overlap("wait-stream"), sy = overlap("sync");
  EXPECT_GE(ev.first, ws.first);
  EXPECT_GT(ws.first, sy.first);
  EXPECT_LE(ev.second, sy.second);
}

// A hand-built write-after-read: the copy-back of bucket A on R reads A while C overwrites A.
TEST(StreamSimulator, CopyBackObservesAConcurrentOverwrite) {
  Schedule s;
  s.world = 1;
  s.elem_bytes = 4;
  s.params = {Param{"p0", 2}, Param{"p1", 2}};
  uint32_t C = s.add_stream("compute", StreamKind::kNonBlocking);
  uint32_t R = s.add_stream("reduction", StreamKind::kNonBlocking);
  uint32_t A = s.add_buffer("A", 8, "bucket"), out = s.add_buffer("out", 8, "partition");
  auto produce = [&](uint32_t param) {
    Action a;
    a.kind = ActionKind::kProduce;
    a.stream = C;
    a.param = param;
    a.label = "produce p" + std::to_string(param);
    a.writes = {s.elems(A, 0, 2)};
    s.actions.push_back(a);
  };
  produce(0);
  uint32_t e = s.add_event("ready");
  Action rec;
  rec.kind = ActionKind::kEventRecord;
  rec.stream = C;
  rec.event = e;
  s.actions.push_back(rec);
  Action wait;
  wait.kind = ActionKind::kStreamWait;
  wait.stream = R;
  wait.event = e;
  s.actions.push_back(wait);
  Action copy;
  copy.kind = ActionKind::kCopyBack;
  copy.stream = R;
  copy.label = "copy back A";
  copy.reads = {s.elems(A, 0, 2)};
  copy.writes = {s.elems(out, 0, 2)};
  s.actions.push_back(copy);
  produce(1);  // overwrites A on C with nothing ordering it after the copy-back
  s.expectations.push_back(Expectation{s.elems(out, 0, 2), 0, 0, "p0 in out"});

  StreamSimulator sim(s);
  auto res = sim.search();
  ASSERT_EQ(res.verdict, SearchResult::Verdict::kCorruptionFound);
  EXPECT_EQ(res.outcome.corrupted_cells, 2u);
  EXPECT_EQ(res.outcome.cells[0].where, "out[0, 4)");
  EXPECT_EQ(res.outcome.cells[0].expected, reduced_gradient(0, 0, 0, 1));
  EXPECT_EQ(res.outcome.cells[0].got, gradient_value(1, 0, 0, 0, 1));
  std::string text = sim.describe(res.witness);
  EXPECT_NE(text.find("compute                finish produce p1"), std::string::npos) << text;

  // Order the overwrite after the copy-back: no corrupting interleaving is left.
  uint32_t done = s.add_event("copied");
  Action rec2;
  rec2.kind = ActionKind::kEventRecord;
  rec2.stream = R;
  rec2.event = done;
  Action wait2;
  wait2.kind = ActionKind::kStreamWait;
  wait2.stream = C;
  wait2.event = done;
  s.actions.insert(s.actions.begin() + 4, {rec2, wait2});
  StreamSimulator fixed(s);
  EXPECT_EQ(fixed.search().verdict, SearchResult::Verdict::kNoCorruption);
}

TEST(StreamSimulator, LegacyDefaultStreamOrdersBlockingStreamsButNotNonBlockingOnes) {
  // Producer on a stream, consumer copy on the legacy stream, no events: ordered only when
  // the producer's stream is blocking.
  for (auto kind : {StreamKind::kBlocking, StreamKind::kNonBlocking}) {
    Schedule s;
    s.world = 1;
    s.elem_bytes = 4;
    s.params = {Param{"p0", 2}};
    uint32_t P = s.add_stream("producer", kind);
    uint32_t L = s.add_stream("legacy", StreamKind::kLegacyDefault);
    uint32_t g = s.add_buffer("grad", 8, "gradient"), out = s.add_buffer("out", 8, "partition");
    Action p;
    p.kind = ActionKind::kProduce;
    p.stream = P;
    p.param = 0;
    p.writes = {s.elems(g, 0, 2)};
    s.actions.push_back(p);
    Action c;
    c.kind = ActionKind::kCopy;
    c.stream = L;
    c.reads = {s.elems(g, 0, 2)};
    c.writes = {s.elems(out, 0, 2)};
    s.actions.push_back(c);
    // out holds the raw gradient (world 1: reduced == gradient / 1).
    s.expectations.push_back(Expectation{s.elems(out, 0, 2), 0, 0, "grad in out"});
    StreamSimulator sim(s);
    EXPECT_EQ(sim.search().verdict, kind == StreamKind::kBlocking ? SearchResult::Verdict::kNoCorruption
                                                                  : SearchResult::Verdict::kCorruptionFound);
  }
}

TEST(StreamSimulator, RejectsSchedulesTooLargeToSimulate) {
  ZeroConfig c = cfg(1, "none", "seed");
  auto s = make_zero_schedule(c);
  try {
    StreamSimulator sim(s, 1 << 20);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the simulator allows 1048576"), std::string::npos) << e.what();
  }
}
