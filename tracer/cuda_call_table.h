// The call table: what each CUDA API call the tracer listens to is, as data. One row per
// CUPTI callback id (runtime or driver domain) names the call, its CallKind and the
// extractor that reads the call's generated *_params struct into a CudaCall, the one
// normalised description of a call that CudaCallHandler turns into a trace record. The
// rows are also exactly the callback ids CuptiSession (and precise mode's Sanitizer
// session) enable: a call absent from the table costs nothing and is never seen.
//
// Facts only: a row says what the call did (which stream, event, pointer, bytes), never
// what it implies for ordering; those rules live in analyzer/.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "traceformat/records.h"

namespace streamrace::tracer {

enum class ApiDomain : uint8_t { kRuntime, kDriver };

// What a call is, independent of the entry point (runtime, driver, per-thread variant).
enum class CallKind : uint8_t {
  kScopeOnly,  // runtime call recorded by nothing, enabled so that its driver calls are not
               // mistaken for the user's (cudaMemcpyToSymbol, cudaSetDevice, ...)
  kStreamCreate,
  kStreamDestroy,
  kEventCreate,
  kEventDestroy,
  kEventRecord,
  kStreamWaitEvent,
  kEventSynchronize,
  kEventQuery,
  kStreamSynchronize,
  kStreamQuery,
  kDeviceSynchronize,
  kAlloc,
  kFree,
  kMemcpy,
  kMemset,
  kKernelLaunch,
  kGraphLaunch,
  kStreamCapture,
  kGraphCall,  // instantiate, exec update, destroys, capture dependencies (GraphCall record)
  kGraphEdit,  // the explicit graph API: graphs created and cloned, nodes, edges (GraphEdit record)
  kProfilerStart,  // cudaProfilerStart: a capture window edge with window=profiler (CaptureMark), else nothing
  kProfilerStop,
  // A module, library or context went (cuModuleUnload, cuLibraryUnload, cuCtxDestroy, a primary
  // context reset or release): the driver may hand out its CUfunction and CUkernel handles
  // again, for other kernels, so what the tracer cached per handle is forgotten. No record.
  kFunctionsUnload,
};

// The trace record a call kind becomes (nullopt: none).
std::optional<trace::RecordKind> record_kind_of(CallKind kind);

// One call, as the extractor read it from the params struct. Fields a kind does not use
// stay zero. `stream` is the handle as the call named it (0, cudaStreamLegacy and
// cudaStreamPerThread included); the handler maps it to the trace's stream ids.
struct CudaCall {
  CallKind kind = CallKind::kScopeOnly;
  uint64_t stream = 0;
  bool has_stream = false;  // the call takes a stream, or runs on the default stream (sync copies)
  uint64_t event = 0;
  uint64_t ptr = 0;    // allocation, freed pointer, copy or set destination, graph exec
  uint64_t src = 0;    // copies
  uint64_t bytes = 0;  // allocation size, copied / set extent, unmapped size (0 for other frees)
  trace::AllocKind alloc_kind = trace::AllocKind::kDevice;
  trace::CopyKind copy_kind = trace::CopyKind::kDefault;
  bool async = false;  // copies and sets: the ...Async entry points
  uint32_t flags = 0;  // stream and event creation
  int32_t priority = 0;
  bool capture_begin = false;
  uint32_t capture_flags = 0;  // trace::CaptureFlags (begin)
  // Graphs: the graph a capture made (end, read at exit) or captured into (begin to graph),
  // the graph an instantiate or exec update took; `ptr` is the exec (created or named).
  uint64_t graph = 0;
  trace::GraphAction graph_action = trace::GraphAction::kInstantiate;
  uint32_t graph_flags = 0;  // instantiate: trace::GraphCallFlags
  // The explicit graph API (kGraphEdit). `graph` is the graph edited (an exec setter's exec);
  // `node` the node (an add's, read at exit); `other` the child graph, the event, or a clone's
  // original. `deps` (and `edges_to`, for edge calls): `ndeps` handles as the call passed them.
  // A node's work is in the copy (ptr, src, bytes, copy_kind), set (ptr, bytes) and launch
  // (func, grid, block, args, packed) fields.
  trace::GraphEditAction edit = trace::GraphEditAction::kCreate;
  trace::GraphNodeType node_type = trace::GraphNodeType::kEmpty;
  uint16_t edit_flags = 0;  // trace::GraphEditFlags
  uint64_t node = 0;
  uint64_t other = 0;
  const void* const* deps = nullptr;
  const void* const* edges_to = nullptr;
  size_t ndeps = 0;
  // Kernel launches. `func`: a CUfunction, a CUkernel (`library_kernel`), or 0 when only the
  // runtime's host stub is known (its parameters cannot be described). `args`: kernelParams
  // (a pointer per argument); `packed`: one buffer with every argument at its layout offset.
  uint64_t func = 0;
  bool library_kernel = false;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  void* const* args = nullptr;
  const void* packed = nullptr;
};

// A driver launch's own arguments (CudaCall's launch fields and its stream), for the call
// handler's lean path (CudaCallHandler::on_call): filled without a whole CudaCall.
struct LaunchArgs {
  uint64_t func = 0;
  uint64_t stream = 0;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  void* const* args = nullptr;
  const void* packed = nullptr;
  bool library_kernel = false;
};

struct CallSpec {
  ApiDomain domain;
  uint32_t cbid;           // CUPTI_RUNTIME_TRACE_CBID_* or CUPTI_DRIVER_TRACE_CBID_*
  const char* name;        // the API name the trace records
  CallKind kind;
  bool per_thread_default;  // a _ptsz/_ptds entry point: stream 0 is the per-thread stream
  void (*extract)(const void* params, CudaCall& out);  // null for kScopeOnly and param-less calls
  // Driver kernel launches (cuLaunchKernel, cuLaunchKernelEx and their _ptsz): their LaunchArgs,
  // the same fields `extract` gives; null for every other row.
  void (*launch)(const void* params, LaunchArgs& out) = nullptr;
};

// Every row, runtime rows first.
std::span<const CallSpec> call_table();
// The row of a callback id, or null when the tracer does not listen to it.
const CallSpec* find_call(ApiDomain domain, uint32_t cbid);
// Largest callback id of a domain's rows (sizes per-id caches).
uint32_t max_cbid(ApiDomain domain);

}  // namespace streamrace::tracer
