// SanitizerSession: precise mode's event source. The Compute Sanitizer API and CUPTI cannot
// both subscribe in one process, so in precise mode this session replaces CuptiSession:
//
//   - Runtime and driver API callbacks. The Sanitizer API numbers its runtime and driver
//     callback ids as CUPTI does and passes the same generated *_params structs, so each
//     callback becomes the same ApiCall and goes to the same CudaCallHandler, which writes
//     the same records (launch, memcpy, memset, events, stream wait, synchronize,
//     allocations, streams, graphs) as in the default mode. Sanitizer callbacks carry no
//     correlation id: the session numbers each outermost API call itself.
//   - Resource callbacks: module loads (the module is patched), stream and context
//     destruction (pending results of their launches are collected first).
//   - Launch callbacks: a selected kernel's launch gets a LaunchIntervals slot of the
//     context's ring as its callback data; the patched code aggregates into it.
//   - Synchronize callbacks: at a stream or context synchronisation the slots of the
//     finished launches are copied back, turned into KernelAccess records
//     (slot_to_accesses) and reset.
//
// The Sanitizer library is loaded at run time (dlopen), as CUPTI is.
#pragma once

#include <cstdint>
#include <string>

#include "tracer/cuda_call_handler.h"
#include "tracer/precise/interval_buffer.h"
#include "tracer/precise/kernel_selection.h"

namespace streamrace::tracer::precise {

struct SanitizerOptions {
  KernelSelector selector = KernelSelector::all();
  std::string patches_path;       // the fatbin built from access_aggregator.cu
  uint32_t ring_slots = 1024;     // LaunchIntervals slots per context
  uint32_t granule_shift = kDefaultGranuleShift;
  bool filter_modules = true;     // patch only modules holding a selected kernel
  // Measure at most this many launches of each kernel with one launch shape (grid, block);
  // 0: every launch. The analysis gives the others the accesses the measured ones taught
  // (learned access signatures, docs/signatures.md), or the default tier's.
  uint32_t sample = 0;
  // With a sample limit: take the instrumentation out of a module once every kernel and shape
  // it launched is measured `sample` times and `unpatch_quiet` more selected launches (of any
  // module) brought it no new shape (SamplePlan); a new shape patches it again.
  bool unpatch = true;
  uint32_t unpatch_quiet = 1024;
  // Measure kernel nodes of graph launches (KernelNodeAccess); false: they run unmeasured.
  bool graph_nodes = true;
};

struct SessionCounts {
  uint64_t api_callbacks = 0;     // runtime/driver API callbacks received
  uint64_t patched_modules = 0;   // modules the device callback was inserted into
  uint64_t patched_launches = 0;  // launches that got an interval slot
  uint64_t skipped_modules = 0;   // modules holding no selected kernel, left unpatched
  uint64_t graph_kernel_nodes = 0;  // selected kernel nodes of graph launches left unmeasured
  uint64_t measured_graph_nodes = 0;  // kernel nodes of graph launches that got an interval slot
  uint64_t sampled_out = 0;         // selected launches left unmeasured by SanitizerOptions::sample
  uint64_t unpatched_modules = 0;   // modules unpatched once fully sampled
  uint64_t repatched_modules = 0;   // ... and patched again for a new launch shape
  uint64_t unmeasured_unpatched = 0;  // selected launches of a module not patched (failed or unpatched)
};

class SanitizerSession {
 public:
  // Subscribes and enables the callbacks. Returns "" on success, else why CUDA calls cannot
  // be captured this way.
  std::string start(CudaCallHandler& handler, SanitizerOptions options);
  // Waits for every stream with uncollected launches and writes their records (process exit).
  void collect_all();
  std::string library_path() const { return path_; }
  SessionCounts counts() const;

 private:
  bool load();
  void* lib_ = nullptr;
  void* subscriber_ = nullptr;
  std::string path_;
};

}  // namespace streamrace::tracer::precise
