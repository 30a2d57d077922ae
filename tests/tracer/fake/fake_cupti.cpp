// A stand-in libcupti.so.13 for testing CuptiSession without a GPU: subscribe hands out one
// subscriber, and every enable call is remembered, so a test can compare the callback ids the
// tracer enabled with its call table and check that no whole domain was turned on.
// fake_cupti_deliver plays CUPTI's part: it calls the subscriber's callback for a callback id,
// but only when that id was enabled, as CUPTI does.
#include <cupti.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

namespace {

std::mutex g_mu;
CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
std::set<std::pair<uint32_t, uint32_t>> g_enabled;  // (domain, cbid)
std::set<uint32_t> g_domains;                       // whole domains (cuptiEnableDomain / AllDomains)
int g_subscriber = 0;

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  std::lock_guard lock(g_mu);
  if (g_callback) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_callback = callback;
  g_userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId cbid) {
  std::lock_guard lock(g_mu);
  if (enable) {
    g_enabled.insert({uint32_t(domain), uint32_t(cbid)});
  } else {
    g_enabled.erase({uint32_t(domain), uint32_t(cbid)});
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain) {
  std::lock_guard lock(g_mu);
  if (enable) g_domains.insert(uint32_t(domain));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle) {
  std::lock_guard lock(g_mu);
  if (enable) g_domains.insert(~0u);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = 999;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult, const char** str) {
  *str = "fake CUPTI";
  return CUPTI_SUCCESS;
}

// ---- the test's side

// Copies up to `max` enabled (domain, cbid) pairs into `out` (two words each); returns how
// many are enabled.
__attribute__((visibility("default"))) size_t fake_cupti_enabled(uint32_t* out, size_t max) {
  std::lock_guard lock(g_mu);
  size_t i = 0;
  for (auto& [d, cb] : g_enabled) {
    if (i < max) {
      out[2 * i] = d;
      out[2 * i + 1] = cb;
    }
    ++i;
  }
  return g_enabled.size();
}

__attribute__((visibility("default"))) size_t fake_cupti_enabled_domains() {
  std::lock_guard lock(g_mu);
  return g_domains.size();
}

// Delivers one callback as CUPTI would; returns whether the subscriber saw it.
__attribute__((visibility("default"))) bool fake_cupti_deliver(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                                              const CUpti_CallbackData* data) {
  CUpti_CallbackFunc cb;
  void* user;
  {
    std::lock_guard lock(g_mu);
    bool on = g_domains.count(uint32_t(domain)) || g_domains.count(~0u) || g_enabled.count({uint32_t(domain), cbid});
    if (!on || !g_callback) return false;
    cb = g_callback;
    user = g_userdata;
  }
  cb(user, domain, cbid, data);
  return true;
}

}  // extern "C"
