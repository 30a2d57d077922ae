// ZeRO generators: the shape of each variant and rejection of bad parameters.
#include <gtest/gtest.h>

#include "replay/zero_schedule.h"

using namespace streamrace::replay;

namespace {

ZeroConfig tiny(int stage, const std::string& variant) {
  ZeroConfig c;
  c.stage = stage;
  apply_zero_preset("tiny", c);
  EXPECT_TRUE(set_zero_variant(c, variant));
  return c;
}

size_t count(const Schedule& s, ActionKind k, const std::string& stream = "") {
  size_t n = 0;
  for (const auto& a : s.actions)
    if (a.kind == k && (stream.empty() || (a.stream < s.streams.size() && s.streams[a.stream].name == stream))) ++n;
  return n;
}

uint64_t expected_elements(const Schedule& s) {
  uint64_t n = 0;
  for (const auto& e : s.expectations) n += e.range.bytes / s.elem_bytes;
  return n;
}

}  // namespace

TEST(ZeroStage12, VariantsDifferOnlyInTheirOrderingEdges) {
  // tiny: six 2-element parameters, 4-element bucket -> three flushes, the last in the epilogue.
  auto none = make_zero_schedule(tiny(1, "none"));
  auto event = make_zero_schedule(tiny(1, "event"));
  auto ws = make_zero_schedule(tiny(1, "wait-stream"));
  auto sync = make_zero_schedule(tiny(1, "sync"));
  EXPECT_EQ(count(none, ActionKind::kStreamWait, "compute"), 0u);
  EXPECT_EQ(count(none, ActionKind::kStreamWait, "reduction"), 3u);  // R.wait_stream(C) per flush
  EXPECT_EQ(count(event, ActionKind::kStreamWait, "compute"), 1u);   // before bucket 2 reuses buffer 0
  EXPECT_EQ(count(event, ActionKind::kEventRecord, "reduction"), 2u);
  EXPECT_EQ(count(ws, ActionKind::kStreamWait, "compute"), 3u);
  EXPECT_EQ(count(sync, ActionKind::kDeviceSync), 4u);  // one per flush + the epilogue
  EXPECT_EQ(count(none, ActionKind::kDeviceSync), 1u);
  EXPECT_EQ(count(none, ActionKind::kCollective), 3u);
  EXPECT_EQ(count(none, ActionKind::kProduce, "compute"), 6u);
  // Device operations are the same in every variant.
  for (const auto* s : {&event, &ws, &sync})
    for (auto k : {ActionKind::kCopy, ActionKind::kCopyBack, ActionKind::kDivide, ActionKind::kCollective})
      EXPECT_EQ(count(*s, k), count(none, k)) << s->name << " " << to_string(k);
}

TEST(ZeroStage12, ExpectationsCoverExactlyThisRanksPartition) {
  for (int world : {1, 2, 4}) {
    for (int rank = 0; rank < world; ++rank) {
      ZeroConfig c = tiny(2, "none");
      c.world = world;
      c.rank = rank;
      c.param_elements = {3, 5, 2, 7, 1};  // 18 elements, partitions straddle parameters
      c.bucket_elements = 8;
      auto s = make_zero_schedule(c);
      uint64_t part = (18 + world - 1) / world;
      uint64_t owned = std::min<uint64_t>(18, part * (rank + 1)) - std::min<uint64_t>(18, part * rank);
      EXPECT_EQ(expected_elements(s), owned) << "world " << world << " rank " << rank;
    }
  }
}

TEST(ZeroStage12, ReduceScatterOffIsOneInPlaceAllReducePerFlush) {
  ZeroConfig c = tiny(1, "none");
  c.reduce_scatter = false;
  auto s = make_zero_schedule(c);
  EXPECT_EQ(count(s, ActionKind::kCollective), 3u);
  EXPECT_EQ(count(s, ActionKind::kCopyBack), 0u);
  for (const auto& a : s.actions)
    if (a.kind == ActionKind::kCollective) {
      EXPECT_EQ(s.buffers[a.writes[0].buffer].role, "bucket");
    }
}

TEST(ZeroStage3, WaitTargetAndProducerStreamPerVariant) {
  auto racy = make_zero_schedule(tiny(3, "default-stream"));
  auto same = make_zero_schedule(tiny(3, "default-stream-same"));
  auto fixed = make_zero_schedule(tiny(3, "current-stream"));
  EXPECT_EQ(count(racy, ActionKind::kProduce, "backward-side"), 6u);
  EXPECT_EQ(count(same, ActionKind::kProduce, "default"), 6u);
  EXPECT_EQ(count(fixed, ActionKind::kProduce, "backward-side"), 6u);
  // grad_ready[p] is recorded on the default stream (0.13.3) or on the producing stream.
  auto grad_ready_stream = [](const Schedule& s) {
    for (const auto& a : s.actions)
      if (a.kind == ActionKind::kEventRecord && s.events[a.event].rfind("grad_ready", 0) == 0)
        return s.streams[a.stream].name;
    return std::string();
  };
  EXPECT_EQ(grad_ready_stream(racy), "default");
  EXPECT_EQ(grad_ready_stream(same), "default");
  EXPECT_EQ(grad_ready_stream(fixed), "backward-side");
  // One flat bucket, copied into on the reduce stream; one reduce-scatter per flush.
  EXPECT_EQ(count(racy, ActionKind::kCollective, "reduce_and_partition"), 3u);
  EXPECT_EQ(count(racy, ActionKind::kCollective, "allgather"), 6u);
  EXPECT_EQ(count(racy, ActionKind::kStreamSync, "reduce_and_partition"), 1u);
  // Throttles: more than two fetches / flushes in flight make the host wait.
  EXPECT_EQ(count(racy, ActionKind::kEventSync), 4u);  // fetches 3..6 wait for fetch 1..4
}

TEST(ZeroGenerators, RejectBadParametersWithAClearMessage) {
  auto expect_error = [](ZeroConfig c, const std::string& needle) {
    try {
      make_zero_schedule(c);
      ADD_FAILURE() << "accepted config, expected: " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ZeroConfig c = tiny(1, "none");
  c.stage = 4;
  expect_error(c, "stage 4");
  c = tiny(1, "none");
  c.rank = 2;
  expect_error(c, "rank 2 is outside world size 2");
  c = tiny(1, "none");
  c.param_elements.push_back(9);
  expect_error(c, "larger than the bucket");
  c = tiny(1, "none");
  c.dtype = "fp12";
  expect_error(c, "unknown dtype");
  c = tiny(1, "none");
  c.param_elements.clear();
  expect_error(c, "no parameters");
  ZeroConfig v;
  v.stage = 1;
  EXPECT_FALSE(set_zero_variant(v, "current-stream"));
  v.stage = 3;
  EXPECT_FALSE(set_zero_variant(v, "event"));
  EXPECT_TRUE(set_zero_variant(v, "none"));
  EXPECT_EQ(v.stage3, Stage3Variant::kDefaultStream);
}
