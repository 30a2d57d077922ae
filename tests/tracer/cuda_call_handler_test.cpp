// CudaCallHandler driven by synthetic CUPTI callback data: for each CUDA call, the exact
// records it must become. No GPU, no CUPTI: the handler sees what CuptiSession would pass.
#include <gtest/gtest.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_meta.h>
#include <generated_cuda_runtime_api_meta.h>
#include <nvtx3/nvToolsExt.h>
#include <cupti_nvtx_cbid.h>
#include <generated_nvtx_meta.h>
#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "tests/tracer/trace_contents.h"
#include "traceformat/call_stream.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/launch_corpus.h"
#include "tracer/cuda_call_table.h"
#include "tracer/thread_state.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace streamrace::tracer {
namespace {

using testing::read_trace;
using testing::TraceContents;
using trace::RecordKind;

class FakeQueries : public CudaQueries {
 public:
  uint32_t device = 1;
  std::map<uint64_t, std::vector<ParamSlot>> layouts;
  std::map<uint64_t, trace::MemKind> kinds;  // addresses the "driver" knows
  int layout_calls = 0;
  uint32_t device_of_context(uint64_t) override { return device; }
  bool param_layout(uint64_t func, bool, std::vector<ParamSlot>& out) override {
    ++layout_calls;
    auto it = layouts.find(func);
    if (it == layouts.end()) return false;
    out = it->second;
    return true;
  }
  trace::MemKind memory_kind(uint64_t ptr) override {
    auto it = kinds.find(ptr);
    return it == kinds.end() ? trace::MemKind::kPageableHost : it->second;
  }
  std::map<uint64_t, std::string> names;  // what cuFuncGetName answers
  const char* function_name(uint64_t func, bool) override {
    auto it = names.find(func);
    return it == names.end() ? nullptr : it->second.c_str();
  }
  int forgotten = 0;  // forget_functions() calls
  void forget_functions() override { ++forgotten; }
};

template <typename T>
uint64_t H(T p) {
  return reinterpret_cast<uint64_t>(p);
}
template <typename T>
T* as_ptr(uint64_t v) {
  return reinterpret_cast<T*>(v);
}

class HandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sr_handler_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    RecorderOptions o;
    o.path = (dir_ / "t.srace").string();
    o.background_flusher = false;
    o.header_provider = [] {
      trace::TraceHeader h;
      h.producer = "handler test";
      return h;
    };
    rec_ = std::make_unique<TraceRecorder>(o);
    handler_ = std::make_unique<CudaCallHandler>(*rec_, allocs_, queries_, nullptr);
    thread_state() = TracerThreadState{};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A recorder (and handler) that writes only part of the run (tracer/capture_options.h).
  void use_capture(const char* window, const char* step_range) {
    RecorderOptions o;
    o.path = (dir_ / "t.srace").string();
    o.background_flusher = false;
    std::string error;
    auto c = parse_capture_options("", window, "", step_range, &error);
    ASSERT_TRUE(c) << error;
    o.capture = *c;
    rec_ = std::make_unique<TraceRecorder>(o);
    handler_ = std::make_unique<CudaCallHandler>(*rec_, allocs_, queries_, nullptr);
  }
  TraceContents finish() {
    rec_->close();
    return read_trace((dir_ / "t.srace").string());
  }
  void runtime(uint32_t cbid, const void* params, int32_t result = 0, uint32_t corr = 7,
               const char* symbol = nullptr) {
    runtime_enter(cbid, params, corr);
    runtime_exit(cbid, params, result, corr, symbol);
  }
  void runtime_enter(uint32_t cbid, const void* params, uint32_t corr = 7) {
    handler_->on_call(ApiCall{ApiDomain::kRuntime, true, cbid, nullptr, params, 0, corr, 0x100});
  }
  void runtime_exit(uint32_t cbid, const void* params, int32_t result = 0, uint32_t corr = 7,
                    const char* symbol = nullptr) {
    handler_->on_call(ApiCall{ApiDomain::kRuntime, false, cbid, symbol, params, result, corr, 0x100});
  }
  void driver(uint32_t cbid, const void* params, int32_t result = 0, uint32_t corr = 9, const char* symbol = nullptr) {
    handler_->on_call(ApiCall{ApiDomain::kDriver, true, cbid, symbol, params, 0, corr, 0x100});
    handler_->on_call(ApiCall{ApiDomain::kDriver, false, cbid, symbol, params, result, corr, 0x100});
  }
  uint64_t malloc_device(uint64_t ptr, size_t bytes) {
    void* p = as_ptr<void>(ptr);
    cudaMalloc_v3020_params m{&p, bytes};
    runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &m);
    return ptr;
  }

  std::filesystem::path dir_;
  FakeQueries queries_;
  AllocationTable allocs_;
  std::unique_ptr<TraceRecorder> rec_;
  std::unique_ptr<CudaCallHandler> handler_;
};

TEST_F(HandlerTest, StreamCreateWithPriorityRecordsFlagsPriorityAndDevice) {
  cudaStream_t s = as_ptr<CUstream_st>(0x5551);
  cudaStreamCreateWithPriority_v5050_params p{&s, cudaStreamNonBlocking, -2};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithPriority_v5050, &p);
  auto t = finish();
  ASSERT_EQ(t.records.size(), 1u);
  auto r = t.records[0].as<trace::StreamCreate>();
  EXPECT_EQ(t.records[0].kind, RecordKind::kStreamCreate);
  EXPECT_EQ(r.stream, 0x5551u);
  EXPECT_EQ(r.flags, uint32_t(trace::kStreamNonBlocking));
  EXPECT_EQ(r.priority, -2);
  EXPECT_EQ(r.device, 1u);
  EXPECT_EQ(r.call.seq, 0u);
  EXPECT_EQ(t.str(r.call.api_id), "cudaStreamCreateWithPriority");
  EXPECT_TRUE(t.defs_before_use);
  EXPECT_TRUE(t.stats.complete);
}

TEST_F(HandlerTest, RuntimeCallsDriverCallsInsideAreCountedOnce) {
  malloc_device(0x7000'0000, 4096);
  char host[64];
  cudaMemcpyAsync_v3020_params p{as_ptr<void>(0x7000'0100), host, 64, cudaMemcpyHostToDevice,
                                 as_ptr<CUstream_st>(0x5551)};
  runtime_enter(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &p, 21);
  // The runtime implements the copy with a driver copy: it must not become a second record.
  cuMemcpyHtoDAsync_v2_params d{0x7000'0100, host, 64, as_ptr<CUstream_st>(0x5551)};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, &d, 0, 22);
  runtime_exit(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &p, 0, 21);
  auto t = finish();
  ASSERT_EQ(t.records.size(), 2u);
  EXPECT_EQ(t.records[0].kind, RecordKind::kAlloc);
  ASSERT_EQ(t.records[1].kind, RecordKind::kMemcpy);
  auto m = t.records[1].as<trace::Memcpy>();
  EXPECT_EQ(m.stream, 0x5551u);
  EXPECT_EQ(m.correlation, 21u);
  EXPECT_EQ(m.dst, 0x7000'0100u);
  EXPECT_EQ(m.src, H(host));
  EXPECT_EQ(m.bytes, 64u);
  EXPECT_EQ(m.device, 1u);
  EXPECT_EQ(m.copy_kind, trace::CopyKind::kHostToDevice);
  EXPECT_EQ(m.is_async, 1);
  EXPECT_EQ(m.src_mem, trace::MemKind::kPageableHost);
  EXPECT_EQ(m.dst_mem, trace::MemKind::kDevice);
  EXPECT_EQ(m.call.seq, 1u);
  EXPECT_EQ(t.str(m.call.api_id), "cudaMemcpyAsync");
}

TEST_F(HandlerTest, DefaultStreamsBecomeLegacyAndPerThreadIds) {
  malloc_device(0x7000'0000, 4096);
  cudaMemsetAsync_v3020_params legacy{as_ptr<void>(0x7000'0000), 0, 16, nullptr};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, &legacy);
  cudaMemsetAsync_v3020_params legacy_named{as_ptr<void>(0x7000'0000), 0, 16, cudaStreamLegacy};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, &legacy_named);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000, &legacy);  // stream 0 under --default-stream per-thread
  cudaMemsetAsync_v3020_params per_thread{as_ptr<void>(0x7000'0000), 0, 16, cudaStreamPerThread};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, &per_thread);
  cudaMemset_v3020_params sync{as_ptr<void>(0x7000'0000), 0, 16};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, &sync);
  auto t = finish();
  auto sets = t.of(RecordKind::kMemset);
  ASSERT_EQ(sets.size(), 5u);
  EXPECT_EQ(sets[0].as<trace::Memset>().stream, trace::legacy_stream(1));
  EXPECT_EQ(sets[1].as<trace::Memset>().stream, trace::legacy_stream(1));
  EXPECT_EQ(sets[2].as<trace::Memset>().stream, trace::per_thread_stream(0, 1));
  EXPECT_EQ(sets[3].as<trace::Memset>().stream, trace::per_thread_stream(0, 1));
  EXPECT_EQ(sets[4].as<trace::Memset>().stream, trace::legacy_stream(1));
  EXPECT_EQ(sets[0].as<trace::Memset>().is_async, 1);
  EXPECT_EQ(sets[4].as<trace::Memset>().is_async, 0);
  EXPECT_EQ(sets[4].as<trace::Memset>().dst_mem, trace::MemKind::kDevice);
}

struct TwoPointers {
  uint64_t a;
  uint64_t b;
};

TEST_F(HandlerTest, KernelLaunchScansParametersThroughTheDriverLaunchOnce) {
  malloc_device(0x7000'0000, 4096);
  malloc_device(0x7100'0000, 4096);
  const uint64_t func = 0xF00D;
  queries_.layouts[func] = {{0, 4}, {8, 16}, {24, 8}, {32, 8}};
  int n = 1024;
  TwoPointers arr{0x7000'0010, 0x1234};  // one pointer into live memory, one not
  uint64_t out = 0x7100'0000;
  uint64_t dangling = 0x9999'0000;
  void* args[] = {&n, &arr, &out, &dangling};
  cudaLaunchKernel_v7000_params rp{as_ptr<void>(0xABC), dim3(8, 2, 1), dim3(256, 1, 1), args, 0, nullptr};
  runtime_enter(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rp, 31);
  // The runtime's driver launch names its own handle for the legacy stream.
  cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 8, 2, 1, 256, 1, 1, 0, as_ptr<CUstream_st>(0xDEAD), args, nullptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 32, "_Z6vecAddiPfS_");
  runtime_exit(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rp, 0, 31, "_Z6vecAddiPfS_");
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 1u);
  auto k = ks[0].as<trace::KernelLaunchHead>();
  EXPECT_EQ(k.stream, trace::legacy_stream(1));
  EXPECT_EQ(k.correlation, 31u);
  EXPECT_EQ(k.flags, uint32_t(trace::kKernelArgsScanned) | uint32_t(trace::kKernelArgsHash2));
  EXPECT_EQ(k.grid[0], 8u);
  EXPECT_EQ(k.grid[1], 2u);
  EXPECT_EQ(k.block[0], 256u);
  EXPECT_EQ(t.str(k.name_id), "vecAdd(int, float*, float*)");
  EXPECT_EQ(t.str(k.call.api_id), "cudaLaunchKernel");
  ASSERT_EQ(k.nptrs, 2u);
  EXPECT_EQ(ks[0].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0010, 0x7100'0000}));
}

TEST_F(HandlerTest, AFunctionsNameAndLayoutAreLookedUpOncePerThread) {
  malloc_device(0x7000'0000, 4096);
  const uint64_t func = 0xF00E;
  queries_.layouts[func] = {{0, 8}};
  uint64_t p = 0x7000'0040;
  void* args[] = {&p};
  for (int i = 0; i < 3; ++i) {
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 40 + i, "_Z4fillPf");
  }
  EXPECT_EQ(queries_.layout_calls, 1);
  auto ks = finish().of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 3u);
  for (const auto& k : ks) EXPECT_EQ(k.tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0040}));
}

// The thread's facts are fronted by a direct-mapped table (1024 entries, layouts of up to 11
// parameters inline, longer ones in the map behind it): functions that share an entry, or
// that outnumber the per-thread limit (4096, then the facts are dropped and looked up again),
// still get their own name and layout. Each function here puts its one pointer at a parameter
// of its own (of 1 to 14), the others are words that point nowhere.
TEST_F(HandlerTest, FunctionsSharingTheFactsFrontKeepTheirOwnLayoutsAndNames) {
  const uint64_t base = malloc_device(0x7000'0000, 1 << 20);
  constexpr uint64_t kFunctions = 5000;
  auto params_of = [](uint64_t f) { return uint32_t(1 + f % 14); };
  for (uint64_t f = 0; f < kFunctions; ++f) {
    std::vector<ParamSlot> layout;
    for (uint32_t i = 0; i < params_of(f); ++i) layout.push_back({i * 8, 8});
    queries_.layouts[0x10000 + f * 16] = layout;
  }
  std::vector<std::string> names;
  for (uint64_t f = 0; f < kFunctions; ++f) names.push_back("_Z" + std::to_string(std::to_string(f).size() + 1) + "k" +
                                                        std::to_string(f) + "v");
  auto launch = [&](uint64_t f, uint32_t corr) {
    uint64_t words[14];
    for (uint32_t i = 0; i < 14; ++i) words[i] = 0x1000 + i;  // below the table: no pointers
    const uint32_t at = uint32_t(f * 7 % params_of(f));
    words[at] = base + f * 64;
    void* args[14];
    for (uint32_t i = 0; i < 14; ++i) args[i] = &words[i];
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(0x10000 + f * 16), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, corr, names[f].c_str());
  };
  // The first 3000 twice, interleaved (within the limit: each layout looked up once), then
  // all 5000 (past it), then the first 10 again.
  std::vector<uint64_t> order;
  for (uint64_t f = 0; f < 3000; ++f) order.push_back(f);
  for (uint64_t f = 0; f < 3000; ++f) order.push_back((f * 1031) % 3000);
  EXPECT_EQ(queries_.layout_calls, 0);
  for (size_t i = 0; i < order.size(); ++i) launch(order[i], uint32_t(100 + i));
  EXPECT_EQ(queries_.layout_calls, 3000);
  for (uint64_t f = 0; f < kFunctions; ++f) order.push_back(f);
  for (uint64_t f = 0; f < 10; ++f) order.push_back(f);
  for (size_t i = 6000; i < order.size(); ++i) launch(order[i], uint32_t(100 + i));
  EXPECT_GT(queries_.layout_calls, int(kFunctions));  // the facts were dropped once and found again
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), order.size());
  for (size_t i = 0; i < ks.size(); ++i) {
    const uint64_t f = order[i];
    auto k = ks[i].as<trace::KernelLaunchHead>();
    ASSERT_EQ(k.correlation, 100 + i);
    ASSERT_EQ(t.str(k.name_id), "k" + std::to_string(f) + "()") << "launch " << i;
    ASSERT_EQ(k.nptrs, 1u) << "launch " << i << " of function " << f;
    ASSERT_EQ(ks[i].tail_words<trace::KernelLaunchHead>().front(), base + f * 64) << "launch " << i;
  }
}

// Setting defer_scan (tracer/deferred_scan.h): the flusher finishes each launch's scan against
// the allocation table as it was at the launch, and writes the record the launching thread
// would have written. One program, run with the scan deferred and with it made at the launch,
// gives the same kernel records byte for byte (but the clock): a segment freed, one allocated
// again at the same base with another size, a drain between launches, a second thread's
// allocation and launch, a struct of words with a repeated pointer and a host address, a
// cuBLAS call's ranges. The deferred run finished every launch in the flusher.
TEST_F(HandlerTest, DeferredScansGiveTheRecordsOfScansAtTheLaunch) {
  const uint64_t a = 0x7000'0000, b = 0x7200'0000, c = 0x7400'0000;
  queries_.layouts[0xD1] = {{0, 8}, {8, 8}, {16, 4}};
  queries_.layouts[0xD2] = {{0, 8}, {8, 8}};
  queries_.layouts[0xD3] = {{0, 40}};
  auto run = [&](bool defer) {
    RecorderOptions o;
    o.path = (dir_ / (defer ? "deferred.srace" : "inline.srace")).string();
    o.background_flusher = false;
    AllocationTable table;
    TraceRecorder rec(o);
    CudaCallHandler h(rec, table, queries_, nullptr);
    h.set_deferred_scan(defer);
    auto call = [&](ApiDomain d, uint32_t cbid, const void* params, uint32_t corr, const char* symbol) {
      h.on_call(ApiCall{d, true, cbid, symbol, params, 0, corr, 0x100});
      h.on_call(ApiCall{d, false, cbid, symbol, params, 0, corr, 0x100});
    };
    auto malloc_at = [&](uint64_t ptr, size_t bytes) {
      void* p = as_ptr<void>(ptr);
      cudaMalloc_v3020_params m{&p, bytes};
      call(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &m, 1, nullptr);
    };
    auto free_at = [&](uint64_t ptr) {
      cudaFree_v3020_params f{as_ptr<void>(ptr)};
      call(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, &f, 2, nullptr);
    };
    uint32_t corr = 100;
    auto launch = [&](uint64_t func, void** args) {
      cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 2, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
      call(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, corr++, "_Z1kPfS_i");
    };
    thread_state() = TracerThreadState{};
    malloc_at(a, 1 << 20);
    malloc_at(b, 64 << 10);
    uint64_t p0 = a + 0x10, p1 = b + 0x20, p2 = b + 0x1'F000;
    int n = 7;
    void* three[] = {&p0, &p1, &n};
    launch(0xD1, three);  // a and b
    rec.flush();          // its scan finished in this drain
    free_at(b);
    launch(0xD1, three);  // b gone
    malloc_at(b, 128 << 10);
    void* three_far[] = {&p0, &p2, &n};
    launch(0xD1, three_far);  // only the larger b holds p2
    std::thread other([&] {
      malloc_at(c, 4096);
      uint64_t q0 = c, q1 = a + 8;
      void* two[] = {&q0, &q1};
      launch(0xD2, two);
    });
    other.join();
    uint64_t words[5] = {a + 0x100, 0x7fff'1234'5678, a + 0x100, 12345, c + 64};
    void* one[] = {words};
    launch(0xD3, one);
    const trace::CallAccessEntry ranges[] = {{a, 4096, uint64_t(trace::AccessDir::kRead)}};
    auto& ts = thread_state();
    ts.blas_accesses = ranges;
    ts.blas_access_count = 1;
    launch(0xD1, three_far);
    ts.blas_accesses = nullptr;
    ts.blas_access_count = 0;
    free_at(a);
    launch(0xD1, three_far);  // a gone
    const uint64_t finished = h.deferred_scanner() ? h.deferred_scanner()->resolved() : 0;
    rec.close();
    EXPECT_EQ(h.deferred_scanner()->resolved() - finished, defer ? 6u : 0u);  // all but the first at close
    auto t = read_trace(o.path);
    auto ks = t.of(RecordKind::kKernelLaunch);
    for (auto& k : ks) {  // the clock differs between runs
      auto head = k.as<trace::KernelLaunchHead>();
      head.call.host_ts_ns = 0;
      std::memcpy(k.body.data(), &head, sizeof(head));
    }
    // In call order (the file holds each thread's records together).
    std::sort(ks.begin(), ks.end(), [](const auto& x, const auto& y) {
      return x.template as<trace::KernelLaunchHead>().call.seq < y.template as<trace::KernelLaunchHead>().call.seq;
    });
    return ks;
  };
  auto deferred = run(true);
  auto inline_scans = run(false);
  ASSERT_EQ(deferred.size(), 7u);
  ASSERT_EQ(inline_scans.size(), 7u);
  for (size_t i = 0; i < deferred.size(); ++i) EXPECT_EQ(deferred[i].body, inline_scans[i].body) << "launch " << i;
  EXPECT_EQ(deferred[0].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{a + 0x10, b + 0x20}));
  EXPECT_EQ(deferred[1].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{a + 0x10}));
  EXPECT_EQ(deferred[2].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{a + 0x10, b + 0x1'F000}));
  EXPECT_EQ(deferred[3].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{c, a + 8}));
  EXPECT_EQ(deferred[4].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{a + 0x100, c + 64}));
  EXPECT_TRUE(deferred[5].as<trace::KernelLaunchHead>().flags & trace::kKernelCallAccesses);
  EXPECT_EQ(deferred[6].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{b + 0x1'F000}));
}

// Precise mode's launch callback marks the launch it patched (the thread's precise_correlation)
// and may name its kernel (launch_function): that launch's record carries kKernelPrecise and
// that name, the next launch neither; the same with the scan deferred and made at the launch.
TEST_F(HandlerTest, APatchedLaunchIsMarkedPreciseWithTheLaunchCallbacksNameDeferredOrNot) {
  malloc_device(0x7000'0000, 4096);
  const uint64_t func = 0xFEC;
  queries_.layouts[func] = {{0, 8}};
  uint64_t p = 0x7000'0040;
  void* args[] = {&p};
  cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 1, 1, 1, 32, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
  for (const bool defer : {true, false}) {
    handler_->set_deferred_scan(defer);
    auto& ts = thread_state();
    ts.precise_correlation = 60;
    ts.launch_function = "_Z7patchedPf";
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 60, "_Z5otherPf");
    EXPECT_EQ(ts.precise_correlation, 0u);
    EXPECT_EQ(ts.launch_function, nullptr);
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 61, "_Z5otherPf");
  }
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    auto k = ks[i].as<trace::KernelLaunchHead>();
    const bool patched = i % 2 == 0;
    EXPECT_EQ(k.correlation, patched ? 60u : 61u) << i;
    EXPECT_EQ(k.flags, (patched ? uint32_t(trace::kKernelPrecise) : 0u) | uint32_t(trace::kKernelArgsScanned) |
                           uint32_t(trace::kKernelArgsHash2))
        << i;
    // The function's name is its first launch's (facts are cached per function).
    EXPECT_EQ(t.str(k.name_id), "patched(float*)") << i;
    EXPECT_EQ(ks[i].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0040})) << i;
    // Deferred or not: the same record but its CallInfo (seq and clock).
    EXPECT_EQ(std::vector<uint8_t>(ks[i].body.begin() + sizeof(trace::CallInfo), ks[i].body.end()),
              std::vector<uint8_t>(ks[i % 2].body.begin() + sizeof(trace::CallInfo), ks[i % 2].body.end()))
        << i;
  }
}

// Four threads allocate, launch, free and launch again, each at addresses of its own, while the
// background flusher drains every millisecond: every launch's deferred scan, finished whenever
// the flusher gets to it, sees exactly the allocations its thread had made (the pointer found
// after the malloc, none after the free), late launches and drains between them included.
TEST_F(HandlerTest, DeferredScansUnderConcurrentAllocationsSeeTheTableOfTheirLaunch) {
  RecorderOptions o;
  o.path = (dir_ / "concurrent.srace").string();
  o.period_ms = 1;
  AllocationTable table;
  TraceRecorder rec(o);
  CudaCallHandler h(rec, table, queries_, nullptr);
  queries_.layouts[0xC0] = {{0, 8}, {8, 4}};
  constexpr int kThreads = 4, kRounds = 1500;
  auto worker = [&](int t) {
    thread_state() = TracerThreadState{};
    auto call = [&](ApiDomain d, uint32_t cbid, const void* params, uint32_t corr, const char* symbol) {
      h.on_call(ApiCall{d, true, cbid, symbol, params, 0, corr, 0x100});
      h.on_call(ApiCall{d, false, cbid, symbol, params, 0, corr, 0x100});
    };
    const uint64_t base = 0x7000'0000 + uint64_t(t) * 0x100'0000;
    for (int i = 0; i < kRounds; ++i) {
      void* p = as_ptr<void>(base);
      cudaMalloc_v3020_params m{&p, 4096};
      call(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &m, 1, nullptr);
      uint64_t arg = base + 8;
      int n = i;
      void* args[] = {&arg, &n};
      cuLaunchKernel_params dp{as_ptr<CUfunc_st>(0xC0), 1, 1, 1, 32, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
      const uint32_t corr = uint32_t(t) << 24 | uint32_t(i) << 1;
      call(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, corr, "_Z1kPfi");
      cudaFree_v3020_params f{p};
      call(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, &f, 2, nullptr);
      call(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, corr | 1, "_Z1kPfi");
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  rec.close();
  auto ks = read_trace(o.path).of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), size_t(kThreads) * kRounds * 2);
  size_t wrong = 0;
  for (const auto& k : ks) {
    const uint64_t corr = k.as<trace::KernelLaunchHead>().correlation;
    const uint64_t base = 0x7000'0000 + (corr >> 24) * 0x100'0000;
    const auto expected = (corr & 1) ? std::vector<uint64_t>{} : std::vector<uint64_t>{base + 8};
    wrong += k.tail_words<trace::KernelLaunchHead>() != expected;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(h.deferred_scanner()->resolved(), size_t(kThreads) * kRounds * 2);
  EXPECT_EQ(h.deferred_scanner()->inexact(), 0u);
}

// The table's change log is taken by every drain, whether any launch was deferred or not: with
// defer_scan 0 a run's allocations do not pile up in it.
TEST_F(HandlerTest, EveryDrainTakesTheAllocationChangesDeferredLaunchesOrNot) {
  handler_->set_deferred_scan(false);
  for (int i = 0; i < 50; ++i) {
    malloc_device(0x7000'0000, 4096);
    cudaFree_v3020_params f{as_ptr<void>(0x7000'0000)};
    runtime(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, &f);
  }
  EXPECT_EQ(handler_->deferred_scanner()->log().size(), 100u);
  rec_->flush();
  EXPECT_EQ(handler_->deferred_scanner()->log().size(), 0u);
  EXPECT_EQ(handler_->deferred_scanner()->resolved(), 0u);
}

// A new recorder (a forked child's, set_recorder) has its own string ids: a function whose
// facts the thread has cached gets its name interned again there, and its layout looked up
// again, though its front entry is filled.
TEST_F(HandlerTest, ANewRecorderGetsItsOwnNamesForCachedFunctions) {
  malloc_device(0x7000'0000, 4096);
  const uint64_t func = 0xF00F;
  queries_.layouts[func] = {{0, 8}};
  uint64_t p = 0x7000'0080;
  void* args[] = {&p};
  cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 50, "_Z4fillPf");
  auto first = finish();
  ASSERT_EQ(first.of(RecordKind::kKernelLaunch).size(), 1u);
  RecorderOptions o;
  o.path = (dir_ / "child.srace").string();
  o.background_flusher = false;
  // Strings interned first in the new recorder, so that the old ids would name other strings.
  auto child = std::make_unique<TraceRecorder>(o);
  child->strings().intern("first string of the child");
  child->strings().intern("second string of the child");
  handler_->set_recorder(*child);
  EXPECT_EQ(handler_->deferred_scanner(), nullptr);  // made by the child's first launch, not inside fork()
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 51, "_Z4fillPf");
  ASSERT_NE(handler_->deferred_scanner(), nullptr);
  child->close();
  EXPECT_EQ(handler_->deferred_scanner()->resolved(), 1u);
  auto t = read_trace(o.path);
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 1u);
  auto k = ks[0].as<trace::KernelLaunchHead>();
  EXPECT_EQ(k.correlation, 51u);
  EXPECT_EQ(t.str(k.name_id), "fill(float*)");
  EXPECT_EQ(t.str(k.call.api_id), "cuLaunchKernel");
  EXPECT_EQ(ks[0].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0080}));
  EXPECT_EQ(queries_.layout_calls, 2);
  handler_->set_recorder(*rec_);  // before `child` goes
}

// The driver may hand a CUfunction handle out again once its module is unloaded: a kernel
// launched under a reused handle gets its own name and parameter layout, not the unloaded
// kernel's (every unloading call: module, library, context, primary context reset or release).
// Without an unload the cached facts stay (the twin): a launch asks the driver once per function.
TEST_F(HandlerTest, AFunctionHandleReusedAfterAnUnloadGetsTheNewKernelsNameAndLayout) {
  malloc_device(0x7000'0000, 4096);
  uint64_t p = 0x7000'0080, q = 0x7000'0100;
  int64_t n = 3;  // an int argument (4 bytes), in a word the first kernel's layout reads whole
  struct Unload {
    uint32_t cbid;
    const char* api;
  };
  const Unload unloads[] = {{0, ""},  // no unload: the twin
                            {CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, "cuModuleUnload"},
                            {CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload, "cuLibraryUnload"},
                            {CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2, "cuCtxDestroy"},
                            {CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset"},
                            {CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease"}};
  uint32_t corr = 100;
  int forgotten = 0;
  uint64_t func = 0xF100;
  for (const Unload& u : unloads) {
    SCOPED_TRACE(u.cbid == 0 ? "no unload" : u.api);
    ++func;  // a handle of its own per case
    // The first kernel: fill(float*), one pointer.
    queries_.layouts[func] = {{0, 8}};
    void* args1[] = {&p};
    cuLaunchKernel_params first{as_ptr<CUfunc_st>(func), 1, 1, 1, 32, 1, 1, 0, nullptr, args1, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &first, 0, ++corr, "_Z4fillPf");
    if (u.cbid != 0) {
      uint8_t params[64] = {};  // every unload's parameters: handles the handler does not read
      driver(u.cbid, params);
      ++forgotten;
    }
    // The same handle now names scale(int, float*): an int, then a pointer at offset 8.
    queries_.layouts[func] = {{0, 4}, {8, 8}};
    void* args2[] = {&n, &q};
    cuLaunchKernel_params second{as_ptr<CUfunc_st>(func), 1, 1, 1, 32, 1, 1, 0, nullptr, args2, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &second, 0, ++corr, "_Z5scaleiPf");
    EXPECT_EQ(queries_.forgotten, forgotten);
  }
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 2 * std::size(unloads));
  for (size_t i = 0; i < std::size(unloads); ++i) {
    SCOPED_TRACE(i);
    const auto a = ks[2 * i].as<trace::KernelLaunchHead>(), b = ks[2 * i + 1].as<trace::KernelLaunchHead>();
    if (unloads[i].cbid == 0) {
      // No unload: the second launch is taken for the first kernel (the facts are cached).
      EXPECT_EQ(t.str(a.name_id), "fill(float*)");
      EXPECT_EQ(t.str(b.name_id), "fill(float*)");
      EXPECT_EQ(ks[2 * i + 1].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{}));  // n is no pointer
      continue;
    }
    EXPECT_EQ(t.str(a.name_id), "fill(float*)");
    EXPECT_EQ(ks[2 * i].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0080}));
    EXPECT_EQ(t.str(b.name_id), "scale(int, float*)");
    EXPECT_EQ(ks[2 * i + 1].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0100}));
  }
  // One layout query per kernel: the first kernel's again after each unload.
  EXPECT_EQ(queries_.layout_calls, 1 + 2 * (int(std::size(unloads)) - 1));
  // An unload is no record.
  for (const auto& r : t.records) {
    if (r.body.size() < sizeof(trace::CallInfo) || r.kind == RecordKind::kNotice) continue;
    trace::CallInfo ci;
    std::memcpy(&ci, r.body.data(), sizeof ci);
    EXPECT_EQ(t.str(ci.api_id).find("Unload"), std::string::npos);
  }
}

TEST_F(HandlerTest, PackedArgumentBufferIsScannedAtLayoutOffsets) {
  malloc_device(0x7000'0000, 4096);
  const uint64_t func = 0xBEEF;
  queries_.layouts[func] = {{0, 8}, {8, 4}};
  uint8_t buf[16] = {};
  uint64_t p = 0x7000'0800;
  std::memcpy(buf, &p, 8);
  size_t size = sizeof buf;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 1, 1, 1, 32, 1, 1, 0, as_ptr<CUstream_st>(0x5551), nullptr, extra};
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 40, "k");
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 1u);
  auto k = ks[0].as<trace::KernelLaunchHead>();
  EXPECT_EQ(k.stream, 0x5551u);
  EXPECT_EQ(k.correlation, 40u);
  EXPECT_EQ(t.str(k.call.api_id), "cuLaunchKernel");
  EXPECT_EQ(ks[0].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0800}));
}

// Setting launch_corpus (bench/launch_replay.cpp reads it): after SKIP launches, COUNT are
// written with their function (once), the allocations their pointers fell into (once each),
// their parameter bytes, then the table live at the end; later launches are not written. The
// file is made by the first launch written (%p in its name: the process id), not before.
TEST_F(HandlerTest, ALaunchCorpusHoldsTheLaunchesAfterSkipUpToCount) {
  malloc_device(0x7000'0000, 4096);
  malloc_device(0x7100'0000, 256);
  const uint64_t func = 0xF00D;
  queries_.layouts[func] = {{0, 4}, {8, 8}};
  const auto path = dir_ / ("corpus." + std::to_string(getpid()) + ".txt");
  std::string why;
  auto corpus = LaunchCorpus::open((dir_ / "corpus.%p.txt").string() + ":1:2", &why);
  ASSERT_TRUE(corpus) << why;
  handler_->set_launch_corpus(corpus.get());
  int n = 0x0a0b0c0d;
  uint64_t ptr = 0x7000'0010;
  void* args[] = {&n, &ptr};
  cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 8, 2, 1, 256, 1, 1, 0, nullptr, args, nullptr};
  for (uint32_t i = 0; i < 4; ++i) {
    ptr = 0x7000'0010 + i;  // launch 1 (skipped) .. 4 (past COUNT)
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 40 + i, "_Z1kiPf");
    EXPECT_EQ(std::filesystem::exists(path), i > 0) << "after launch " << i + 1;
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "streamrace-launch-corpus 1\n"
            "func 0 f00d 2 0:4 8:8 _Z1kiPf\n"
            "alloc 70000000 1000 1\n"  // trace::AllocKind::kDevice
            "launch 0 1 8 2 1 256 1 1 0d0c0b0a1100007000000000\n"
            "launch 0 1 8 2 1 256 1 1 0d0c0b0a1200007000000000\n"
            "table 2\n"
            "alloc 70000000 1000 1\n"
            "alloc 71000000 100 1\n");
  EXPECT_EQ(finish().of(RecordKind::kKernelLaunch).size(), 4u);  // the trace has them all
  EXPECT_FALSE(LaunchCorpus::open("", &why));
  EXPECT_EQ(why, "launch_corpus: no file named in '' (PATH[:SKIP[:COUNT]])");
  EXPECT_FALSE(LaunchCorpus::open((dir_ / "no" / "such").string(), &why));
  EXPECT_EQ(why, "launch_corpus: cannot write " + (dir_ / "no" / "such").string() + ": No such file or directory");
}

// PyTorch's cat passes its inputs in a by-value struct of 128 pointer slots and fills only the
// first grid.y (tracer/kernel_signatures.h): a stale slot that happens to point at a live
// tensor is not an argument. The used slots are, and a kernel without that signature still
// has every word of the same struct scanned; so does cat with kernel_signatures off. Cat's
// parameters after the struct (output sizes and strides of a 4-entry struct filled up to the
// rank, seen on the H200 holding a word that read as a live block's address) are not scanned.
TEST_F(HandlerTest, CatKernelsScanOnlyTheInputSlotsTheLaunchUses) {
  malloc_device(0x7000'0000, 1 << 20);
  struct Metadata {
    uint64_t input[8];
    uint32_t offset[8];
  } meta{};
  meta.input[0] = 0x7000'1000;
  meta.input[1] = 0x7000'2000;
  meta.input[2] = 0x7000'3000;
  meta.input[5] = 0x7000'8000;  // stale: a live tensor's address left in an unused slot
  for (uint32_t i = 0; i < 8; ++i) meta.offset[i] = i * 64;
  uint64_t out = 0x7000'0000;
  struct SizeStride {
    uint32_t size[4], stride[4];
  } os{{8, 1024, 0x7000'9000, 0}, {0, 0, 0, 0}};  // words: size[2] | size[3] << 32 reads as a live tensor
  static_assert(sizeof(SizeStride) == 32);
  void* args[] = {&out, &meta, &os};
  const char* cat = "_ZN2at6native54_GLOBAL__N__CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj2EEEjLi3ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_";
  struct Launch {
    uint64_t func;
    const char* name;
    unsigned grid_y;
  };
  const Launch launches[] = {{0xCA7, cat, 3}, {0xCA7, cat, 6}, {0x0DD, "_Z6gatherPfS_", 3}};
  for (const auto& l : launches) {
    queries_.layouts[l.func] = {{0, 8}, {8, sizeof(Metadata)}, {8 + sizeof(Metadata), sizeof(SizeStride)}};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(l.func), 4, l.grid_y, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 50, l.name);
  }
  handler_->set_kernel_signatures(false);
  {
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(0xCA8), 4, 3, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    queries_.layouts[0xCA8] = {{0, 8}, {8, sizeof(Metadata)}, {8 + sizeof(Metadata), sizeof(SizeStride)}};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 51, cat);
  }
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 4u);
  const std::vector<uint64_t> used = {0x7000'0000, 0x7000'1000, 0x7000'2000, 0x7000'3000};
  const std::vector<uint64_t> all = {0x7000'0000, 0x7000'1000, 0x7000'2000, 0x7000'3000, 0x7000'8000, 0x7000'9000};
  const std::vector<uint64_t> six = {0x7000'0000, 0x7000'1000, 0x7000'2000, 0x7000'3000, 0x7000'8000};
  EXPECT_EQ(ks[0].tail_words<trace::KernelLaunchHead>(), used);  // grid.y 3: slots 0-2, no size word
  EXPECT_EQ(ks[0].as<trace::KernelLaunchHead>().flags,
            uint32_t(trace::kKernelArgsScanned) | uint32_t(trace::kKernelArgsHash2) | uint32_t(trace::kKernelArgsBySignature));
  EXPECT_EQ(ks[1].tail_words<trace::KernelLaunchHead>(), six);  // grid.y 6: slot 5 is an input
  EXPECT_EQ(ks[2].tail_words<trace::KernelLaunchHead>(), all);  // another kernel: every word
  EXPECT_EQ(ks[2].as<trace::KernelLaunchHead>().flags, uint32_t(trace::kKernelArgsScanned) | uint32_t(trace::kKernelArgsHash2));
  EXPECT_EQ(ks[3].tail_words<trace::KernelLaunchHead>(), all);  // signatures off
}

// (Setting defer_scan 0: the scan made at the launch, where the memo is.) A launch with the
// same function, parameter bytes and grid as an earlier one, the allocation table unchanged since, takes that launch's scan from the memo (its pointers, hash
// and flags); a change of the bytes, the grid or the table scans again and gives what a scan
// gives. Every launch below is checked against the pointers a scan finds.
namespace {
struct AddLaunch {
  uint32_t grid_x;
  uint64_t out, in;
  uint32_t n;
  const char* action;  // done before the launch
};
}  // namespace

TEST_F(HandlerTest, ALaunchLikeAnEarlierOneTakesItsScanOnlyWhileItsBytesGridAndTableAreUnchanged) {
  handler_->set_deferred_scan(false);  // the memo is the launching thread's scan's
  CudaCallHandler::reset_launch_memo_of_this_thread();
  malloc_device(0x7000'0000, 1 << 20);
  const uint64_t func = 0xAD1;
  queries_.layouts[func] = {{0, 4}, {4, 8}, {16, 16}};  // PyTorch's x.add_(1): n, the functor, two pointers
  const AddLaunch launches[] = {
      {4, 0x7000'0000, 0x7000'1000, 64, nullptr},   // 0: scanned, memoised
      {4, 0x7000'0000, 0x7000'1000, 64, nullptr},   // 1: hit
      {4, 0x7000'0000, 0x7000'1000, 64, nullptr},   // 2: hit
      {4, 0x7000'0000, 0x7000'1000, 65, nullptr},   // 3: n differs: scanned
      {4, 0x7000'0000, 0x7000'1000, 65, nullptr},   // 4: hit
      {4, 0x7000'0000, 0x7000'1000, 64, nullptr},   // 5: launch 0's again: hit (not only the last is kept)
      {8, 0x7000'0000, 0x7000'1000, 65, nullptr},   // 6: grid differs: scanned
      {8, 0x7000'0000, 0x7000'1000, 65, "free"},    // 7: the allocation went: scanned, no pointer
      {8, 0x7000'0000, 0x7000'1000, 65, nullptr},   // 8: hit (of no pointer)
      {8, 0x7000'0000, 0x7000'1000, 65, "malloc"},  // 9: back: scanned, both pointers
      {8, 0x7000'0000, 0x9000'0000, 65, nullptr},   // 10: in points nowhere traced: one pointer
      {8, 0x7000'0000, 0x9000'0000, 65, "malloc 9"},  // 11: now it does: scanned, two
      {8, 0x7000'0000, 0x9000'0000, 65, nullptr},   // 12: hit
  };
  const std::vector<uint64_t> both = {0x7000'0000, 0x7000'1000};
  const std::vector<std::vector<uint64_t>> expected = {
      both, both, both, both, both, both, both, {}, {}, both, {0x7000'0000}, {0x7000'0000, 0x9000'0000},
      {0x7000'0000, 0x9000'0000}};
  std::vector<uint64_t> hits;
  for (const auto& l : launches) {
    if (l.action != nullptr && std::string(l.action) == "free") {
      cudaFree_v3020_params f{as_ptr<void>(0x7000'0000)};
      runtime(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, &f);
    } else if (l.action != nullptr && std::string(l.action) == "malloc") {
      malloc_device(0x7000'0000, 1 << 20);
    } else if (l.action != nullptr) {
      malloc_device(0x9000'0000, 1 << 20);
    }
    struct {
      uint32_t n;
      float alpha = 1.0f, other = 1.0f;
      uint32_t pad = 0;
      uint64_t data[2];
    } p{l.n, 1.0f, 1.0f, 0, {l.out, l.in}};
    static_assert(sizeof(p) == 32);
    // The functor's bytes start at 4: the packed buffer as the driver's layout places it.
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), l.grid_x, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551),
                             nullptr, nullptr};
    size_t size = sizeof(p);
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &p, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    dp.extra = extra;
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 90, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2EEEEviT0_T1_");
    hits.push_back(CudaCallHandler::memo_hits_of_this_thread());
  }
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), std::size(launches));
  std::vector<uint64_t> hash;
  for (size_t i = 0; i < ks.size(); ++i) {
    const auto head = ks[i].as<trace::KernelLaunchHead>();
    EXPECT_EQ(ks[i].tail_words<trace::KernelLaunchHead>(), expected[i]) << i;
    EXPECT_EQ(head.flags, uint32_t(trace::kKernelArgsScanned) | uint32_t(trace::kKernelArgsHash2)) << i;
    EXPECT_EQ(head.grid[0], launches[i].grid_x) << i;
    uint64_t h;
    std::memcpy(&h, ks[i].body.data() + sizeof(head) + head.nptrs * sizeof(uint64_t), sizeof(h));
    hash.push_back(h);
  }
  // The hits took the memoised scan (counted), and their hashes are their originals'.
  const uint64_t h0 = hits[0];
  EXPECT_EQ(h0, 0u);
  EXPECT_EQ(hits, (std::vector<uint64_t>{0, 1, 2, 2, 3, 4, 4, 4, 5, 5, 5, 5, 6}));
  EXPECT_EQ(hash[1], hash[0]);
  EXPECT_EQ(hash[2], hash[0]);
  EXPECT_NE(hash[3], hash[0]);
  EXPECT_EQ(hash[4], hash[3]);
  EXPECT_EQ(hash[5], hash[0]);
  EXPECT_EQ(hash[6], hash[3]);  // the grid is not hashed
  EXPECT_NE(hash[7], hash[6]);  // no pointer: the addresses are scalars
  EXPECT_EQ(hash[8], hash[7]);
  EXPECT_EQ(hash[9], hash[6]);
  EXPECT_EQ(hash[12], hash[11]);
}

// Launches that all differ are all scanned; a function with fewer than 16 hits in its first
// 256 lookups is not memoised any more; launches with more pointers than a memo entry holds
// are never memoised (every one scanned); with the memo off (setting launch_memo 0) nothing
// is. Each gives what a scan gives.
TEST_F(HandlerTest, LaunchesUnlikeEveryEarlierOneAndLaunchesOfManyPointersAreScanned) {
  handler_->set_deferred_scan(false);  // the memo is the launching thread's scan's
  CudaCallHandler::reset_launch_memo_of_this_thread();
  malloc_device(0x7000'0000, 1 << 20);
  const uint64_t two = 0xAD2, stopped = 0xAD5;
  queries_.layouts[two] = {{0, 8}, {8, 8}};
  queries_.layouts[stopped] = {{0, 8}, {8, 8}};
  auto launch_two = [&](uint64_t func, uint64_t a, uint64_t b) {
    void* args[] = {&a, &b};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 1, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 91, "_Z1fPfm");
  };
  // 200 launches, each unlike every earlier one (7 buffers in turn), then one launch 20
  // times: 19 hits.
  for (uint64_t i = 0; i < 220; ++i) launch_two(two, i < 200 ? 0x7000'0000 + (i % 7) * 0x100 : 0x7000'0000, i < 200 ? i : 5);
  EXPECT_EQ(CudaCallHandler::memo_hits_of_this_thread(), 19u);
  // 300 such launches of another function: its trial of 256 lookups found no hit, so the 20
  // launches alike after them are scanned.
  for (uint64_t i = 0; i < 320; ++i) launch_two(stopped, i < 300 ? 0x7000'0000 + (i % 7) * 0x100 : 0x7000'0000, i < 300 ? i : 5);
  EXPECT_EQ(CudaCallHandler::memo_hits_of_this_thread(), 19u);
  // One 88-byte parameter of eleven pointers: its 12 words and 11 pointers do not fit an
  // entry's 19.
  const uint64_t eleven = 0xAD3;
  queries_.layouts[eleven] = {{0, 88}};
  uint64_t many[11];
  for (int k = 0; k < 11; ++k) many[k] = 0x7000'0000 + uint64_t(k) * 0x40;
  for (int i = 0; i < 5; ++i) {
    void* args[] = {many};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(eleven), 1, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 92, "_Z1g11Pointers");
  }
  EXPECT_EQ(CudaCallHandler::memo_hits_of_this_thread(), 19u);
  // Four pointer parameters: 8 words and 4 pointers fit: the first launch is memoised, the
  // next four hit.
  const uint64_t four = 0xAD6;
  queries_.layouts[four] = {{0, 8}, {8, 8}, {16, 8}, {24, 8}};
  for (int i = 0; i < 5; ++i) {
    void* args[] = {&many[0], &many[1], &many[2], &many[3]};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(four), 1, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 95, "_Z1hPfS_S_S_");
  }
  EXPECT_EQ(CudaCallHandler::memo_hits_of_this_thread(), 23u);
  // The memo off: the same launch five times, scanned five times.
  handler_->set_launch_memo(false);
  EXPECT_FALSE(handler_->launch_memo());
  for (int i = 0; i < 5; ++i) launch_two(two, 0x7000'0000, 5);
  EXPECT_EQ(CudaCallHandler::memo_hits_of_this_thread(), 23u);
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 220u + 320u + 5u + 5u + 5u);
  for (uint64_t i = 0; i < 220; ++i)
    ASSERT_EQ(ks[i].tail_words<trace::KernelLaunchHead>(),
              std::vector<uint64_t>{i < 200 ? 0x7000'0000 + (i % 7) * 0x100 : 0x7000'0000})
        << i;
  for (uint64_t i = 0; i < 320; ++i)
    ASSERT_EQ(ks[220 + i].tail_words<trace::KernelLaunchHead>(),
              std::vector<uint64_t>{i < 300 ? 0x7000'0000 + (i % 7) * 0x100 : 0x7000'0000})
        << i;
  for (uint64_t i = 540; i < 545; ++i)
    EXPECT_EQ(ks[i].tail_words<trace::KernelLaunchHead>(), std::vector<uint64_t>(many, many + 11)) << i;
  for (uint64_t i = 545; i < 550; ++i)
    EXPECT_EQ(ks[i].tail_words<trace::KernelLaunchHead>(), std::vector<uint64_t>(many, many + 4)) << i;
  for (uint64_t i = 550; i < 555; ++i)
    EXPECT_EQ(ks[i].tail_words<trace::KernelLaunchHead>(), std::vector<uint64_t>{0x7000'0000}) << i;
}

// Every 1,024th hit is scanned all the same and compared with the memo: a memoised outcome
// that differs from the scan's turns the memo off for the process, with a warning, and the
// record is the scan's.
TEST_F(HandlerTest, AMemoisedScanThatDiffersFromANewScanTurnsTheMemoOffWithAWarning) {
  handler_->set_deferred_scan(false);  // the memo is the launching thread's scan's
  CudaCallHandler::reset_launch_memo_of_this_thread();
  malloc_device(0x7000'0000, 1 << 20);
  const uint64_t func = 0xAD4;
  queries_.layouts[func] = {{0, 8}, {8, 8}};
  auto launch = [&] {
    uint64_t a = 0x7000'0000, b = 5;
    void* args[] = {&a, &b};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 1, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 94, "_Z1fPfm");
  };
  // 1,030 launches: 1,029 would hit, of which the 1,024th is checked (and agrees).
  for (int i = 0; i < 1030; ++i) launch();
  EXPECT_EQ(CudaCallHandler::memo_hits_of_this_thread(), 1028u);
  EXPECT_TRUE(handler_->launch_memo());
  // Every entry's hash made wrong, and the next hit checked: it differs.
  CudaCallHandler::spoil_launch_memo_of_this_thread();
  launch();
  EXPECT_FALSE(handler_->launch_memo());
  launch();
  EXPECT_EQ(CudaCallHandler::memo_hits_of_this_thread(), 1028u);
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 1032u);
  const auto first = ks[0].as<trace::KernelLaunchHead>();
  uint64_t h0;
  std::memcpy(&h0, ks[0].body.data() + sizeof(first) + first.nptrs * sizeof(uint64_t), sizeof(h0));
  for (size_t i = 0; i < ks.size(); ++i) {
    const auto head = ks[i].as<trace::KernelLaunchHead>();
    ASSERT_EQ(ks[i].tail_words<trace::KernelLaunchHead>(), std::vector<uint64_t>{0x7000'0000}) << i;
    uint64_t h;
    std::memcpy(&h, ks[i].body.data() + sizeof(head) + head.nptrs * sizeof(uint64_t), sizeof(h));
    ASSERT_EQ(h, h0) << i;  // the spoilt hash never reached a record
  }
  std::vector<std::string> warnings;
  for (const auto& n : t.of(RecordKind::kNotice))
    if (n.as<trace::NoticeHead>().level == trace::NoticeLevel::kWarning)
      warnings.emplace_back(n.body.begin() + sizeof(trace::NoticeHead), n.body.end());
  EXPECT_EQ(warnings, std::vector<std::string>{
                          "a memoised kernel-argument scan differed from a new scan of the same launch: the launch "
                          "memo is off for the rest of the process (please report this)"});
}

// The word after a scanned launch's pointers hashes its scalars: the same scalars with other
// addresses give the same hash (addresses change from step to step, signatures must not), a
// different scalar or a different pattern of repeated pointers gives another.
// A kernel launched inside a cuBLAS call (tracer/cublas_interposer.cpp sets the thread's
// ranges for the call's duration) carries the call's ranges after its hash; one after it none.
TEST_F(HandlerTest, KernelsInsideACublasCallCarryItsRanges) {
  malloc_device(0x7000'0000, 1 << 20);
  const uint64_t func = 0xB1A5;
  queries_.layouts[func] = {{0, 8}, {8, 8}};
  uint64_t a = 0x7000'0000, d = 0x7008'0000;
  void* args[] = {&a, &d};
  const trace::CallAccessEntry ranges[] = {{a, 4096, uint64_t(trace::AccessDir::kRead)},
                                           {d, 2048, uint64_t(trace::AccessDir::kWrite) | trace::kCallAccessHull}};
  auto& ts = thread_state();
  ts.blas_depth = 1;
  ts.blas_accesses = ranges;
  ts.blas_access_count = 2;
  cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 4, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 70, "nvjet_sm90_tst");
  ts.blas_depth = 0;
  ts.blas_accesses = nullptr;
  ts.blas_access_count = 0;
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 71, "nvjet_sm90_tst");
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 2u);
  auto in_call = ks[0].as<trace::KernelLaunchHead>();
  EXPECT_TRUE(in_call.flags & trace::kKernelCallAccesses);
  ASSERT_EQ(in_call.nptrs, 2u);
  ASSERT_EQ(ks[0].body.size(), sizeof(in_call) + (2 + 1 + 1 + 6) * sizeof(uint64_t));
  std::vector<uint64_t> words((ks[0].body.size() - sizeof(in_call)) / sizeof(uint64_t));
  std::memcpy(words.data(), ks[0].body.data() + sizeof(in_call), words.size() * sizeof(uint64_t));
  EXPECT_EQ(words[0], a);
  EXPECT_EQ(words[1], d);
  EXPECT_EQ(std::vector<uint64_t>(words.begin() + 3, words.end()),
            (std::vector<uint64_t>{2, a, 4096, uint64_t(trace::AccessDir::kRead), d, 2048,
                                   uint64_t(trace::AccessDir::kWrite) | trace::kCallAccessHull}));
  auto after = ks[1].as<trace::KernelLaunchHead>();
  EXPECT_FALSE(after.flags & trace::kKernelCallAccesses);
  EXPECT_EQ(ks[1].body.size(), sizeof(after) + (2 + 1) * sizeof(uint64_t));
}

TEST_F(HandlerTest, ArgumentsHashKeysTheScalarsNotTheAddresses) {
  malloc_device(0x7000'0000, 1 << 20);
  const uint64_t func = 0xBEE;
  queries_.layouts[func] = {{0, 4}, {8, 8}, {16, 8}, {24, 2}};
  struct Launch {
    int n;
    uint64_t a, b;
    uint16_t flag;
  };
  const Launch launches[] = {
      {1024, 0x7000'0000, 0x7001'0000, 1},  // 0
      {1024, 0x7002'0000, 0x7004'0000, 1},  // 1: other addresses: same hash as 0
      {1000, 0x7000'0000, 0x7001'0000, 1},  // 2: another n
      {1024, 0x7000'0000, 0x7000'0000, 1},  // 3: b is a: one pointer, used twice
      {1024, 0x7000'0000, 0x7001'0000, 2},  // 4: the 2-byte scalar differs
      {1024, 0x7000'0000, 0x9999'0000, 1},  // 5: b points nowhere traced: a scalar
      {1024, 0x7000'0000, 0x9999'0001, 1},  // 6: so its value counts
  };
  for (const auto& l : launches) {
    Launch v = l;
    void* args[] = {&v.n, &v.a, &v.b, &v.flag};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 4, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 60, "_Z1kiPfS_t");
  }
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 7u);
  std::vector<uint64_t> hash;
  for (const auto& k : ks) {
    auto head = k.as<trace::KernelLaunchHead>();
    ASSERT_EQ(head.flags & (trace::kKernelArgsHash | trace::kKernelArgsHash2), uint32_t(trace::kKernelArgsHash2));
    ASSERT_EQ(k.body.size(), sizeof(head) + (head.nptrs + 1) * sizeof(uint64_t));
    uint64_t h;
    std::memcpy(&h, k.body.data() + sizeof(head) + head.nptrs * sizeof(uint64_t), sizeof(h));
    hash.push_back(h);
  }
  EXPECT_EQ(ks[1].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7002'0000, 0x7004'0000}));
  EXPECT_EQ(ks[3].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'0000}));
  EXPECT_EQ(hash[0], hash[1]);
  for (size_t i : {2u, 3u, 4u, 5u}) EXPECT_NE(hash[0], hash[i]) << i;
  EXPECT_NE(hash[5], hash[6]);
  // The values themselves: traces and learnt signature files hold them, so the function never
  // changes, however the tracer computes it: XXH3_64bits (trace format 1.5) of, per parameter,
  // its size, then each 8-byte word (a pointer as a mark and its index), then the bytes left
  // over, as little-endian words. (1.4's multiply-xor chain of the same words is no longer
  // computed anywhere: its values are only read, from old traces and signature files.)
  auto reference = [](std::initializer_list<uint64_t> words) {
    const std::vector<uint64_t> v(words);
    return uint64_t(XXH3_64bits(v.data(), v.size() * sizeof(uint64_t)));
  };
  constexpr uint64_t kMark = 0x5A17'0000'0000'0000ull;
  EXPECT_EQ(hash[0], reference({4, 1024, 8, kMark + 0, 8, kMark + 1, 2, 1}));
  EXPECT_EQ(hash[3], reference({4, 1024, 8, kMark + 0, 8, kMark + 0, 2, 1}));
  EXPECT_EQ(hash[5], reference({4, 1024, 8, kMark + 0, 8, 0x9999'0000, 2, 1}));
  // And one value as a number: another xxHash release, or another word order, fails here.
  EXPECT_EQ(hash[0], 0x894A'F1BB'F8AC'FD19ull) << std::hex << hash[0];
}

// Parameters of more words than the tracer's buffer holds (CUDA 12.1 allows 32 KiB) are hashed
// through XXH3's streaming state: the same value as all their words hashed at once.
TEST_F(HandlerTest, ArgumentsHashOfLongParametersIsTheHashOfAllTheirWords) {
  malloc_device(0x7000'0000, 1 << 20);
  const uint64_t func = 0xB16;
  for (size_t words : {510u, 511u, 512u, 1300u, 4000u}) {
    // One parameter of `words` 8-byte words (a pointer at word 7), then a 4-byte one.
    std::vector<uint64_t> big(words);
    for (size_t j = 0; j < words; ++j) big[j] = j * 0x9E37'79B9ull + 3;
    big[7] = 0x7000'0100;
    uint32_t tail = 0xABCD;
    queries_.layouts[func + words] = {{0, uint32_t(words * 8)}, {uint32_t(words * 8), 4}};
    void* args[] = {big.data(), &tail};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func + words), 4, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 80 + words, "_Z3bigv");
  }
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 5u);
  size_t at = 0;
  for (size_t words : {510u, 511u, 512u, 1300u, 4000u}) {
    std::vector<uint64_t> fed = {words * 8};
    for (size_t j = 0; j < words; ++j) fed.push_back(j == 7 ? 0x5A17'0000'0000'0000ull : j * 0x9E37'79B9ull + 3);
    fed.push_back(4);
    fed.push_back(0xABCD);
    const auto& k = ks[at++];
    ASSERT_EQ(k.tail_words<trace::KernelLaunchHead>(), std::vector<uint64_t>{0x7000'0100}) << words;
    ASSERT_EQ(k.body.size(), sizeof(trace::KernelLaunchHead) + 2 * sizeof(uint64_t)) << words;
    uint64_t h;
    std::memcpy(&h, k.body.data() + sizeof(trace::KernelLaunchHead) + sizeof(uint64_t), sizeof(h));
    EXPECT_EQ(h, XXH3_64bits(fed.data(), fed.size() * sizeof(uint64_t))) << words;
  }
}

// PyTorch's vectorized elementwise kernels run only with every pointer aligned to VEC elements
// (tracer/kernel_signatures.h): a word that is not (a float scale under stack garbage) is no
// argument of `vectorized_elementwise_kernel<8, ...>`, while an aligned one is; a kernel without
// that name, or with kernel signatures off, keeps the misaligned word.
TEST_F(HandlerTest, VectorizedKernelsTakeOnlyAlignedPointers) {
  malloc_device(0x7000'0000, 1 << 20);
  struct Params {
    uint64_t scale_word;  // low half a float, high half garbage that reads as a live address
    uint64_t out;
  } prm{0x7000'1004, 0x7000'2000};
  void* args[] = {&prm.scale_word, &prm.out};
  const char* vec8 = "_ZN2at6native29vectorized_elementwise_kernelILi8EZZZNS0_12_GLOBAL__N_1masked_scaleEvEEvifT1_";
  const char* vec2 = "_ZN2at6native29vectorized_elementwise_kernelILi2EZZZNS0_3addEvEEvifT1_";
  const std::pair<uint64_t, const char*> launches[] = {{0xA8, vec8}, {0xA2, vec2}, {0xA0, "_Z5otherPfS_"}};
  for (auto [func, name] : launches) {
    queries_.layouts[func] = {{0, 8}, {8, 8}};
    cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 4, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
    driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 70, name);
  }
  handler_->set_kernel_signatures(false);
  queries_.layouts[0xA9] = {{0, 8}, {8, 8}};
  cuLaunchKernel_params dp{as_ptr<CUfunc_st>(0xA9), 4, 1, 1, 128, 1, 1, 0, as_ptr<CUstream_st>(0x5551), args, nullptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dp, 0, 71, vec8);
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 4u);
  const std::vector<uint64_t> both = {0x7000'1004, 0x7000'2000};
  EXPECT_EQ(ks[0].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{0x7000'2000}));  // 8: 0x...1004 is not
  EXPECT_EQ(ks[1].tail_words<trace::KernelLaunchHead>(), both);  // 2: 4-byte aligned is aligned enough
  EXPECT_EQ(ks[2].tail_words<trace::KernelLaunchHead>(), both);
  EXPECT_EQ(ks[3].tail_words<trace::KernelLaunchHead>(), both);  // signatures off
}

TEST_F(HandlerTest, RuntimeLaunchWithoutDriverCallbackIsStillRecordedUnscanned) {
  int n = 3;
  void* args[] = {&n};
  cudaLaunchKernel_v7000_params rp{as_ptr<void>(0xABC), dim3(1, 1, 1), dim3(32, 1, 1), args, 0,
                                   as_ptr<CUstream_st>(0x5551)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rp, 0, 50, "spin");
  auto t = finish();
  auto ks = t.of(RecordKind::kKernelLaunch);
  ASSERT_EQ(ks.size(), 1u);
  auto k = ks[0].as<trace::KernelLaunchHead>();
  EXPECT_EQ(k.flags, 0u);
  EXPECT_EQ(k.nptrs, 0u);
  EXPECT_EQ(k.correlation, 50u);
  EXPECT_EQ(t.str(k.name_id), "spin");
}

// The lean path (on_call: a driver launch's exit outside runtime and NCCL calls, its scan
// deferred) writes the records the general path (on_driver, emit, kernel) writes, byte for
// byte but the clock: cuLaunchKernel on the legacy stream (0 and 1), the per-thread stream (2)
// and a stream of its own, cuLaunchKernel_ptsz on stream 0, cuLaunchKernelEx with its stream in
// the config and its arguments packed in `extra`, a launch the Sanitizer API patched, a failed
// launch, a launch inside an NCCL call, a function with no layout, a second context; ten
// parameters (past the facts' inline slots) of sizes the words' copy takes apart, with a library
// call's ranges; a parameter without bytes (the lean path gives the launch back, and the general
// path still finds what the launch callback left: the patched flag and name). Each record's
// stream and device are checked as well, so a path that got them wrong on both runs fails too.
TEST_F(HandlerTest, ALeanLaunchGivesTheRecordOfTheGeneralPath) {
  const uint64_t a = 0x7000'0000;
  queries_.layouts[0xE1] = {{0, 8}, {8, 4}};
  queries_.layouts[0xE2] = {{0, 8}, {8, 8}};
  queries_.layouts[0xE3] = {{0, 8}, {8, 4}};
  queries_.layouts[0xE5] = {{0, 8}, {8, 4}};
  const std::vector<uint32_t> sizes = {8, 1, 2, 4, 12, 16, 24, 8, 3, 8};
  queries_.layouts[0xE4] = {};
  for (uint32_t i = 0, at = 0; i < sizes.size(); at += 24, ++i) queries_.layouts[0xE4].push_back({at, sizes[i]});
  auto run = [&](bool lean) {
    RecorderOptions o;
    o.path = (dir_ / (lean ? "lean.srace" : "general.srace")).string();
    o.background_flusher = false;
    AllocationTable table;
    TraceRecorder rec(o);
    CudaCallHandler h(rec, table, queries_, nullptr);
    h.set_lean_launches(lean);
    auto call = [&](ApiDomain d, uint32_t cbid, const void* params, uint32_t corr, const char* symbol, int32_t result,
                    uint64_t context) {
      h.on_call(ApiCall{d, true, cbid, symbol, params, 0, corr, context});
      h.on_call(ApiCall{d, false, cbid, symbol, params, result, corr, context});
    };
    thread_state() = TracerThreadState{};
    void* p = as_ptr<void>(a);
    cudaMalloc_v3020_params m{&p, 1 << 20};
    call(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, &m, 1, nullptr, 0, 0x100);
    uint64_t p0 = a + 0x40;
    int n = 9;
    void* args[] = {&p0, &n};
    uint32_t corr = 200;
    auto launch = [&](uint32_t cbid, uint64_t func, uint64_t stream, int32_t result = 0, uint64_t context = 0x100) {
      cuLaunchKernel_params dp{as_ptr<CUfunc_st>(func), 3, 2, 1, 64, 2, 1, 0, as_ptr<CUstream_st>(stream), args, nullptr};
      call(ApiDomain::kDriver, cbid, &dp, corr++, "_Z4leanPfi", result, context);
    };
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE1, 0);
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE1, 1);
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE1, 2);
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE1, 0x5551);
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, 0xE1, 0);
    queries_.device = 3;
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE1, 0, 0, 0x200);  // another context: device 3
    queries_.device = 1;
    // cuLaunchKernelEx: its stream and shape in the config, its arguments packed in `extra`.
    struct {
      uint64_t ptr;
      uint64_t words;
    } packed{a + 0x80, 0x1234};
    size_t size = sizeof packed;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    CUlaunchConfig cfg{};
    cfg.gridDimX = 5, cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = as_ptr<CUstream_st>(0x6661);
    cuLaunchKernelEx_params ex{&cfg, as_ptr<CUfunc_st>(0xE2), nullptr, extra};
    call(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &ex, corr++, "_Z2exPfm", 0, 0x100);
    cfg.hStream = nullptr;
    call(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &ex, corr++, "_Z2exPfm", 0, 0x100);
    auto& ts = thread_state();
    ts.precise_correlation = corr;  // patched: the launch callback's name
    ts.launch_function = "_Z7patchedPfi";
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE3, 0x5551);
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE1, 0x5551, 1);  // failed: not recorded
    ts.nccl_depth = 1;
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE1, 0x5551);  // NCCL's own: not recorded
    ts.nccl_depth = 0;
    launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0xE9, 0x5551);  // no layout: unscanned
    uint8_t bytes[10][24];
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j < 24; ++j) bytes[i][j] = uint8_t(0x11 * i + j);
    const uint64_t inside = a + 0x100;
    std::memcpy(bytes[7], &inside, 8);  // a pointer into the allocation
    void* ten[10];
    for (int i = 0; i < 10; ++i) ten[i] = bytes[i];
    const trace::CallAccessEntry ranges[] = {{a + 0x200, 64, 1}, {a + 0x400, 32, 2}};
    ts.blas_accesses = ranges;
    ts.blas_access_count = 2;
    cuLaunchKernel_params many{as_ptr<CUfunc_st>(0xE4), 1, 1, 1, 32, 1, 1, 0, as_ptr<CUstream_st>(0x5551), ten, nullptr};
    call(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &many, corr++, "_Z4manyv", 0, 0x100);
    ts.blas_access_count = 0;
    ts.blas_accesses = nullptr;
    void* holey[] = {&p0, nullptr};
    ts.precise_correlation = corr;
    ts.launch_function = "_Z7patchedPfi";
    cuLaunchKernel_params hole{as_ptr<CUfunc_st>(0xE5), 1, 1, 1, 32, 1, 1, 0, as_ptr<CUstream_st>(0x5551), holey, nullptr};
    call(ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &hole, corr++, "_Z4leanPfi", 0, 0x100);
    rec.close();
    auto t = read_trace(o.path);
    auto ks = t.of(RecordKind::kKernelLaunch);
    std::vector<std::string> names;
    for (auto& k : ks) {  // the clock differs between runs
      auto head = k.as<trace::KernelLaunchHead>();
      names.push_back(t.str(head.name_id));
      head.call.host_ts_ns = 0;
      std::memcpy(k.body.data(), &head, sizeof(head));
    }
    return std::pair{ks, names};
  };
  auto [lean, lean_names] = run(true);
  auto [general, general_names] = run(false);
  ASSERT_EQ(lean.size(), 12u);
  ASSERT_EQ(general.size(), 12u);
  for (size_t i = 0; i < lean.size(); ++i) EXPECT_EQ(lean[i].body, general[i].body) << "launch " << i;
  EXPECT_EQ(lean_names, general_names);
  const uint32_t me = 0;  // the recorder's index of this thread, the only one
  const std::vector<std::tuple<uint64_t, uint32_t, uint32_t, uint32_t>> expected = {
      // stream, device, correlation, pointers
      {trace::legacy_stream(1), 1, 200, 1},
      {trace::legacy_stream(1), 1, 201, 1},
      {trace::per_thread_stream(me, 1), 1, 202, 1},
      {0x5551, 1, 203, 1},
      {trace::per_thread_stream(me, 1), 1, 204, 1},
      {trace::legacy_stream(3), 3, 205, 1},
      {0x6661, 1, 206, 1},
      {trace::per_thread_stream(me, 1), 1, 207, 1},
      {0x5551, 1, 208, 1},
      {0x5551, 1, 211, 0},
      {0x5551, 1, 212, 1},  // the pointer in the eighth parameter
      {0x5551, 1, 213, 1},  // scanned where it launched: the parameter without bytes skipped
  };
  for (size_t i = 0; i < lean.size(); ++i) {
    const auto k = lean[i].as<trace::KernelLaunchHead>();
    EXPECT_EQ(k.stream, std::get<0>(expected[i])) << "launch " << i;
    EXPECT_EQ(k.device, std::get<1>(expected[i])) << "launch " << i;
    EXPECT_EQ(k.correlation, std::get<2>(expected[i])) << "launch " << i;
    EXPECT_EQ(k.nptrs, std::get<3>(expected[i])) << "launch " << i;
  }
  EXPECT_EQ(lean[6].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{a + 0x80}));
  EXPECT_EQ(lean[6].as<trace::KernelLaunchHead>().grid[0], 5u);
  EXPECT_EQ(lean[6].as<trace::KernelLaunchHead>().block[0], 256u);
  EXPECT_EQ(lean[8].as<trace::KernelLaunchHead>().flags & trace::kKernelPrecise, uint32_t(trace::kKernelPrecise));
  EXPECT_EQ(lean_names[8], "patched(float*, int)");
  EXPECT_EQ(lean_names[0], "lean(float*, int)");
  EXPECT_EQ(lean[10].tail_words<trace::KernelLaunchHead>(), (std::vector<uint64_t>{a + 0x100}));
  EXPECT_NE(lean[10].as<trace::KernelLaunchHead>().flags & trace::kKernelCallAccesses, 0u);
  EXPECT_EQ(lean[10].body.size(), sizeof(trace::KernelLaunchHead) + (1 + 1 + 1 + 2 * 3) * 8);  // pointer, hash, ranges
  EXPECT_EQ(lean[11].as<trace::KernelLaunchHead>().flags & trace::kKernelPrecise, uint32_t(trace::kKernelPrecise));
  EXPECT_EQ(lean_names[11], "patched(float*, int)");
}

TEST_F(HandlerTest, NcclInternalLaunchesAreSuppressedButLendTheirCorrelation) {
  thread_state().nccl_depth = 1;
  thread_state().nccl_launch_correlation = 0;
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cuLaunchKernelEx_params dp{&cfg, as_ptr<CUfunc_st>(0x77), nullptr, nullptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &dp, 0, 61, "ncclDevKernel");
  driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &dp, 0, 62, "ncclDevKernel");
  EXPECT_EQ(thread_state().nccl_launch_correlation, 61u);
  thread_state().nccl_depth = 0;
  rec_->close();
  EXPECT_FALSE(rec_->file_created());  // nothing recorded: no file at all
  EXPECT_EQ(queries_.layout_calls, 0);
}

// The tracer records only the free; that cudaFree first waits for the device is the
// analyzer's rule (tests/analyzer: FreeOrdersTheHostAfterTheDevice).
TEST_F(HandlerTest, CudaFreeIsRecordedAsAFreeOnly) {
  malloc_device(0x7000'0000, 4096);
  cudaFree_v3020_params init{nullptr};  // cudaFree(0): context initialisation only
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, &init);
  cudaFree_v3020_params f{as_ptr<void>(0x7000'0000)};
  runtime_enter(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, &f);
  cuMemFree_v2_params df{0x7000'0000};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &df);
  runtime_exit(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, &f);
  auto t = finish();
  ASSERT_EQ(t.records.size(), 2u);
  EXPECT_EQ(t.records[0].kind, RecordKind::kAlloc);
  EXPECT_TRUE(t.of(RecordKind::kDeviceSynchronize).empty());
  ASSERT_EQ(t.records[1].kind, RecordKind::kFree);
  auto fr = t.records[1].as<trace::Free>();
  EXPECT_EQ(fr.ptr, 0x7000'0000u);
  EXPECT_EQ(fr.kind, trace::AllocKind::kDevice);
  EXPECT_EQ(fr.device, 1u);
  EXPECT_EQ(fr.stream, 0u);
  EXPECT_EQ(fr.call.seq, 1u);
  EXPECT_EQ(t.str(fr.call.api_id), "cudaFree");
  EXPECT_EQ(allocs_.size(), 0u);
}

TEST_F(HandlerTest, DriverFreesAndFreeArrayAreFreesOnly) {
  cuMemAlloc_v2_params a{nullptr, 4096};
  CUdeviceptr dptr = 0x7400'0000;
  a.dptr = &dptr;
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &a);
  cuMemFree_v2_params f{dptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f);
  void* host = as_ptr<void>(0x5100'0000);
  cudaMallocHost_v3020_params mh{&host, 256};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, &mh);
  cudaFreeHost_v3020_params fh{host};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, &fh);
  cudaFreeArray_v3020_params none{nullptr};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020, &none);
  cudaFreeArray_v3020_params fa{as_ptr<cudaArray>(0xA770)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaFreeArray_v3020, &fa);
  auto t = finish();
  std::vector<RecordKind> kinds;
  for (auto& rec : t.records) kinds.push_back(rec.kind);
  EXPECT_EQ(kinds, (std::vector<RecordKind>{RecordKind::kAlloc, RecordKind::kFree, RecordKind::kAlloc,
                                            RecordKind::kFree, RecordKind::kFree}));
  auto f0 = t.records[1].as<trace::Free>();
  EXPECT_EQ(f0.ptr, 0x7400'0000u);
  EXPECT_EQ(f0.kind, trace::AllocKind::kDevice);
  EXPECT_EQ(t.str(f0.call.api_id), "cuMemFree_v2");
  EXPECT_EQ(t.records[3].as<trace::Free>().kind, trace::AllocKind::kHostPinned);
  auto fa_rec = t.records[4].as<trace::Free>();
  EXPECT_EQ(fa_rec.ptr, 0xA770u);
  EXPECT_EQ(fa_rec.kind, trace::AllocKind::kArray);
  EXPECT_EQ(fa_rec.device, 1u);
  EXPECT_EQ(t.str(fa_rec.call.api_id), "cudaFreeArray");
}

TEST_F(HandlerTest, DriverCallsOutsideARuntimeCallAreRecordedWithTheirOwnNames) {
  malloc_device(0x7000'0000, 4096);
  cuMemsetD32Async_params s{0x7000'0000, 7, 16, nullptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, &s, 0, 81);
  cuMemsetD8_v2_params s8{0x7000'0100, 1, 10};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds, &s8, 0, 82);
  char host[32];
  cuMemcpyDtoHAsync_v2_params c{host, 0x7000'0000, 32, as_ptr<CUstream_st>(0x5551)};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, &c, 0, 83);
  cuStreamWaitEvent_params w{nullptr, as_ptr<CUevent_st>(0xE2), 0};
  driver(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz, &w, 0, 84);
  cuStreamQuery_params q{as_ptr<CUstream_st>(0x5552)};
  driver(CUPTI_DRIVER_TRACE_CBID_cuStreamQuery, &q, /*CUDA_ERROR_NOT_READY*/ 600, 85);
  driver(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, nullptr, 0, 86);
  auto t = finish();
  ASSERT_EQ(t.records.size(), 7u);
  auto m32 = t.records[1].as<trace::Memset>();
  EXPECT_EQ(m32.bytes, 64u);
  EXPECT_EQ(m32.is_async, 1);
  EXPECT_EQ(m32.stream, trace::legacy_stream(1));
  EXPECT_EQ(m32.correlation, 81u);
  EXPECT_EQ(t.str(m32.call.api_id), "cuMemsetD32Async");
  auto m8 = t.records[2].as<trace::Memset>();
  EXPECT_EQ(m8.bytes, 10u);
  EXPECT_EQ(m8.is_async, 0);
  EXPECT_EQ(m8.stream, trace::per_thread_stream(0, 1));
  EXPECT_EQ(t.str(m8.call.api_id), "cuMemsetD8_v2");
  auto cp = t.records[3].as<trace::Memcpy>();
  EXPECT_EQ(cp.dst, H(host));
  EXPECT_EQ(cp.src, 0x7000'0000u);
  EXPECT_EQ(cp.copy_kind, trace::CopyKind::kDeviceToHost);
  EXPECT_EQ(cp.stream, 0x5551u);
  EXPECT_EQ(cp.is_async, 1);
  auto wr = t.records[4].as<trace::StreamWaitEvent>();
  EXPECT_EQ(wr.stream, trace::per_thread_stream(0, 1));
  EXPECT_EQ(wr.event, 0xE2u);
  auto qr = t.records[5].as<trace::StreamQuery>();
  EXPECT_EQ(qr.stream, 0x5552u);
  EXPECT_EQ(qr.result, 600);
  EXPECT_EQ(t.records[6].kind, RecordKind::kDeviceSynchronize);
  EXPECT_EQ(t.str(t.records[6].as<trace::DeviceSynchronize>().call.api_id), "cuCtxSynchronize");
}

// ---------------------------------------------------------------------------------------
// The call table

// Step markers and window edges: NVTX ranges as CUPTI's NVTX callbacks deliver them, and
// cudaProfilerStart/Stop as call table rows. Only the calls inside the window are written.
TEST_F(HandlerTest, NvtxRangesCountStepsAndOpenTheirWindow) {
  use_capture("nvtx:train", "step");
  cudaStreamSynchronize_v3020_params ss{as_ptr<CUstream_st>(0x5552)};
  nvtxRangePushA_params step{"step"};
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePushA, &step);  // step 0, outside
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &ss);
  nvtxRangePop_params pop{};
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePop, &pop);
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = "train";
  nvtxRangePushEx_params train{&attr};
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePushEx, &train);  // the window opens
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePushA, &step);    // step 1, inside
  nvtxRangePushA_params other{"forward"};
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePushA, &other);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &ss);
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePop, &pop);  // forward
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePop, &pop);  // step
  handler_->markers().on_nvtx(CUPTI_CBID_NVTX_nvtxRangePop, &pop);  // train: the window closes
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &ss);
  auto t = finish();
  std::vector<std::pair<RecordKind, std::string>> got;
  for (auto& r : t.records) {
    std::string what;
    if (r.kind == RecordKind::kCaptureMark) {
      auto m = r.as<trace::CaptureMark>();
      what = std::to_string(int(m.action)) + "@" + std::to_string(m.step) + " " + t.str(m.call.api_id);
    }
    got.emplace_back(r.kind, what);
  }
  EXPECT_EQ(got, (std::vector<std::pair<RecordKind, std::string>>{
                     {RecordKind::kCaptureMark, "2@0 nvtxRangePushEx"},  // open, in step 0
                     {RecordKind::kCaptureMark, "3@0 nvtxRangePushEx"},  // state end (no live state)
                     {RecordKind::kCaptureMark, "1@1 nvtxRangePushA"},   // step 1 begins
                     {RecordKind::kStreamSynchronize, ""},
                     {RecordKind::kCaptureMark, "4@1 nvtxRangePop"}}));  // close
  auto open = t.records[0].as<trace::CaptureMark>();
  EXPECT_EQ(open.reason, trace::CaptureReason::kNvtxRange);
  EXPECT_EQ(open.steps_dropped, 1u);
  EXPECT_EQ(open.calls_left_out, 2u);  // step 0's marker and its sync
  EXPECT_EQ(t.header.extra.at("capture"), "nvtx range 'train'");
  EXPECT_EQ(t.header.extra.at("step_range"), "step");
}

TEST_F(HandlerTest, ProfilerStartAndStopBoundTheWindow) {
  use_capture("profiler", "");
  cudaStreamSynchronize_v3020_params ss{as_ptr<CUstream_st>(0x5552)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &ss);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, nullptr);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &ss);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, nullptr);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &ss);
  driver(CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, nullptr);  // a driver-only program
  auto t = finish();
  std::vector<std::string> got;
  for (auto& r : t.records) {
    if (r.kind != RecordKind::kCaptureMark) {
      got.push_back(trace::record_kind_name(r.kind));
      continue;
    }
    auto m = r.as<trace::CaptureMark>();
    got.push_back(std::to_string(int(m.action)) + " " + t.str(m.call.api_id));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"2 cudaProfilerStart", "3 cudaProfilerStart", "StreamSynchronize",
                                           "4 cudaProfilerStop", "2 cuProfilerStart", "3 cuProfilerStart"}));
}

TEST(CallTable, CoversEveryCallRecordTheAnalyzerModels) {
  // Every record kind that comes from one CUDA API call (has CallInfo) has at least one
  // runtime or driver row. NCCL's records come from the NCCL interposer, not from CUPTI;
  // AllocatorBlock records from PyTorch's allocator (torch_allocator_hook_test); HostAccess
  // records from the page guard of --host-accesses (host_access_tracker_test).
  std::set<RecordKind> from_table, from_runtime_or_driver[2];
  for (const CallSpec& s : call_table()) {
    if (auto k = record_kind_of(s.kind)) {
      from_table.insert(*k);
      from_runtime_or_driver[s.domain == ApiDomain::kRuntime ? 0 : 1].insert(*k);
    }
  }
  const std::set<RecordKind> not_cuda_calls = {RecordKind::kNcclCommInit, RecordKind::kNcclCall,
                                               RecordKind::kNcclGroupStart, RecordKind::kNcclGroupEnd,
                                               RecordKind::kAllocatorBlock, RecordKind::kHostAccess,
                                               RecordKind::kCaptureMark};  // step markers, window edges
  int call_kinds = 0;
  for (uint32_t v = 0; v <= 0xFFFF; ++v) {
    auto k = RecordKind(v);
    if (std::string(trace::record_kind_name(k)) == "Unknown" || !trace::has_call_info(k)) continue;
    if (not_cuda_calls.count(k)) continue;
    ++call_kinds;
    EXPECT_TRUE(from_table.count(k)) << "no callback id becomes a " << trace::record_kind_name(k) << " record";
    // The driver sees the programs that never call the runtime (Triton, NCCL, cuMemMap).
    EXPECT_TRUE(from_runtime_or_driver[1].count(k)) << "no driver callback id for " << trace::record_kind_name(k);
  }
  EXPECT_EQ(call_kinds, 20);  // 1.2 added GraphEdit
}

TEST(CallTable, RowsAreUniqueNamedAndReadTheirParameters) {
  std::set<std::pair<int, uint32_t>> seen;
  for (const CallSpec& s : call_table()) {
    EXPECT_TRUE(seen.insert({int(s.domain), s.cbid}).second) << s.name << " twice";
    ASSERT_NE(s.name, nullptr);
    EXPECT_EQ(find_call(s.domain, s.cbid), &s) << s.name;
    const bool needs_no_params = s.kind == CallKind::kScopeOnly || s.kind == CallKind::kDeviceSynchronize ||
                                 s.kind == CallKind::kProfilerStart || s.kind == CallKind::kProfilerStop ||
                                 s.kind == CallKind::kFunctionsUnload;
    EXPECT_EQ(s.extract == nullptr, needs_no_params) << s.name;
    if (s.kind == CallKind::kScopeOnly) {
      EXPECT_EQ(s.domain, ApiDomain::kRuntime) << s.name;
    }
  }
  EXPECT_EQ(find_call(ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020), nullptr);
  EXPECT_EQ(find_call(ApiDomain::kDriver, 100000), nullptr);
  EXPECT_EQ(CudaCallHandler::runtime_cbids().size() + CudaCallHandler::driver_cbids().size(), call_table().size());
}

// CuptiSession takes kernel launches from the driver's callbacks alone: every runtime launch
// row has a driver launch row of the same stream convention underneath (cudaLaunchKernel and
// __cudaLaunchKernel call cuLaunchKernel, cudaLaunchKernelExC cuLaunchKernelEx, the
// cooperative launch cuLaunchCooperativeKernel, a _ptsz entry the driver's _ptsz), and the
// runtime's other rows stay enabled.
TEST(CallTable, TheDriverRowsCoverEveryRuntimeLaunch) {
  auto driver_row = [](uint32_t cbid) { return find_call(ApiDomain::kDriver, cbid); };
  const std::pair<uint32_t, uint32_t> under[] = {
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
      {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel},
      {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel},
      {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
       CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz},
  };
  size_t runtime_launch_rows = 0;
  for (const CallSpec& s : call_table())
    if (s.domain == ApiDomain::kRuntime && s.kind == CallKind::kKernelLaunch) ++runtime_launch_rows;
  EXPECT_EQ(runtime_launch_rows, std::size(under));
  for (auto [rt, dr] : under) {
    const CallSpec* r = find_call(ApiDomain::kRuntime, rt);
    const CallSpec* d = driver_row(dr);
    ASSERT_NE(r, nullptr);
    ASSERT_NE(d, nullptr) << r->name;
    EXPECT_EQ(r->kind, CallKind::kKernelLaunch);
    EXPECT_EQ(d->kind, CallKind::kKernelLaunch) << d->name;
    EXPECT_EQ(r->per_thread_default, d->per_thread_default) << r->name;
  }
  const std::vector<uint32_t> all = CudaCallHandler::runtime_cbids();
  EXPECT_EQ(CudaCallHandler::cupti_runtime_cbids(true), all);
  const std::vector<uint32_t> cupti = CudaCallHandler::cupti_runtime_cbids(false);
  EXPECT_EQ(cupti.size() + runtime_launch_rows, all.size());
  for (uint32_t cb : cupti) EXPECT_NE(find_call(ApiDomain::kRuntime, cb)->kind, CallKind::kKernelLaunch);
}

// bench/cupti_floor/tracer_cbids.sh, the empty subscriber's list (floor_cbids in
// bench/realistic_overhead.sh), names as many callback ids of each domain as the tracer enables
// (runtime launches only with RUNTIME_LAUNCHES=1), the driver's kernel launches among them (from
// 06bfe67 until session 39 it read no SR_DRL row, so the floor took no launch callbacks), and
// refuses a table with rows of a macro it does not know.
TEST(CallTable, TheFloorsListHasTheTracersCallbackIds) {
  auto run = [](const std::string& env, const std::string& table) {
    const std::string cmd = env + " bash " + std::string(SR_SOURCE_DIR) + "/bench/cupti_floor/tracer_cbids.sh " + table + " 2>&1";
    std::map<std::string, size_t> count;
    std::set<std::string> names;
    FILE* f = popen(cmd.c_str(), "r");
    char line[512];
    while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr) {
      std::string l(line);
      if (!l.empty() && l.back() == '\n') l.pop_back();
      names.insert(l);
      ++count[l.substr(0, l.find(':'))];
    }
    const int status = f != nullptr ? pclose(f) : -1;
    return std::make_tuple(WIFEXITED(status) ? WEXITSTATUS(status) : -1, count, names);
  };
  auto [rc, count, names] = run("", "");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(count["runtime"], CudaCallHandler::cupti_runtime_cbids(false).size());
  EXPECT_EQ(count["driver"], CudaCallHandler::driver_cbids().size());
  EXPECT_EQ(count.size(), 2u);
  for (const char* n : {"driver:cuLaunchKernel", "driver:cuLaunchKernel_ptsz", "driver:cuLaunchKernelEx",
                        "driver:cuLaunchKernelEx_ptsz", "driver:cuMemAlloc_v2", "runtime:cudaMemcpyAsync_v3020"})
    EXPECT_EQ(names.count(n), 1u) << n;
  EXPECT_EQ(names.count("runtime:cudaLaunchKernel_v7000"), 0u);
  auto [rc_rt, count_rt, names_rt] = run("RUNTIME_LAUNCHES=1", "");
  EXPECT_EQ(rc_rt, 0);
  EXPECT_EQ(count_rt["runtime"], CudaCallHandler::cupti_runtime_cbids(true).size());
  EXPECT_EQ(names_rt.count("runtime:cudaLaunchKernel_v7000"), 1u);

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("sr_cbids_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string odd = (dir / "table.cpp").string();
  std::ofstream(odd) << "    SR_DR(cuMemAlloc_v2, \"cuMemAlloc\", kAlloc, kLegacy, x),\n"
                     << "    SR_DRX(cuLaunchKernel, \"cuLaunchKernel\", kLegacy, a, b),\n";
  auto [rc_odd, count_odd, names_odd] = run("", odd);
  EXPECT_EQ(rc_odd, 2);
  EXPECT_EQ(names_odd.count("    SR_DRX(cuLaunchKernel, \"cuLaunchKernel\", kLegacy, a, b),"), 0u);
  EXPECT_TRUE(std::any_of(names_odd.begin(), names_odd.end(),
                          [](const std::string& l) { return l.find("rows of a macro this script does not know") != std::string::npos; }));
  std::filesystem::remove_all(dir);
}

// A launch seen only at the driver level (as CuptiSession delivers a runtime launch now) is
// recorded with the driver call's name, correlation and stream: stream 0 of cuLaunchKernel is
// the legacy stream, of cuLaunchKernel_ptsz the calling thread's per-thread stream.
TEST_F(HandlerTest, ADriverOnlyLaunchKeepsItsStreamAndCorrelation) {
  uint32_t corr = 20;
  for (bool ptsz : {false, true}) {
    cuLaunchKernel_params p{};
    p.f = as_ptr<CUfunc_st>(0xF1);
    p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    const uint32_t cbid = ptsz ? CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz : CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
    driver(cbid, &p, 0, ++corr);
    p.hStream = as_ptr<CUstream_st>(0x5551);
    driver(cbid, &p, 0, ++corr);
  }
  auto t = finish();
  std::vector<trace::KernelLaunchHead> heads;
  for (const auto& r : t.records)
    if (r.kind == trace::RecordKind::kKernelLaunch) heads.push_back(r.as<trace::KernelLaunchHead>());
  ASSERT_EQ(heads.size(), 4u);
  const trace::KernelLaunchHead* k[] = {&heads[0], &heads[1], &heads[2], &heads[3]};
  EXPECT_EQ(k[0]->stream, trace::legacy_stream(1));  // FakeQueries: context 0x100 is device 1
  EXPECT_EQ(k[1]->stream, 0x5551u);
  EXPECT_EQ(k[2]->stream, trace::per_thread_stream(0, 1));
  EXPECT_EQ(k[3]->stream, 0x5551u);
  for (size_t i = 0; i < heads.size(); ++i) {
    EXPECT_EQ(t.str(k[i]->call.api_id), "cuLaunchKernel");
    EXPECT_EQ(k[i]->correlation, 21u + i);
  }
}

TEST_F(HandlerTest, EventsAndQueriesKeepTheirResults) {
  cudaEvent_t e = as_ptr<CUevent_st>(0xE1);
  cudaEventCreateWithFlags_v3020_params c{&e, cudaEventDisableTiming};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020, &c);
  cudaEventRecord_v3020_params r{e, as_ptr<CUstream_st>(0x5551)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, &r);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, &r, /*cudaErrorInvalidResourceHandle*/ 400);
  cudaStreamWaitEvent_v3020_params w{as_ptr<CUstream_st>(0x5552), e, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, &w);
  cudaEventQuery_v3020_params q{e};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, &q, /*cudaErrorNotReady*/ 600);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, &q, 0);
  cudaEventSynchronize_v3020_params es{e};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, &es);
  cudaStreamSynchronize_v3020_params ss{as_ptr<CUstream_st>(0x5552)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &ss);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, nullptr);
  auto t = finish();
  std::vector<RecordKind> kinds;
  for (auto& rec : t.records) kinds.push_back(rec.kind);
  EXPECT_EQ(kinds, (std::vector<RecordKind>{RecordKind::kEventCreate, RecordKind::kEventRecord,
                                            RecordKind::kStreamWaitEvent, RecordKind::kEventQuery,
                                            RecordKind::kEventQuery, RecordKind::kEventSynchronize,
                                            RecordKind::kStreamSynchronize, RecordKind::kDeviceSynchronize}));
  EXPECT_EQ(t.records[0].as<trace::EventCreate>().flags, uint32_t(cudaEventDisableTiming));
  EXPECT_EQ(t.records[1].as<trace::EventRecord>().stream, 0x5551u);
  EXPECT_EQ(t.records[2].as<trace::StreamWaitEvent>().stream, 0x5552u);
  EXPECT_EQ(t.records[2].as<trace::StreamWaitEvent>().event, 0xE1u);
  EXPECT_EQ(t.records[3].as<trace::EventQuery>().result, 600);
  EXPECT_EQ(t.records[4].as<trace::EventQuery>().result, 0);
  // seq stays dense although the failed record call wrote nothing.
  for (size_t i = 0; i < t.records.size(); ++i) {
    trace::CallInfo ci;
    std::memcpy(&ci, t.records[i].body.data(), sizeof ci);
    EXPECT_EQ(ci.seq, i);
  }
}

TEST_F(HandlerTest, StreamOrderedAllocationsCarryTheirStream) {
  void* p = as_ptr<void>(0x7200'0000);
  cudaMallocAsync_v11020_params m{&p, 1 << 20, as_ptr<CUstream_st>(0x5551)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, &m);
  cudaFreeAsync_v11020_params f{p, as_ptr<CUstream_st>(0x5552)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, &f);
  auto t = finish();
  ASSERT_EQ(t.records.size(), 2u);
  auto a = t.records[0].as<trace::Alloc>();
  EXPECT_EQ(a.kind, trace::AllocKind::kAsync);
  EXPECT_EQ(a.ptr, 0x7200'0000u);
  EXPECT_EQ(a.bytes, 1u << 20);
  EXPECT_EQ(a.stream, 0x5551u);
  auto fr = t.records[1].as<trace::Free>();
  EXPECT_EQ(fr.kind, trace::AllocKind::kAsync);
  EXPECT_EQ(fr.stream, 0x5552u);
}

TEST_F(HandlerTest, VirtualMemoryMapsAndUnmapsFromTheDriver) {
  cuMemMap_params m{0x7300'0000, 2 << 20, 0, 0x42, 0};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &m);
  cuMemUnmap_params u{0x7300'0000, 2 << 20};
  driver(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &u);
  auto t = finish();
  ASSERT_EQ(t.records.size(), 2u);
  auto a = t.records[0].as<trace::Alloc>();
  EXPECT_EQ(a.kind, trace::AllocKind::kVmmMap);
  EXPECT_EQ(a.bytes, 2u << 20);
  EXPECT_EQ(t.str(a.call.api_id), "cuMemMap");
  auto f = t.records[1].as<trace::Free>();
  EXPECT_EQ(f.kind, trace::AllocKind::kVmmMap);
  EXPECT_EQ(f.bytes, 2u << 20);
}

TEST_F(HandlerTest, PinnedHostMemoryIsKnownToCopies) {
  void* h = as_ptr<void>(0x5000'0000);
  cudaHostAlloc_v3020_params ha{&h, 4096, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020, &ha);
  malloc_device(0x7000'0000, 4096);
  cudaMemcpyAsync_v3020_params p{as_ptr<void>(0x5000'0010), as_ptr<void>(0x7000'0000), 16, cudaMemcpyDefault,
                                 as_ptr<CUstream_st>(0x5551)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &p);
  auto t = finish();
  auto m = t.of(RecordKind::kMemcpy).at(0).as<trace::Memcpy>();
  EXPECT_EQ(m.copy_kind, trace::CopyKind::kDeviceToHost);
  EXPECT_EQ(m.src_mem, trace::MemKind::kDevice);
  EXPECT_EQ(m.dst_mem, trace::MemKind::kPinnedHost);
}

TEST_F(HandlerTest, GraphLaunchAndCaptureAreRecorded) {
  cudaStreamBeginCapture_v10000_params b{as_ptr<CUstream_st>(0x5551), cudaStreamCaptureModeGlobal};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, &b);
  cudaGraph_t g = nullptr;
  cudaStreamEndCapture_v10000_params e{as_ptr<CUstream_st>(0x5551), &g};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, &e);
  cudaGraphLaunch_v10000_params l{as_ptr<CUgraphExec_st>(0x6A00), as_ptr<CUstream_st>(0x5552)};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, &l, 0, 70);
  auto t = finish();
  ASSERT_EQ(t.records.size(), 3u);
  EXPECT_EQ(t.records[0].as<trace::StreamCapture>().begin, 1u);
  EXPECT_EQ(t.records[1].as<trace::StreamCapture>().begin, 0u);
  auto gl = t.records[2].as<trace::GraphLaunch>();
  EXPECT_EQ(gl.graph_exec, 0x6A00u);
  EXPECT_EQ(gl.stream, 0x5552u);
  EXPECT_EQ(gl.correlation, 70u);
}

// A capture with a side stream forked in and joined back, as torch.cuda.graph makes with
// a side stream: every captured call is an ordinary record on its stream, and the end of
// the capture names the graph it made (read at exit).
TEST_F(HandlerTest, CaptureForkJoinRecordsEveryCapturedCallAndTheGraph) {
  auto* s1 = as_ptr<CUstream_st>(0x5551);
  auto* s2 = as_ptr<CUstream_st>(0x5552);
  auto* fork = as_ptr<CUevent_st>(0xE1);
  auto* join = as_ptr<CUevent_st>(0xE2);
  const uint64_t buf = malloc_device(0x7000'0000, 4096);
  queries_.kinds[buf] = trace::MemKind::kDevice;
  cudaStreamBeginCapture_v10000_params b{s1, cudaStreamCaptureModeThreadLocal};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, &b);
  cudaEventRecord_v3020_params r1{fork, s1};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, &r1);
  cudaStreamWaitEvent_v3020_params w1{s2, fork, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, &w1);
  cudaMemsetAsync_v3020_params m{as_ptr<void>(buf), 0, 4096, s2};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, &m);
  cudaEventRecord_v3020_params r2{join, s2};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, &r2);
  cudaStreamWaitEvent_v3020_params w2{s1, join, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, &w2);
  cudaGraph_t g = nullptr;
  cudaStreamEndCapture_v10000_params e{s1, &g};
  runtime_enter(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, &e);
  g = as_ptr<CUgraph_st>(0x6B00);  // the runtime writes *pGraph before it returns
  runtime_exit(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, &e);
  auto t = finish();
  auto caps = t.of(RecordKind::kStreamCapture);
  ASSERT_EQ(caps.size(), 2u);
  auto begin = caps[0].as<trace::StreamCapture>();
  EXPECT_EQ(begin.begin, 1u);
  EXPECT_EQ(begin.stream, 0x5551u);
  EXPECT_EQ(begin.flags, uint32_t(cudaStreamCaptureModeThreadLocal));
  auto end = caps[1].as<trace::StreamCapture>();
  EXPECT_EQ(end.begin, 0u);
  EXPECT_EQ(end.graph, 0x6B00u);
  ASSERT_EQ(t.of(RecordKind::kEventRecord).size(), 2u);
  ASSERT_EQ(t.of(RecordKind::kStreamWaitEvent).size(), 2u);
  EXPECT_EQ(t.of(RecordKind::kStreamWaitEvent)[0].as<trace::StreamWaitEvent>().stream, 0x5552u);
  auto ms = t.of(RecordKind::kMemset).at(0).as<trace::Memset>();
  EXPECT_EQ(ms.stream, 0x5552u);
  EXPECT_EQ(ms.dst, buf);
}

TEST_F(HandlerTest, GraphInstantiateUpdateAndDestroyTieExecsToGraphs) {
  auto* graph = as_ptr<CUgraph_st>(0x6B00);
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate_v12000_params i{&exec, graph, 0};
  runtime_enter(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, &i);
  exec = as_ptr<CUgraphExec_st>(0x6A00);
  runtime_exit(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, &i);
  cudaGraphExec_t exec2 = as_ptr<CUgraphExec_st>(0x6A01);
  cudaGraphInstantiateWithFlags_v11040_params iwf{&exec2, graph, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040, &iwf);
  CUgraphExec exec3 = as_ptr<CUgraphExec_st>(0x6A02);
  cuGraphInstantiateWithParams_params dp{&exec3, graph, nullptr};
  driver(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams, &dp);
  cudaGraphExec_t failed = as_ptr<CUgraphExec_st>(0x6AFF);
  cudaGraphInstantiate_v12000_params fi{&failed, graph, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, &fi, /*result=*/1);
  cudaGraphExecUpdate_v10020_params u{exec, as_ptr<CUgraph_st>(0x6B01), nullptr};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecUpdate_v10020, &u);
  cudaGraphExecDestroy_v10000_params xd{exec};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecDestroy_v10000, &xd);
  cuGraphDestroy_params gd{graph};
  driver(CUPTI_DRIVER_TRACE_CBID_cuGraphDestroy, &gd);
  cudaStreamUpdateCaptureDependencies_v12030_params cd{as_ptr<CUstream_st>(0x5551), nullptr, nullptr, 0, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamUpdateCaptureDependencies_v12030, &cd);
  auto t = finish();
  auto calls = t.of(RecordKind::kGraphCall);
  ASSERT_EQ(calls.size(), 7u);
  using trace::GraphAction;
  auto at = [&](size_t k) { return calls[k].as<trace::GraphCall>(); };
  EXPECT_EQ(at(0).action, GraphAction::kInstantiate);
  EXPECT_EQ(at(0).graph, 0x6B00u);
  EXPECT_EQ(at(0).graph_exec, 0x6A00u);
  EXPECT_EQ(at(1).graph_exec, 0x6A01u);
  EXPECT_EQ(at(2).action, GraphAction::kInstantiate);
  EXPECT_EQ(at(2).graph_exec, 0x6A02u);
  EXPECT_EQ(t.str(at(2).call.api_id), "cuGraphInstantiateWithParams");
  EXPECT_EQ(at(3).action, GraphAction::kExecUpdate);
  EXPECT_EQ(at(3).graph_exec, 0x6A00u);
  EXPECT_EQ(at(3).graph, 0x6B01u);
  EXPECT_EQ(at(4).action, GraphAction::kExecDestroy);
  EXPECT_EQ(at(4).graph_exec, 0x6A00u);
  EXPECT_EQ(at(5).action, GraphAction::kGraphDestroy);
  EXPECT_EQ(at(5).graph, 0x6B00u);
  EXPECT_EQ(at(6).action, GraphAction::kCaptureDependencies);
  EXPECT_EQ(at(6).stream, 0x5551u);
}

TEST_F(HandlerTest, FailedEndCaptureStillEndsItAndFailedBeginIsDropped) {
  auto* s1 = as_ptr<CUstream_st>(0x5551);
  cudaStreamBeginCapture_v10000_params b{s1, cudaStreamCaptureModeGlobal};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, &b, /*result=*/1);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, &b);
  cudaGraph_t g = as_ptr<CUgraph_st>(0x6B00);
  cudaStreamEndCapture_v10000_params e{s1, &g};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, &e, /*result=*/901);  // invalidated
  cudaStreamBeginCaptureToGraph_v12030_params tg{s1, as_ptr<CUgraph_st>(0x6B05), nullptr, nullptr, 0,
                                                 cudaStreamCaptureModeRelaxed};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030, &tg);
  auto t = finish();
  auto caps = t.of(RecordKind::kStreamCapture);
  ASSERT_EQ(caps.size(), 3u);
  EXPECT_EQ(caps[0].as<trace::StreamCapture>().begin, 1u);
  EXPECT_EQ(caps[1].as<trace::StreamCapture>().begin, 0u);
  EXPECT_EQ(caps[1].as<trace::StreamCapture>().graph, 0u);
  auto to_graph = caps[2].as<trace::StreamCapture>();
  EXPECT_EQ(to_graph.flags, trace::kCaptureToGraph | uint32_t(cudaStreamCaptureModeRelaxed));
  EXPECT_EQ(to_graph.graph, 0x6B05u);
}

// The explicit graph API: each call one GraphEdit record; a node's work is the body of the
// record its eager call would be.
trace::GraphEditParts edit_at(const TraceContents& t, size_t k) {
  static std::deque<testing::RecordCopy> kept;  // the parts' payload points into the body
  kept.push_back(t.of(RecordKind::kGraphEdit).at(k));
  return trace::graph_edit_parts(trace::RecordView{kept.back().kind, std::span<const uint8_t>(kept.back().body)});
}

TEST_F(HandlerTest, ExplicitGraphNodesEdgesAndCloneAreRecorded) {
  malloc_device(0x7000'0000, 4096);
  malloc_device(0x7100'0000, 4096);
  cudaGraph_t g = as_ptr<CUgraph_st>(0x6B00);
  cudaGraphCreate_v10000_params cp{&g, 0};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphCreate_v10000, &cp);
  cudaGraphNode_t n1 = as_ptr<CUgraphNode_st>(0x6E00), n2 = as_ptr<CUgraphNode_st>(0x6E01),
                  n3 = as_ptr<CUgraphNode_st>(0x6E02), n4 = as_ptr<CUgraphNode_st>(0x6E03);
  cudaMemsetParams mp{};
  mp.dst = as_ptr<void>(0x7000'0000);
  mp.pitch = 0;
  mp.elementSize = 4;
  mp.width = 256;
  mp.height = 1;
  cudaGraphAddMemsetNode_v10000_params ms{&n1, g, nullptr, 0, &mp};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemsetNode_v10000, &ms);
  cudaGraphAddMemcpyNode1D_v11010_params mc{&n2, g, &n1, 1, as_ptr<void>(0x7100'0000), as_ptr<void>(0x7000'0000),
                                            1024, cudaMemcpyDeviceToDevice};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemcpyNode1D_v11010, &mc);
  cudaEvent_t ev = as_ptr<CUevent_st>(0x4E00);
  cudaGraphAddEventRecordNode_v11010_params er{&n3, g, &n2, 1, ev};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddEventRecordNode_v11010, &er);
  cudaGraph_t child = as_ptr<CUgraph_st>(0x6B01);
  cudaGraphAddChildGraphNode_v10000_params ch{&n4, g, nullptr, 0, child};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddChildGraphNode_v10000, &ch);
  cudaGraphEdgeData data{};
  cudaGraphAddDependencies_v12030_params dep{g, &n4, &n2, &data, 1};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddDependencies_v12030, &dep);
  data.type = cudaGraphDependencyTypeProgrammatic;
  cudaGraphRemoveDependencies_v12030_params rd{g, &n1, &n2, &data, 1};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphRemoveDependencies_v12030, &rd);
  cudaGraph_t clone = as_ptr<CUgraph_st>(0x6B02);
  cudaGraphClone_v10000_params cl{&clone, g};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphClone_v10000, &cl);
  cudaGraphDestroyNode_v10000_params dn{n3};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphDestroyNode_v10000, &dn);
  cudaGraphExec_t exec = as_ptr<CUgraphExec_st>(0x6A00);
  cudaGraphInstantiateWithFlags_v11040_params inst{&exec, g, cudaGraphInstantiateFlagDeviceLaunch};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040, &inst);
  cudaGraphExecMemcpyNodeSetParams1D_v11010_params es{exec, n2, as_ptr<void>(0x7100'0000), as_ptr<void>(0x7000'0100),
                                                      512, cudaMemcpyDeviceToDevice};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecMemcpyNodeSetParams1D_v11010, &es);
  cudaGraphAddMemcpyNodeToSymbol_v11010_params sym{&n1, g, nullptr, 0, as_ptr<void>(0xAB), as_ptr<void>(0x7000'0000),
                                                   64, 0, cudaMemcpyDeviceToDevice};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddMemcpyNodeToSymbol_v11010, &sym);
  auto t = finish();
  using trace::GraphEditAction;
  using trace::GraphNodeType;
  ASSERT_EQ(t.of(RecordKind::kGraphEdit).size(), 11u);
  auto create = edit_at(t, 0);
  EXPECT_EQ(create.head.action, GraphEditAction::kCreate);
  EXPECT_EQ(create.head.graph, 0x6B00u);
  auto memset = edit_at(t, 1);
  EXPECT_EQ(memset.head.action, GraphEditAction::kAddNode);
  EXPECT_EQ(memset.head.type, GraphNodeType::kMemset);
  EXPECT_EQ(memset.head.node, 0x6E00u);
  EXPECT_TRUE(memset.first.empty());
  ASSERT_EQ(memset.payload.size(), sizeof(trace::Memset));
  trace::Memset m;
  std::memcpy(&m, memset.payload.data(), sizeof(m));
  EXPECT_EQ(m.dst, 0x7000'0000u);
  EXPECT_EQ(m.bytes, 1024u);
  EXPECT_EQ(m.stream, 0u);
  EXPECT_EQ(m.call.seq, memset.head.call.seq);
  EXPECT_EQ(t.str(m.call.api_id), "cudaGraphAddMemsetNode");
  auto copy = edit_at(t, 2);
  EXPECT_EQ(copy.head.type, GraphNodeType::kMemcpy);
  EXPECT_EQ(copy.first, (std::vector<uint64_t>{0x6E00}));
  trace::Memcpy c;
  ASSERT_EQ(copy.payload.size(), sizeof(c));
  std::memcpy(&c, copy.payload.data(), sizeof(c));
  EXPECT_EQ(c.dst, 0x7100'0000u);
  EXPECT_EQ(c.src, 0x7000'0000u);
  EXPECT_EQ(c.bytes, 1024u);
  EXPECT_EQ(c.copy_kind, trace::CopyKind::kDeviceToDevice);
  EXPECT_EQ(c.src_mem, trace::MemKind::kDevice);
  auto rec = edit_at(t, 3);
  EXPECT_EQ(rec.head.type, GraphNodeType::kEventRecord);
  EXPECT_EQ(rec.head.other, 0x4E00u);
  EXPECT_TRUE(rec.payload.empty());
  auto chn = edit_at(t, 4);
  EXPECT_EQ(chn.head.type, GraphNodeType::kChildGraph);
  EXPECT_EQ(chn.head.other, 0x6B01u);
  auto add = edit_at(t, 5);
  EXPECT_EQ(add.head.action, GraphEditAction::kAddEdges);
  EXPECT_EQ(add.first, (std::vector<uint64_t>{0x6E03}));
  EXPECT_EQ(add.second, (std::vector<uint64_t>{0x6E01}));
  EXPECT_EQ(add.head.flags, 0u);
  auto rem = edit_at(t, 6);
  EXPECT_EQ(rem.head.action, GraphEditAction::kRemoveEdges);
  EXPECT_EQ(rem.head.flags, uint16_t(trace::kEditEdgeNotFull));
  auto cln = edit_at(t, 7);
  EXPECT_EQ(cln.head.action, GraphEditAction::kClone);
  EXPECT_EQ(cln.head.graph, 0x6B02u);
  EXPECT_EQ(cln.head.other, 0x6B00u);
  EXPECT_EQ(edit_at(t, 8).head.action, GraphEditAction::kDestroyNode);
  EXPECT_EQ(edit_at(t, 8).head.node, 0x6E02u);
  auto set = edit_at(t, 9);
  EXPECT_EQ(set.head.action, GraphEditAction::kExecSetNode);
  EXPECT_EQ(set.head.graph, 0x6A00u);
  EXPECT_EQ(set.head.node, 0x6E01u);
  std::memcpy(&c, set.payload.data(), sizeof(c));
  EXPECT_EQ(c.src, 0x7000'0100u);
  EXPECT_EQ(c.bytes, 512u);
  auto symbol = edit_at(t, 10);
  EXPECT_EQ(symbol.head.flags, uint16_t(trace::kEditParamsUnknown));
  EXPECT_TRUE(symbol.payload.empty());
  auto calls = t.of(RecordKind::kGraphCall);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].as<trace::GraphCall>().flags, uint32_t(trace::kGraphDeviceLaunch));
}

TEST_F(HandlerTest, RuntimeKernelNodeIsRecordedOnceFromTheDriverCallInside) {
  malloc_device(0x7000'0000, 4096);
  const uint64_t func = 0xF00D;
  queries_.layouts[func] = {{0, 8}, {8, 4}};
  uint64_t x = 0x7000'0040;
  int n = 16;
  void* args[] = {&x, &n};
  cudaGraph_t g = as_ptr<CUgraph_st>(0x6B00);
  cudaGraphNode_t node = as_ptr<CUgraphNode_st>(0x6E00);
  cudaKernelNodeParams kp{};
  kp.func = as_ptr<void>(0xABC);  // the runtime's host stub
  kp.gridDim = dim3(4);
  kp.blockDim = dim3(128);
  kp.kernelParams = args;
  cudaGraphAddKernelNode_v10000_params rp{&node, g, nullptr, 0, &kp};
  runtime_enter(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddKernelNode_v10000, &rp, 41);
  CUDA_KERNEL_NODE_PARAMS dk{};
  dk.func = as_ptr<CUfunc_st>(func);
  dk.gridDimX = 4;
  dk.gridDimY = dk.gridDimZ = 1;
  dk.blockDimX = 128;
  dk.blockDimY = dk.blockDimZ = 1;
  dk.kernelParams = args;
  CUgraphNode dnode = node;
  cuGraphAddKernelNode_v2_params dp{&dnode, g, nullptr, 0, &dk};
  // The graph calls' callbacks name no symbol: the kernel's name comes from the driver.
  queries_.names[func] = "_Z5scalePfi";
  driver(CUPTI_DRIVER_TRACE_CBID_cuGraphAddKernelNode_v2, &dp, 0, 42);
  runtime_exit(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddKernelNode_v10000, &rp, 0, 41);
  // A driver kernel node outside any runtime call is recorded under its own name.
  cuGraphAddKernelNode_v2_params dp2{&dnode, g, &dnode, 1, &dk};
  driver(CUPTI_DRIVER_TRACE_CBID_cuGraphAddKernelNode_v2, &dp2, 0, 43);
  auto t = finish();
  ASSERT_EQ(t.of(RecordKind::kGraphEdit).size(), 2u);
  EXPECT_TRUE(t.of(RecordKind::kKernelLaunch).empty());
  auto e = edit_at(t, 0);
  EXPECT_EQ(t.str(e.head.call.api_id), "cudaGraphAddKernelNode");
  EXPECT_EQ(e.head.type, trace::GraphNodeType::kKernel);
  trace::KernelLaunchHead k;
  ASSERT_EQ(e.payload.size(), sizeof(k) + 2 * sizeof(uint64_t));  // one pointer, the arguments' hash
  std::memcpy(&k, e.payload.data(), sizeof(k));
  EXPECT_EQ(k.flags, uint32_t(trace::kKernelArgsScanned) | uint32_t(trace::kKernelArgsHash2));
  EXPECT_EQ(k.nptrs, 1u);
  EXPECT_EQ(k.grid[0], 4u);
  EXPECT_EQ(k.block[0], 128u);
  EXPECT_EQ(k.stream, 0u);
  EXPECT_EQ(t.str(k.name_id), "scale(float*, int)");
  uint64_t p;
  std::memcpy(&p, e.payload.data() + sizeof(k), sizeof(p));
  EXPECT_EQ(p, 0x7000'0040u);
  auto d = edit_at(t, 1);
  EXPECT_EQ(t.str(d.head.call.api_id), "cuGraphAddKernelNode");
  EXPECT_EQ(d.first, (std::vector<uint64_t>{0x6E00}));
}

TEST_F(HandlerTest, GenericAddNodeReadsTheNodeTypesParameters) {
  malloc_device(0x7000'0000, 4096);
  cudaGraph_t g = as_ptr<CUgraph_st>(0x6B00);
  cudaGraphNode_t n1 = as_ptr<CUgraphNode_st>(0x6E00), n2 = as_ptr<CUgraphNode_st>(0x6E01);
  cudaGraphNodeParams np{};
  np.type = cudaGraphNodeTypeMemset;
  np.memset.dst = as_ptr<void>(0x7000'0000);
  np.memset.pitch = 256;
  np.memset.elementSize = 1;
  np.memset.width = 100;
  np.memset.height = 3;  // rows 256 bytes apart: bytes 0 .. 2 * 256 + 100
  cudaGraphAddNode_v12030_params rp{&n1, g, nullptr, nullptr, 0, &np};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddNode_v12030, &rp);
  CUgraphNodeParams dn{};
  dn.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  CUgraphNode h2 = n2;
  CUgraphNode dep = n1;
  CUgraphEdgeData ed{};
  ed.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  cuGraphAddNode_v2_params dp{&h2, g, &dep, &ed, 1, &dn};
  driver(CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2, &dp);
  auto t = finish();
  ASSERT_EQ(t.of(RecordKind::kGraphEdit).size(), 2u);
  auto a = edit_at(t, 0);
  EXPECT_EQ(a.head.type, trace::GraphNodeType::kMemset);
  trace::Memset m;
  ASSERT_EQ(a.payload.size(), sizeof(m));
  std::memcpy(&m, a.payload.data(), sizeof(m));
  EXPECT_EQ(m.bytes, 2u * 256 + 100);
  auto b = edit_at(t, 1);
  EXPECT_EQ(b.head.type, trace::GraphNodeType::kConditional);
  EXPECT_EQ(b.head.flags, uint16_t(trace::kEditEdgeNotFull));
  EXPECT_EQ(b.first, (std::vector<uint64_t>{0x6E00}));
  EXPECT_TRUE(b.payload.empty());
}

TEST_F(HandlerTest, ManyDependenciesAndEdgesStayInsideARecord) {
  cudaGraph_t g = as_ptr<CUgraph_st>(0x6B00);
  std::vector<cudaGraphNode_t> from(5000), to(5000);
  for (size_t i = 0; i < from.size(); ++i) {
    from[i] = as_ptr<CUgraphNode_st>(0x10000 + i);
    to[i] = as_ptr<CUgraphNode_st>(0x20000 + i);
  }
  cudaGraphNode_t n = as_ptr<CUgraphNode_st>(0x6E00);
  cudaGraphAddEmptyNode_v10000_params en{&n, g, from.data(), from.size()};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddEmptyNode_v10000, &en);
  cudaGraphAddDependencies_v12030_params dep{g, from.data(), to.data(), nullptr, from.size()};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddDependencies_v12030, &dep);
  auto t = finish();
  ASSERT_EQ(t.of(RecordKind::kGraphEdit).size(), 4u);  // the node, then 2048 + 2048 + 904 edges
  auto node = edit_at(t, 0);
  EXPECT_EQ(node.head.count, 4096u);
  EXPECT_EQ(node.head.flags, uint16_t(trace::kEditDepsLeftOut));
  EXPECT_EQ(edit_at(t, 1).first.size(), 2048u);
  auto last = edit_at(t, 3);
  ASSERT_EQ(last.first.size(), 904u);
  EXPECT_EQ(last.first.back(), 0x10000u + 4999);
  EXPECT_EQ(last.second.back(), 0x20000u + 4999);
}

TEST_F(HandlerTest, TracerOwnCallsAreIgnored) {
  {
    InternalCallGuard guard;
    runtime(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, nullptr);
  }
  rec_->close();
  EXPECT_FALSE(rec_->file_created());
}

}  // namespace
}  // namespace streamrace::tracer
