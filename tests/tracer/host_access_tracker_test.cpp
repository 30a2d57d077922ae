// --host-accesses end to end on a CPU: CudaCallHandler driven by synthetic CUPTI data (as in
// cuda_call_handler_test.cpp) with a HostAccessTracker, on real mmap'd pages standing in for
// cudaHostAlloc / cudaHostRegister memory. The program's host accesses really fault; the
// trace is then analysed, so each racy program and its clean twin is checked for the exact
// finding or its absence.
#include <gtest/gtest.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_meta.h>
#include <generated_cuda_runtime_api_meta.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "analyzer/analyzer.h"
#include "tests/tracer/trace_contents.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/host_access_tracker.h"
#include "tracer/page_guard.h"
#include "tracer/thread_state.h"

namespace streamrace::tracer {
namespace {

using testing::read_trace;
using testing::TraceContents;
using trace::RecordKind;

const size_t kPage = size_t(sysconf(_SC_PAGESIZE));

class Queries : public CudaQueries {
 public:
  uint32_t device_of_context(uint64_t) override { return 0; }
  bool param_layout(uint64_t, bool, std::vector<ParamSlot>&) override { return false; }
  trace::MemKind memory_kind(uint64_t ptr) override {
    return ptr >= 0x7000'0000 && ptr < 0x8000'0000 ? trace::MemKind::kDevice : trace::MemKind::kPageableHost;
  }
};

template <typename T>
T* as_ptr(uint64_t v) {
  return reinterpret_cast<T*>(v);
}
uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }

__attribute__((noinline)) void host_store(volatile char* p, char v) { *p = v; }
__attribute__((noinline)) char host_load(volatile const char* p) { return *p; }

constexpr uint64_t kDev = 0x7000'0000;
cudaStream_t stream_s() { return as_ptr<CUstream_st>(0x5551); }

class HostAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sr_hostacc_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    RecorderOptions o;
    o.path = (dir_ / "t.srace").string();
    o.background_flusher = false;
    o.header_provider = [] {
      trace::TraceHeader h;
      h.producer = "host access test";
      return h;
    };
    rec_ = std::make_unique<TraceRecorder>(o);
    handler_ = std::make_unique<CudaCallHandler>(*rec_, allocs_, queries_, nullptr);
    tracker_ = std::make_unique<HostAccessTracker>(PageGuard::process(), *rec_, true);
    ASSERT_TRUE(tracker_->active());
    handler_->set_host_access_tracker(tracker_.get());
    thread_state() = TracerThreadState{};
    mem_ = static_cast<char*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mem_, MAP_FAILED);
  }
  void TearDown() override {
    tracker_->host_synchronized();
    PageGuard::process().set_seq_source(nullptr);  // the recorder goes with the test
    rec_->close();
    munmap(mem_, 4 * kPage);
    std::filesystem::remove_all(dir_);
  }

  void runtime(uint32_t cbid, const void* params, int32_t result = 0) {
    handler_->on_call(ApiCall{ApiDomain::kRuntime, true, cbid, nullptr, params, 0, ++corr_, 0x100});
    handler_->on_call(ApiCall{ApiDomain::kRuntime, false, cbid, nullptr, params, result, corr_, 0x100});
  }
  // The "driver" hands out our mmap'd pages as pinned memory.
  void host_alloc(void* p, size_t bytes) {
    void* h = p;
    cudaHostAlloc_v3020_params a{&h, bytes, 0};
    runtime(CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, &a);
  }
  void device_alloc() {
    void* d = as_ptr<void>(kDev);
    cudaMalloc_v3020_params m{&d, 1 << 20};
    runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &m);
  }
  void copy_async(uint64_t dst, uint64_t src, size_t bytes, cudaMemcpyKind kind) {
    cudaMemcpyAsync_v3020_params p{as_ptr<void>(dst), as_ptr<void>(src), bytes, kind, stream_s()};
    runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &p);
  }
  void stream_sync() {
    cudaStreamSynchronize_v3020_params p{stream_s()};
    runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &p);
  }
  TraceContents finish() {
    tracker_->finish();
    rec_->close();
    return read_trace((dir_ / "t.srace").string());
  }
  analysis::AnalysisResult analyse() {
    analysis::Analyzer a(analysis::AnalyzerOptions{});
    a.add_trace((dir_ / "t.srace").string());
    return a.finish();
  }

  std::filesystem::path dir_;
  Queries queries_;
  AllocationTable allocs_;
  std::unique_ptr<TraceRecorder> rec_;
  std::unique_ptr<CudaCallHandler> handler_;
  std::unique_ptr<HostAccessTracker> tracker_;
  char* mem_ = nullptr;
  uint32_t corr_ = 0;
};

TEST_F(HostAccessTest, RefillOfAnH2DSourceBeforeTheSyncIsAHostWriteDuringCopy) {
  host_alloc(mem_, 2 * kPage);
  device_alloc();
  copy_async(kDev, u(mem_), 2 * kPage, cudaMemcpyHostToDevice);
  EXPECT_EQ(tracker_->open_windows(), 1u);
  host_store(mem_ + 100, 1);  // faults once, then goes through
  EXPECT_EQ(mem_[100], 1);
  EXPECT_TRUE(tracker_->has_pending());
  stream_sync();  // the caught access reaches the trace first; the window ends
  EXPECT_EQ(tracker_->open_windows(), 0u);
  host_store(mem_ + 200, 2);  // after the sync: no window, no fault
  EXPECT_FALSE(tracker_->has_pending());
  auto t = finish();
  auto ha = t.of(RecordKind::kHostAccess);
  ASSERT_EQ(ha.size(), 1u);
  auto r = ha[0].as<trace::HostAccess>();
  auto m = t.of(RecordKind::kMemcpy).at(0).as<trace::Memcpy>();
  auto s = t.of(RecordKind::kStreamSynchronize).at(0).as<trace::StreamSynchronize>();
  EXPECT_EQ(r.addr, u(mem_ + 100));
  EXPECT_EQ(r.page, u(mem_));
  EXPECT_EQ(r.page_bytes, kPage);
  EXPECT_EQ(r.dir, trace::AccessDir::kWrite);
  EXPECT_EQ(r.flags, trace::kHostAccessExactAddr);
  EXPECT_EQ(t.str(r.call.api_id), "host write");
  EXPECT_EQ(r.call.thread, m.call.thread);
  EXPECT_GT(r.call.seq, m.call.seq);
  EXPECT_LT(r.call.seq, s.call.seq);
  EXPECT_NE(r.call.stack_id, 0u);
  EXPECT_TRUE(t.defs_before_use);

  auto res = analyse();
  ASSERT_EQ(res.findings.size(), 1u);
  const auto& f = res.findings[0];
  EXPECT_EQ(f.kind, analysis::RaceKind::kHostWriteDuringCopy);
  EXPECT_EQ(f.confidence, analysis::Confidence::kCertain);
  EXPECT_EQ(f.earlier.op, "cudaMemcpyAsync");
  EXPECT_EQ(f.earlier.direction, "read");
  EXPECT_EQ(f.later.op, "host write");
  EXPECT_EQ(f.later.op_kind, "host");
  EXPECT_EQ(f.overlap_addr, u(mem_ + 100));
  EXPECT_EQ(f.overlap_bytes, 1u);
  ASSERT_FALSE(f.later.stack.empty());  // the faulting thread's native frames
  EXPECT_FALSE(f.later.stack[0].python);
}

TEST_F(HostAccessTest, RefillAfterTheSyncIsClean) {
  host_alloc(mem_, 2 * kPage);
  device_alloc();
  copy_async(kDev, u(mem_), 2 * kPage, cudaMemcpyHostToDevice);
  stream_sync();
  host_store(mem_ + 100, 1);
  finish();
  EXPECT_TRUE(analyse().findings.empty());
  EXPECT_EQ(mem_[100], 1);
}

TEST_F(HostAccessTest, ReadingAPendingD2HDestinationIsAHostReadDuringCopy) {
  host_alloc(mem_, kPage);
  device_alloc();
  mem_[8] = 42;
  copy_async(u(mem_), kDev, 64, cudaMemcpyDeviceToHost);
  EXPECT_EQ(host_load(mem_ + 8), 42);  // read-protected page: faults, then reads the data
  stream_sync();
  finish();
  auto res = analyse();
  ASSERT_EQ(res.findings.size(), 1u);
#if defined(__x86_64__)
  EXPECT_EQ(res.findings[0].kind, analysis::RaceKind::kHostReadDuringCopy);
  EXPECT_EQ(res.findings[0].confidence, analysis::Confidence::kCertain);
  EXPECT_EQ(res.findings[0].later.op, "host read");
#endif
  EXPECT_EQ(res.findings[0].earlier.direction, "write");
  EXPECT_EQ(res.findings[0].overlap_addr, u(mem_ + 8));
}

TEST_F(HostAccessTest, AnEventSynchronizeAfterTheCopyEndsItsWindow) {
  host_alloc(mem_, kPage);
  device_alloc();
  copy_async(u(mem_), kDev, 64, cudaMemcpyDeviceToHost);
  cudaEvent_t e = as_ptr<CUevent_st>(0xe1);
  cudaEventRecord_v3020_params rec{e, stream_s()};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, &rec);
  EXPECT_EQ(tracker_->open_windows(), 1u);
  cudaEventSynchronize_v3020_params sync{e};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, &sync);
  EXPECT_EQ(tracker_->open_windows(), 0u);
  EXPECT_EQ(host_load(mem_ + 8), 0);
  finish();
  EXPECT_TRUE(analyse().findings.empty());
}

TEST_F(HostAccessTest, AnotherStreamsSyncLeavesTheWindowOpen) {
  host_alloc(mem_, kPage);
  device_alloc();
  copy_async(kDev, u(mem_), 64, cudaMemcpyHostToDevice);
  cudaStreamSynchronize_v3020_params other{as_ptr<CUstream_st>(0x5552)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &other);
  EXPECT_EQ(tracker_->open_windows(), 1u);
  host_store(mem_ + 10, 1);
  stream_sync();
  finish();
  auto res = analyse();
  ASSERT_EQ(res.findings.size(), 1u);
  EXPECT_EQ(res.findings[0].kind, analysis::RaceKind::kHostWriteDuringCopy);
}

TEST_F(HostAccessTest, AWriteToTheSamePageOutsideTheCopiedBytesIsRecordedButClean) {
  host_alloc(mem_, kPage);
  device_alloc();
  copy_async(kDev, u(mem_), 1024, cudaMemcpyHostToDevice);
  host_store(mem_ + 2048, 1);  // same page: faults, but the copy never reads these bytes
  stream_sync();
  auto t = finish();
  EXPECT_EQ(t.of(RecordKind::kHostAccess).size(), 1u);
  EXPECT_TRUE(analyse().findings.empty());
}

TEST_F(HostAccessTest, FreeingThePinnedMemoryEndsItsWindowsBeforeTheFreeRuns) {
  host_alloc(mem_, kPage);
  device_alloc();
  copy_async(kDev, u(mem_), 64, cudaMemcpyHostToDevice);
  cudaFreeHost_v3020_params fh{mem_};
  handler_->on_call(ApiCall{ApiDomain::kRuntime, true, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, nullptr, &fh, 0, 99,
                            0x100});
  EXPECT_EQ(tracker_->open_windows(), 0u);  // at the free's entry, before the memory goes
  host_store(mem_ + 1, 1);
  EXPECT_FALSE(tracker_->has_pending());
  handler_->on_call(ApiCall{ApiDomain::kRuntime, false, CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, nullptr, &fh, 0,
                            99, 0x100});
  // Freed: a later copy from these addresses guards nothing.
  copy_async(kDev, u(mem_), 64, cudaMemcpyHostToDevice);
  EXPECT_EQ(tracker_->open_windows(), 0u);
}

TEST_F(HostAccessTest, RegisteredMemoryIsGuardedOnlyOnPagesWhollyInside) {
  // cudaHostRegister of [mem + 100, mem + 3 pages + 100): its first and last pages hold other data.
  cudaHostRegister_v4000_params reg{mem_ + 100, 3 * kPage, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000, &reg);
  device_alloc();
  copy_async(kDev, u(mem_ + 100), 3 * kPage, cudaMemcpyHostToDevice);
  EXPECT_EQ(tracker_->open_windows(), 1u);
  host_store(mem_ + 50, 1);               // first page: shared, never guarded
  host_store(mem_ + 3 * kPage + 200, 1);  // last page: shared, never guarded
  EXPECT_FALSE(tracker_->has_pending());
  host_store(mem_ + kPage + 1, 1);  // wholly inside: guarded
  EXPECT_TRUE(tracker_->has_pending());
  stream_sync();
  finish();
  auto res = analyse();
  ASSERT_EQ(res.findings.size(), 1u);
  EXPECT_EQ(res.findings[0].overlap_addr, u(mem_ + kPage + 1));
  EXPECT_EQ(res.findings[0].later.alloc_kind, "cudaHostRegister");
}

TEST_F(HostAccessTest, PinnedMemoryThatIsNotPlainReadWriteIsNeverGuarded) {
  ASSERT_EQ(mprotect(mem_, kPage, PROT_READ), 0);  // e.g. cudaHostRegisterReadOnly of read-only pages
  cudaHostRegister_v4000_params reg{mem_, kPage, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaHostRegister_v4000, &reg);
  device_alloc();
  copy_async(kDev, u(mem_), 64, cudaMemcpyHostToDevice);
  EXPECT_EQ(tracker_->open_windows(), 0u);
  ASSERT_EQ(mprotect(mem_, kPage, PROT_READ | PROT_WRITE), 0);
}

TEST_F(HostAccessTest, AnAsyncCopyFromPageableMemoryOnTheStreamEndsItsWindows) {
  host_alloc(mem_, kPage);
  device_alloc();
  copy_async(kDev, u(mem_), 64, cudaMemcpyHostToDevice);
  EXPECT_EQ(tracker_->open_windows(), 1u);
  static char pageable[64];
  copy_async(kDev + 4096, u(pageable), 64, cudaMemcpyHostToDevice);  // synchronises with the stream first
  EXPECT_EQ(tracker_->open_windows(), 0u);
  host_store(mem_ + 1, 1);
  EXPECT_FALSE(tracker_->has_pending());
  finish();
  EXPECT_TRUE(analyse().findings.empty());
}

TEST_F(HostAccessTest, MemoryTheTracerWasNotToldIsPinnedIsNeverGuarded) {
  device_alloc();
  copy_async(kDev, u(mem_), 64, cudaMemcpyHostToDevice);  // pageable: the copy is synchronous anyway
  EXPECT_EQ(tracker_->open_windows(), 0u);
  host_store(mem_, 1);
  EXPECT_FALSE(tracker_->has_pending());
}

}  // namespace
}  // namespace streamrace::tracer
