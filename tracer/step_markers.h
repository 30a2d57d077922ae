// StepMarkers: the calls that move a capture window or count steps (docs/long-runs.md),
// turned into the recorder's marks. A push of the NVTX range named by `step_range` starts a
// step; with `window=nvtx:NAME` the window is open while any thread is inside a range NAME;
// with `window=profiler` it is open from cudaProfilerStart to cudaProfilerStop. NVTX ranges
// reach the tracer as CUPTI's NVTX callbacks (the library is the process's NVTX injection
// and hands NVTX over to CUPTI, tracer/injection.cpp). Per-thread range stacks: a pop names no
// range, so each thread remembers which of its open ranges were ours.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tracer/trace_recorder.h"

namespace streamrace::tracer {

class StepMarkers {
 public:
  explicit StepMarkers(TraceRecorder& rec) : rec_(&rec) {}
  void set_recorder(TraceRecorder& rec) {
    rec_ = &rec;
    depth_.store(0);
  }

  // `domain`: nvtxDomainRangePushEx / nvtxDomainRangePop (a stack apart from the global one).
  void range_pushed(std::string_view name, uint32_t api_id, bool domain = false);
  void range_popped(uint32_t api_id, bool domain = false);
  void profiler(bool start, uint32_t api_id);
  // A CUPTI NVTX-domain callback: `cbid` a CUPTI_CBID_NVTX_* id, `params` its params struct.
  void on_nvtx(uint32_t cbid, const void* params);
  // The NVTX callback ids on_nvtx understands (pushes and pops; CuptiSession enables them
  // when the capture needs NVTX).
  static std::vector<uint32_t> nvtx_cbids();

 private:
  TraceRecorder* rec_;
  std::atomic<int> depth_{0};  // threads' open window ranges
};

}  // namespace streamrace::tracer
