// The call table: see cuda_call_table.h.
//
// Extractors are templates over the generated params struct and read fields by name, so one
// extractor serves a call's runtime, driver and per-thread entry points: the runtime names a
// stream `stream` (sometimes `hStream`), the driver `hStream`; an event `event` / `hEvent`;
// a size `size` / `count` / `bytesize` / `ByteCount`; and so on. A row whose struct has none
// of the names an extractor reads does not compile.
#include "tracer/cuda_call_table.h"

// generated_cuda_meta.h names the legacy (_v1) driver types that cuda.h declares only for
// this internal build mode; the table calls no driver function, so the mode is harmless.
#define __CUDA_API_VERSION_INTERNAL 1

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <generated_cuda_meta.h>
#include <generated_cuda_runtime_api_meta.h>

#include <algorithm>
#include <vector>

namespace streamrace::tracer {

namespace {

using trace::AllocKind;
using trace::CopyKind;

template <typename T>
uint64_t H(T v) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<uint64_t>(v);
  } else {
    return uint64_t(v);
  }
}

template <typename P>
const P& as(const void* raw) {
  return *static_cast<const P*>(raw);
}

// ---------------------------------------------------------------------------------------
// Fields by name, whichever spelling the struct uses.

template <typename P>
constexpr bool kTakesStream = requires(const P& p) { p.hStream; } || requires(const P& p) { p.stream; };

// The stream a call names; 0 (the default stream) for calls without one, such as cudaMemcpy.
template <typename P>
uint64_t stream_of(const P& p) {
  if constexpr (requires { p.hStream; }) {
    return H(p.hStream);
  } else if constexpr (requires { p.stream; }) {
    return H(p.stream);
  } else {
    return 0;
  }
}

template <typename P>
uint64_t event_of(const P& p) {
  if constexpr (requires { p.hEvent; }) {
    return H(p.hEvent);
  } else {
    return H(p.event);
  }
}

template <typename P>
uint32_t flags_of(const P& p) {
  if constexpr (requires { p.flags; }) {
    return p.flags;
  } else if constexpr (requires { p.Flags; }) {
    return p.Flags;
  } else {
    return 0;
  }
}

template <typename P>
uint64_t size_of(const P& p) {
  if constexpr (requires { p.bytesize; }) {
    return p.bytesize;
  } else if constexpr (requires { p.ByteCount; }) {
    return p.ByteCount;
  } else if constexpr (requires { p.count; }) {
    return p.count;
  } else {
    return p.size;
  }
}

// Where an allocation call writes its result.
template <typename P>
uint64_t allocated_ptr(const P& p) {
  if constexpr (requires { p.dptr; }) {
    return H(*p.dptr);
  } else if constexpr (requires { p.devPtr; }) {
    return H(*p.devPtr);
  } else if constexpr (requires { p.pHost; }) {
    return H(*p.pHost);
  } else if constexpr (requires { p.pp; }) {
    return H(*p.pp);
  } else {
    return H(*p.ptr);
  }
}

// The pointer a free, register, unregister, map or unmap call is given.
template <typename P>
uint64_t given_ptr(const P& p) {
  if constexpr (requires { p.dptr; }) {
    return H(p.dptr);
  } else if constexpr (requires { p.devPtr; }) {
    return H(p.devPtr);
  } else if constexpr (requires { p.p; }) {
    return H(p.p);
  } else if constexpr (requires { p.array; }) {
    return H(p.array);
  } else {
    return H(p.ptr);
  }
}

template <typename P>
uint64_t dst_of(const P& p) {
  if constexpr (requires { p.dstDevice; }) {
    return H(p.dstDevice);
  } else if constexpr (requires { p.dstHost; }) {
    return H(p.dstHost);
  } else if constexpr (requires { p.devPtr; }) {
    return H(p.devPtr);
  } else {
    return H(p.dst);
  }
}

template <typename P>
uint64_t src_of(const P& p) {
  if constexpr (requires { p.srcDevice; }) {
    return H(p.srcDevice);
  } else if constexpr (requires { p.srcHost; }) {
    return H(p.srcHost);
  } else {
    return H(p.src);
  }
}

// 2D copies and sets touch rows of `width` bytes `pitch` apart: the extent from the first
// to the last byte touched.
uint64_t extent_2d(uint64_t pitch, uint64_t width, uint64_t height) {
  return height == 0 ? 0 : pitch * (height - 1) + width;
}

void set_stream(CudaCall& c, uint64_t stream) {
  c.stream = stream;
  c.has_stream = true;
}

// ---------------------------------------------------------------------------------------
// Extractors, one per shape of call.

template <typename P>
void stream_arg(const void* raw, CudaCall& c) {
  set_stream(c, stream_of(as<P>(raw)));
}

template <typename P>
void event_arg(const void* raw, CudaCall& c) {
  c.event = event_of(as<P>(raw));
}

// Event record and stream wait: an event and a stream.
template <typename P>
void event_and_stream(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.event = event_of(p);
  set_stream(c, stream_of(p));
}

template <typename P>
void created_stream(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  if constexpr (requires { p.phStream; }) {
    c.stream = H(*p.phStream);
  } else {
    c.stream = H(*p.pStream);
  }
  c.flags = flags_of(p);
  if constexpr (requires { p.priority; }) c.priority = p.priority;
}

template <typename P>
void created_event(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  if constexpr (requires { p.phEvent; }) {
    c.event = H(*p.phEvent);
  } else {
    c.event = H(*p.event);
  }
  c.flags = flags_of(p);
}

// An allocation the call returns through an out parameter (stream-ordered ones on a stream).
template <typename P, AllocKind K>
void allocation(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.ptr = allocated_ptr(p);
  c.bytes = size_of(p);
  c.alloc_kind = K;
  if constexpr (kTakesStream<P>) set_stream(c, stream_of(p));
}

// Pitched allocations: `*pitch` bytes per row.
template <typename P>
void pitched_allocation(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.ptr = allocated_ptr(p);
  if constexpr (requires { p.pPitch; }) {
    c.bytes = uint64_t(*p.pPitch) * p.Height;
  } else {
    c.bytes = uint64_t(*p.pitch) * p.height;
  }
}

void malloc_3d(const void* raw, CudaCall& c) {
  const auto& p = as<cudaMalloc3D_v3020_params>(raw);
  c.ptr = H(p.pitchedDevPtr->ptr);
  c.bytes = uint64_t(p.pitchedDevPtr->pitch) * p.extent.height * p.extent.depth;
}

// Memory the caller already has, made known to CUDA (host registration, a VMM mapping).
template <typename P, AllocKind K>
void given_range(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.ptr = given_ptr(p);
  c.bytes = size_of(p);
  c.alloc_kind = K;
}

// A free of a pointer. K: the kind recorded when the tracer never saw the allocation.
template <typename P, AllocKind K>
void release(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.ptr = given_ptr(p);
  c.alloc_kind = K;
  if constexpr (kTakesStream<P>) set_stream(c, stream_of(p));
}

CopyKind copy_kind_arg(int kind) {
  return kind < 0 || kind > int(CopyKind::kDefault) ? CopyKind::kDefault : CopyKind(kind);
}

// A copy. The runtime passes the direction (`kind`); the driver's entry points are named by
// it (K). Calls without a stream run on the default stream.
template <typename P, CopyKind K = CopyKind::kDefault>
void copy(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.ptr = dst_of(p);
  c.src = src_of(p);
  if constexpr (requires { p.width; }) {
    c.bytes = extent_2d(p.dpitch, p.width, p.height);
  } else {
    c.bytes = size_of(p);
  }
  if constexpr (requires { p.kind; }) {
    c.copy_kind = copy_kind_arg(p.kind);
  } else {
    c.copy_kind = K;
  }
  c.async = kTakesStream<P>;
  set_stream(c, stream_of(p));
}

// A set of `N` elements of `Elem` bytes (driver) or `count` bytes (runtime).
template <typename P, unsigned Elem = 1>
void set(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.ptr = dst_of(p);
  if constexpr (requires { p.width; }) {
    c.bytes = extent_2d(p.pitch, p.width, p.height);
  } else if constexpr (requires { p.N; }) {
    c.bytes = uint64_t(p.N) * Elem;
  } else {
    c.bytes = p.count;
  }
  c.async = kTakesStream<P>;
  set_stream(c, stream_of(p));
}

void dims(CudaCall& c, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz) {
  const uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  std::copy(grid, grid + 3, c.grid);
  std::copy(block, block + 3, c.block);
}
void dims(CudaCall& c, const dim3& grid, const dim3& block) {
  dims(c, grid.x, grid.y, grid.z, block.x, block.y, block.z);
}

// Layout of __cudaLaunchKernel (CUDA 13's launch stub), which has no generated params struct.
struct InternalLaunchParams {
  const void* kernel;  // cudaKernel_t, i.e. a CUkernel
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};

// Runtime launches. cudaLaunchKernel passes a host stub (which the driver cannot describe, so
// `func` stays 0); CUDA 13's __cudaLaunchKernel passes a CUkernel.
template <typename P>
void runtime_launch(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  if constexpr (requires { p.kernel; }) {
    c.func = H(p.kernel);
    c.library_kernel = true;
  }
  dims(c, p.gridDim, p.blockDim);
  c.args = p.args;
  set_stream(c, stream_of(p));
}

template <typename P>
void runtime_launch_ex(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  dims(c, p.config->gridDim, p.config->blockDim);
  c.args = p.args;
  set_stream(c, H(p.config->stream));
}

// The packed argument buffer of a driver launch given `extra` instead of kernelParams.
const void* packed_arguments(void* const* kernel_params, void** extra) {
  if (kernel_params != nullptr || extra == nullptr) return nullptr;
  for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2)
    if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) return e[1];
  return nullptr;
}

// cuLaunchKernel and cuLaunchCooperativeKernel (the same without `extra`).
template <typename P>
void driver_launch(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.func = H(p.f);
  dims(c, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ);
  c.args = p.kernelParams;
  if constexpr (requires { p.extra; }) c.packed = packed_arguments(p.kernelParams, p.extra);
  set_stream(c, H(p.hStream));
}

template <typename P>
void driver_launch_ex(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  const CUlaunchConfig& cfg = *p.config;
  c.func = H(p.f);
  dims(c, cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ);
  c.args = p.kernelParams;
  c.packed = packed_arguments(p.kernelParams, p.extra);
  set_stream(c, H(cfg.hStream));
}

template <typename P>
void graph_launch(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  if constexpr (requires { p.graphExec; }) {
    c.ptr = H(p.graphExec);
  } else if constexpr (requires { p.hGraphExec; }) {
    c.ptr = H(p.hGraphExec);
  } else {
    c.ptr = H(p.hGraph);
  }
  set_stream(c, stream_of(p));
}

template <typename P, bool Begin>
void capture(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  set_stream(c, stream_of(p));
  c.capture_begin = Begin;
  if constexpr (requires { p.mode; }) c.capture_flags = uint32_t(p.mode) & trace::kCaptureModeMask;
  if constexpr (requires { p.graph; }) {
    c.graph = H(p.graph);  // cudaStreamBeginCaptureToGraph
    c.capture_flags |= trace::kCaptureToGraph;
  } else if constexpr (requires { p.hGraph; }) {
    c.graph = H(p.hGraph);
    c.capture_flags |= trace::kCaptureToGraph;
  }
  // End: the graph made, read at exit (the handler records runtime and driver calls there).
  if constexpr (requires { p.pGraph; }) c.graph = p.pGraph ? H(*p.pGraph) : 0;
  if constexpr (requires { p.phGraph; }) c.graph = p.phGraph ? H(*p.phGraph) : 0;
}

// cudaGraphInstantiate* / cuGraphInstantiate*: graph -> exec, the exec read at exit.
template <typename P>
void graph_instantiate(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.graph_action = trace::GraphAction::kInstantiate;
  if constexpr (requires { p.pGraphExec; }) {
    c.ptr = p.pGraphExec ? H(*p.pGraphExec) : 0;
    c.graph = H(p.graph);
  } else {
    c.ptr = p.phGraphExec ? H(*p.phGraphExec) : 0;
    c.graph = H(p.hGraph);
  }
}

template <typename P>
void graph_exec_update(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.graph_action = trace::GraphAction::kExecUpdate;
  c.ptr = H(p.hGraphExec);
  c.graph = H(p.hGraph);
}

template <typename P>
void graph_exec_destroy(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.graph_action = trace::GraphAction::kExecDestroy;
  if constexpr (requires { p.graphExec; }) {
    c.ptr = H(p.graphExec);
  } else {
    c.ptr = H(p.hGraphExec);
  }
}

template <typename P>
void graph_destroy(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.graph_action = trace::GraphAction::kGraphDestroy;
  if constexpr (requires { p.graph; }) {
    c.graph = H(p.graph);
  } else {
    c.graph = H(p.hGraph);
  }
}

// cudaStreamUpdateCaptureDependencies: the capture's dependency set changes in a way the
// trace does not show (nodes added with the explicit graph API); named, not modelled.
template <typename P>
void capture_dependencies(const void* raw, CudaCall& c) {
  set_stream(c, stream_of(as<P>(raw)));
  c.graph_action = trace::GraphAction::kCaptureDependencies;
}

// ---------------------------------------------------------------------------------------
// The rows. Runtime rows are kept where the runtime call is the operation the user wrote:
// it names the API in the trace, and the stream as the user named it (the driver call inside
// may name the runtime's default stream by an internal handle). Driver rows catch programs
// and libraries that call the driver directly (Triton, NCCL, PyTorch's expandable segments),
// and the kernel launch inside a runtime launch, which alone carries the CUfunction needed to
// scan its arguments. The _ptsz/_ptds rows are the per-thread default stream entry points.

using K = CallKind;
constexpr auto kRt = ApiDomain::kRuntime;
constexpr auto kDr = ApiDomain::kDriver;
constexpr bool kLegacy = false;  // stream 0 is the legacy default stream
constexpr bool kPerThread = true;

#define SR_RT(ID, NAME, KIND, PT, X) {kRt, CUPTI_RUNTIME_TRACE_CBID_##ID, NAME, K::KIND, PT, X}
#define SR_DR(ID, NAME, KIND, PT, X) {kDr, CUPTI_DRIVER_TRACE_CBID_##ID, NAME, K::KIND, PT, X}
#define SR_P(ID) ID##_params

// clang-format off
const CallSpec kTable[] = {
    // ---- runtime: streams and events
    SR_RT(cudaStreamCreate_v3020, "cudaStreamCreate", kStreamCreate, kLegacy, created_stream<SR_P(cudaStreamCreate_v3020)>),
    SR_RT(cudaStreamCreateWithFlags_v5000, "cudaStreamCreateWithFlags", kStreamCreate, kLegacy, created_stream<SR_P(cudaStreamCreateWithFlags_v5000)>),
    SR_RT(cudaStreamCreateWithPriority_v5050, "cudaStreamCreateWithPriority", kStreamCreate, kLegacy, created_stream<SR_P(cudaStreamCreateWithPriority_v5050)>),
    // cudaStreamDestroy_v3020 has no params struct of its own: it is _v5050's.
    SR_RT(cudaStreamDestroy_v3020, "cudaStreamDestroy", kStreamDestroy, kLegacy, stream_arg<SR_P(cudaStreamDestroy_v5050)>),
    SR_RT(cudaStreamDestroy_v5050, "cudaStreamDestroy", kStreamDestroy, kLegacy, stream_arg<SR_P(cudaStreamDestroy_v5050)>),
    SR_RT(cudaEventCreate_v3020, "cudaEventCreate", kEventCreate, kLegacy, created_event<SR_P(cudaEventCreate_v3020)>),
    SR_RT(cudaEventCreateWithFlags_v3020, "cudaEventCreateWithFlags", kEventCreate, kLegacy, created_event<SR_P(cudaEventCreateWithFlags_v3020)>),
    SR_RT(cudaEventDestroy_v3020, "cudaEventDestroy", kEventDestroy, kLegacy, event_arg<SR_P(cudaEventDestroy_v3020)>),
    SR_RT(cudaEventRecord_v3020, "cudaEventRecord", kEventRecord, kLegacy, event_and_stream<SR_P(cudaEventRecord_v3020)>),
    SR_RT(cudaEventRecord_ptsz_v7000, "cudaEventRecord", kEventRecord, kPerThread, event_and_stream<SR_P(cudaEventRecord_ptsz_v7000)>),
    SR_RT(cudaEventRecordWithFlags_v11010, "cudaEventRecordWithFlags", kEventRecord, kLegacy, event_and_stream<SR_P(cudaEventRecordWithFlags_v11010)>),
    SR_RT(cudaEventRecordWithFlags_ptsz_v11010, "cudaEventRecordWithFlags", kEventRecord, kPerThread, event_and_stream<SR_P(cudaEventRecordWithFlags_ptsz_v11010)>),
    SR_RT(cudaStreamWaitEvent_v3020, "cudaStreamWaitEvent", kStreamWaitEvent, kLegacy, event_and_stream<SR_P(cudaStreamWaitEvent_v3020)>),
    SR_RT(cudaStreamWaitEvent_ptsz_v7000, "cudaStreamWaitEvent", kStreamWaitEvent, kPerThread, event_and_stream<SR_P(cudaStreamWaitEvent_ptsz_v7000)>),
    SR_RT(cudaEventSynchronize_v3020, "cudaEventSynchronize", kEventSynchronize, kLegacy, event_arg<SR_P(cudaEventSynchronize_v3020)>),
    SR_RT(cudaEventQuery_v3020, "cudaEventQuery", kEventQuery, kLegacy, event_arg<SR_P(cudaEventQuery_v3020)>),
    SR_RT(cudaStreamSynchronize_v3020, "cudaStreamSynchronize", kStreamSynchronize, kLegacy, stream_arg<SR_P(cudaStreamSynchronize_v3020)>),
    SR_RT(cudaStreamSynchronize_ptsz_v7000, "cudaStreamSynchronize", kStreamSynchronize, kPerThread, stream_arg<SR_P(cudaStreamSynchronize_ptsz_v7000)>),
    SR_RT(cudaStreamQuery_v3020, "cudaStreamQuery", kStreamQuery, kLegacy, stream_arg<SR_P(cudaStreamQuery_v3020)>),
    SR_RT(cudaStreamQuery_ptsz_v7000, "cudaStreamQuery", kStreamQuery, kPerThread, stream_arg<SR_P(cudaStreamQuery_ptsz_v7000)>),
    SR_RT(cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize", kDeviceSynchronize, kLegacy, nullptr),
    SR_RT(cudaThreadSynchronize_v3020, "cudaThreadSynchronize", kDeviceSynchronize, kLegacy, nullptr),
    SR_RT(cudaDeviceReset_v3020, "cudaDeviceReset", kDeviceSynchronize, kLegacy, nullptr),
    // ---- runtime: memory
    SR_RT(cudaMalloc_v3020, "cudaMalloc", kAlloc, kLegacy, (allocation<SR_P(cudaMalloc_v3020), AllocKind::kDevice>)),
    SR_RT(cudaMallocPitch_v3020, "cudaMallocPitch", kAlloc, kLegacy, pitched_allocation<SR_P(cudaMallocPitch_v3020)>),
    SR_RT(cudaMalloc3D_v3020, "cudaMalloc3D", kAlloc, kLegacy, malloc_3d),
    SR_RT(cudaMallocManaged_v6000, "cudaMallocManaged", kAlloc, kLegacy, (allocation<SR_P(cudaMallocManaged_v6000), AllocKind::kManaged>)),
    SR_RT(cudaMallocHost_v3020, "cudaMallocHost", kAlloc, kLegacy, (allocation<SR_P(cudaMallocHost_v3020), AllocKind::kHostPinned>)),
    SR_RT(cudaHostAlloc_v3020, "cudaHostAlloc", kAlloc, kLegacy, (allocation<SR_P(cudaHostAlloc_v3020), AllocKind::kHostPinned>)),
    SR_RT(cudaHostRegister_v4000, "cudaHostRegister", kAlloc, kLegacy, (given_range<SR_P(cudaHostRegister_v4000), AllocKind::kHostRegistered>)),
    SR_RT(cudaHostUnregister_v4000, "cudaHostUnregister", kFree, kLegacy, (release<SR_P(cudaHostUnregister_v4000), AllocKind::kHostRegistered>)),
    SR_RT(cudaFree_v3020, "cudaFree", kFree, kLegacy, (release<SR_P(cudaFree_v3020), AllocKind::kDevice>)),
    SR_RT(cudaFreeHost_v3020, "cudaFreeHost", kFree, kLegacy, (release<SR_P(cudaFreeHost_v3020), AllocKind::kHostPinned>)),
    SR_RT(cudaFreeArray_v3020, "cudaFreeArray", kFree, kLegacy, (release<SR_P(cudaFreeArray_v3020), AllocKind::kArray>)),
    SR_RT(cudaMallocAsync_v11020, "cudaMallocAsync", kAlloc, kLegacy, (allocation<SR_P(cudaMallocAsync_v11020), AllocKind::kAsync>)),
    SR_RT(cudaMallocAsync_ptsz_v11020, "cudaMallocAsync", kAlloc, kPerThread, (allocation<SR_P(cudaMallocAsync_ptsz_v11020), AllocKind::kAsync>)),
    SR_RT(cudaMallocFromPoolAsync_v11020, "cudaMallocFromPoolAsync", kAlloc, kLegacy, (allocation<SR_P(cudaMallocFromPoolAsync_v11020), AllocKind::kAsync>)),
    SR_RT(cudaMallocFromPoolAsync_ptsz_v11020, "cudaMallocFromPoolAsync", kAlloc, kPerThread, (allocation<SR_P(cudaMallocFromPoolAsync_ptsz_v11020), AllocKind::kAsync>)),
    SR_RT(cudaFreeAsync_v11020, "cudaFreeAsync", kFree, kLegacy, (release<SR_P(cudaFreeAsync_v11020), AllocKind::kAsync>)),
    SR_RT(cudaFreeAsync_ptsz_v11020, "cudaFreeAsync", kFree, kPerThread, (release<SR_P(cudaFreeAsync_ptsz_v11020), AllocKind::kAsync>)),
    // ---- runtime: copies and sets
    SR_RT(cudaMemcpy_v3020, "cudaMemcpy", kMemcpy, kLegacy, copy<SR_P(cudaMemcpy_v3020)>),
    SR_RT(cudaMemcpy_ptds_v7000, "cudaMemcpy", kMemcpy, kPerThread, copy<SR_P(cudaMemcpy_ptds_v7000)>),
    SR_RT(cudaMemcpyAsync_v3020, "cudaMemcpyAsync", kMemcpy, kLegacy, copy<SR_P(cudaMemcpyAsync_v3020)>),
    SR_RT(cudaMemcpyAsync_ptsz_v7000, "cudaMemcpyAsync", kMemcpy, kPerThread, copy<SR_P(cudaMemcpyAsync_ptsz_v7000)>),
    SR_RT(cudaMemcpy2D_v3020, "cudaMemcpy2D", kMemcpy, kLegacy, copy<SR_P(cudaMemcpy2D_v3020)>),
    SR_RT(cudaMemcpy2D_ptds_v7000, "cudaMemcpy2D", kMemcpy, kPerThread, copy<SR_P(cudaMemcpy2D_ptds_v7000)>),
    SR_RT(cudaMemcpy2DAsync_v3020, "cudaMemcpy2DAsync", kMemcpy, kLegacy, copy<SR_P(cudaMemcpy2DAsync_v3020)>),
    SR_RT(cudaMemcpy2DAsync_ptsz_v7000, "cudaMemcpy2DAsync", kMemcpy, kPerThread, copy<SR_P(cudaMemcpy2DAsync_ptsz_v7000)>),
    SR_RT(cudaMemcpyPeer_v4000, "cudaMemcpyPeer", kMemcpy, kLegacy, (copy<SR_P(cudaMemcpyPeer_v4000), CopyKind::kDeviceToDevice>)),
    SR_RT(cudaMemcpyPeerAsync_v4000, "cudaMemcpyPeerAsync", kMemcpy, kLegacy, (copy<SR_P(cudaMemcpyPeerAsync_v4000), CopyKind::kDeviceToDevice>)),
    SR_RT(cudaMemset_v3020, "cudaMemset", kMemset, kLegacy, set<SR_P(cudaMemset_v3020)>),
    SR_RT(cudaMemset_ptds_v7000, "cudaMemset", kMemset, kPerThread, set<SR_P(cudaMemset_ptds_v7000)>),
    SR_RT(cudaMemsetAsync_v3020, "cudaMemsetAsync", kMemset, kLegacy, set<SR_P(cudaMemsetAsync_v3020)>),
    SR_RT(cudaMemsetAsync_ptsz_v7000, "cudaMemsetAsync", kMemset, kPerThread, set<SR_P(cudaMemsetAsync_ptsz_v7000)>),
    SR_RT(cudaMemset2D_v3020, "cudaMemset2D", kMemset, kLegacy, set<SR_P(cudaMemset2D_v3020)>),
    SR_RT(cudaMemset2D_ptds_v7000, "cudaMemset2D", kMemset, kPerThread, set<SR_P(cudaMemset2D_ptds_v7000)>),
    SR_RT(cudaMemset2DAsync_v3020, "cudaMemset2DAsync", kMemset, kLegacy, set<SR_P(cudaMemset2DAsync_v3020)>),
    SR_RT(cudaMemset2DAsync_ptsz_v7000, "cudaMemset2DAsync", kMemset, kPerThread, set<SR_P(cudaMemset2DAsync_ptsz_v7000)>),
    // ---- runtime: launches, graphs, capture
    SR_RT(cudaLaunchKernel_v7000, "cudaLaunchKernel", kKernelLaunch, kLegacy, runtime_launch<SR_P(cudaLaunchKernel_v7000)>),
    SR_RT(cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel", kKernelLaunch, kPerThread, runtime_launch<SR_P(cudaLaunchKernel_ptsz_v7000)>),
    SR_RT(__cudaLaunchKernel_v13000, "cudaLaunchKernel", kKernelLaunch, kLegacy, runtime_launch<InternalLaunchParams>),
    SR_RT(__cudaLaunchKernel_ptsz_v13000, "cudaLaunchKernel", kKernelLaunch, kPerThread, runtime_launch<InternalLaunchParams>),
    SR_RT(cudaLaunchKernelExC_v11060, "cudaLaunchKernelExC", kKernelLaunch, kLegacy, runtime_launch_ex<SR_P(cudaLaunchKernelExC_v11060)>),
    SR_RT(cudaLaunchKernelExC_ptsz_v11060, "cudaLaunchKernelExC", kKernelLaunch, kPerThread, runtime_launch_ex<SR_P(cudaLaunchKernelExC_ptsz_v11060)>),
    SR_RT(cudaLaunchCooperativeKernel_v9000, "cudaLaunchCooperativeKernel", kKernelLaunch, kLegacy, runtime_launch<SR_P(cudaLaunchCooperativeKernel_v9000)>),
    SR_RT(cudaLaunchCooperativeKernel_ptsz_v9000, "cudaLaunchCooperativeKernel", kKernelLaunch, kPerThread, runtime_launch<SR_P(cudaLaunchCooperativeKernel_ptsz_v9000)>),
    SR_RT(cudaGraphLaunch_v10000, "cudaGraphLaunch", kGraphLaunch, kLegacy, graph_launch<SR_P(cudaGraphLaunch_v10000)>),
    SR_RT(cudaGraphLaunch_ptsz_v10000, "cudaGraphLaunch", kGraphLaunch, kPerThread, graph_launch<SR_P(cudaGraphLaunch_ptsz_v10000)>),
    SR_RT(cudaStreamBeginCapture_v10000, "cudaStreamBeginCapture", kStreamCapture, kLegacy, (capture<SR_P(cudaStreamBeginCapture_v10000), true>)),
    SR_RT(cudaStreamBeginCapture_ptsz_v10000, "cudaStreamBeginCapture", kStreamCapture, kPerThread, (capture<SR_P(cudaStreamBeginCapture_ptsz_v10000), true>)),
    SR_RT(cudaStreamBeginCaptureToGraph_v12030, "cudaStreamBeginCaptureToGraph", kStreamCapture, kLegacy, (capture<SR_P(cudaStreamBeginCaptureToGraph_v12030), true>)),
    SR_RT(cudaStreamBeginCaptureToGraph_ptsz_v12030, "cudaStreamBeginCaptureToGraph", kStreamCapture, kPerThread, (capture<SR_P(cudaStreamBeginCaptureToGraph_ptsz_v12030), true>)),
    SR_RT(cudaStreamEndCapture_v10000, "cudaStreamEndCapture", kStreamCapture, kLegacy, (capture<SR_P(cudaStreamEndCapture_v10000), false>)),
    SR_RT(cudaStreamEndCapture_ptsz_v10000, "cudaStreamEndCapture", kStreamCapture, kPerThread, (capture<SR_P(cudaStreamEndCapture_ptsz_v10000), false>)),
    // cudaGraphInstantiate_v10000 (before CUDA 12) has no params struct in CUDA 13's headers:
    // its first two fields are _v12000's.
    SR_RT(cudaGraphInstantiate_v10000, "cudaGraphInstantiate", kGraphCall, kLegacy, graph_instantiate<SR_P(cudaGraphInstantiate_v12000)>),
    SR_RT(cudaGraphInstantiate_v12000, "cudaGraphInstantiate", kGraphCall, kLegacy, graph_instantiate<SR_P(cudaGraphInstantiate_v12000)>),
    SR_RT(cudaGraphInstantiateWithFlags_v11040, "cudaGraphInstantiateWithFlags", kGraphCall, kLegacy, graph_instantiate<SR_P(cudaGraphInstantiateWithFlags_v11040)>),
    SR_RT(cudaGraphInstantiateWithParams_v12000, "cudaGraphInstantiateWithParams", kGraphCall, kLegacy, graph_instantiate<SR_P(cudaGraphInstantiateWithParams_v12000)>),
    SR_RT(cudaGraphInstantiateWithParams_ptsz_v12000, "cudaGraphInstantiateWithParams", kGraphCall, kPerThread, graph_instantiate<SR_P(cudaGraphInstantiateWithParams_ptsz_v12000)>),
    SR_RT(cudaGraphExecUpdate_v10020, "cudaGraphExecUpdate", kGraphCall, kLegacy, graph_exec_update<SR_P(cudaGraphExecUpdate_v10020)>),
    SR_RT(cudaGraphExecDestroy_v10000, "cudaGraphExecDestroy", kGraphCall, kLegacy, graph_exec_destroy<SR_P(cudaGraphExecDestroy_v10000)>),
    SR_RT(cudaGraphDestroy_v10000, "cudaGraphDestroy", kGraphCall, kLegacy, graph_destroy<SR_P(cudaGraphDestroy_v10000)>),
    // _v11030 has no params struct of its own in CUDA 13's headers: the stream comes first in _v12030's.
    SR_RT(cudaStreamUpdateCaptureDependencies_v11030, "cudaStreamUpdateCaptureDependencies", kGraphCall, kLegacy, capture_dependencies<SR_P(cudaStreamUpdateCaptureDependencies_v12030)>),
    SR_RT(cudaStreamUpdateCaptureDependencies_ptsz_v11030, "cudaStreamUpdateCaptureDependencies", kGraphCall, kPerThread, capture_dependencies<SR_P(cudaStreamUpdateCaptureDependencies_ptsz_v12030)>),
    SR_RT(cudaStreamUpdateCaptureDependencies_v12030, "cudaStreamUpdateCaptureDependencies", kGraphCall, kLegacy, capture_dependencies<SR_P(cudaStreamUpdateCaptureDependencies_v12030)>),
    SR_RT(cudaStreamUpdateCaptureDependencies_ptsz_v12030, "cudaStreamUpdateCaptureDependencies", kGraphCall, kPerThread, capture_dependencies<SR_P(cudaStreamUpdateCaptureDependencies_ptsz_v12030)>),
    // ---- runtime calls whose internal driver calls would otherwise look like user operations
    SR_RT(cudaMemcpyToSymbol_v3020, "cudaMemcpyToSymbol", kScopeOnly, kLegacy, nullptr),
    SR_RT(cudaMemcpyFromSymbol_v3020, "cudaMemcpyFromSymbol", kScopeOnly, kLegacy, nullptr),
    SR_RT(cudaMemcpyToSymbolAsync_v3020, "cudaMemcpyToSymbolAsync", kScopeOnly, kLegacy, nullptr),
    SR_RT(cudaMemcpyFromSymbolAsync_v3020, "cudaMemcpyFromSymbolAsync", kScopeOnly, kLegacy, nullptr),
    SR_RT(cudaMemcpy3D_v3020, "cudaMemcpy3D", kScopeOnly, kLegacy, nullptr),
    SR_RT(cudaMemcpy3DAsync_v3020, "cudaMemcpy3DAsync", kScopeOnly, kLegacy, nullptr),
    SR_RT(cudaMallocArray_v3020, "cudaMallocArray", kScopeOnly, kLegacy, nullptr),
    SR_RT(cudaSetDevice_v3020, "cudaSetDevice", kScopeOnly, kLegacy, nullptr),

    // ---- driver: launches
    SR_DR(cuLaunchKernel, "cuLaunchKernel", kKernelLaunch, kLegacy, driver_launch<SR_P(cuLaunchKernel)>),
    SR_DR(cuLaunchKernel_ptsz, "cuLaunchKernel", kKernelLaunch, kPerThread, driver_launch<SR_P(cuLaunchKernel_ptsz)>),
    SR_DR(cuLaunchKernelEx, "cuLaunchKernelEx", kKernelLaunch, kLegacy, driver_launch_ex<SR_P(cuLaunchKernelEx)>),
    SR_DR(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", kKernelLaunch, kPerThread, driver_launch_ex<SR_P(cuLaunchKernelEx_ptsz)>),
    SR_DR(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", kKernelLaunch, kLegacy, driver_launch<SR_P(cuLaunchCooperativeKernel)>),
    SR_DR(cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel", kKernelLaunch, kPerThread, driver_launch<SR_P(cuLaunchCooperativeKernel_ptsz)>),
    // ---- driver: memory
    SR_DR(cuMemAlloc_v2, "cuMemAlloc_v2", kAlloc, kLegacy, (allocation<SR_P(cuMemAlloc_v2), AllocKind::kDevice>)),
    SR_DR(cuMemAllocPitch_v2, "cuMemAllocPitch_v2", kAlloc, kLegacy, pitched_allocation<SR_P(cuMemAllocPitch_v2)>),
    SR_DR(cuMemAllocManaged, "cuMemAllocManaged", kAlloc, kLegacy, (allocation<SR_P(cuMemAllocManaged), AllocKind::kManaged>)),
    SR_DR(cuMemAllocHost_v2, "cuMemAllocHost_v2", kAlloc, kLegacy, (allocation<SR_P(cuMemAllocHost_v2), AllocKind::kHostPinned>)),
    SR_DR(cuMemHostAlloc, "cuMemHostAlloc", kAlloc, kLegacy, (allocation<SR_P(cuMemHostAlloc), AllocKind::kHostPinned>)),
    SR_DR(cuMemHostRegister_v2, "cuMemHostRegister_v2", kAlloc, kLegacy, (given_range<SR_P(cuMemHostRegister_v2), AllocKind::kHostRegistered>)),
    SR_DR(cuMemHostUnregister, "cuMemHostUnregister", kFree, kLegacy, (release<SR_P(cuMemHostUnregister), AllocKind::kHostRegistered>)),
    SR_DR(cuMemFree_v2, "cuMemFree_v2", kFree, kLegacy, (release<SR_P(cuMemFree_v2), AllocKind::kDevice>)),
    SR_DR(cuMemFreeHost, "cuMemFreeHost", kFree, kLegacy, (release<SR_P(cuMemFreeHost), AllocKind::kHostPinned>)),
    SR_DR(cuMemAllocAsync, "cuMemAllocAsync", kAlloc, kLegacy, (allocation<SR_P(cuMemAllocAsync), AllocKind::kAsync>)),
    SR_DR(cuMemAllocAsync_ptsz, "cuMemAllocAsync", kAlloc, kPerThread, (allocation<SR_P(cuMemAllocAsync_ptsz), AllocKind::kAsync>)),
    SR_DR(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", kAlloc, kLegacy, (allocation<SR_P(cuMemAllocFromPoolAsync), AllocKind::kAsync>)),
    SR_DR(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", kAlloc, kPerThread, (allocation<SR_P(cuMemAllocFromPoolAsync_ptsz), AllocKind::kAsync>)),
    SR_DR(cuMemFreeAsync, "cuMemFreeAsync", kFree, kLegacy, (release<SR_P(cuMemFreeAsync), AllocKind::kAsync>)),
    SR_DR(cuMemFreeAsync_ptsz, "cuMemFreeAsync", kFree, kPerThread, (release<SR_P(cuMemFreeAsync_ptsz), AllocKind::kAsync>)),
    SR_DR(cuMemMap, "cuMemMap", kAlloc, kLegacy, (given_range<SR_P(cuMemMap), AllocKind::kVmmMap>)),
    // An unmap frees a range (bytes != 0), not one allocation.
    SR_DR(cuMemUnmap, "cuMemUnmap", kFree, kLegacy, (given_range<SR_P(cuMemUnmap), AllocKind::kVmmMap>)),
    // ---- driver: copies and sets
    SR_DR(cuMemcpy, "cuMemcpy", kMemcpy, kLegacy, copy<SR_P(cuMemcpy)>),
    SR_DR(cuMemcpy_ptds, "cuMemcpy", kMemcpy, kPerThread, copy<SR_P(cuMemcpy_ptds)>),
    SR_DR(cuMemcpyAsync, "cuMemcpyAsync", kMemcpy, kLegacy, copy<SR_P(cuMemcpyAsync)>),
    SR_DR(cuMemcpyAsync_ptsz, "cuMemcpyAsync", kMemcpy, kPerThread, copy<SR_P(cuMemcpyAsync_ptsz)>),
    SR_DR(cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2", kMemcpy, kLegacy, (copy<SR_P(cuMemcpyHtoD_v2), CopyKind::kHostToDevice>)),
    SR_DR(cuMemcpyHtoD_v2_ptds, "cuMemcpyHtoD_v2", kMemcpy, kPerThread, (copy<SR_P(cuMemcpyHtoD_v2_ptds), CopyKind::kHostToDevice>)),
    SR_DR(cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync_v2", kMemcpy, kLegacy, (copy<SR_P(cuMemcpyHtoDAsync_v2), CopyKind::kHostToDevice>)),
    SR_DR(cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync_v2", kMemcpy, kPerThread, (copy<SR_P(cuMemcpyHtoDAsync_v2_ptsz), CopyKind::kHostToDevice>)),
    SR_DR(cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2", kMemcpy, kLegacy, (copy<SR_P(cuMemcpyDtoH_v2), CopyKind::kDeviceToHost>)),
    SR_DR(cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH_v2", kMemcpy, kPerThread, (copy<SR_P(cuMemcpyDtoH_v2_ptds), CopyKind::kDeviceToHost>)),
    SR_DR(cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync_v2", kMemcpy, kLegacy, (copy<SR_P(cuMemcpyDtoHAsync_v2), CopyKind::kDeviceToHost>)),
    SR_DR(cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync_v2", kMemcpy, kPerThread, (copy<SR_P(cuMemcpyDtoHAsync_v2_ptsz), CopyKind::kDeviceToHost>)),
    SR_DR(cuMemcpyDtoD_v2, "cuMemcpyDtoD_v2", kMemcpy, kLegacy, (copy<SR_P(cuMemcpyDtoD_v2), CopyKind::kDeviceToDevice>)),
    SR_DR(cuMemcpyDtoD_v2_ptds, "cuMemcpyDtoD_v2", kMemcpy, kPerThread, (copy<SR_P(cuMemcpyDtoD_v2_ptds), CopyKind::kDeviceToDevice>)),
    SR_DR(cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync_v2", kMemcpy, kLegacy, (copy<SR_P(cuMemcpyDtoDAsync_v2), CopyKind::kDeviceToDevice>)),
    SR_DR(cuMemcpyDtoDAsync_v2_ptsz, "cuMemcpyDtoDAsync_v2", kMemcpy, kPerThread, (copy<SR_P(cuMemcpyDtoDAsync_v2_ptsz), CopyKind::kDeviceToDevice>)),
    SR_DR(cuMemsetD8_v2, "cuMemsetD8_v2", kMemset, kLegacy, set<SR_P(cuMemsetD8_v2)>),
    SR_DR(cuMemsetD8_v2_ptds, "cuMemsetD8_v2", kMemset, kPerThread, set<SR_P(cuMemsetD8_v2_ptds)>),
    SR_DR(cuMemsetD8Async, "cuMemsetD8Async", kMemset, kLegacy, set<SR_P(cuMemsetD8Async)>),
    SR_DR(cuMemsetD8Async_ptsz, "cuMemsetD8Async", kMemset, kPerThread, set<SR_P(cuMemsetD8Async_ptsz)>),
    SR_DR(cuMemsetD32_v2, "cuMemsetD32_v2", kMemset, kLegacy, (set<SR_P(cuMemsetD32_v2), 4>)),
    SR_DR(cuMemsetD32_v2_ptds, "cuMemsetD32_v2", kMemset, kPerThread, (set<SR_P(cuMemsetD32_v2_ptds), 4>)),
    SR_DR(cuMemsetD32Async, "cuMemsetD32Async", kMemset, kLegacy, (set<SR_P(cuMemsetD32Async), 4>)),
    SR_DR(cuMemsetD32Async_ptsz, "cuMemsetD32Async", kMemset, kPerThread, (set<SR_P(cuMemsetD32Async_ptsz), 4>)),
    // ---- driver: streams, events, synchronisation
    SR_DR(cuStreamCreate, "cuStreamCreate", kStreamCreate, kLegacy, created_stream<SR_P(cuStreamCreate)>),
    SR_DR(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", kStreamCreate, kLegacy, created_stream<SR_P(cuStreamCreateWithPriority)>),
    SR_DR(cuStreamDestroy_v2, "cuStreamDestroy_v2", kStreamDestroy, kLegacy, stream_arg<SR_P(cuStreamDestroy_v2)>),
    SR_DR(cuEventCreate, "cuEventCreate", kEventCreate, kLegacy, created_event<SR_P(cuEventCreate)>),
    SR_DR(cuEventDestroy_v2, "cuEventDestroy_v2", kEventDestroy, kLegacy, event_arg<SR_P(cuEventDestroy_v2)>),
    SR_DR(cuEventRecord, "cuEventRecord", kEventRecord, kLegacy, event_and_stream<SR_P(cuEventRecord)>),
    SR_DR(cuEventRecord_ptsz, "cuEventRecord", kEventRecord, kPerThread, event_and_stream<SR_P(cuEventRecord_ptsz)>),
    SR_DR(cuEventRecordWithFlags, "cuEventRecordWithFlags", kEventRecord, kLegacy, event_and_stream<SR_P(cuEventRecordWithFlags)>),
    SR_DR(cuEventRecordWithFlags_ptsz, "cuEventRecordWithFlags", kEventRecord, kPerThread, event_and_stream<SR_P(cuEventRecordWithFlags_ptsz)>),
    SR_DR(cuStreamWaitEvent, "cuStreamWaitEvent", kStreamWaitEvent, kLegacy, event_and_stream<SR_P(cuStreamWaitEvent)>),
    SR_DR(cuStreamWaitEvent_ptsz, "cuStreamWaitEvent", kStreamWaitEvent, kPerThread, event_and_stream<SR_P(cuStreamWaitEvent_ptsz)>),
    SR_DR(cuEventSynchronize, "cuEventSynchronize", kEventSynchronize, kLegacy, event_arg<SR_P(cuEventSynchronize)>),
    SR_DR(cuEventQuery, "cuEventQuery", kEventQuery, kLegacy, event_arg<SR_P(cuEventQuery)>),
    SR_DR(cuStreamSynchronize, "cuStreamSynchronize", kStreamSynchronize, kLegacy, stream_arg<SR_P(cuStreamSynchronize)>),
    SR_DR(cuStreamSynchronize_ptsz, "cuStreamSynchronize", kStreamSynchronize, kPerThread, stream_arg<SR_P(cuStreamSynchronize_ptsz)>),
    SR_DR(cuStreamQuery, "cuStreamQuery", kStreamQuery, kLegacy, stream_arg<SR_P(cuStreamQuery)>),
    SR_DR(cuStreamQuery_ptsz, "cuStreamQuery", kStreamQuery, kPerThread, stream_arg<SR_P(cuStreamQuery_ptsz)>),
    SR_DR(cuCtxSynchronize, "cuCtxSynchronize", kDeviceSynchronize, kLegacy, nullptr),
    // The _v2 form names a context; the device is still the callback's context's.
    SR_DR(cuCtxSynchronize_v2, "cuCtxSynchronize_v2", kDeviceSynchronize, kLegacy, nullptr),
    SR_DR(cuGraphLaunch, "cuGraphLaunch", kGraphLaunch, kLegacy, graph_launch<SR_P(cuGraphLaunch)>),
    SR_DR(cuGraphLaunch_ptsz, "cuGraphLaunch", kGraphLaunch, kPerThread, graph_launch<SR_P(cuGraphLaunch_ptsz)>),
    SR_DR(cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2", kStreamCapture, kLegacy, (capture<SR_P(cuStreamBeginCapture_v2), true>)),
    SR_DR(cuStreamBeginCapture_v2_ptsz, "cuStreamBeginCapture_v2", kStreamCapture, kPerThread, (capture<SR_P(cuStreamBeginCapture_v2_ptsz), true>)),
    SR_DR(cuStreamEndCapture, "cuStreamEndCapture", kStreamCapture, kLegacy, (capture<SR_P(cuStreamEndCapture), false>)),
    SR_DR(cuStreamEndCapture_ptsz, "cuStreamEndCapture", kStreamCapture, kPerThread, (capture<SR_P(cuStreamEndCapture_ptsz), false>)),
    SR_DR(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", kStreamCapture, kLegacy, (capture<SR_P(cuStreamBeginCaptureToGraph), true>)),
    SR_DR(cuStreamBeginCaptureToGraph_ptsz, "cuStreamBeginCaptureToGraph", kStreamCapture, kPerThread, (capture<SR_P(cuStreamBeginCaptureToGraph_ptsz), true>)),
    SR_DR(cuGraphInstantiate, "cuGraphInstantiate", kGraphCall, kLegacy, graph_instantiate<SR_P(cuGraphInstantiate)>),
    SR_DR(cuGraphInstantiate_v2, "cuGraphInstantiate", kGraphCall, kLegacy, graph_instantiate<SR_P(cuGraphInstantiate_v2)>),
    SR_DR(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", kGraphCall, kLegacy, graph_instantiate<SR_P(cuGraphInstantiateWithFlags)>),
    SR_DR(cuGraphInstantiateWithParams, "cuGraphInstantiateWithParams", kGraphCall, kLegacy, graph_instantiate<SR_P(cuGraphInstantiateWithParams)>),
    SR_DR(cuGraphInstantiateWithParams_ptsz, "cuGraphInstantiateWithParams", kGraphCall, kPerThread, graph_instantiate<SR_P(cuGraphInstantiateWithParams_ptsz)>),
    SR_DR(cuGraphExecUpdate, "cuGraphExecUpdate", kGraphCall, kLegacy, graph_exec_update<SR_P(cuGraphExecUpdate)>),
    SR_DR(cuGraphExecUpdate_v2, "cuGraphExecUpdate", kGraphCall, kLegacy, graph_exec_update<SR_P(cuGraphExecUpdate_v2)>),
    SR_DR(cuGraphExecDestroy, "cuGraphExecDestroy", kGraphCall, kLegacy, graph_exec_destroy<SR_P(cuGraphExecDestroy)>),
    SR_DR(cuGraphDestroy, "cuGraphDestroy", kGraphCall, kLegacy, graph_destroy<SR_P(cuGraphDestroy)>),
    SR_DR(cuStreamUpdateCaptureDependencies, "cuStreamUpdateCaptureDependencies", kGraphCall, kLegacy, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies)>),
    SR_DR(cuStreamUpdateCaptureDependencies_ptsz, "cuStreamUpdateCaptureDependencies", kGraphCall, kPerThread, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies_ptsz)>),
    SR_DR(cuStreamUpdateCaptureDependencies_v2, "cuStreamUpdateCaptureDependencies", kGraphCall, kLegacy, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies_v2)>),
    SR_DR(cuStreamUpdateCaptureDependencies_v2_ptsz, "cuStreamUpdateCaptureDependencies", kGraphCall, kPerThread, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies_v2_ptsz)>),
};
// clang-format on
#undef SR_RT
#undef SR_DR
#undef SR_P

struct Index {
  std::vector<const CallSpec*> runtime, driver;
  Index() {
    for (const CallSpec& s : kTable) {
      auto& v = s.domain == kRt ? runtime : driver;
      if (s.cbid >= v.size()) v.resize(s.cbid + 1, nullptr);
      v[s.cbid] = &s;
    }
  }
};

const Index& index() {
  static const Index i;
  return i;
}

}  // namespace

std::optional<trace::RecordKind> record_kind_of(CallKind kind) {
  using trace::RecordKind;
  switch (kind) {
    case CallKind::kScopeOnly: return std::nullopt;
    case CallKind::kStreamCreate: return RecordKind::kStreamCreate;
    case CallKind::kStreamDestroy: return RecordKind::kStreamDestroy;
    case CallKind::kEventCreate: return RecordKind::kEventCreate;
    case CallKind::kEventDestroy: return RecordKind::kEventDestroy;
    case CallKind::kEventRecord: return RecordKind::kEventRecord;
    case CallKind::kStreamWaitEvent: return RecordKind::kStreamWaitEvent;
    case CallKind::kEventSynchronize: return RecordKind::kEventSynchronize;
    case CallKind::kEventQuery: return RecordKind::kEventQuery;
    case CallKind::kStreamSynchronize: return RecordKind::kStreamSynchronize;
    case CallKind::kStreamQuery: return RecordKind::kStreamQuery;
    case CallKind::kDeviceSynchronize: return RecordKind::kDeviceSynchronize;
    case CallKind::kAlloc: return RecordKind::kAlloc;
    case CallKind::kFree: return RecordKind::kFree;
    case CallKind::kMemcpy: return RecordKind::kMemcpy;
    case CallKind::kMemset: return RecordKind::kMemset;
    case CallKind::kKernelLaunch: return RecordKind::kKernelLaunch;
    case CallKind::kGraphLaunch: return RecordKind::kGraphLaunch;
    case CallKind::kStreamCapture: return RecordKind::kStreamCapture;
    case CallKind::kGraphCall: return RecordKind::kGraphCall;
  }
  return std::nullopt;
}

std::span<const CallSpec> call_table() { return kTable; }

const CallSpec* find_call(ApiDomain domain, uint32_t cbid) {
  const auto& v = domain == kRt ? index().runtime : index().driver;
  return cbid < v.size() ? v[cbid] : nullptr;
}

uint32_t max_cbid(ApiDomain domain) {
  const auto& v = domain == kRt ? index().runtime : index().driver;
  return v.empty() ? 0 : uint32_t(v.size() - 1);
}

}  // namespace streamrace::tracer
