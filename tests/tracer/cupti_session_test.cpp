// CuptiSession against the fake libcupti.so.13 (fake/fake_cupti.cpp): the callback ids it
// enables are exactly the call table's rows, no whole domain is enabled, and a callback
// CUPTI delivers reaches the handler as the ApiCall the handler tests use.
#include <cupti.h>  // with the runtime's generated params structs
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "tests/tracer/trace_contents.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/cuda_call_table.h"
#include "tracer/cupti_session.h"
#include "tracer/thread_state.h"

extern "C" size_t fake_cupti_enabled(uint32_t* out, size_t max);
extern "C" size_t fake_cupti_enabled_domains();
extern "C" bool fake_cupti_deliver(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data);

namespace streamrace::tracer {
namespace {

struct NoDriver : CudaQueries {
  uint32_t device_of_context(uint64_t) override { return 0; }
  bool param_layout(uint64_t, bool, std::vector<ParamSlot>&) override { return false; }
  trace::MemKind memory_kind(uint64_t) override { return trace::MemKind::kPageableHost; }
};

std::set<std::pair<uint32_t, uint32_t>> enabled_in_fake() {
  std::vector<uint32_t> words(2 * 4096);
  size_t n = fake_cupti_enabled(words.data(), 4096);
  EXPECT_LE(n, 4096u);
  std::set<std::pair<uint32_t, uint32_t>> out;
  for (size_t i = 0; i < n; ++i) out.insert({words[2 * i], words[2 * i + 1]});
  return out;
}

CUpti_CallbackData callback_data(CUpti_ApiCallbackSite site, const void* params, int32_t* result, uint32_t corr) {
  CUpti_CallbackData d{};
  d.callbackSite = site;
  d.functionParams = params;
  d.functionReturnValue = result;
  d.correlationId = corr;
  return d;
}

// One process-wide session (CUPTI has one subscriber), shared by the tests below.
TEST(CuptiSession, EnablesExactlyTheCallTableAndDeliversOnlyThose) {
  const auto dir = std::filesystem::temp_directory_path() / ("sr_cupti_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RecorderOptions o;
  o.path = (dir / "t.srace").string();
  o.background_flusher = false;
  TraceRecorder rec(o);
  AllocationTable allocs;
  NoDriver queries;
  CudaCallHandler handler(rec, allocs, queries, nullptr);
  CuptiSession session;
  ASSERT_EQ(session.start(handler, /*timing=*/false), "");
  EXPECT_EQ(session.version(), "999");

  // The call table's rows, less the runtime's kernel launches: the driver's launch callbacks
  // underneath record them (CudaCallHandler::cupti_runtime_cbids).
  std::set<std::pair<uint32_t, uint32_t>> want;
  size_t runtime_launches = 0;
  for (const CallSpec& s : call_table()) {
    if (s.domain == ApiDomain::kRuntime && s.kind == CallKind::kKernelLaunch) {
      ++runtime_launches;
      continue;
    }
    uint32_t domain = s.domain == ApiDomain::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    want.insert({domain, s.cbid});
  }
  EXPECT_EQ(runtime_launches, 8u);  // cudaLaunchKernel, __cudaLaunchKernel, ...ExC, ...Cooperative; _ptsz of each
  EXPECT_EQ(enabled_in_fake(), want);
  EXPECT_EQ(want.size() + runtime_launches, call_table().size());  // no row twice
  EXPECT_EQ(fake_cupti_enabled_domains(), 0u);  // never a whole domain

  // An enabled call reaches the handler and becomes its record.
  thread_state() = TracerThreadState{};
  cudaStreamSynchronize_v3020_params ss{reinterpret_cast<cudaStream_t>(0x5551)};
  int32_t ok = 0;
  auto enter = callback_data(CUPTI_API_ENTER, &ss, nullptr, 5);
  auto exit = callback_data(CUPTI_API_EXIT, &ss, &ok, 5);
  EXPECT_TRUE(fake_cupti_deliver(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &enter));
  EXPECT_TRUE(fake_cupti_deliver(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &exit));
  // A call outside the table is never delivered: it costs the traced program nothing.
  EXPECT_FALSE(fake_cupti_deliver(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, &enter));
  EXPECT_FALSE(fake_cupti_deliver(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, &enter));

  // cudaLaunchKernel on stream 0, as CUPTI reports it on a GPU (bench/launch_probe/): the
  // runtime's callbacks are not delivered, the driver's cuLaunchKernel inside is, with the
  // same stream handle and correlation id, and becomes the launch's record.
  cudaLaunchKernel_v7000_params rt{};
  auto rt_enter = callback_data(CUPTI_API_ENTER, &rt, nullptr, 6);
  EXPECT_FALSE(fake_cupti_deliver(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rt_enter));
  cuLaunchKernel_params dr{};
  dr.f = reinterpret_cast<CUfunction>(0xF00);
  dr.gridDimX = 2;
  dr.gridDimY = dr.gridDimZ = dr.blockDimX = dr.blockDimY = dr.blockDimZ = 1;
  auto dr_enter = callback_data(CUPTI_API_ENTER, &dr, nullptr, 6);
  auto dr_exit = callback_data(CUPTI_API_EXIT, &dr, &ok, 6);
  EXPECT_TRUE(fake_cupti_deliver(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dr_enter));
  EXPECT_TRUE(fake_cupti_deliver(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dr_exit));
  auto rt_exit = callback_data(CUPTI_API_EXIT, &rt, &ok, 6);
  EXPECT_FALSE(fake_cupti_deliver(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rt_exit));

  // Paused (streamrace_bench_pause): nothing is delivered; resumed: the same ids again.
  ASSERT_TRUE(session.set_paused(true));
  EXPECT_TRUE(enabled_in_fake().empty());
  EXPECT_FALSE(fake_cupti_deliver(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, &enter));
  EXPECT_FALSE(fake_cupti_deliver(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &dr_exit));
  ASSERT_TRUE(session.set_paused(false));
  EXPECT_EQ(enabled_in_fake(), want);

  rec.close();
  auto t = testing::read_trace(o.path);
  ASSERT_EQ(t.records.size(), 2u);
  ASSERT_EQ(t.records[0].kind, trace::RecordKind::kStreamSynchronize);
  EXPECT_EQ(t.records[0].as<trace::StreamSynchronize>().stream, 0x5551u);
  EXPECT_EQ(t.str(t.records[0].as<trace::StreamSynchronize>().call.api_id), "cudaStreamSynchronize");
  ASSERT_EQ(t.records[1].kind, trace::RecordKind::kKernelLaunch);
  const auto& k = t.records[1].as<trace::KernelLaunchHead>();
  EXPECT_EQ(t.str(k.call.api_id), "cuLaunchKernel");
  EXPECT_EQ(k.correlation, 6u);
  EXPECT_EQ(k.stream, trace::legacy_stream(0));
  EXPECT_EQ(k.grid[0], 2u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace streamrace::tracer
