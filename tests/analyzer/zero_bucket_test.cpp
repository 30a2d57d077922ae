// The seeds' ZeRO-1 double-buffer pattern (DeepSpeed 0.14.2 with overlap_comm and
// contiguous_gradients): racy without a fix, clean with the seed's per-buffer event and with
// 0.14.3's compute-waits-on-reduction, and with a host synchronize per flush.
#include <gtest/gtest.h>

#include "replay/trace_emitter.h"
#include "replay/zero_schedule.h"
#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using analysis::Confidence;
using analysis::RaceKind;
using replay::ZeroFix;

// The synthetic bucket pattern of the golden trace (replay::synthetic_bucket_config), two
// training steps, default tier.
analysis::AnalysisResult zero(ZeroFix fix, int ranks = 1) {
  testing::TempDir dir;
  std::vector<std::string> paths;
  replay::EmitOptions eo;
  eo.steps = 2;
  eo.precise_kernels = false;
  for (int rank = 0; rank < ranks; ++rank) {
    paths.push_back(dir.file("rank" + std::to_string(rank) + ".srace"));
    replay::emit_trace(replay::make_zero_schedule(replay::synthetic_bucket_config(fix, rank)), paths.back(), eo);
  }
  return testing::analyze_files(paths);
}

TEST(ZeroBuckets, UnfixedBucketReuseRacesWithTheFlushOnBothStreams) {
  auto r = zero(ZeroFix::kNone, 2);
  ASSERT_EQ(r.findings.size(), 2u);
  // The bucket copy on the compute stream against the partition copy on the reduction stream.
  const auto& war = r.findings[0].kind == RaceKind::kWriteAfterRead ? r.findings[0] : r.findings[1];
  const auto& waw = r.findings[0].kind == RaceKind::kWriteAfterRead ? r.findings[1] : r.findings[0];
  EXPECT_EQ(war.kind, RaceKind::kWriteAfterRead);
  EXPECT_EQ(war.confidence, Confidence::kCertain);
  EXPECT_EQ(war.later.op, "cudaMemcpyAsync");
  EXPECT_EQ(war.later.stream_label, "legacy default stream (device 0)");
  EXPECT_EQ(war.later.stack.at(0).function, "reduce_independent_p_g_buckets_and_remove_grads");
  EXPECT_EQ(war.later.stack.at(0).line, 950u);
  EXPECT_EQ(war.earlier.op, "cudaMemcpyAsync");
  EXPECT_EQ(war.earlier.direction, "read");
  EXPECT_EQ(war.earlier.stack.at(0).function, "copy_grads_in_partition");
  EXPECT_EQ(war.ranks, (std::vector<int>{0, 1}));
  // Per rank and step, buckets 3 and 4 reuse the buffers of buckets 1 and 2; each rank
  // copies its own half of the bucket out, so two of the four grads per bucket overlap it.
  EXPECT_EQ(war.occurrences, 2u * 2 * 2 * 2);  // ranks x steps x reused buckets x grads
  // ... and against the all-reduce on the process group's NCCL stream.
  EXPECT_EQ(waw.kind, RaceKind::kWriteAfterWrite);
  EXPECT_EQ(waw.confidence, Confidence::kCertain);
  EXPECT_EQ(waw.earlier.op, "ncclAllReduce");
  EXPECT_EQ(waw.earlier.direction, "read and write");
  EXPECT_EQ(waw.earlier.stack.at(0).function, "allreduce_bucket");
  EXPECT_EQ(waw.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(waw.occurrences, 2u * 2 * 2 * 4);  // ranks x steps x reused buckets x grads
}

TEST(ZeroBuckets, SeedEventPatchIsClean) { EXPECT_TRUE(zero(ZeroFix::kEvent, 2).findings.empty()); }

TEST(ZeroBuckets, ComputeWaitsOnReductionStreamIsClean) {
  EXPECT_TRUE(zero(ZeroFix::kWaitStream, 2).findings.empty());
}

TEST(ZeroBuckets, HostSynchronizePerFlushIsClean) { EXPECT_TRUE(zero(ZeroFix::kSync, 2).findings.empty()); }

}  // namespace
}  // namespace streamrace
