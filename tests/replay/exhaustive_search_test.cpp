// Exhaustive interleaving search on small ZeRO configurations: a corrupting schedule for the
// racy variants, a proof that none exists for the fixed ones.
#include <gtest/gtest.h>

#include "replay/stream_simulator.h"
#include "replay/zero_schedule.h"

using namespace streamrace::replay;
using Verdict = SearchResult::Verdict;

namespace {

SearchResult search(int stage, const std::string& variant, int rank = 0, bool reduce_scatter = true) {
  ZeroConfig c;
  c.stage = stage;
  apply_zero_preset("tiny", c);
  EXPECT_TRUE(set_zero_variant(c, variant));
  c.rank = rank;
  c.reduce_scatter = reduce_scatter;
  auto s = make_zero_schedule(c);
  StreamSimulator sim(s);
  return sim.search();
}

}  // namespace

class Stage12Search : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(Stage12Search, NoneCorruptsAndEveryFixIsProven) {
  auto [stage, rank, rs] = GetParam();
  auto none = search(stage, "none", rank, rs);
  EXPECT_EQ(none.verdict, Verdict::kCorruptionFound);
  EXPECT_GT(none.outcome.corrupted_cells, 0u);
  EXPECT_FALSE(none.witness.empty());
  ASSERT_FALSE(none.outcome.cells.empty());
  EXPECT_EQ(none.outcome.cells[0].where.rfind("averaged_gradients[", 0), 0u) << none.outcome.cells[0].where;
  for (const char* fix : {"event", "wait-stream", "sync"}) {
    auto r = search(stage, fix, rank, rs);
    EXPECT_EQ(r.verdict, Verdict::kNoCorruption) << fix << " after " << r.states << " states";
    EXPECT_GT(r.states, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyConfigs, Stage12Search,
                         ::testing::Values(std::make_tuple(1, 0, true), std::make_tuple(1, 1, true),
                                           std::make_tuple(2, 0, true), std::make_tuple(2, 1, true),
                                           std::make_tuple(1, 0, false), std::make_tuple(2, 1, false)));

TEST(Stage3Search, OnlyTheDefaultStreamWaitWithASideStreamProducerCorrupts) {
  for (int rank : {0, 1}) {
    EXPECT_EQ(search(3, "default-stream", rank).verdict, Verdict::kCorruptionFound) << rank;
    EXPECT_EQ(search(3, "default-stream-same", rank).verdict, Verdict::kNoCorruption) << rank;
    EXPECT_EQ(search(3, "current-stream", rank).verdict, Verdict::kNoCorruption) << rank;
  }
  EXPECT_EQ(search(3, "default-stream", 0, false).verdict, Verdict::kCorruptionFound);
  EXPECT_EQ(search(3, "current-stream", 0, false).verdict, Verdict::kNoCorruption);
}

TEST(Stage3Search, TheCorruptionIsAGradientReadBeforeItWasWritten) {
  ZeroConfig c;
  c.stage = 3;
  apply_zero_preset("tiny", c);
  c.stage3 = Stage3Variant::kDefaultStream;
  auto s = make_zero_schedule(c);
  StreamSimulator sim(s);
  auto r = sim.search();
  ASSERT_EQ(r.verdict, Verdict::kCorruptionFound);
  ASSERT_FALSE(r.outcome.cells.empty());
  EXPECT_EQ(r.outcome.cells[0].where.rfind("grad_partition[p", 0), 0u) << r.outcome.cells[0].where;
  // In the witness some gradient is copied into the bucket (on the reduce stream) before
  // the backward kernel on the side stream finished writing it.
  bool early_copy = false;
  std::vector<bool> produced(s.params.size(), false);
  for (const auto& t : r.witness) {
    const Action& a = s.actions[t.action];
    if (a.kind == ActionKind::kProduce && t.finish) produced[a.param] = true;
    if (a.kind == ActionKind::kCopy && !t.finish && s.buffers[a.reads[0].buffer].role == "gradient") {
      size_t p = std::stoul(s.buffers[a.reads[0].buffer].name.substr(6));  // "grad[p<N>]"
      if (!produced[p]) early_copy = true;
    }
  }
  EXPECT_TRUE(early_copy) << sim.describe(r.witness);
}

TEST(SearchLimits, PartialOrderReductionKeepsEveryVerdict) {
  // Without the reduction the search visits many more states and must agree.
  for (int stage : {1, 3}) {
    for (const auto& v : zero_variant_names(stage)) {
      ZeroConfig c;
      c.stage = stage;
      apply_zero_preset("tiny", c);
      c.param_elements = {2, 2, 2, 2, 2};  // keep the unreduced space small
      ASSERT_TRUE(set_zero_variant(c, v));
      auto s = make_zero_schedule(c);
      StreamSimulator sim(s);
      auto reduced = sim.search(0, SearchLimits{2'000'000, true});
      auto full = sim.search(0, SearchLimits{2'000'000, false});
      EXPECT_EQ(reduced.verdict, full.verdict) << s.name;
      EXPECT_NE(full.verdict, Verdict::kInconclusive) << s.name;
      if (full.verdict == Verdict::kNoCorruption) {
        EXPECT_GT(full.states, reduced.states) << s.name;
      }
    }
  }
}

TEST(SearchLimits, AnExhaustedBudgetIsInconclusiveNeverAProof) {
  ZeroConfig c;
  c.stage = 1;
  apply_zero_preset("tiny", c);
  c.fix = ZeroFix::kWaitStream;
  auto s = make_zero_schedule(c);
  StreamSimulator sim(s);
  auto r = sim.search(0, SearchLimits{3});
  EXPECT_EQ(r.verdict, Verdict::kInconclusive);
}

TEST(Stage12Search, IrregularSizesOnTwoAndFourRanksEveryRank) {
  // Partitions straddle parameters and buckets hold one to three parameters.
  for (int world : {2, 4})
    for (int stage : {1, 2})
      for (const auto& v : zero_variant_names(stage))
        for (int rank = 0; rank < world; ++rank) {
          ZeroConfig c;
          c.stage = stage;
          c.world = world;
          c.rank = rank;
          ASSERT_TRUE(set_zero_variant(c, v));
          c.param_elements = {3, 1, 2, 4, 2, 3, 1, 2};
          c.bucket_elements = 5;
          auto s = make_zero_schedule(c);
          StreamSimulator sim(s);
          EXPECT_EQ(sim.search().verdict, v == "none" ? Verdict::kCorruptionFound : Verdict::kNoCorruption) << s.name;
        }
}
