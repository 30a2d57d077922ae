// StepMarkers: see step_markers.h.
#include "tracer/step_markers.h"

#include <nvtx3/nvToolsExt.h>
#include <cupti_nvtx_cbid.h>
#include <generated_nvtx_meta.h>

namespace streamrace::tracer {

namespace {

enum RangeRole : uint8_t { kOther = 0, kStep = 1, kWindow = 2 };

// The calling thread's open ranges, innermost last: the global ranges' stack, and one for all
// NVTX domains together (each domain has its own stack in NVTX; mixing domains on one thread
// can pair a pop with another domain's push).
std::vector<uint8_t>& open_ranges(bool domain) {
  thread_local std::vector<uint8_t> ranges[2];
  return ranges[domain ? 1 : 0];
}

const char* ascii_message(const nvtxEventAttributes_t* a) {
  if (a == nullptr || a->messageType != NVTX_MESSAGE_TYPE_ASCII) return nullptr;
  return a->message.ascii;
}

}  // namespace

void StepMarkers::range_pushed(std::string_view name, uint32_t api_id, bool domain) {
  const CaptureOptions& o = rec_->capture();
  uint8_t role = kOther;
  if (!o.step_range.empty() && name == o.step_range) role |= kStep;
  if (o.window == CaptureOptions::Window::kNvtxRange && name == o.range) role |= kWindow;
  auto& ranges = open_ranges(domain);
  if (ranges.size() < 4096) ranges.push_back(role);  // a program that never pops stays bounded
  if (role & kStep) rec_->mark_step(api_id);
  if ((role & kWindow) && depth_.fetch_add(1) == 0) rec_->mark_window(true, api_id);
}

void StepMarkers::range_popped(uint32_t api_id, bool domain) {
  auto& ranges = open_ranges(domain);
  if (ranges.empty()) return;
  const uint8_t role = ranges.back();
  ranges.pop_back();
  if ((role & kWindow) && depth_.fetch_sub(1) == 1) rec_->mark_window(false, api_id);
}

void StepMarkers::profiler(bool start, uint32_t api_id) {
  if (rec_->capture().window == CaptureOptions::Window::kProfiler) rec_->mark_window(start, api_id);
}

void StepMarkers::on_nvtx(uint32_t cbid, const void* params) {
  if (params == nullptr) return;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA: {
      const char* m = static_cast<const nvtxRangePushA_params*>(params)->message;
      range_pushed(m ? m : "", rec_->strings().intern("nvtxRangePushA"));
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushEx: {
      const char* m = ascii_message(static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib);
      range_pushed(m ? m : "", rec_->strings().intern("nvtxRangePushEx"));
      return;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      const char* m = ascii_message(static_cast<const nvtxDomainRangePushEx_params*>(params)->core.eventAttrib);
      range_pushed(m ? m : "", rec_->strings().intern("nvtxDomainRangePushEx"), true);
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushW:
      range_pushed("", 0);  // wide names are not matched, but the pop must find its push
      return;
    case CUPTI_CBID_NVTX_nvtxRangePop:
      range_popped(rec_->strings().intern("nvtxRangePop"));
      return;
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      range_popped(rec_->strings().intern("nvtxDomainRangePop"), true);
      return;
    default:
      return;
  }
}

std::vector<uint32_t> StepMarkers::nvtx_cbids() {
  return {CUPTI_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushW,       CUPTI_CBID_NVTX_nvtxRangePushEx,
          CUPTI_CBID_NVTX_nvtxRangePop,   CUPTI_CBID_NVTX_nvtxDomainRangePushEx, CUPTI_CBID_NVTX_nvtxDomainRangePop};
}

}  // namespace streamrace::tracer
