// CuptiSession: see cupti_session.h.
#include "tracer/cupti_session.h"

#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "tracer/self_time.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer {

namespace {

struct CuptiFns {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) activity_register = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) activity_timestamp = nullptr;
  decltype(&cuptiActivityFlushAll) activity_flush = nullptr;
  decltype(&cuptiActivityGetNextRecord) activity_next = nullptr;
};
CuptiFns g_fn;
std::atomic<CudaCallHandler*> g_handler{nullptr};

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  CudaCallHandler* h = g_handler.load(std::memory_order_acquire);
  if (h == nullptr || data == nullptr) return;
  if (domain == CUPTI_CB_DOMAIN_NVTX) {
    h->markers().on_nvtx(cbid, static_cast<const CUpti_NvtxData*>(data)->functionParams);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (const int cut = h->bench_cut(); cut == 1 || cut == 5) [[unlikely]] {  // setting bench_cut: every CUDA callback stops here
    // 5: after what a record's sequence number costs (a locked add: on x86 a full fence, which
    // waits for the stores before it, the driver's among them, to drain).
    if (cut == 5) h->recorder().seq_counter().fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  // A driver call is recorded at its exit: its enter matters only to the host-access tracker.
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cb->callbackSite == CUPTI_API_ENTER && !h->wants_driver_enters()) return;
  self_time::Scope timed(self_time::kCupti);
  ApiCall call;
  call.domain = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? ApiDomain::kRuntime : ApiDomain::kDriver;
  call.enter = cb->callbackSite == CUPTI_API_ENTER;
  call.cbid = cbid;
  call.symbol_name = cb->symbolName;
  call.params = cb->functionParams;
  call.result = (!call.enter && cb->functionReturnValue) ? *static_cast<const int32_t*>(cb->functionReturnValue) : 0;
  call.correlation = cb->correlationId;
  call.context = reinterpret_cast<uint64_t>(cb->context);
  h->on_call(call);
}

constexpr size_t kActivityBufferBytes = 4u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kActivityBufferBytes));
  *size = *buffer ? kActivityBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CudaCallHandler* h = g_handler.load(std::memory_order_acquire);
  if (h != nullptr && valid > 0) {
    TraceRecorder& rec = h->recorder();
    CUpti_Activity* rec_ptr = nullptr;
    while (g_fn.activity_next(buffer, valid, &rec_ptr) == CUPTI_SUCCESS) {
      trace::OpTiming t{};
      switch (rec_ptr->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec_ptr);
          t = {k->correlationId, k->start, k->end, k->deviceId, 0};
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec_ptr);
          t = {m->correlationId, m->start, m->end, m->deviceId, 0};
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec_ptr);
          t = {m->correlationId, m->start, m->end, m->deviceId, 0};
          break;
        }
        default:
          continue;
      }
      if (t.correlation != 0) rec.add(t);
    }
  }
  std::free(buffer);
}

// Device timestamps on the same clock as the host timestamps of call records.
uint64_t CUPTIAPI timestamp_now() { return monotonic_ns(); }

template <typename F>
void find(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

// Prefer a CUPTI the process already holds (PyTorch wheels bring their own).
void* open_cupti() {
  const char* candidates[] = {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
                              "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "libcupti.so"};
  void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  for (const char* c : candidates) {
    if (lib) break;
    lib = dlopen(c, RTLD_NOW | RTLD_LOCAL);
  }
  return lib;
}

}  // namespace

int cupti_nvtx_injection(void* get_export_table) {
  void* lib = open_cupti();
  if (!lib) return 0;
  using Init = int (*)(void*);
  auto init = reinterpret_cast<Init>(dlsym(lib, "InitializeInjectionNvtx2"));
  return init ? init(get_export_table) : 0;
}

bool CuptiSession::load() {
  if (lib_) return true;
  void* lib = open_cupti();
  if (!lib) return false;
  find(lib, g_fn.subscribe, "cuptiSubscribe");
  find(lib, g_fn.subscribe_v2, "cuptiSubscribe_v2");
  find(lib, g_fn.enable_callback, "cuptiEnableCallback");
  find(lib, g_fn.result_string, "cuptiGetResultString");
  find(lib, g_fn.get_version, "cuptiGetVersion");
  find(lib, g_fn.activity_enable, "cuptiActivityEnable");
  find(lib, g_fn.activity_register, "cuptiActivityRegisterCallbacks");
  find(lib, g_fn.activity_timestamp, "cuptiActivityRegisterTimestampCallback");
  find(lib, g_fn.activity_flush, "cuptiActivityFlushAll");
  find(lib, g_fn.activity_next, "cuptiActivityGetNextRecord");
  if (!g_fn.subscribe || !g_fn.enable_callback) return false;
  lib_ = lib;
  uint32_t v = 0;
  if (g_fn.get_version && g_fn.get_version(&v) == CUPTI_SUCCESS) version_ = std::to_string(v);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(g_fn.subscribe), &info) && info.dli_fname) path_ = info.dli_fname;
  return true;
}

std::string CuptiSession::start(CudaCallHandler& handler, bool timing, bool runtime_launches) {
  if (subscriber_) return "";
  if (!load()) return "cupti-unavailable: libcupti.so.13 could not be loaded";
  g_handler.store(&handler, std::memory_order_release);
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult rc;
  char holder[128] = {0};
  if (g_fn.subscribe_v2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "streamrace";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder;
    rc = g_fn.subscribe_v2(&sub, on_callback, nullptr, &params);
  } else {
    rc = g_fn.subscribe(&sub, on_callback, nullptr);
  }
  if (rc != CUPTI_SUCCESS) {
    g_handler.store(nullptr);
    const char* msg = nullptr;
    if (g_fn.result_string) g_fn.result_string(rc, &msg);
    std::string why = rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                          ? "cupti-busy: another tool holds CUPTI's only subscriber slot"
                          : "cupti-subscribe-failed";
    if (holder[0]) why += std::string(" (held by ") + holder + ")";
    if (rc != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && msg) why += std::string(": ") + msg;
    return why;
  }
  subscriber_ = sub;
  runtime_launches_ = runtime_launches;
  set_paused(false);
  // Step markers and NVTX windows (docs/long-runs.md): only when the capture counts steps or
  // follows a range, so that other programs' NVTX calls cost nothing.
  if (handler.recorder().capture().wants_nvtx())
    for (uint32_t cb : StepMarkers::nvtx_cbids()) g_fn.enable_callback(1, sub, CUPTI_CB_DOMAIN_NVTX, cb);
  if (timing && g_fn.activity_register && g_fn.activity_enable && g_fn.activity_next) {
    if (g_fn.activity_timestamp) g_fn.activity_timestamp(timestamp_now);
    if (g_fn.activity_register(buffer_requested, buffer_completed) == CUPTI_SUCCESS) {
      g_fn.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      g_fn.activity_enable(CUPTI_ACTIVITY_KIND_MEMCPY);
      g_fn.activity_enable(CUPTI_ACTIVITY_KIND_MEMSET);
      timing_ = true;
    }
  }
  return "";
}

bool CuptiSession::set_paused(bool paused) {
  if (!subscriber_) return false;
  auto sub = static_cast<CUpti_SubscriberHandle>(subscriber_);
  const uint32_t on = paused ? 0 : 1;
  for (uint32_t cb : CudaCallHandler::cupti_runtime_cbids(runtime_launches_))
    g_fn.enable_callback(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API, cb);
  for (uint32_t cb : CudaCallHandler::driver_cbids()) g_fn.enable_callback(on, sub, CUPTI_CB_DOMAIN_DRIVER_API, cb);
  return true;
}

void CuptiSession::flush_activity(bool forced) {
  if (timing_ && g_fn.activity_flush) g_fn.activity_flush(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

}  // namespace streamrace::tracer
