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

// A driver launch's arguments, CudaCall's launch fields from them.
void to_call(const LaunchArgs& a, CudaCall& c) {
  c.func = a.func;
  c.library_kernel = a.library_kernel;
  std::copy(a.grid, a.grid + 3, c.grid);
  std::copy(a.block, a.block + 3, c.block);
  c.args = a.args;
  c.packed = a.packed;
  set_stream(c, a.stream);
}

// cuLaunchKernel and cuLaunchCooperativeKernel (the same without `extra`).
template <typename P>
void driver_launch_args(const void* raw, LaunchArgs& a) {
  const P& p = as<P>(raw);
  a.func = H(p.f);
  a.grid[0] = p.gridDimX, a.grid[1] = p.gridDimY, a.grid[2] = p.gridDimZ;
  a.block[0] = p.blockDimX, a.block[1] = p.blockDimY, a.block[2] = p.blockDimZ;
  a.args = p.kernelParams;
  if constexpr (requires { p.extra; }) a.packed = packed_arguments(p.kernelParams, p.extra);
  a.stream = H(p.hStream);
}

template <typename P>
void driver_launch(const void* raw, CudaCall& c) {
  LaunchArgs a;
  driver_launch_args<P>(raw, a);
  to_call(a, c);
}

template <typename P>
void driver_launch_ex_args(const void* raw, LaunchArgs& a) {
  const P& p = as<P>(raw);
  const CUlaunchConfig& cfg = *p.config;
  a.func = H(p.f);
  a.grid[0] = cfg.gridDimX, a.grid[1] = cfg.gridDimY, a.grid[2] = cfg.gridDimZ;
  a.block[0] = cfg.blockDimX, a.block[1] = cfg.blockDimY, a.block[2] = cfg.blockDimZ;
  a.args = p.kernelParams;
  a.packed = packed_arguments(p.kernelParams, p.extra);
  a.stream = H(cfg.hStream);
}

template <typename P>
void driver_launch_ex(const void* raw, CudaCall& c) {
  LaunchArgs a;
  driver_launch_ex_args<P>(raw, a);
  to_call(a, c);
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
  unsigned long long flags = 0;
  if constexpr (requires { p.flags; }) {
    flags = p.flags;
  } else if constexpr (requires { p.instantiateParams; }) {
    flags = p.instantiateParams ? p.instantiateParams->flags : 0;
  }
  // cudaGraphInstantiateFlagDeviceLaunch == CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH == 4.
  if (flags & 4) c.graph_flags |= trace::kGraphDeviceLaunch;
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
// The explicit graph API. Node-adding calls name the graph, the dependencies and the node
// made (read at exit); setters name the node (and the exec). A node's work lands in the same
// CudaCall fields as the eager call's (copy, set, launch), so the handler writes it with the
// same code.

using trace::GraphEditAction;
using trace::GraphNodeType;

template <typename T>
const void* const* handles(T* const* a) {
  return reinterpret_cast<const void* const*>(a);
}
template <typename T>
const void* const* handles(const T* a) {
  return reinterpret_cast<const void* const*>(a);
}

// Edge data that is not all zero (ports, programmatic dependencies) is not a full dependency.
template <typename E>
bool edges_not_full(const E* data, size_t n) {
  if (data == nullptr) return false;
  for (size_t i = 0; i < n; ++i)
    if (data[i].from_port != 0 || data[i].to_port != 0 || data[i].type != 0) return true;
  return false;
}

template <typename P>
void node_place(const P& p, CudaCall& c) {
  c.edit = GraphEditAction::kAddNode;
  if constexpr (requires { p.pGraphNode; }) {
    c.node = p.pGraphNode ? H(*p.pGraphNode) : 0;
    c.graph = H(p.graph);
    c.deps = handles(p.pDependencies);
  } else {
    c.node = p.phGraphNode ? H(*p.phGraphNode) : 0;
    c.graph = H(p.hGraph);
    c.deps = handles(p.dependencies);
  }
  c.ndeps = p.numDependencies;
  if constexpr (requires { p.dependencyData; })
    if (edges_not_full(p.dependencyData, p.numDependencies)) c.edit_flags |= trace::kEditEdgeNotFull;
}

// A setter's node (and exec): the edit is kSetNode, or kExecSetNode with `graph` the exec.
template <typename P>
void node_target(const P& p, CudaCall& c) {
  if constexpr (requires { p.hGraphExec; }) {
    c.edit = GraphEditAction::kExecSetNode;
    c.graph = H(p.hGraphExec);
  } else if constexpr (requires { p.graphExec; }) {
    c.edit = GraphEditAction::kExecSetNode;
    c.graph = H(p.graphExec);
  } else {
    c.edit = GraphEditAction::kSetNode;
  }
  if constexpr (requires { p.hNode; }) {
    c.node = H(p.hNode);
  } else {
    c.node = H(p.node);
  }
}

// Node parameters. Runtime kernel nodes name a host stub (func stays 0: the driver call inside
// the runtime call carries the CUfunction, as for launches); driver ones a CUfunction or CUkernel.
template <typename K>
void kernel_work(const K* k, CudaCall& c) {
  c.node_type = GraphNodeType::kKernel;
  if (k == nullptr) {
    c.edit_flags |= trace::kEditParamsUnknown;
    return;
  }
  if constexpr (requires { k->gridDim; }) {
    dims(c, k->gridDim, k->blockDim);  // the runtime's: func is a host stub
  } else {
    dims(c, k->gridDimX, k->gridDimY, k->gridDimZ, k->blockDimX, k->blockDimY, k->blockDimZ);
    c.func = H(k->func);
    if constexpr (requires { k->kern; }) {
      if (k->func == nullptr && k->kern != nullptr) {
        c.func = H(k->kern);
        c.library_kernel = true;
      }
    }
  }
  c.args = k->kernelParams;
  c.packed = packed_arguments(k->kernelParams, k->extra);
}

// A 3D copy's first byte and extent within one pitched side.
uint64_t extent_3d(uint64_t pitch, uint64_t rows_per_slice, uint64_t width, uint64_t height, uint64_t depth) {
  if (width == 0 || height == 0 || depth == 0) return 0;
  if (height == 1 && depth == 1) return width;
  return (depth - 1) * pitch * rows_per_slice + (height - 1) * pitch + width;
}

void copy_3d(const cudaMemcpy3DParms* m, CudaCall& c) {
  c.node_type = GraphNodeType::kMemcpy;
  if (m == nullptr || m->srcArray != nullptr || m->dstArray != nullptr) {
    c.edit_flags |= trace::kEditParamsUnknown;  // arrays are not tracked
    return;
  }
  auto at = [](const cudaPitchedPtr& p, const cudaPos& pos) {
    return H(p.ptr) + pos.z * p.pitch * p.ysize + pos.y * p.pitch + pos.x;
  };
  c.src = at(m->srcPtr, m->srcPos);
  c.ptr = at(m->dstPtr, m->dstPos);
  // One extent for both sides: the larger (pitches may differ).
  c.bytes = std::max(extent_3d(m->srcPtr.pitch, m->srcPtr.ysize, m->extent.width, m->extent.height, m->extent.depth),
                     extent_3d(m->dstPtr.pitch, m->dstPtr.ysize, m->extent.width, m->extent.height, m->extent.depth));
  c.copy_kind = CopyKind(m->kind);
}

void copy_3d(const CUDA_MEMCPY3D* m, CudaCall& c) {
  c.node_type = GraphNodeType::kMemcpy;
  if (m == nullptr || m->srcMemoryType == CU_MEMORYTYPE_ARRAY || m->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
    c.edit_flags |= trace::kEditParamsUnknown;
    return;
  }
  auto base = [](CUmemorytype t, const void* host, CUdeviceptr dev) { return t == CU_MEMORYTYPE_HOST ? H(host) : H(dev); };
  c.src = base(m->srcMemoryType, m->srcHost, m->srcDevice) + m->srcZ * m->srcPitch * m->srcHeight +
          m->srcY * m->srcPitch + m->srcXInBytes;
  c.ptr = base(m->dstMemoryType, m->dstHost, m->dstDevice) + m->dstZ * m->dstPitch * m->dstHeight +
          m->dstY * m->dstPitch + m->dstXInBytes;
  c.bytes = std::max(extent_3d(m->srcPitch, m->srcHeight, m->WidthInBytes, m->Height, m->Depth),
                     extent_3d(m->dstPitch, m->dstHeight, m->WidthInBytes, m->Height, m->Depth));
  c.copy_kind = CopyKind::kDefault;
}

template <typename M>
void set_work(const M* m, CudaCall& c) {
  c.node_type = GraphNodeType::kMemset;
  if (m == nullptr) {
    c.edit_flags |= trace::kEditParamsUnknown;
    return;
  }
  c.ptr = H(m->dst);
  c.bytes = extent_2d(m->pitch, uint64_t(m->elementSize) * m->width, m->height);
}

// cudaGraphNodeParams / CUgraphNodeParams (cudaGraphAddNode, cudaGraphNodeSetParams, ...).
template <typename N>
void generic_work(const N* n, CudaCall& c) {
  if (n == nullptr) {
    c.node_type = GraphNodeType::kUnknown;
    return;
  }
  const int type = int(n->type);
  switch (type) {
    case 0: return kernel_work(&n->kernel, c);
    case 1: return copy_3d(&n->memcpy.copyParams, c);
    case 2: return set_work(&n->memset, c);
    case 4:
      c.node_type = GraphNodeType::kChildGraph;
      c.other = H(n->graph.graph);
      return;
    case 6:
      c.node_type = GraphNodeType::kEventWait;
      c.other = H(n->eventWait.event);
      return;
    case 7:
      c.node_type = GraphNodeType::kEventRecord;
      c.other = H(n->eventRecord.event);
      return;
    case 3: case 5: case 8: case 9: case 10: case 11: case 12: case 13:
      c.node_type = GraphNodeType(type);
      return;
    default:
      c.node_type = GraphNodeType::kUnknown;
      return;
  }
}

template <typename P>
void graph_create(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.edit = GraphEditAction::kCreate;
  if constexpr (requires { p.pGraph; }) {
    c.graph = p.pGraph ? H(*p.pGraph) : 0;
  } else {
    c.graph = p.phGraph ? H(*p.phGraph) : 0;
  }
}

template <typename P>
void graph_clone(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.edit = GraphEditAction::kClone;
  if constexpr (requires { p.pGraphClone; }) {
    c.graph = p.pGraphClone ? H(*p.pGraphClone) : 0;
  } else {
    c.graph = p.phGraphClone ? H(*p.phGraphClone) : 0;
  }
  c.other = H(p.originalGraph);
}

template <typename P, GraphNodeType T>
void add_plain_node(const void* raw, CudaCall& c) {  // empty, host
  node_place(as<P>(raw), c);
  c.node_type = T;
}

template <typename P>
void add_kernel_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_place(p, c);
  if constexpr (requires { p.pNodeParams; }) {
    kernel_work(p.pNodeParams, c);
  } else {
    kernel_work(p.nodeParams, c);
  }
}

template <typename P>
void set_kernel_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_target(p, c);
  if constexpr (requires { p.pNodeParams; }) {
    kernel_work(p.pNodeParams, c);
  } else {
    kernel_work(p.nodeParams, c);
  }
}

template <typename P>
void add_memcpy_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_place(p, c);
  if constexpr (requires { p.pCopyParams; }) {
    copy_3d(p.pCopyParams, c);
  } else {
    copy_3d(p.copyParams, c);
  }
}

template <typename P>
void set_memcpy_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_target(p, c);
  if constexpr (requires { p.pNodeParams; }) {
    copy_3d(p.pNodeParams, c);
  } else if constexpr (requires { p.nodeParams; }) {
    copy_3d(p.nodeParams, c);
  } else {
    copy_3d(p.copyParams, c);
  }
}

// cudaGraphAddMemcpyNode1D and its setters.
template <typename P>
void memcpy_1d_work(const P& p, CudaCall& c) {
  c.node_type = GraphNodeType::kMemcpy;
  c.ptr = H(p.dst);
  c.src = H(p.src);
  c.bytes = p.count;
  c.copy_kind = CopyKind(p.kind);
}
template <typename P>
void add_memcpy_1d_node(const void* raw, CudaCall& c) {
  node_place(as<P>(raw), c);
  memcpy_1d_work(as<P>(raw), c);
}
template <typename P>
void set_memcpy_1d_node(const void* raw, CudaCall& c) {
  node_target(as<P>(raw), c);
  memcpy_1d_work(as<P>(raw), c);
}

// Copies to or from a __device__ symbol: the symbol's address is not in the call; named as
// parameters the trace does not show.
template <typename P, bool Add>
void symbol_memcpy_node(const void* raw, CudaCall& c) {
  if constexpr (Add) {
    node_place(as<P>(raw), c);
  } else {
    node_target(as<P>(raw), c);
  }
  c.node_type = GraphNodeType::kMemcpy;
  c.edit_flags |= trace::kEditParamsUnknown;
}

template <typename P>
void add_memset_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_place(p, c);
  if constexpr (requires { p.pMemsetParams; }) {
    set_work(p.pMemsetParams, c);
  } else {
    set_work(p.memsetParams, c);
  }
}

template <typename P>
void set_memset_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_target(p, c);
  if constexpr (requires { p.pNodeParams; }) {
    set_work(p.pNodeParams, c);
  } else if constexpr (requires { p.nodeParams; }) {
    set_work(p.nodeParams, c);
  } else {
    set_work(p.memsetParams, c);
  }
}

template <typename P>
void add_child_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_place(p, c);
  c.node_type = GraphNodeType::kChildGraph;
  c.other = H(p.childGraph);
}

template <typename P, GraphNodeType T>
void add_event_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_place(p, c);
  c.node_type = T;
  c.other = H(p.event);
}

template <typename P, GraphNodeType T>
void set_event_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_target(p, c);
  c.node_type = T;
  c.other = H(p.event);
}

// cudaGraphExecChildGraphNodeSetParams: the exec's child graph node takes another graph's parameters.
template <typename P>
void set_child_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_target(p, c);
  c.node_type = GraphNodeType::kChildGraph;
  c.other = H(p.childGraph);
}

template <typename P>
void add_generic_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_place(p, c);
  generic_work(p.nodeParams, c);
}

template <typename P>
void set_generic_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  node_target(p, c);
  generic_work(p.nodeParams, c);
}

template <typename P>
void destroy_node(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.edit = GraphEditAction::kDestroyNode;
  if constexpr (requires { p.hNode; }) {
    c.node = H(p.hNode);
  } else {
    c.node = H(p.node);
  }
}

// cudaGraphAdd/RemoveDependencies before CUDA 12.3 (no edge data), whose params struct CUDA 13's
// headers no longer declare.
struct GraphEdgesParams10 {
  cudaGraph_t graph;
  const cudaGraphNode_t* from;
  const cudaGraphNode_t* to;
  size_t numDependencies;
};

// cudaGraphAddNode of CUDA 12.2 (no edge data); CUDA 13's headers declare only _v12030's.
struct GraphAddNodeParams12020 {
  cudaGraphNode_t* pGraphNode;
  cudaGraph_t graph;
  const cudaGraphNode_t* pDependencies;
  size_t numDependencies;
  cudaGraphNodeParams* nodeParams;
};

template <typename P, bool Add>
void graph_edges(const void* raw, CudaCall& c) {
  const P& p = as<P>(raw);
  c.edit = Add ? GraphEditAction::kAddEdges : GraphEditAction::kRemoveEdges;
  if constexpr (requires { p.hGraph; }) {
    c.graph = H(p.hGraph);
  } else {
    c.graph = H(p.graph);
  }
  c.deps = handles(p.from);
  c.edges_to = handles(p.to);
  c.ndeps = p.numDependencies;
  if constexpr (requires { p.edgeData; })
    if (edges_not_full(p.edgeData, p.numDependencies)) c.edit_flags |= trace::kEditEdgeNotFull;
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
#define SR_DRL(ID, NAME, PT, X, L) {kDr, CUPTI_DRIVER_TRACE_CBID_##ID, NAME, K::kKernelLaunch, PT, X<SR_P(ID)>, L<SR_P(ID)>}

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
    // ---- runtime: the explicit graph API (GraphEdit records)
    SR_RT(cudaGraphCreate_v10000, "cudaGraphCreate", kGraphEdit, kLegacy, graph_create<SR_P(cudaGraphCreate_v10000)>),
    SR_RT(cudaGraphClone_v10000, "cudaGraphClone", kGraphEdit, kLegacy, graph_clone<SR_P(cudaGraphClone_v10000)>),
    SR_RT(cudaGraphAddKernelNode_v10000, "cudaGraphAddKernelNode", kGraphEdit, kLegacy, add_kernel_node<SR_P(cudaGraphAddKernelNode_v10000)>),
    SR_RT(cudaGraphKernelNodeSetParams_v10000, "cudaGraphKernelNodeSetParams", kGraphEdit, kLegacy, set_kernel_node<SR_P(cudaGraphKernelNodeSetParams_v10000)>),
    SR_RT(cudaGraphExecKernelNodeSetParams_v10010, "cudaGraphExecKernelNodeSetParams", kGraphEdit, kLegacy, set_kernel_node<SR_P(cudaGraphExecKernelNodeSetParams_v10010)>),
    SR_RT(cudaGraphAddMemcpyNode_v10000, "cudaGraphAddMemcpyNode", kGraphEdit, kLegacy, add_memcpy_node<SR_P(cudaGraphAddMemcpyNode_v10000)>),
    SR_RT(cudaGraphMemcpyNodeSetParams_v10000, "cudaGraphMemcpyNodeSetParams", kGraphEdit, kLegacy, set_memcpy_node<SR_P(cudaGraphMemcpyNodeSetParams_v10000)>),
    SR_RT(cudaGraphExecMemcpyNodeSetParams_v10020, "cudaGraphExecMemcpyNodeSetParams", kGraphEdit, kLegacy, set_memcpy_node<SR_P(cudaGraphExecMemcpyNodeSetParams_v10020)>),
    SR_RT(cudaGraphAddMemcpyNode1D_v11010, "cudaGraphAddMemcpyNode1D", kGraphEdit, kLegacy, add_memcpy_1d_node<SR_P(cudaGraphAddMemcpyNode1D_v11010)>),
    SR_RT(cudaGraphMemcpyNodeSetParams1D_v11010, "cudaGraphMemcpyNodeSetParams1D", kGraphEdit, kLegacy, set_memcpy_1d_node<SR_P(cudaGraphMemcpyNodeSetParams1D_v11010)>),
    SR_RT(cudaGraphExecMemcpyNodeSetParams1D_v11010, "cudaGraphExecMemcpyNodeSetParams1D", kGraphEdit, kLegacy, set_memcpy_1d_node<SR_P(cudaGraphExecMemcpyNodeSetParams1D_v11010)>),
    SR_RT(cudaGraphAddMemcpyNodeToSymbol_v11010, "cudaGraphAddMemcpyNodeToSymbol", kGraphEdit, kLegacy, (symbol_memcpy_node<SR_P(cudaGraphAddMemcpyNodeToSymbol_v11010), true>)),
    SR_RT(cudaGraphAddMemcpyNodeFromSymbol_v11010, "cudaGraphAddMemcpyNodeFromSymbol", kGraphEdit, kLegacy, (symbol_memcpy_node<SR_P(cudaGraphAddMemcpyNodeFromSymbol_v11010), true>)),
    SR_RT(cudaGraphMemcpyNodeSetParamsToSymbol_v11010, "cudaGraphMemcpyNodeSetParamsToSymbol", kGraphEdit, kLegacy, (symbol_memcpy_node<SR_P(cudaGraphMemcpyNodeSetParamsToSymbol_v11010), false>)),
    SR_RT(cudaGraphMemcpyNodeSetParamsFromSymbol_v11010, "cudaGraphMemcpyNodeSetParamsFromSymbol", kGraphEdit, kLegacy, (symbol_memcpy_node<SR_P(cudaGraphMemcpyNodeSetParamsFromSymbol_v11010), false>)),
    SR_RT(cudaGraphExecMemcpyNodeSetParamsToSymbol_v11010, "cudaGraphExecMemcpyNodeSetParamsToSymbol", kGraphEdit, kLegacy, (symbol_memcpy_node<SR_P(cudaGraphExecMemcpyNodeSetParamsToSymbol_v11010), false>)),
    SR_RT(cudaGraphExecMemcpyNodeSetParamsFromSymbol_v11010, "cudaGraphExecMemcpyNodeSetParamsFromSymbol", kGraphEdit, kLegacy, (symbol_memcpy_node<SR_P(cudaGraphExecMemcpyNodeSetParamsFromSymbol_v11010), false>)),
    SR_RT(cudaGraphAddMemsetNode_v10000, "cudaGraphAddMemsetNode", kGraphEdit, kLegacy, add_memset_node<SR_P(cudaGraphAddMemsetNode_v10000)>),
    SR_RT(cudaGraphMemsetNodeSetParams_v10000, "cudaGraphMemsetNodeSetParams", kGraphEdit, kLegacy, set_memset_node<SR_P(cudaGraphMemsetNodeSetParams_v10000)>),
    SR_RT(cudaGraphExecMemsetNodeSetParams_v10020, "cudaGraphExecMemsetNodeSetParams", kGraphEdit, kLegacy, set_memset_node<SR_P(cudaGraphExecMemsetNodeSetParams_v10020)>),
    SR_RT(cudaGraphAddHostNode_v10000, "cudaGraphAddHostNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cudaGraphAddHostNode_v10000), GraphNodeType::kHost>)),
    SR_RT(cudaGraphAddEmptyNode_v10000, "cudaGraphAddEmptyNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cudaGraphAddEmptyNode_v10000), GraphNodeType::kEmpty>)),
    SR_RT(cudaGraphAddChildGraphNode_v10000, "cudaGraphAddChildGraphNode", kGraphEdit, kLegacy, add_child_node<SR_P(cudaGraphAddChildGraphNode_v10000)>),
    SR_RT(cudaGraphAddEventRecordNode_v11010, "cudaGraphAddEventRecordNode", kGraphEdit, kLegacy, (add_event_node<SR_P(cudaGraphAddEventRecordNode_v11010), GraphNodeType::kEventRecord>)),
    SR_RT(cudaGraphAddEventWaitNode_v11010, "cudaGraphAddEventWaitNode", kGraphEdit, kLegacy, (add_event_node<SR_P(cudaGraphAddEventWaitNode_v11010), GraphNodeType::kEventWait>)),
    SR_RT(cudaGraphEventRecordNodeSetEvent_v11010, "cudaGraphEventRecordNodeSetEvent", kGraphEdit, kLegacy, (set_event_node<SR_P(cudaGraphEventRecordNodeSetEvent_v11010), GraphNodeType::kEventRecord>)),
    SR_RT(cudaGraphEventWaitNodeSetEvent_v11010, "cudaGraphEventWaitNodeSetEvent", kGraphEdit, kLegacy, (set_event_node<SR_P(cudaGraphEventWaitNodeSetEvent_v11010), GraphNodeType::kEventWait>)),
    SR_RT(cudaGraphExecEventRecordNodeSetEvent_v11010, "cudaGraphExecEventRecordNodeSetEvent", kGraphEdit, kLegacy, (set_event_node<SR_P(cudaGraphExecEventRecordNodeSetEvent_v11010), GraphNodeType::kEventRecord>)),
    SR_RT(cudaGraphExecEventWaitNodeSetEvent_v11010, "cudaGraphExecEventWaitNodeSetEvent", kGraphEdit, kLegacy, (set_event_node<SR_P(cudaGraphExecEventWaitNodeSetEvent_v11010), GraphNodeType::kEventWait>)),
    SR_RT(cudaGraphAddExternalSemaphoresSignalNode_v11020, "cudaGraphAddExternalSemaphoresSignalNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cudaGraphAddExternalSemaphoresSignalNode_v11020), GraphNodeType::kSemaphoreSignal>)),
    SR_RT(cudaGraphAddExternalSemaphoresWaitNode_v11020, "cudaGraphAddExternalSemaphoresWaitNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cudaGraphAddExternalSemaphoresWaitNode_v11020), GraphNodeType::kSemaphoreWait>)),
    SR_RT(cudaGraphAddMemAllocNode_v11040, "cudaGraphAddMemAllocNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cudaGraphAddMemAllocNode_v11040), GraphNodeType::kMemAlloc>)),
    SR_RT(cudaGraphAddMemFreeNode_v11040, "cudaGraphAddMemFreeNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cudaGraphAddMemFreeNode_v11040), GraphNodeType::kMemFree>)),
    SR_RT(cudaGraphAddNode_v12020, "cudaGraphAddNode", kGraphEdit, kLegacy, add_generic_node<GraphAddNodeParams12020>),
    SR_RT(cudaGraphAddNode_v12030, "cudaGraphAddNode", kGraphEdit, kLegacy, add_generic_node<SR_P(cudaGraphAddNode_v12030)>),
    SR_RT(cudaGraphNodeSetParams_v12020, "cudaGraphNodeSetParams", kGraphEdit, kLegacy, set_generic_node<SR_P(cudaGraphNodeSetParams_v12020)>),
    SR_RT(cudaGraphExecNodeSetParams_v12020, "cudaGraphExecNodeSetParams", kGraphEdit, kLegacy, set_generic_node<SR_P(cudaGraphExecNodeSetParams_v12020)>),
    SR_RT(cudaGraphExecChildGraphNodeSetParams_v11010, "cudaGraphExecChildGraphNodeSetParams", kGraphEdit, kLegacy, (set_child_node<SR_P(cudaGraphExecChildGraphNodeSetParams_v11010)>)),
    SR_RT(cudaGraphAddDependencies_v10000, "cudaGraphAddDependencies", kGraphEdit, kLegacy, (graph_edges<GraphEdgesParams10, true>)),
    SR_RT(cudaGraphAddDependencies_v12030, "cudaGraphAddDependencies", kGraphEdit, kLegacy, (graph_edges<SR_P(cudaGraphAddDependencies_v12030), true>)),
    SR_RT(cudaGraphRemoveDependencies_v10000, "cudaGraphRemoveDependencies", kGraphEdit, kLegacy, (graph_edges<GraphEdgesParams10, false>)),
    SR_RT(cudaGraphRemoveDependencies_v12030, "cudaGraphRemoveDependencies", kGraphEdit, kLegacy, (graph_edges<SR_P(cudaGraphRemoveDependencies_v12030), false>)),
    SR_RT(cudaGraphDestroyNode_v10000, "cudaGraphDestroyNode", kGraphEdit, kLegacy, destroy_node<SR_P(cudaGraphDestroyNode_v10000)>),
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
    SR_RT(cudaProfilerStart_v4000, "cudaProfilerStart", kProfilerStart, kLegacy, nullptr),
    SR_RT(cudaProfilerStop_v4000, "cudaProfilerStop", kProfilerStop, kLegacy, nullptr),

    // ---- driver: launches
    SR_DRL(cuLaunchKernel, "cuLaunchKernel", kLegacy, driver_launch, driver_launch_args),
    SR_DRL(cuLaunchKernel_ptsz, "cuLaunchKernel", kPerThread, driver_launch, driver_launch_args),
    SR_DRL(cuLaunchKernelEx, "cuLaunchKernelEx", kLegacy, driver_launch_ex, driver_launch_ex_args),
    SR_DRL(cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", kPerThread, driver_launch_ex, driver_launch_ex_args),
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
    SR_DR(cuProfilerStart, "cuProfilerStart", kProfilerStart, kLegacy, nullptr),
    // ---- driver: what unloads kernels (their handles may be reused)
    SR_DR(cuModuleUnload, "cuModuleUnload", kFunctionsUnload, kLegacy, nullptr),
    SR_DR(cuLibraryUnload, "cuLibraryUnload", kFunctionsUnload, kLegacy, nullptr),
    SR_DR(cuCtxDestroy_v2, "cuCtxDestroy", kFunctionsUnload, kLegacy, nullptr),
    SR_DR(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", kFunctionsUnload, kLegacy, nullptr),
    SR_DR(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", kFunctionsUnload, kLegacy, nullptr),
    SR_DR(cuProfilerStop, "cuProfilerStop", kProfilerStop, kLegacy, nullptr),
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
    // ---- driver: the explicit graph API (what PyTorch, Triton and JAX-style stacks call directly)
    SR_DR(cuGraphCreate, "cuGraphCreate", kGraphEdit, kLegacy, graph_create<SR_P(cuGraphCreate)>),
    SR_DR(cuGraphClone, "cuGraphClone", kGraphEdit, kLegacy, graph_clone<SR_P(cuGraphClone)>),
    SR_DR(cuGraphAddKernelNode, "cuGraphAddKernelNode", kGraphEdit, kLegacy, add_kernel_node<SR_P(cuGraphAddKernelNode)>),
    SR_DR(cuGraphAddKernelNode_v2, "cuGraphAddKernelNode", kGraphEdit, kLegacy, add_kernel_node<SR_P(cuGraphAddKernelNode_v2)>),
    SR_DR(cuGraphKernelNodeSetParams, "cuGraphKernelNodeSetParams", kGraphEdit, kLegacy, set_kernel_node<SR_P(cuGraphKernelNodeSetParams)>),
    SR_DR(cuGraphKernelNodeSetParams_v2, "cuGraphKernelNodeSetParams", kGraphEdit, kLegacy, set_kernel_node<SR_P(cuGraphKernelNodeSetParams_v2)>),
    SR_DR(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams", kGraphEdit, kLegacy, set_kernel_node<SR_P(cuGraphExecKernelNodeSetParams)>),
    SR_DR(cuGraphExecKernelNodeSetParams_v2, "cuGraphExecKernelNodeSetParams", kGraphEdit, kLegacy, set_kernel_node<SR_P(cuGraphExecKernelNodeSetParams_v2)>),
    SR_DR(cuGraphAddMemcpyNode, "cuGraphAddMemcpyNode", kGraphEdit, kLegacy, add_memcpy_node<SR_P(cuGraphAddMemcpyNode)>),
    SR_DR(cuGraphMemcpyNodeSetParams, "cuGraphMemcpyNodeSetParams", kGraphEdit, kLegacy, set_memcpy_node<SR_P(cuGraphMemcpyNodeSetParams)>),
    SR_DR(cuGraphExecMemcpyNodeSetParams, "cuGraphExecMemcpyNodeSetParams", kGraphEdit, kLegacy, set_memcpy_node<SR_P(cuGraphExecMemcpyNodeSetParams)>),
    SR_DR(cuGraphAddMemsetNode, "cuGraphAddMemsetNode", kGraphEdit, kLegacy, add_memset_node<SR_P(cuGraphAddMemsetNode)>),
    SR_DR(cuGraphMemsetNodeSetParams, "cuGraphMemsetNodeSetParams", kGraphEdit, kLegacy, set_memset_node<SR_P(cuGraphMemsetNodeSetParams)>),
    SR_DR(cuGraphExecMemsetNodeSetParams, "cuGraphExecMemsetNodeSetParams", kGraphEdit, kLegacy, set_memset_node<SR_P(cuGraphExecMemsetNodeSetParams)>),
    SR_DR(cuGraphAddHostNode, "cuGraphAddHostNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cuGraphAddHostNode), GraphNodeType::kHost>)),
    SR_DR(cuGraphAddEmptyNode, "cuGraphAddEmptyNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cuGraphAddEmptyNode), GraphNodeType::kEmpty>)),
    SR_DR(cuGraphAddChildGraphNode, "cuGraphAddChildGraphNode", kGraphEdit, kLegacy, add_child_node<SR_P(cuGraphAddChildGraphNode)>),
    SR_DR(cuGraphAddEventRecordNode, "cuGraphAddEventRecordNode", kGraphEdit, kLegacy, (add_event_node<SR_P(cuGraphAddEventRecordNode), GraphNodeType::kEventRecord>)),
    SR_DR(cuGraphAddEventWaitNode, "cuGraphAddEventWaitNode", kGraphEdit, kLegacy, (add_event_node<SR_P(cuGraphAddEventWaitNode), GraphNodeType::kEventWait>)),
    SR_DR(cuGraphExecEventRecordNodeSetEvent, "cuGraphExecEventRecordNodeSetEvent", kGraphEdit, kLegacy, (set_event_node<SR_P(cuGraphExecEventRecordNodeSetEvent), GraphNodeType::kEventRecord>)),
    SR_DR(cuGraphExecEventWaitNodeSetEvent, "cuGraphExecEventWaitNodeSetEvent", kGraphEdit, kLegacy, (set_event_node<SR_P(cuGraphExecEventWaitNodeSetEvent), GraphNodeType::kEventWait>)),
    SR_DR(cuGraphAddExternalSemaphoresSignalNode, "cuGraphAddExternalSemaphoresSignalNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cuGraphAddExternalSemaphoresSignalNode), GraphNodeType::kSemaphoreSignal>)),
    SR_DR(cuGraphAddExternalSemaphoresWaitNode, "cuGraphAddExternalSemaphoresWaitNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cuGraphAddExternalSemaphoresWaitNode), GraphNodeType::kSemaphoreWait>)),
    SR_DR(cuGraphAddMemAllocNode, "cuGraphAddMemAllocNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cuGraphAddMemAllocNode), GraphNodeType::kMemAlloc>)),
    SR_DR(cuGraphAddMemFreeNode, "cuGraphAddMemFreeNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cuGraphAddMemFreeNode), GraphNodeType::kMemFree>)),
    SR_DR(cuGraphAddBatchMemOpNode, "cuGraphAddBatchMemOpNode", kGraphEdit, kLegacy, (add_plain_node<SR_P(cuGraphAddBatchMemOpNode), GraphNodeType::kBatchMemOp>)),
    SR_DR(cuGraphAddNode, "cuGraphAddNode", kGraphEdit, kLegacy, add_generic_node<SR_P(cuGraphAddNode)>),
    SR_DR(cuGraphAddNode_v2, "cuGraphAddNode", kGraphEdit, kLegacy, add_generic_node<SR_P(cuGraphAddNode_v2)>),
    SR_DR(cuGraphNodeSetParams, "cuGraphNodeSetParams", kGraphEdit, kLegacy, set_generic_node<SR_P(cuGraphNodeSetParams)>),
    SR_DR(cuGraphExecNodeSetParams, "cuGraphExecNodeSetParams", kGraphEdit, kLegacy, set_generic_node<SR_P(cuGraphExecNodeSetParams)>),
    SR_DR(cuGraphExecChildGraphNodeSetParams, "cuGraphExecChildGraphNodeSetParams", kGraphEdit, kLegacy, set_child_node<SR_P(cuGraphExecChildGraphNodeSetParams)>),
    SR_DR(cuGraphAddDependencies, "cuGraphAddDependencies", kGraphEdit, kLegacy, (graph_edges<SR_P(cuGraphAddDependencies), true>)),
    SR_DR(cuGraphAddDependencies_v2, "cuGraphAddDependencies", kGraphEdit, kLegacy, (graph_edges<SR_P(cuGraphAddDependencies_v2), true>)),
    SR_DR(cuGraphRemoveDependencies, "cuGraphRemoveDependencies", kGraphEdit, kLegacy, (graph_edges<SR_P(cuGraphRemoveDependencies), false>)),
    SR_DR(cuGraphRemoveDependencies_v2, "cuGraphRemoveDependencies", kGraphEdit, kLegacy, (graph_edges<SR_P(cuGraphRemoveDependencies_v2), false>)),
    SR_DR(cuGraphDestroyNode, "cuGraphDestroyNode", kGraphEdit, kLegacy, destroy_node<SR_P(cuGraphDestroyNode)>),
    SR_DR(cuStreamUpdateCaptureDependencies, "cuStreamUpdateCaptureDependencies", kGraphCall, kLegacy, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies)>),
    SR_DR(cuStreamUpdateCaptureDependencies_ptsz, "cuStreamUpdateCaptureDependencies", kGraphCall, kPerThread, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies_ptsz)>),
    SR_DR(cuStreamUpdateCaptureDependencies_v2, "cuStreamUpdateCaptureDependencies", kGraphCall, kLegacy, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies_v2)>),
    SR_DR(cuStreamUpdateCaptureDependencies_v2_ptsz, "cuStreamUpdateCaptureDependencies", kGraphCall, kPerThread, capture_dependencies<SR_P(cuStreamUpdateCaptureDependencies_v2_ptsz)>),
};
// clang-format on
#undef SR_RT
#undef SR_DR
#undef SR_DRL
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
    case CallKind::kGraphEdit: return RecordKind::kGraphEdit;
    case CallKind::kProfilerStart:
    case CallKind::kProfilerStop: return std::nullopt;  // a CaptureMark, and only in a profiler window
    case CallKind::kFunctionsUnload: return std::nullopt;  // the handles cached are forgotten
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
