// streamrace overlap: collective/compute overlap from device timestamps, exposed time, and
// the cause of each stretch a compute stream sat idle.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <sstream>

#include "analyzer/overlap_analysis.h"
#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using trace::NcclOp;
using trace::NcclType;
using trace::TraceBuilder;

constexpr uint64_t us = 1000;

TEST(Overlap, CollectiveOverlapExposureAndStreamWait) {
  testing::TempDir dir;
  std::string path = dir.file("r0.srace");
  uint64_t comm_stream = 0;
  {
    TraceBuilder t(path, TraceBuilder::default_header(0));
    uint64_t compute = trace::legacy_stream(0);
    comm_stream = t.create_stream();
    uint64_t buf = t.alloc(1 << 20), other = t.alloc(1 << 20);
    uint64_t comm = t.comm_init(0, 2);
    t.host_time(0);
    uint64_t k1 = t.kernel(compute, "backward_kernel", {other});
    uint64_t c1 = t.at("stage3.py", 1262, "__reduce_and_partition_ipg_grads")
                      .nccl(NcclOp::kReduceScatter, comm_stream, comm, buf, buf, 1024, NcclType::kBfloat16);
    uint64_t done = t.create_event();
    t.record_event(done, comm_stream);
    t.at("stage3.py", 1300, "wait_for_grads").wait_event(compute, done);
    uint64_t k2 = t.at("model.py", 10, "forward").kernel(compute, "next_kernel", {other});
    t.timing(k1, 1000 * us, 1100 * us);
    t.timing(c1, 1050 * us, 1250 * us);
    t.timing(k2, 1300 * us, 1400 * us);
  }
  analysis::OverlapOptions opts;
  opts.steps = 1;
  auto r = analysis::analyze_overlap(path, opts);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.collectives, 1u);
  EXPECT_EQ(r.collective_ns, 200 * us);
  EXPECT_EQ(r.overlapped_ns, 50 * us);
  EXPECT_EQ(r.exposed_ns, 150 * us);
  EXPECT_EQ(r.compute_ns, 200 * us);
  EXPECT_EQ(r.span_ns, 400 * us);
  ASSERT_EQ(r.waits.size(), 1u);
  EXPECT_EQ(r.waits[0].start_ns, 1100 * us);
  EXPECT_EQ(r.waits[0].end_ns, 1300 * us);
  EXPECT_EQ(r.waits[0].cause, "stream wait");
  EXPECT_EQ(r.waits[0].detail,
            "waited for ncclReduceScatter on stream " + fmt::format("{:#x}", comm_stream) + " (non-blocking, device 0)");
  ASSERT_FALSE(r.waits[0].stack.empty());
  EXPECT_EQ(r.waits[0].stack[0].line, 1300u);
  ASSERT_EQ(r.wait_by_cause.size(), 1u);
  EXPECT_EQ(r.wait_by_cause[0], std::make_pair(std::string("stream wait"), 200 * us));
}

TEST(Overlap, CollectiveQueuedBehindAnotherOnTheSameCommunicator) {
  testing::TempDir dir;
  std::string path = dir.file("r0.srace");
  {
    TraceBuilder t(path, TraceBuilder::default_header(0));
    uint64_t compute = trace::legacy_stream(0);
    uint64_t rs_stream = t.create_stream(), ag_stream = t.create_stream();
    uint64_t buf = t.alloc(1 << 20), params = t.alloc(1 << 20);
    uint64_t comm = t.comm_init(0, 2);
    t.host_time(0);
    uint64_t k1 = t.kernel(compute, "backward_kernel", {buf});
    uint64_t rs = t.nccl(NcclOp::kReduceScatter, rs_stream, comm, buf, buf, 4096, NcclType::kBfloat16);
    uint64_t ag = t.nccl(NcclOp::kAllGather, ag_stream, comm, params, params, 1024, NcclType::kBfloat16);
    uint64_t fetched = t.create_event();
    t.record_event(fetched, ag_stream);
    t.at("partitioned_param_coordinator.py", 300, "fetch_sub_module").wait_event(compute, fetched);
    uint64_t k2 = t.kernel(compute, "forward_kernel", {params});
    t.timing(k1, 0, 100 * us);
    t.timing(rs, 100 * us, 900 * us);  // a large reduce-scatter
    t.timing(ag, 901 * us, 950 * us);  // the all-gather runs only after it
    t.timing(k2, 951 * us, 1000 * us);
  }
  auto r = analysis::analyze_overlap(path, {});
  ASSERT_EQ(r.waits.size(), 1u);
  EXPECT_EQ(r.waits[0].cause, "collective ahead");
  EXPECT_NE(r.waits[0].detail.find("ncclAllGather"), std::string::npos);
  EXPECT_NE(r.waits[0].detail.find("queued behind ncclReduceScatter on the same communicator"), std::string::npos);
  EXPECT_EQ(r.exposed_ns, 849 * us);  // 100..900 and 901..950, nothing computing
}

TEST(Overlap, HostSynchronizeAndLateLaunch) {
  testing::TempDir dir;
  std::string path = dir.file("r0.srace");
  {
    TraceBuilder t(path, TraceBuilder::default_header(0));
    uint64_t compute = trace::legacy_stream(0);
    uint64_t rp = t.create_stream();
    uint64_t buf = t.alloc(1 << 20);
    uint64_t comm = t.comm_init(0, 2);
    t.host_time(0);
    uint64_t k1 = t.kernel(compute, "k1", {buf});
    uint64_t c = t.nccl(NcclOp::kAllReduce, rp, comm, buf, buf, 1024, NcclType::kFloat32);
    uint64_t e = t.create_event();
    t.record_event(e, rp);
    t.at("stage3.py", 1255, "__reduce_and_partition_ipg_grads").event_synchronize(e);
    t.host_time(800 * us);
    uint64_t k2 = t.kernel(compute, "k2", {buf});
    t.host_time(2000 * us);
    uint64_t k3 = t.at("train.py", 9, "loop").kernel(compute, "k3", {buf});
    t.timing(k1, 0, 100 * us);
    t.timing(c, 100 * us, 700 * us);
    t.timing(k2, 810 * us, 900 * us);
    t.timing(k3, 2010 * us, 2100 * us);
  }
  auto r = analysis::analyze_overlap(path, {});
  ASSERT_EQ(r.waits.size(), 2u);
  EXPECT_EQ(r.waits[0].cause, "host launch");  // 900 -> 2010: longest first
  EXPECT_EQ(r.waits[1].cause, "event synchronize");
  EXPECT_EQ(r.waits[1].detail, "host blocked until ncclAllReduce on stream 0x1000 (non-blocking, device 0) finished");
  EXPECT_EQ(r.waits[1].stack.at(0).line, 1255u);
}

TEST(Overlap, TraceWithoutTimestampsSaysSo) {
  testing::TempDir dir;
  std::string path = dir.file("r0.srace");
  {
    TraceBuilder t(path, TraceBuilder::default_header(0));
    uint64_t a = t.create_stream();
    t.kernel(a, "k", {});
  }
  auto r = analysis::analyze_overlap(path, {});
  EXPECT_EQ(r.timed_ops, 0u);
  EXPECT_EQ(r.untimed_ops, 1u);
  std::ostringstream out;
  analysis::write_overlap_text(out, {r}, {});
  EXPECT_NE(out.str().find("no device timestamps in this trace"), std::string::npos);
}

}  // namespace
}  // namespace streamrace
