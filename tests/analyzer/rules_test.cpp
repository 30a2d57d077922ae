// One racy program and its clean twin for every happens-before rule in ARCHITECTURE.md.
// Each test asserts the exact finding (kind, confidence, both ops and streams, ranges) or
// its absence.
#include <gtest/gtest.h>

#include "support/trace_test_support.h"

namespace streamrace {
namespace {

using analysis::AnalysisResult;
using analysis::Confidence;
using analysis::Finding;
using analysis::RaceKind;
using testing::run_program;
using trace::AllocKind;
using trace::CopyKind;
using trace::MemKind;
using trace::NcclOp;
using trace::NcclType;
using trace::TraceBuilder;

constexpr uint64_t kBytes = 4096;

struct Expect {
  RaceKind kind;
  Confidence confidence;
  const char* earlier_op;
  uint64_t earlier_stream;
  const char* later_op;
  uint64_t later_stream;
  uint64_t overlap_addr;
  uint64_t overlap_bytes;
};

void expect_one(const AnalysisResult& r, const Expect& e) {
  ASSERT_EQ(r.findings.size(), 1u) << "expected exactly one finding";
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.kind, e.kind);
  EXPECT_EQ(f.confidence, e.confidence);
  EXPECT_EQ(f.earlier.op, e.earlier_op);
  EXPECT_EQ(f.earlier.stream, e.earlier_stream);
  EXPECT_EQ(f.later.op, e.later_op);
  EXPECT_EQ(f.later.stream, e.later_stream);
  EXPECT_EQ(f.overlap_addr, e.overlap_addr);
  EXPECT_EQ(f.overlap_bytes, e.overlap_bytes);
  EXPECT_EQ(f.occurrences, 1u);
  EXPECT_EQ(f.fix_edit.record_stream, e.earlier_stream);
  EXPECT_EQ(f.fix_edit.wait_stream, e.later_stream);
  EXPECT_EQ(f.fix_edit.after_seq, f.earlier.seq);
  EXPECT_EQ(f.fix_edit.before_seq, f.later.seq);
}

void expect_clean(const AnalysisResult& r) {
  EXPECT_TRUE(r.findings.empty()) << "unexpected finding: " << r.findings[0].missing_edge;
  EXPECT_GT(r.accesses, 0u);
}

// Two non-blocking streams and one buffer; `between` runs after A's write, before B's.
AnalysisResult two_streams(const std::function<void(TraceBuilder&, uint64_t a, uint64_t b, uint64_t buf)>& between,
                           uint64_t* a_out = nullptr, uint64_t* b_out = nullptr, uint64_t* buf_out = nullptr,
                           analysis::AnalyzerOptions opts = {}) {
  return run_program(
      [&](TraceBuilder& t) {
        uint64_t a = t.create_stream();
        uint64_t b = t.create_stream();
        uint64_t buf = t.alloc(kBytes);
        if (a_out) *a_out = a;
        if (b_out) *b_out = b;
        if (buf_out) *buf_out = buf;
        t.at("producer.py", 10, "produce").memset(a, buf, kBytes);
        between(t, a, b, buf);
        t.at("consumer.py", 20, "consume").memset(b, buf, kBytes);
      },
      opts);
}

// --- op on stream S: ordered after every earlier op on S
TEST(StreamOrder, SameStreamIsOrdered) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t a = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    t.memset(a, buf, kBytes);
    t.memcpy(a, buf, buf + kBytes / 2, kBytes / 2);
    t.memset(a, buf, kBytes);
  });
  expect_clean(r);
}

TEST(StreamOrder, TwoStreamsWithoutSyncRace) {
  uint64_t a, b, buf;
  auto r = two_streams([](TraceBuilder&, uint64_t, uint64_t, uint64_t) {}, &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
  EXPECT_NE(r.findings[0].missing_edge.find("never waited for"), std::string::npos);
  EXPECT_EQ(r.findings[0].later.stack.at(0).file, "consumer.py");
  EXPECT_EQ(r.findings[0].earlier.stack.at(0).line, 10u);
}

TEST(StreamOrder, DisjointRangesDoNotRace) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    t.memset(a, buf, kBytes / 2);
    t.memset(b, buf + kBytes / 2, kBytes / 2);
  });
  expect_clean(r);
}

TEST(StreamOrder, ReadReadIsNotARace) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t src = t.alloc(kBytes), d1 = t.alloc(kBytes), d2 = t.alloc(kBytes);
    t.memcpy(a, d1, src, kBytes);
    t.memcpy(b, d2, src, kBytes);
  });
  expect_clean(r);
}

TEST(StreamOrder, ReadAfterWriteOnPartialOverlap) {
  uint64_t a = 0, b = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    buf = t.alloc(kBytes);
    uint64_t dst = t.alloc(kBytes);
    t.memset(a, buf, kBytes / 2);
    t.memcpy(b, dst, buf + kBytes / 4, kBytes / 2);
  });
  expect_one(r, {RaceKind::kReadAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemcpyAsync", b,
                 buf + kBytes / 4, kBytes / 4});
}

// --- cudaEventRecord / cudaStreamWaitEvent
TEST(EventWait, WaitOrdersTheStreams) {
  auto r = two_streams([](TraceBuilder& t, uint64_t a, uint64_t b, uint64_t) {
    uint64_t e = t.create_event();
    t.record_event(e, a);
    t.wait_event(b, e);
  });
  expect_clean(r);
}

TEST(EventWait, RecordWithoutWaitRaces) {
  uint64_t a, b, buf;
  auto r = two_streams(
      [](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) {
        uint64_t e = t.create_event();
        t.record_event(e, a);
      },
      &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

TEST(EventWait, EventRecordedBeforeTheWriteDoesNotOrderIt) {
  uint64_t a = 0, b = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    buf = t.alloc(kBytes);
    uint64_t e = t.create_event();
    t.memset(a, buf, 16);  // op #1 on A, ordered by the event
    t.record_event(e, a);
    t.memset(a, buf, kBytes);  // issued after the record
    t.wait_event(b, e);
    t.memset(b, buf, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
  EXPECT_NE(r.findings[0].missing_edge.find("only up to its operation #2"), std::string::npos)
      << r.findings[0].missing_edge;
}

TEST(EventWait, NeverRecordedEventOrdersNothing) {
  uint64_t a, b, buf;
  auto r = two_streams(
      [](TraceBuilder& t, uint64_t, uint64_t b, uint64_t) {
        uint64_t e = t.create_event();
        t.wait_event(b, e);
      },
      &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

// A re-record replaces the snapshot: a wait after the re-record sees only the new one.
TEST(EventRerecord, WaitAfterRerecordOnOtherStreamRaces) {
  uint64_t a = 0, b = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    uint64_t c = t.create_stream();
    buf = t.alloc(kBytes);
    uint64_t e = t.create_event();
    t.memset(a, buf, kBytes);
    t.record_event(e, a);
    t.record_event(e, c);  // re-recorded on C before B waits
    t.wait_event(b, e);
    t.memset(b, buf, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

TEST(EventRerecord, WaitBeforeRerecordSeesTheFirstRecord) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream(), c = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    uint64_t e = t.create_event();
    t.memset(a, buf, kBytes);
    t.record_event(e, a);
    t.wait_event(b, e);
    t.record_event(e, c);  // re-recorded after the wait: does not affect it
    t.memset(b, buf, kBytes);
  });
  expect_clean(r);
}

// --- cudaEventSynchronize / cudaEventQuery: host joins the event
TEST(HostSync, EventSynchronizeOrdersLaterLaunches) {
  auto r = two_streams([](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) {
    uint64_t e = t.create_event();
    t.record_event(e, a);
    t.event_synchronize(e);
  });
  expect_clean(r);
}

TEST(HostSync, EventQuerySuccessOrders) {
  auto r = two_streams([](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) {
    uint64_t e = t.create_event();
    t.record_event(e, a);
    t.event_query(e, 0);
  });
  expect_clean(r);
}

TEST(HostSync, EventQueryNotReadyDoesNotOrder) {
  uint64_t a, b, buf;
  auto r = two_streams(
      [](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) {
        uint64_t e = t.create_event();
        t.record_event(e, a);
        t.event_query(e, 600);  // cudaErrorNotReady
      },
      &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

// --- cudaStreamSynchronize / cudaStreamQuery: host joins the stream
TEST(HostSync, StreamSynchronizeOrders) {
  auto r = two_streams([](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) { t.stream_synchronize(a); });
  expect_clean(r);
}

TEST(HostSync, SynchronizingAnotherStreamDoesNotOrder) {
  uint64_t a, b, buf;
  auto r = two_streams([](TraceBuilder& t, uint64_t, uint64_t b, uint64_t) { t.stream_synchronize(b); }, &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

TEST(HostSync, StreamQuerySuccessOrders) {
  auto r = two_streams([](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) { t.stream_query(a, 0); });
  expect_clean(r);
}

TEST(HostSync, StreamQueryNotReadyDoesNotOrder) {
  uint64_t a, b, buf;
  auto r = two_streams([](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) { t.stream_query(a, 600); }, &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

// --- cudaDeviceSynchronize, cudaFree and other implicitly synchronising calls
TEST(DeviceSync, DeviceSynchronizeOrders) {
  auto r = two_streams([](TraceBuilder& t, uint64_t, uint64_t, uint64_t) { t.device_synchronize(0); });
  expect_clean(r);
}

TEST(DeviceSync, SynchronizingAnotherDeviceDoesNotOrder) {
  uint64_t a, b, buf;
  auto r = two_streams([](TraceBuilder& t, uint64_t, uint64_t, uint64_t) { t.device_synchronize(1); }, &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

TEST(DeviceSync, CudaFreeIsAnImplicitSynchronization) {
  auto r = two_streams([](TraceBuilder& t, uint64_t, uint64_t, uint64_t) {
    uint64_t tmp = t.alloc(256);
    t.free(tmp);
  });
  expect_clean(r);
}

TEST(DeviceSync, CudaFreeHostAndCudaFreeArrayAreImplicitSynchronizations) {
  auto host = two_streams([](TraceBuilder& t, uint64_t, uint64_t, uint64_t) {
    uint64_t tmp = t.alloc(256, AllocKind::kHostPinned);
    t.free(tmp, AllocKind::kHostPinned);
  });
  expect_clean(host);
  // Arrays are not tracked: the Free names the cudaArray_t and releases no shadow.
  auto array = two_streams([](TraceBuilder& t, uint64_t, uint64_t, uint64_t) { t.free(0xA770, AllocKind::kArray); });
  expect_clean(array);
}

TEST(DeviceSync, CudaFreeOnAnotherDeviceDoesNotOrder) {
  uint64_t a, b, buf;
  auto r = two_streams(
      [](TraceBuilder& t, uint64_t, uint64_t, uint64_t) {
        uint64_t tmp = t.alloc(256, AllocKind::kDevice, 0, 1);
        t.free(tmp, AllocKind::kDevice, 0, 1);
      },
      &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

// Traces written before the tracer stopped encoding cudaFree's sync carry a DeviceSynchronize
// record (api cudaFree) just before the Free: the findings are the same with and without it.
TEST(DeviceSync, OldTracesWithTheTracersSyncRecordBeforeAFreeGiveTheSameFindings) {
  for (uint32_t device : {0u, 1u}) {
    auto body = [device](bool old_tracer) {
      return [device, old_tracer](TraceBuilder& t, uint64_t, uint64_t, uint64_t) {
        uint64_t tmp = t.alloc(256, AllocKind::kDevice, 0, device);
        if (old_tracer) t.device_synchronize(device, "cudaFree");
        t.free(tmp, AllocKind::kDevice, 0, device);
      };
    };
    auto now = two_streams(body(false));
    auto before = two_streams(body(true));
    ASSERT_EQ(now.findings.size(), before.findings.size()) << "device " << device;
    ASSERT_EQ(now.findings.size(), device == 0 ? 0u : 1u);
    for (size_t i = 0; i < now.findings.size(); ++i) EXPECT_EQ(now.findings[i].fingerprint, before.findings[i].fingerprint);
  }
}

TEST(DeviceSync, CudaFreeAsyncIsNotASynchronization) {
  uint64_t a, b, buf;
  auto r = two_streams(
      [](TraceBuilder& t, uint64_t a, uint64_t, uint64_t) {
        uint64_t tmp = t.alloc(256, AllocKind::kAsync, a);
        t.free(tmp, AllocKind::kAsync, a);
      },
      &a, &b, &buf);
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync", b, buf, kBytes});
}

// --- legacy default stream
TEST(LegacyStream, BlockingStreamsSynchronizeWithIt) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t a = t.create_stream(0);  // blocking
    uint64_t b = t.create_stream(0);
    uint64_t buf = t.alloc(kBytes);
    uint64_t legacy = trace::legacy_stream(0);
    t.memset(a, buf, kBytes);       // blocking stream
    t.memset(legacy, buf, kBytes);  // waits for A
    t.memset(b, buf, kBytes);       // waits for the legacy op
  });
  expect_clean(r);
}

TEST(LegacyStream, NonBlockingStreamsAreExempt) {
  uint64_t a = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream(trace::kStreamNonBlocking);
    buf = t.alloc(kBytes);
    t.memset(a, buf, kBytes);
    t.memset(trace::legacy_stream(0), buf, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", a, "cudaMemsetAsync",
                 trace::legacy_stream(0), buf, kBytes});
  EXPECT_EQ(r.findings[0].later.stream_label, "legacy default stream (device 0)");
}

TEST(LegacyStream, LaterNonBlockingWorkDoesNotWaitForIt) {
  uint64_t b = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    b = t.create_stream(trace::kStreamNonBlocking);
    buf = t.alloc(kBytes);
    t.memset(trace::legacy_stream(0), buf, kBytes);
    t.memset(b, buf, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", trace::legacy_stream(0),
                 "cudaMemsetAsync", b, buf, kBytes});
}

// --- per-thread default stream
TEST(PerThreadStream, SynchronizesWithTheLegacyStream) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t buf = t.alloc(kBytes);
    t.thread(1).memset(trace::per_thread_stream(1, 0), buf, kBytes);
    t.thread(0).memset(trace::legacy_stream(0), buf, kBytes);
  });
  expect_clean(r);
}

TEST(PerThreadStream, TwoThreadsDefaultStreamsAreIndependent) {
  uint64_t buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    buf = t.alloc(kBytes);
    t.thread(1).memset(trace::per_thread_stream(1, 0), buf, kBytes);
    t.thread(2).memset(trace::per_thread_stream(2, 0), buf, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "cudaMemsetAsync", trace::per_thread_stream(1, 0),
                 "cudaMemsetAsync", trace::per_thread_stream(2, 0), buf, kBytes});
  EXPECT_EQ(r.findings[0].later.stream_label, "per-thread default stream (thread 2, device 0)");
}

// --- synchronous memcpy and pageable-host async copies
TEST(SyncCopies, SynchronousDeviceToHostCopyMakesTheHostWait) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t b = t.create_stream();
    uint64_t dev = t.alloc(kBytes);
    uint64_t host = 0x5000'0000;  // pageable
    t.memcpy(trace::legacy_stream(0), host, dev, kBytes, CopyKind::kDeviceToHost, false, MemKind::kDevice,
             MemKind::kPageableHost);
    t.memset(b, dev, kBytes);
  });
  expect_clean(r);
}

TEST(SyncCopies, SynchronousDeviceToDeviceCopyDoesNotMakeTheHostWait) {
  uint64_t b = 0, src = 0;
  auto r = run_program([&](TraceBuilder& t) {
    b = t.create_stream();
    src = t.alloc(kBytes);
    uint64_t dst = t.alloc(kBytes);
    t.memcpy(trace::legacy_stream(0), dst, src, kBytes, CopyKind::kDeviceToDevice, false);
    t.memset(b, src, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterRead, Confidence::kCertain, "cudaMemcpy", trace::legacy_stream(0),
                 "cudaMemsetAsync", b, src, kBytes});
}

TEST(SyncCopies, AsyncCopyToPageableHostMakesTheHostWait) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t dev = t.alloc(kBytes);
    t.memcpy(a, 0x5000'0000, dev, kBytes, CopyKind::kDeviceToHost, true, MemKind::kDevice, MemKind::kPageableHost);
    t.memset(b, dev, kBytes);
  });
  expect_clean(r);
}

TEST(SyncCopies, AsyncCopyToPinnedHostDoesNotMakeTheHostWait) {
  uint64_t a = 0, b = 0, dev = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    dev = t.alloc(kBytes);
    uint64_t pinned = t.alloc(kBytes, AllocKind::kHostPinned);
    t.memcpy(a, pinned, dev, kBytes, CopyKind::kDeviceToHost, true, MemKind::kDevice, MemKind::kPinnedHost);
    t.memset(b, dev, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterRead, Confidence::kCertain, "cudaMemcpyAsync", a, "cudaMemsetAsync", b, dev, kBytes});
}

// --- NCCL collectives: accesses on their stream with the ranges of nccl-buffers.md
TEST(Nccl, AllReduceReadsAndWritesItsBufferOnItsStream) {
  uint64_t compute = 0, comm_stream = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    compute = t.create_stream();
    comm_stream = t.create_stream();
    buf = t.alloc(kBytes);
    uint64_t comm = t.comm_init(0, 2);
    t.at("train.py", 5, "step").memset(compute, buf, kBytes);
    uint64_t e = t.create_event();
    t.record_event(e, compute);
    t.wait_event(comm_stream, e);
    t.at("train.py", 6, "step").nccl(NcclOp::kAllReduce, comm_stream, comm, buf, buf, kBytes / 4, NcclType::kFloat32);
    t.at("train.py", 7, "step").memset(compute, buf, kBytes);  // before the all-reduce is waited on
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "ncclAllReduce", comm_stream, "cudaMemsetAsync",
                 compute, buf, kBytes});
  EXPECT_EQ(r.findings[0].earlier.direction, "read and write");
  EXPECT_EQ(r.findings[0].ranks, std::vector<int>{0});
}

TEST(Nccl, AllReduceWaitedOnIsClean) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t compute = t.create_stream(), comm_stream = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    uint64_t comm = t.comm_init(0, 2);
    t.memset(compute, buf, kBytes);
    uint64_t e = t.create_event(), done = t.create_event();
    t.record_event(e, compute);
    t.wait_event(comm_stream, e);
    t.nccl(NcclOp::kAllReduce, comm_stream, comm, buf, buf, kBytes / 4, NcclType::kFloat32);
    t.record_event(done, comm_stream);
    t.wait_event(compute, done);
    t.memset(compute, buf, kBytes);
  });
  expect_clean(r);
}

TEST(Nccl, ReduceScatterWritesOnlyItsRecvChunk) {
  // In-place reduce-scatter on rank 1 of 2: recv = send + 1 * recvcount. A write to rank 0's
  // chunk after the send buffer was read still races (WAR); a read of rank 0's chunk does not.
  uint64_t compute = 0, comm_stream = 0, buf = 0;
  auto r = run_program(
      [&](TraceBuilder& t) {
        compute = t.create_stream();
        comm_stream = t.create_stream();
        buf = t.alloc(kBytes);
        uint64_t out = t.alloc(kBytes);
        uint64_t comm = t.comm_init(1, 2);
        uint64_t half = kBytes / 2;
        t.nccl(NcclOp::kReduceScatter, comm_stream, comm, buf, buf + half, half / 2, NcclType::kFloat16);
        t.memcpy(compute, out, buf, half);  // reads rank 0's chunk: read-read, clean
      },
      {}, 1);
  expect_clean(r);
  auto racy = run_program(
      [&](TraceBuilder& t) {
        compute = t.create_stream();
        comm_stream = t.create_stream();
        buf = t.alloc(kBytes);
        uint64_t out = t.alloc(kBytes);
        uint64_t comm = t.comm_init(1, 2);
        uint64_t half = kBytes / 2;
        t.nccl(NcclOp::kReduceScatter, comm_stream, comm, buf, buf + half, half / 2, NcclType::kFloat16);
        t.memcpy(compute, out, buf + half, half);  // reads rank 1's chunk, which the call writes
      },
      {}, 1);
  expect_one(racy, {RaceKind::kReadAfterWrite, Confidence::kCertain, "ncclReduceScatter", comm_stream,
                    "cudaMemcpyAsync", compute, buf + kBytes / 2, kBytes / 2});
  EXPECT_EQ(racy.findings[0].ranks, std::vector<int>{1});
}

TEST(Nccl, AllGatherRecvIsNranksTimesCount) {
  uint64_t compute = 0, comm_stream = 0, recv = 0;
  auto r = run_program([&](TraceBuilder& t) {
    compute = t.create_stream();
    comm_stream = t.create_stream();
    uint64_t send = t.alloc(256);
    recv = t.alloc(kBytes);
    uint64_t comm = t.comm_init(0, 4);
    t.nccl(NcclOp::kAllGather, comm_stream, comm, send, recv, 64, NcclType::kFloat32);  // 4 x 256 bytes
    t.memset(compute, recv + 1024, 1024);  // past the gathered bytes: clean
    t.memset(compute, recv + 768, 16);     // inside the last rank's chunk: races
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kCertain, "ncclAllGather", comm_stream, "cudaMemsetAsync",
                 compute, recv + 768, 16});
}

// --- ncclGroupStart/End: issued at the end; streams wait for each other and are held
TEST(NcclGroup, GroupedStreamsAreHeldUntilTheGroupCompletes) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t s1 = t.create_stream(), s2 = t.create_stream();
    uint64_t b1 = t.alloc(kBytes), b2 = t.alloc(kBytes);
    uint64_t comm = t.comm_init(0, 2);
    t.group_start();
    t.nccl(NcclOp::kSend, s1, comm, b1, 0, kBytes / 4, NcclType::kFloat32, 1);
    t.nccl(NcclOp::kRecv, s2, comm, 0, b2, kBytes / 4, NcclType::kFloat32, 1);
    t.group_end();
    t.memset(s2, b1, kBytes);  // s2 is held until the send on s1 completed too
  });
  expect_clean(r);
}

TEST(NcclGroup, WithoutAGroupTheStreamsAreIndependent) {
  uint64_t s1 = 0, s2 = 0, b1 = 0;
  auto r = run_program([&](TraceBuilder& t) {
    s1 = t.create_stream();
    s2 = t.create_stream();
    b1 = t.alloc(kBytes);
    uint64_t b2 = t.alloc(kBytes);
    uint64_t comm = t.comm_init(0, 2);
    t.nccl(NcclOp::kSend, s1, comm, b1, 0, kBytes / 4, NcclType::kFloat32, 1);
    t.nccl(NcclOp::kRecv, s2, comm, 0, b2, kBytes / 4, NcclType::kFloat32, 1);
    t.memset(s2, b1, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterRead, Confidence::kCertain, "ncclSend", s1, "cudaMemsetAsync", s2, b1, kBytes});
}

// --- CUDA graphs and stream capture: recognised and reported as not analysed
TEST(Graphs, GraphLaunchIsReportedAsNotAnalysed) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t a = t.create_stream();
    t.graph_launch(a);
  });
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.unanalysed_graph_launches, 1u);
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_EQ(r.notices[0].level, "warning");
  EXPECT_NE(r.notices[0].text.find("1 CUDA graph launches were not analysed"), std::string::npos) << r.notices[0].text;
}

TEST(Graphs, CapturedWorkIsNotExecutedAndIsReported) {
  auto r = run_program([](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    t.capture(a, true);
    t.memset(a, buf, kBytes);  // captured, not run now
    t.capture(a, false);
    t.memset(b, buf, kBytes);
  });
  EXPECT_TRUE(r.findings.empty());
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_EQ(r.notices[0].text, "1 operations issued during stream capture were not analysed");
}

// --- host threads: one host clock in real call order by default
TEST(HostThreads, OneHostClockOrdersAcrossThreads) {
  auto program = [](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    t.thread(1).memset(a, buf, kBytes);
    t.thread(1).stream_synchronize(a);
    t.thread(2).memset(b, buf, kBytes);
  };
  expect_clean(run_program(program));
  analysis::AnalyzerOptions separate;
  separate.separate_host_threads = true;
  auto r = run_program(program, separate);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].kind, RaceKind::kWriteAfterWrite);
  EXPECT_EQ(r.findings[0].later.thread, 2u);
  EXPECT_EQ(r.findings[0].earlier.thread, 1u);
}

// --- kernels: pointer arguments only, so findings are `possible`
TEST(Kernels, KernelAgainstCopyIsPossible) {
  uint64_t a = 0, b = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    buf = t.alloc(kBytes);
    t.kernel(a, "scale_kernel", {buf + 64});
    t.memset(b, buf, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kPossible, "scale_kernel", a, "cudaMemsetAsync", b, buf + 64,
                 kBytes - 64});
  EXPECT_EQ(r.findings[0].earlier.direction, "read or write");
  EXPECT_FALSE(r.findings[0].earlier.exact);
  EXPECT_NE(r.findings[0].fix.find("streamrace run --precise"), std::string::npos);
}

TEST(Kernels, TwoKernelsOnOneBufferArePossible) {
  uint64_t a = 0, b = 0, buf = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    buf = t.alloc(kBytes);
    t.kernel(a, "producer_kernel", {buf});
    t.kernel(b, "consumer_kernel", {buf});
  });
  expect_one(r, {RaceKind::kWriteAfterWrite, Confidence::kPossible, "producer_kernel", a, "consumer_kernel", b, buf, kBytes});
}

TEST(Kernels, OrderedKernelsAreClean) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    t.kernel(a, "producer_kernel", {buf});
    uint64_t e = t.create_event();
    t.record_event(e, a);
    t.wait_event(b, e);
    t.kernel(b, "consumer_kernel", {buf});
  });
  expect_clean(r);
}

TEST(Kernels, PointersOutsideTracedAllocationsAreIgnored) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    t.kernel(a, "k1", {0x1234'5000});
    t.kernel(b, "k2", {0x1234'5000});
  });
  EXPECT_TRUE(r.findings.empty());
}

// --- stream-ordered allocation: reuse after cudaFreeAsync without ordering
TEST(StreamOrderedAlloc, FreeOnOneStreamWhileAnotherStillReadsRaces) {
  uint64_t a = 0, b = 0, p = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    uint64_t dst = t.alloc(kBytes);
    p = t.alloc(kBytes, AllocKind::kAsync, a);
    t.memset(a, p, kBytes);
    uint64_t e = t.create_event();
    t.record_event(e, a);
    t.wait_event(b, e);
    t.memcpy(b, dst, p, kBytes);      // B reads p
    t.free(p, AllocKind::kAsync, a);  // freed in A's order: B's read is not ordered before it
    uint64_t q = t.alloc(kBytes, AllocKind::kAsync, a, 0, p);  // same addresses again
    t.memset(a, q, kBytes);
  });
  expect_one(r, {RaceKind::kWriteAfterRead, Confidence::kCertain, "cudaMemcpyAsync", b, "cudaFreeAsync", a, p, kBytes});
  EXPECT_NE(r.findings[0].fix.find("record_stream"), std::string::npos);
}

TEST(StreamOrderedAlloc, FreeAfterWaitingForTheReaderIsClean) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t dst = t.alloc(kBytes);
    uint64_t p = t.alloc(kBytes, AllocKind::kAsync, a);
    t.memset(a, p, kBytes);
    uint64_t e = t.create_event(), back = t.create_event();
    t.record_event(e, a);
    t.wait_event(b, e);
    t.memcpy(b, dst, p, kBytes);
    t.record_event(back, b);
    t.wait_event(a, back);
    t.free(p, AllocKind::kAsync, a);
    uint64_t q = t.alloc(kBytes, AllocKind::kAsync, a, 0, p);
    t.memset(a, q, kBytes);
  });
  expect_clean(r);
}

// --- deduplication: the same race repeated is one finding with a count
TEST(Dedup, RepeatedRaceIsOneFindingWithOccurrences) {
  auto r = run_program([&](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    for (int step = 0; step < 5; ++step) {
      t.at("loop.py", 3, "step").memset(a, buf, kBytes);
      t.at("loop.py", 4, "step").memset(b, buf, kBytes);
    }
  });
  ASSERT_EQ(r.findings.size(), 2u);  // B after A, and A (next step) after B
  EXPECT_EQ(r.findings[0].occurrences + r.findings[1].occurrences, 9u);
  EXPECT_NE(r.findings[0].fingerprint, r.findings[1].fingerprint);
}

TEST(Dedup, SameRaceOnTwoRanksMergesIntoOneFinding) {
  testing::TempDir dir;
  for (int rank = 0; rank < 2; ++rank) {
    TraceBuilder t(dir.file("rank" + std::to_string(rank) + ".srace"), TraceBuilder::default_header(rank));
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(kBytes);
    t.at("train.py", 30, "f").memset(a, buf, kBytes);
    t.at("train.py", 31, "f").memset(b, buf, kBytes);
  }
  auto r = testing::analyze_files(analysis::expand_trace_inputs({dir.path().string()}));
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].occurrences, 2u);
  EXPECT_EQ(r.findings[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(r.findings[0].where.size(), 2u);
  EXPECT_EQ(r.traces.size(), 2u);
}

}  // namespace
}  // namespace streamrace

namespace streamrace {
namespace {

// A kernel pointer argument that an exact operation used as the start of a range is taken
// to span that range, not the rest of its (caching-allocator) allocation.
TEST(Kernels, ExtentInferredFromExactAccessesAtTheSameAddress) {
  auto program = [](TraceBuilder& t) {
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t segment = t.alloc(16 * kBytes);  // one cudaMalloc holding two tensors
    uint64_t bucket = segment, grad = segment + 4 * kBytes;
    uint64_t comm = t.comm_init(0, 2);
    t.nccl(NcclOp::kAllReduce, a, comm, bucket, bucket, kBytes / 4, NcclType::kFloat32);  // bucket: kBytes
    t.kernel(a, "div_kernel", {bucket});
    t.memset(b, grad, kBytes);  // another tensor of the same segment
  };
  expect_clean(run_program(program));
  analysis::AnalyzerOptions whole;
  whole.kernel_extent_to_allocation_end = true;
  auto r = run_program(program, whole);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].earlier.op, "div_kernel");
  EXPECT_EQ(r.findings[0].confidence, Confidence::kPossible);
  EXPECT_EQ(r.findings[0].earlier.bytes, 16 * kBytes);
}

TEST(Kernels, InferredExtentStillCatchesOverlap) {
  uint64_t a = 0, b = 0, bucket = 0;
  auto r = run_program([&](TraceBuilder& t) {
    a = t.create_stream();
    b = t.create_stream();
    bucket = t.alloc(16 * kBytes);
    uint64_t comm = t.comm_init(0, 2);
    t.nccl(NcclOp::kAllReduce, a, comm, bucket, bucket, kBytes / 4, NcclType::kFloat32);
    t.kernel(a, "div_kernel", {bucket});
    t.memset(b, bucket + kBytes / 2, kBytes / 4);
  });
  ASSERT_EQ(r.findings.size(), 1u);
  // Per earlier stream the exact access is preferred: the all-reduce, not the kernel.
  EXPECT_EQ(r.findings[0].earlier.op, "ncclAllReduce");
  EXPECT_EQ(r.findings[0].confidence, Confidence::kCertain);
}

}  // namespace
}  // namespace streamrace
