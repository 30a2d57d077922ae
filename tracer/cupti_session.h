// CuptiSession: the thin CUPTI boundary. Loads libcupti at run time, subscribes, enables the
// callback ids the CudaCallHandler wants, translates each CUpti_CallbackData into an
// ApiCall, and turns activity records (device start/end per kernel, copy and set) into
// OpTiming records joined by correlation id. No CUDA semantics live here.
#pragma once

#include <cstdint>
#include <string>

#include "tracer/cuda_call_handler.h"

namespace streamrace::tracer {

class CuptiSession {
 public:
  // Subscribes and enables callbacks. Returns "" on success, else why CUDA calls cannot be
  // captured (the caller records it in the trace and says so once on stderr). Kernel
  // launches are taken from the driver's callbacks alone unless `runtime_launches`
  // (CudaCallHandler::cupti_runtime_cbids).
  std::string start(CudaCallHandler& handler, bool timing, bool runtime_launches = false);
  // Turns every callback start() enabled off (paused) or on again; false if not started.
  bool set_paused(bool paused);
  // Delivers the activity records CUPTI holds (forced: also those of running work).
  void flush_activity(bool forced);
  std::string version() const { return version_; }
  std::string library_path() const { return path_; }

 private:
  bool load();

  void* lib_ = nullptr;
  void* subscriber_ = nullptr;
  bool timing_ = false;
  bool runtime_launches_ = false;
  std::string version_;
  std::string path_;
};

// NVTX's injection entry (InitializeInjectionNvtx2) handed on to CUPTI's own, so that NVTX
// calls reach CUPTI's NVTX callback domain; 0 when CUPTI cannot be loaded.
int cupti_nvtx_injection(void* get_export_table);

}  // namespace streamrace::tracer
