// liblaunch_probe.so: which stream handle and correlation id a kernel launch shows at the
// runtime level and at the driver level underneath it (issue 12: may the tracer subscribe to
// the driver's launch callbacks only?). Loaded as CUDA_INJECTION64_PATH; logs the first
// LAUNCH_PROBE_MAX (default 64) launch callbacks of each level on stderr:
//   launch_probe: rt cudaLaunchKernel_v7000 stream=0x0 corr=12
//   launch_probe:   dr cuLaunchKernel stream=0x0 corr=13 (inside rt corr=12)
// A measurement tool, not part of the tracer; bench/launch_probe/run.sh builds and runs it.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>  // with the generated params structs
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace {

struct Internal {  // CUDA 13's __cudaLaunchKernel arguments (no generated struct)
  const void* kernel;
  dim3 grid, block;
  void** args;
  size_t shared;
  cudaStream_t stream;
};

std::atomic<int> g_logged{0};
int g_max = 64;
thread_local uint32_t t_rt_corr = 0;
thread_local int t_rt_depth = 0;

template <typename T>
const T& as(const void* p) {
  return *static_cast<const T*>(p);
}

struct Row {
  bool runtime;
  uint32_t cbid;
  const char* name;
};

const void* rt_stream(uint32_t cbid, const void* p) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: return as<cudaLaunchKernel_v7000_params>(p).stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: return as<cudaLaunchKernel_ptsz_v7000_params>(p).stream;
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000: return as<Internal>(p).stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060: return as<cudaLaunchKernelExC_v11060_params>(p).config->stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      return as<cudaLaunchKernelExC_ptsz_v11060_params>(p).config->stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      return as<cudaLaunchCooperativeKernel_v9000_params>(p).stream;
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      return as<cudaLaunchCooperativeKernel_ptsz_v9000_params>(p).stream;
  }
  return reinterpret_cast<const void*>(-1);
}

const void* dr_stream(uint32_t cbid, const void* p) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: return as<cuLaunchKernel_params>(p).hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: return as<cuLaunchKernel_ptsz_params>(p).hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: return as<cuLaunchKernelEx_params>(p).config->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: return as<cuLaunchKernelEx_ptsz_params>(p).config->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: return as<cuLaunchCooperativeKernel_params>(p).hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return as<cuLaunchCooperativeKernel_ptsz_params>(p).hStream;
  }
  return reinterpret_cast<const void*>(-1);
}

#define RT(n) {true, CUPTI_RUNTIME_TRACE_CBID_##n, #n}
#define DR(n) {false, CUPTI_DRIVER_TRACE_CBID_##n, #n}
const Row kRows[] = {RT(cudaLaunchKernel_v7000), RT(cudaLaunchKernel_ptsz_v7000), RT(__cudaLaunchKernel_v13000),
                     RT(__cudaLaunchKernel_ptsz_v13000), RT(cudaLaunchKernelExC_v11060),
                     RT(cudaLaunchKernelExC_ptsz_v11060), RT(cudaLaunchCooperativeKernel_v9000),
                     RT(cudaLaunchCooperativeKernel_ptsz_v9000), DR(cuLaunchKernel), DR(cuLaunchKernel_ptsz),
                     DR(cuLaunchKernelEx), DR(cuLaunchKernelEx_ptsz), DR(cuLaunchCooperativeKernel),
                     DR(cuLaunchCooperativeKernel_ptsz)};

const char* name_of(bool runtime, uint32_t cbid) {
  for (const Row& r : kRows)
    if (r.runtime == runtime && r.cbid == cbid) return r.name;
  return "?";
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (cb->callbackSite == CUPTI_API_EXIT) {
    if (runtime && --t_rt_depth == 0) t_rt_corr = 0;
    return;
  }
  const void* s = runtime ? rt_stream(cbid, cb->functionParams) : dr_stream(cbid, cb->functionParams);
  if (runtime && t_rt_depth++ == 0) t_rt_corr = cb->correlationId;
  if (g_logged.fetch_add(1) >= g_max) return;
  if (runtime)
    std::fprintf(stderr, "launch_probe: rt %s stream=%p corr=%u symbol=%.40s\n", name_of(true, cbid), s,
                 cb->correlationId, cb->symbolName ? cb->symbolName : "");
  else
    std::fprintf(stderr, "launch_probe:   dr %s stream=%p corr=%u (inside rt corr=%u) symbol=%.40s\n",
                 name_of(false, cbid), s, cb->correlationId, t_rt_corr, cb->symbolName ? cb->symbolName : "");
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  static bool done = false;
  if (done) return 1;
  done = true;
  if (const char* m = std::getenv("LAUNCH_PROBE_MAX")) g_max = std::atoi(m);
  void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  for (const char* c : {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
    if (!lib) lib = dlopen(c, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "launch_probe: no libcupti.so.13\n");
    return 1;
  }
  auto subscribe = reinterpret_cast<decltype(&cuptiSubscribe)>(dlsym(lib, "cuptiSubscribe"));
  auto enable = reinterpret_cast<decltype(&cuptiEnableCallback)>(dlsym(lib, "cuptiEnableCallback"));
  CUpti_SubscriberHandle sub = nullptr;
  if (!subscribe || !enable || subscribe(&sub, on_callback, nullptr) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "launch_probe: cuptiSubscribe failed\n");
    return 1;
  }
  for (const Row& r : kRows)
    enable(1, sub, r.runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, r.cbid);
  std::fprintf(stderr, "launch_probe: on, %zu callback ids\n", sizeof kRows / sizeof *kRows);
  return 1;
}
