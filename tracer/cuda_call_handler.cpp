// CudaCallHandler: see cuda_call_handler.h. The happens-before meaning of each record is
// the analyzer's business; this file only says which record each CUDA call becomes.
#include "tracer/cuda_call_handler.h"

// generated_cuda_meta.h names the legacy (_v1) driver types that cuda.h declares only for
// this internal build mode; the handler calls no driver function, so the mode is harmless.
#define __CUDA_API_VERSION_INTERNAL 1

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <generated_cuda_meta.h>
#include <generated_cuda_runtime_api_meta.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "tracer/thread_state.h"

namespace streamrace::tracer {

TracerThreadState& thread_state() {
  thread_local TracerThreadState state;
  return state;
}

namespace {

using trace::AllocKind;

// What each enabled callback id means to the tracer.
enum class Op : uint8_t {
  kNone,
  kScopeOnly,  // a runtime call whose driver calls must not be recorded on their own
  kStreamCreate, kStreamCreateFlags, kStreamCreatePriority, kStreamDestroy,
  kEventCreate, kEventCreateFlags, kEventDestroy, kEventRecord, kStreamWaitEvent,
  kEventSynchronize, kEventQuery, kStreamSynchronize, kStreamQuery, kDeviceSynchronize,
  kMalloc, kMallocPitch, kMalloc3D, kMallocManaged, kMallocHost, kHostAlloc, kHostRegister, kHostUnregister,
  kFree, kFreeHost, kFreeArray, kMallocAsync, kMallocFromPoolAsync, kFreeAsync,
  kMemcpy, kMemcpyAsync, kMemcpy2D, kMemcpy2DAsync, kMemcpyPeer, kMemcpyPeerAsync,
  kMemset, kMemsetAsync, kMemset2D, kMemset2DAsync,
  kLaunchKernel, kLaunchKernelInternal, kLaunchKernelExC,
  kGraphLaunch, kBeginCapture, kEndCapture,
  // driver
  kCuLaunchKernel, kCuLaunchKernelEx, kCuLaunchCooperative,
  kCuMemAlloc, kCuMemAllocPitch, kCuMemAllocManaged, kCuMemAllocHost, kCuMemHostAlloc, kCuMemHostRegister,
  kCuMemHostUnregister, kCuMemFree, kCuMemFreeHost, kCuMemAllocAsync, kCuMemAllocFromPoolAsync, kCuMemFreeAsync,
  kCuMemMap, kCuMemUnmap,
  kCuMemcpy, kCuMemcpyAsync, kCuMemcpyHtoD, kCuMemcpyHtoDAsync, kCuMemcpyDtoH, kCuMemcpyDtoHAsync, kCuMemcpyDtoD,
  kCuMemcpyDtoDAsync, kCuMemsetD8, kCuMemsetD8Async, kCuMemsetD32, kCuMemsetD32Async,
  kCuStreamCreate, kCuStreamCreatePriority, kCuStreamDestroy, kCuEventCreate, kCuEventDestroy, kCuEventRecord,
  kCuStreamWaitEvent, kCuEventSynchronize, kCuEventQuery, kCuStreamSynchronize, kCuStreamQuery, kCuCtxSynchronize,
  kCuGraphLaunch, kCuBeginCapture, kCuEndCapture,
};

struct CbInfo {
  Op op = Op::kNone;
  bool ptsz = false;
  const char* name = nullptr;
};

#define RT(CB, OP, NAME) {CUPTI_RUNTIME_TRACE_CBID_##CB, {Op::OP, false, NAME}}
#define RTP(CB, OP, NAME) {CUPTI_RUNTIME_TRACE_CBID_##CB, {Op::OP, true, NAME}}
const std::pair<uint32_t, CbInfo> kRuntimeTable[] = {
    RT(cudaStreamCreate_v3020, kStreamCreate, "cudaStreamCreate"),
    RT(cudaStreamCreateWithFlags_v5000, kStreamCreateFlags, "cudaStreamCreateWithFlags"),
    RT(cudaStreamCreateWithPriority_v5050, kStreamCreatePriority, "cudaStreamCreateWithPriority"),
    RT(cudaStreamDestroy_v3020, kStreamDestroy, "cudaStreamDestroy"),
    RT(cudaStreamDestroy_v5050, kStreamDestroy, "cudaStreamDestroy"),
    RT(cudaEventCreate_v3020, kEventCreate, "cudaEventCreate"),
    RT(cudaEventCreateWithFlags_v3020, kEventCreateFlags, "cudaEventCreateWithFlags"),
    RT(cudaEventDestroy_v3020, kEventDestroy, "cudaEventDestroy"),
    RT(cudaEventRecord_v3020, kEventRecord, "cudaEventRecord"),
    RTP(cudaEventRecord_ptsz_v7000, kEventRecord, "cudaEventRecord"),
    RT(cudaEventRecordWithFlags_v11010, kEventRecord, "cudaEventRecordWithFlags"),
    RTP(cudaEventRecordWithFlags_ptsz_v11010, kEventRecord, "cudaEventRecordWithFlags"),
    RT(cudaStreamWaitEvent_v3020, kStreamWaitEvent, "cudaStreamWaitEvent"),
    RTP(cudaStreamWaitEvent_ptsz_v7000, kStreamWaitEvent, "cudaStreamWaitEvent"),
    RT(cudaEventSynchronize_v3020, kEventSynchronize, "cudaEventSynchronize"),
    RT(cudaEventQuery_v3020, kEventQuery, "cudaEventQuery"),
    RT(cudaStreamSynchronize_v3020, kStreamSynchronize, "cudaStreamSynchronize"),
    RTP(cudaStreamSynchronize_ptsz_v7000, kStreamSynchronize, "cudaStreamSynchronize"),
    RT(cudaStreamQuery_v3020, kStreamQuery, "cudaStreamQuery"),
    RTP(cudaStreamQuery_ptsz_v7000, kStreamQuery, "cudaStreamQuery"),
    RT(cudaDeviceSynchronize_v3020, kDeviceSynchronize, "cudaDeviceSynchronize"),
    RT(cudaThreadSynchronize_v3020, kDeviceSynchronize, "cudaThreadSynchronize"),
    RT(cudaDeviceReset_v3020, kDeviceSynchronize, "cudaDeviceReset"),
    RT(cudaMalloc_v3020, kMalloc, "cudaMalloc"),
    RT(cudaMallocPitch_v3020, kMallocPitch, "cudaMallocPitch"),
    RT(cudaMalloc3D_v3020, kMalloc3D, "cudaMalloc3D"),
    RT(cudaMallocManaged_v6000, kMallocManaged, "cudaMallocManaged"),
    RT(cudaMallocHost_v3020, kMallocHost, "cudaMallocHost"),
    RT(cudaHostAlloc_v3020, kHostAlloc, "cudaHostAlloc"),
    RT(cudaHostRegister_v4000, kHostRegister, "cudaHostRegister"),
    RT(cudaHostUnregister_v4000, kHostUnregister, "cudaHostUnregister"),
    RT(cudaFree_v3020, kFree, "cudaFree"),
    RT(cudaFreeHost_v3020, kFreeHost, "cudaFreeHost"),
    RT(cudaFreeArray_v3020, kFreeArray, "cudaFreeArray"),
    RT(cudaMallocAsync_v11020, kMallocAsync, "cudaMallocAsync"),
    RTP(cudaMallocAsync_ptsz_v11020, kMallocAsync, "cudaMallocAsync"),
    RT(cudaMallocFromPoolAsync_v11020, kMallocFromPoolAsync, "cudaMallocFromPoolAsync"),
    RTP(cudaMallocFromPoolAsync_ptsz_v11020, kMallocFromPoolAsync, "cudaMallocFromPoolAsync"),
    RT(cudaFreeAsync_v11020, kFreeAsync, "cudaFreeAsync"),
    RTP(cudaFreeAsync_ptsz_v11020, kFreeAsync, "cudaFreeAsync"),
    RT(cudaMemcpy_v3020, kMemcpy, "cudaMemcpy"),
    RTP(cudaMemcpy_ptds_v7000, kMemcpy, "cudaMemcpy"),
    RT(cudaMemcpyAsync_v3020, kMemcpyAsync, "cudaMemcpyAsync"),
    RTP(cudaMemcpyAsync_ptsz_v7000, kMemcpyAsync, "cudaMemcpyAsync"),
    RT(cudaMemcpy2D_v3020, kMemcpy2D, "cudaMemcpy2D"),
    RTP(cudaMemcpy2D_ptds_v7000, kMemcpy2D, "cudaMemcpy2D"),
    RT(cudaMemcpy2DAsync_v3020, kMemcpy2DAsync, "cudaMemcpy2DAsync"),
    RTP(cudaMemcpy2DAsync_ptsz_v7000, kMemcpy2DAsync, "cudaMemcpy2DAsync"),
    RT(cudaMemcpyPeer_v4000, kMemcpyPeer, "cudaMemcpyPeer"),
    RT(cudaMemcpyPeerAsync_v4000, kMemcpyPeerAsync, "cudaMemcpyPeerAsync"),
    RT(cudaMemset_v3020, kMemset, "cudaMemset"),
    RTP(cudaMemset_ptds_v7000, kMemset, "cudaMemset"),
    RT(cudaMemsetAsync_v3020, kMemsetAsync, "cudaMemsetAsync"),
    RTP(cudaMemsetAsync_ptsz_v7000, kMemsetAsync, "cudaMemsetAsync"),
    RT(cudaMemset2D_v3020, kMemset2D, "cudaMemset2D"),
    RTP(cudaMemset2D_ptds_v7000, kMemset2D, "cudaMemset2D"),
    RT(cudaMemset2DAsync_v3020, kMemset2DAsync, "cudaMemset2DAsync"),
    RTP(cudaMemset2DAsync_ptsz_v7000, kMemset2DAsync, "cudaMemset2DAsync"),
    RT(cudaLaunchKernel_v7000, kLaunchKernel, "cudaLaunchKernel"),
    RTP(cudaLaunchKernel_ptsz_v7000, kLaunchKernel, "cudaLaunchKernel"),
    RT(__cudaLaunchKernel_v13000, kLaunchKernelInternal, "cudaLaunchKernel"),
    RTP(__cudaLaunchKernel_ptsz_v13000, kLaunchKernelInternal, "cudaLaunchKernel"),
    RT(cudaLaunchKernelExC_v11060, kLaunchKernelExC, "cudaLaunchKernelExC"),
    RTP(cudaLaunchKernelExC_ptsz_v11060, kLaunchKernelExC, "cudaLaunchKernelExC"),
    RT(cudaLaunchCooperativeKernel_v9000, kLaunchKernel, "cudaLaunchCooperativeKernel"),
    RTP(cudaLaunchCooperativeKernel_ptsz_v9000, kLaunchKernel, "cudaLaunchCooperativeKernel"),
    RT(cudaGraphLaunch_v10000, kGraphLaunch, "cudaGraphLaunch"),
    RTP(cudaGraphLaunch_ptsz_v10000, kGraphLaunch, "cudaGraphLaunch"),
    RT(cudaStreamBeginCapture_v10000, kBeginCapture, "cudaStreamBeginCapture"),
    RTP(cudaStreamBeginCapture_ptsz_v10000, kBeginCapture, "cudaStreamBeginCapture"),
    RT(cudaStreamBeginCaptureToGraph_v12030, kBeginCapture, "cudaStreamBeginCaptureToGraph"),
    RTP(cudaStreamBeginCaptureToGraph_ptsz_v12030, kBeginCapture, "cudaStreamBeginCaptureToGraph"),
    RT(cudaStreamEndCapture_v10000, kEndCapture, "cudaStreamEndCapture"),
    RTP(cudaStreamEndCapture_ptsz_v10000, kEndCapture, "cudaStreamEndCapture"),
    // Calls whose internal driver calls would otherwise look like user operations.
    RT(cudaMemcpyToSymbol_v3020, kScopeOnly, "cudaMemcpyToSymbol"),
    RT(cudaMemcpyFromSymbol_v3020, kScopeOnly, "cudaMemcpyFromSymbol"),
    RT(cudaMemcpyToSymbolAsync_v3020, kScopeOnly, "cudaMemcpyToSymbolAsync"),
    RT(cudaMemcpyFromSymbolAsync_v3020, kScopeOnly, "cudaMemcpyFromSymbolAsync"),
    RT(cudaMemcpy3D_v3020, kScopeOnly, "cudaMemcpy3D"),
    RT(cudaMemcpy3DAsync_v3020, kScopeOnly, "cudaMemcpy3DAsync"),
    RT(cudaMallocArray_v3020, kScopeOnly, "cudaMallocArray"),
    RT(cudaSetDevice_v3020, kScopeOnly, "cudaSetDevice"),
};
#undef RT
#undef RTP

#define DR(CB, OP) {CUPTI_DRIVER_TRACE_CBID_##CB, {Op::OP, false, #CB}}
#define DRP(CB, OP, NAME) {CUPTI_DRIVER_TRACE_CBID_##CB, {Op::OP, true, NAME}}
const std::pair<uint32_t, CbInfo> kDriverTable[] = {
    DR(cuLaunchKernel, kCuLaunchKernel),
    DRP(cuLaunchKernel_ptsz, kCuLaunchKernel, "cuLaunchKernel"),
    DR(cuLaunchKernelEx, kCuLaunchKernelEx),
    DRP(cuLaunchKernelEx_ptsz, kCuLaunchKernelEx, "cuLaunchKernelEx"),
    DR(cuLaunchCooperativeKernel, kCuLaunchCooperative),
    DRP(cuLaunchCooperativeKernel_ptsz, kCuLaunchCooperative, "cuLaunchCooperativeKernel"),
    DR(cuMemAlloc_v2, kCuMemAlloc),
    DR(cuMemAllocPitch_v2, kCuMemAllocPitch),
    DR(cuMemAllocManaged, kCuMemAllocManaged),
    DR(cuMemAllocHost_v2, kCuMemAllocHost),
    DR(cuMemHostAlloc, kCuMemHostAlloc),
    DR(cuMemHostRegister_v2, kCuMemHostRegister),
    DR(cuMemHostUnregister, kCuMemHostUnregister),
    DR(cuMemFree_v2, kCuMemFree),
    DR(cuMemFreeHost, kCuMemFreeHost),
    DR(cuMemAllocAsync, kCuMemAllocAsync),
    DRP(cuMemAllocAsync_ptsz, kCuMemAllocAsync, "cuMemAllocAsync"),
    DR(cuMemAllocFromPoolAsync, kCuMemAllocFromPoolAsync),
    DRP(cuMemAllocFromPoolAsync_ptsz, kCuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync"),
    DR(cuMemFreeAsync, kCuMemFreeAsync),
    DRP(cuMemFreeAsync_ptsz, kCuMemFreeAsync, "cuMemFreeAsync"),
    DR(cuMemMap, kCuMemMap),
    DR(cuMemUnmap, kCuMemUnmap),
    DR(cuMemcpy, kCuMemcpy),
    DRP(cuMemcpy_ptds, kCuMemcpy, "cuMemcpy"),
    DR(cuMemcpyAsync, kCuMemcpyAsync),
    DRP(cuMemcpyAsync_ptsz, kCuMemcpyAsync, "cuMemcpyAsync"),
    DR(cuMemcpyHtoD_v2, kCuMemcpyHtoD),
    DRP(cuMemcpyHtoD_v2_ptds, kCuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    DR(cuMemcpyHtoDAsync_v2, kCuMemcpyHtoDAsync),
    DRP(cuMemcpyHtoDAsync_v2_ptsz, kCuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
    DR(cuMemcpyDtoH_v2, kCuMemcpyDtoH),
    DRP(cuMemcpyDtoH_v2_ptds, kCuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    DR(cuMemcpyDtoHAsync_v2, kCuMemcpyDtoHAsync),
    DRP(cuMemcpyDtoHAsync_v2_ptsz, kCuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
    DR(cuMemcpyDtoD_v2, kCuMemcpyDtoD),
    DRP(cuMemcpyDtoD_v2_ptds, kCuMemcpyDtoD, "cuMemcpyDtoD_v2"),
    DR(cuMemcpyDtoDAsync_v2, kCuMemcpyDtoDAsync),
    DRP(cuMemcpyDtoDAsync_v2_ptsz, kCuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
    DR(cuMemsetD8_v2, kCuMemsetD8),
    DRP(cuMemsetD8_v2_ptds, kCuMemsetD8, "cuMemsetD8_v2"),
    DR(cuMemsetD8Async, kCuMemsetD8Async),
    DRP(cuMemsetD8Async_ptsz, kCuMemsetD8Async, "cuMemsetD8Async"),
    DR(cuMemsetD32_v2, kCuMemsetD32),
    DRP(cuMemsetD32_v2_ptds, kCuMemsetD32, "cuMemsetD32_v2"),
    DR(cuMemsetD32Async, kCuMemsetD32Async),
    DRP(cuMemsetD32Async_ptsz, kCuMemsetD32Async, "cuMemsetD32Async"),
    DR(cuStreamCreate, kCuStreamCreate),
    DR(cuStreamCreateWithPriority, kCuStreamCreatePriority),
    DR(cuStreamDestroy_v2, kCuStreamDestroy),
    DR(cuEventCreate, kCuEventCreate),
    DR(cuEventDestroy_v2, kCuEventDestroy),
    DR(cuEventRecord, kCuEventRecord),
    DRP(cuEventRecord_ptsz, kCuEventRecord, "cuEventRecord"),
    DR(cuEventRecordWithFlags, kCuEventRecord),
    DRP(cuEventRecordWithFlags_ptsz, kCuEventRecord, "cuEventRecordWithFlags"),
    DR(cuStreamWaitEvent, kCuStreamWaitEvent),
    DRP(cuStreamWaitEvent_ptsz, kCuStreamWaitEvent, "cuStreamWaitEvent"),
    DR(cuEventSynchronize, kCuEventSynchronize),
    DR(cuEventQuery, kCuEventQuery),
    DR(cuStreamSynchronize, kCuStreamSynchronize),
    DRP(cuStreamSynchronize_ptsz, kCuStreamSynchronize, "cuStreamSynchronize"),
    DR(cuStreamQuery, kCuStreamQuery),
    DRP(cuStreamQuery_ptsz, kCuStreamQuery, "cuStreamQuery"),
    DR(cuCtxSynchronize, kCuCtxSynchronize),
    DR(cuCtxSynchronize_v2, kCuCtxSynchronize),
    DR(cuGraphLaunch, kCuGraphLaunch),
    DRP(cuGraphLaunch_ptsz, kCuGraphLaunch, "cuGraphLaunch"),
    DR(cuStreamBeginCapture_v2, kCuBeginCapture),
    DRP(cuStreamBeginCapture_v2_ptsz, kCuBeginCapture, "cuStreamBeginCapture_v2"),
    DR(cuStreamEndCapture, kCuEndCapture),
    DRP(cuStreamEndCapture_ptsz, kCuEndCapture, "cuStreamEndCapture"),
};
#undef DR
#undef DRP

template <size_t N>
std::vector<CbInfo> make_index(const std::pair<uint32_t, CbInfo> (&table)[N]) {
  uint32_t max = 0;
  for (auto& [cb, info] : table) max = cb > max ? cb : max;
  std::vector<CbInfo> index(max + 1);
  for (auto& [cb, info] : table) index[cb] = info;
  return index;
}

const std::vector<CbInfo>& runtime_index() {
  static const std::vector<CbInfo> index = make_index(kRuntimeTable);
  return index;
}
const std::vector<CbInfo>& driver_index() {
  static const std::vector<CbInfo> index = make_index(kDriverTable);
  return index;
}
const CbInfo& lookup(ApiDomain d, uint32_t cbid) {
  static const CbInfo none{};
  const auto& index = d == ApiDomain::kRuntime ? runtime_index() : driver_index();
  return cbid < index.size() ? index[cbid] : none;
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

template <typename T>
const T& P(const ApiCall& c) {
  return *static_cast<const T*>(c.params);
}
uint64_t H(const void* p) { return reinterpret_cast<uint64_t>(p); }

bool is_launch(Op op) {
  return op == Op::kLaunchKernel || op == Op::kLaunchKernelInternal || op == Op::kLaunchKernelExC;
}

// 2D copies and sets touch rows of `width` bytes `pitch` apart: the extent from the first
// to the last byte touched.
uint64_t extent_2d(uint64_t pitch, uint64_t width, uint64_t height) {
  return height == 0 ? 0 : pitch * (height - 1) + width;
}

}  // namespace

CudaCallHandler::CudaCallHandler(TraceRecorder& rec, AllocationTable& allocs, CudaQueries& queries, StackCapture* stacks)
    : rec_(&rec),
      allocs_(allocs),
      queries_(queries),
      stacks_(stacks),
      runtime_names_(runtime_index().size()),
      driver_names_(driver_index().size()) {}

void CudaCallHandler::set_recorder(TraceRecorder& rec) {
  rec_ = &rec;
  for (auto& n : runtime_names_) n.store(0);
  for (auto& n : driver_names_) n.store(0);
}

std::vector<uint32_t> CudaCallHandler::runtime_cbids() {
  std::vector<uint32_t> out;
  for (auto& [cb, info] : kRuntimeTable) out.push_back(cb);
  return out;
}
std::vector<uint32_t> CudaCallHandler::driver_cbids() {
  std::vector<uint32_t> out;
  for (auto& [cb, info] : kDriverTable) out.push_back(cb);
  return out;
}

uint32_t CudaCallHandler::api_id(ApiDomain d, uint32_t cbid) {
  auto& names = d == ApiDomain::kRuntime ? runtime_names_ : driver_names_;
  if (cbid >= names.size()) return 0;
  uint32_t id = names[cbid].load(std::memory_order_relaxed);
  if (id == 0) {
    const char* n = lookup(d, cbid).name;
    id = rec_->strings().intern(n ? n : "?");
    names[cbid].store(id, std::memory_order_relaxed);
  }
  return id;
}

uint32_t CudaCallHandler::device_of(uint64_t context) {
  auto& ts = thread_state();
  if (context != 0 && context == ts.last_context) return ts.last_device;
  uint32_t d;
  {
    InternalCallGuard guard;
    d = queries_.device_of_context(context);
  }
  if (context != 0) {
    ts.last_context = context;
    ts.last_device = d;
  }
  return d;
}

uint64_t CudaCallHandler::normalize_stream(uint64_t handle, bool per_thread_default, uint32_t device) {
  // cudaStreamLegacy == CU_STREAM_LEGACY == 1, cudaStreamPerThread == CU_STREAM_PER_THREAD == 2.
  if (handle == 0) {
    return per_thread_default ? trace::per_thread_stream(rec_->thread_index(), device) : trace::legacy_stream(device);
  }
  if (handle == 1) return trace::legacy_stream(device);
  if (handle == 2) return trace::per_thread_stream(rec_->thread_index(), device);
  return handle;
}

trace::CallInfo CudaCallHandler::call_info(uint32_t api) { return rec_->call(api, capture_stack()); }

trace::MemKind CudaCallHandler::mem_kind(uint64_t ptr) {
  if (auto a = allocs_.find(ptr)) return AllocationTable::mem_kind_of(a->kind);
  InternalCallGuard guard;
  return queries_.memory_kind(ptr);
}

void CudaCallHandler::on_call(const ApiCall& c) {
  auto& ts = thread_state();
  if (ts.internal > 0) return;
  try {
    if (c.domain == ApiDomain::kRuntime) {
      on_runtime(c);
    } else {
      on_driver(c);
    }
  } catch (...) {
    // Never let the tracer's trouble reach the traced program.
  }
}

// ---------------------------------------------------------------------------------------
// Runtime domain

void CudaCallHandler::on_runtime(const ApiCall& c) {
  auto& ts = thread_state();
  const CbInfo& info = lookup(ApiDomain::kRuntime, c.cbid);
  if (info.op == Op::kNone) return;
  if (c.enter) {
    if (ts.runtime_depth++ == 0) {
      ts.runtime = RuntimeScope{c.cbid, c.correlation, 0, info.ptsz, is_launch(info.op), false, 0};
      // The driver launch inside may name the runtime's default stream by an internal
      // handle: remember the stream as the user named it.
      if (info.op == Op::kLaunchKernel || info.op == Op::kLaunchKernelInternal) {
        ts.runtime.stream =
            normalize_stream(H(P<cudaLaunchKernel_v7000_params>(c).stream), info.ptsz, device_of(c.context));
      } else if (info.op == Op::kLaunchKernelExC) {
        ts.runtime.stream =
            normalize_stream(H(P<cudaLaunchKernelExC_v11060_params>(c).config->stream), info.ptsz, device_of(c.context));
      }
    }
    return;
  }
  if (ts.runtime_depth > 0) --ts.runtime_depth;
  if (ts.runtime_depth > 0) return;  // a runtime call made by another runtime call
  RuntimeScope scope = ts.runtime;
  ts.runtime = RuntimeScope{};
  if (ts.nccl_depth > 0) {
    if (scope.launch && ts.nccl_launch_correlation == 0) ts.nccl_launch_correlation = c.correlation;
    return;
  }
  if (c.result != 0 && info.op != Op::kEventQuery && info.op != Op::kStreamQuery) return;

  const bool pt = info.ptsz;
  const uint32_t api = api_id(ApiDomain::kRuntime, c.cbid);
  switch (info.op) {
    case Op::kStreamCreate:
      stream_create(api, H(*P<cudaStreamCreate_v3020_params>(c).pStream), device_of(c.context), 0, 0);
      break;
    case Op::kStreamCreateFlags: {
      auto& p = P<cudaStreamCreateWithFlags_v5000_params>(c);
      stream_create(api, H(*p.pStream), device_of(c.context), p.flags, 0);
      break;
    }
    case Op::kStreamCreatePriority: {
      auto& p = P<cudaStreamCreateWithPriority_v5050_params>(c);
      stream_create(api, H(*p.pStream), device_of(c.context), p.flags, p.priority);
      break;
    }
    case Op::kStreamDestroy: {
      trace::StreamDestroy r{};
      r.stream = H(P<cudaStreamDestroy_v5050_params>(c).stream);
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kEventCreate:
    case Op::kEventCreateFlags: {
      trace::EventCreate r{};
      if (info.op == Op::kEventCreate) {
        r.event = H(*P<cudaEventCreate_v3020_params>(c).event);
      } else {
        auto& p = P<cudaEventCreateWithFlags_v3020_params>(c);
        r.event = H(*p.event);
        r.flags = p.flags;
      }
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kEventDestroy: {
      trace::EventDestroy r{};
      r.event = H(P<cudaEventDestroy_v3020_params>(c).event);
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kEventRecord: {  // cudaEventRecord and ...WithFlags share the first two fields
      auto& p = P<cudaEventRecord_v3020_params>(c);
      trace::EventRecord r{};
      r.event = H(p.event);
      r.stream = normalize_stream(H(p.stream), pt, device_of(c.context));
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kStreamWaitEvent: {
      auto& p = P<cudaStreamWaitEvent_v3020_params>(c);
      trace::StreamWaitEvent r{};
      r.stream = normalize_stream(H(p.stream), pt, device_of(c.context));
      r.event = H(p.event);
      GilScope python_stack_matters;  // overlap reports name the wait's Python line
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kEventSynchronize: {
      trace::EventSynchronize r{};
      r.event = H(P<cudaEventSynchronize_v3020_params>(c).event);
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kEventQuery: {
      trace::EventQuery r{};
      r.event = H(P<cudaEventQuery_v3020_params>(c).event);
      r.result = c.result;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kStreamSynchronize: {
      trace::StreamSynchronize r{};
      r.stream = normalize_stream(H(P<cudaStreamSynchronize_v3020_params>(c).stream), pt, device_of(c.context));
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kStreamQuery: {
      trace::StreamQuery r{};
      r.stream = normalize_stream(H(P<cudaStreamQuery_v3020_params>(c).stream), pt, device_of(c.context));
      r.result = c.result;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kDeviceSynchronize:
      device_sync(api, device_of(c.context));
      break;
    case Op::kMalloc: {
      auto& p = P<cudaMalloc_v3020_params>(c);
      alloc(api, H(*p.devPtr), p.size, AllocKind::kDevice, 0, device_of(c.context));
      break;
    }
    case Op::kMallocPitch: {
      auto& p = P<cudaMallocPitch_v3020_params>(c);
      alloc(api, H(*p.devPtr), uint64_t(*p.pitch) * p.height, AllocKind::kDevice, 0, device_of(c.context));
      break;
    }
    case Op::kMalloc3D: {
      auto& p = P<cudaMalloc3D_v3020_params>(c);
      alloc(api, H(p.pitchedDevPtr->ptr), uint64_t(p.pitchedDevPtr->pitch) * p.extent.height * p.extent.depth,
            AllocKind::kDevice, 0, device_of(c.context));
      break;
    }
    case Op::kMallocManaged: {
      auto& p = P<cudaMallocManaged_v6000_params>(c);
      alloc(api, H(*p.devPtr), p.size, AllocKind::kManaged, 0, device_of(c.context));
      break;
    }
    case Op::kMallocHost: {
      auto& p = P<cudaMallocHost_v3020_params>(c);
      alloc(api, H(*p.ptr), p.size, AllocKind::kHostPinned, 0, device_of(c.context));
      break;
    }
    case Op::kHostAlloc: {
      auto& p = P<cudaHostAlloc_v3020_params>(c);
      alloc(api, H(*p.pHost), p.size, AllocKind::kHostPinned, 0, device_of(c.context));
      break;
    }
    case Op::kHostRegister: {
      auto& p = P<cudaHostRegister_v4000_params>(c);
      alloc(api, H(p.ptr), p.size, AllocKind::kHostRegistered, 0, device_of(c.context));
      break;
    }
    case Op::kHostUnregister:
      free(api, H(P<cudaHostUnregister_v4000_params>(c).ptr), 0, AllocKind::kHostRegistered, 0, device_of(c.context),
           false);
      break;
    case Op::kFree:
      free(api, H(P<cudaFree_v3020_params>(c).devPtr), 0, AllocKind::kDevice, 0, device_of(c.context), true);
      break;
    case Op::kFreeHost:
      free(api, H(P<cudaFreeHost_v3020_params>(c).ptr), 0, AllocKind::kHostPinned, 0, device_of(c.context), true);
      break;
    case Op::kFreeArray:
      if (P<cudaFreeArray_v3020_params>(c).array != nullptr) device_sync(api, device_of(c.context));
      break;
    case Op::kMallocAsync: {
      auto& p = P<cudaMallocAsync_v11020_params>(c);
      uint32_t dev = device_of(c.context);
      alloc(api, H(*p.devPtr), p.size, AllocKind::kAsync, normalize_stream(H(p.hStream), pt, dev), dev);
      break;
    }
    case Op::kMallocFromPoolAsync: {
      auto& p = P<cudaMallocFromPoolAsync_v11020_params>(c);
      uint32_t dev = device_of(c.context);
      alloc(api, H(*p.ptr), p.size, AllocKind::kAsync, normalize_stream(H(p.stream), pt, dev), dev);
      break;
    }
    case Op::kFreeAsync: {
      auto& p = P<cudaFreeAsync_v11020_params>(c);
      uint32_t dev = device_of(c.context);
      free(api, H(p.devPtr), 0, AllocKind::kAsync, normalize_stream(H(p.hStream), pt, dev), dev, false);
      break;
    }
    case Op::kMemcpy: {
      auto& p = P<cudaMemcpy_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(0, pt, dev), scope.correlation, H(p.dst), H(p.src), p.count, p.kind, false, dev);
      break;
    }
    case Op::kMemcpyAsync: {
      auto& p = P<cudaMemcpyAsync_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(H(p.stream), pt, dev), scope.correlation, H(p.dst), H(p.src), p.count, p.kind, true,
             dev);
      break;
    }
    case Op::kMemcpy2D: {
      auto& p = P<cudaMemcpy2D_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(0, pt, dev), scope.correlation, H(p.dst), H(p.src),
             extent_2d(p.dpitch, p.width, p.height), p.kind, false, dev);
      break;
    }
    case Op::kMemcpy2DAsync: {
      auto& p = P<cudaMemcpy2DAsync_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(H(p.stream), pt, dev), scope.correlation, H(p.dst), H(p.src),
             extent_2d(p.dpitch, p.width, p.height), p.kind, true, dev);
      break;
    }
    case Op::kMemcpyPeer: {
      auto& p = P<cudaMemcpyPeer_v4000_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(0, pt, dev), scope.correlation, H(p.dst), H(p.src), p.count,
             int(trace::CopyKind::kDeviceToDevice), false, dev);
      break;
    }
    case Op::kMemcpyPeerAsync: {
      auto& p = P<cudaMemcpyPeerAsync_v4000_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(H(p.stream), pt, dev), scope.correlation, H(p.dst), H(p.src), p.count,
             int(trace::CopyKind::kDeviceToDevice), true, dev);
      break;
    }
    case Op::kMemset: {
      auto& p = P<cudaMemset_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memset(api, normalize_stream(0, pt, dev), scope.correlation, H(p.devPtr), p.count, false, dev);
      break;
    }
    case Op::kMemsetAsync: {
      auto& p = P<cudaMemsetAsync_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memset(api, normalize_stream(H(p.stream), pt, dev), scope.correlation, H(p.devPtr), p.count, true, dev);
      break;
    }
    case Op::kMemset2D: {
      auto& p = P<cudaMemset2D_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memset(api, normalize_stream(0, pt, dev), scope.correlation, H(p.devPtr), extent_2d(p.pitch, p.width, p.height),
             false, dev);
      break;
    }
    case Op::kMemset2DAsync: {
      auto& p = P<cudaMemset2DAsync_v3020_params>(c);
      uint32_t dev = device_of(c.context);
      memset(api, normalize_stream(H(p.stream), pt, dev), scope.correlation, H(p.devPtr),
             extent_2d(p.pitch, p.width, p.height), true, dev);
      break;
    }
    case Op::kLaunchKernel:
    case Op::kLaunchKernelInternal: {
      if (scope.launch_emitted) break;
      // The driver launch was not seen (or not reported): record the launch from the
      // runtime's arguments. CUDA 13's __cudaLaunchKernel passes a CUkernel, which the
      // driver can describe; cudaLaunchKernel's host stub cannot be, so it goes unscanned.
      auto& p = P<cudaLaunchKernel_v7000_params>(c);
      uint32_t dev = device_of(c.context);
      uint32_t grid[3] = {p.gridDim.x, p.gridDim.y, p.gridDim.z};
      uint32_t block[3] = {p.blockDim.x, p.blockDim.y, p.blockDim.z};
      bool internal = info.op == Op::kLaunchKernelInternal;
      kernel(api, normalize_stream(H(p.stream), pt, dev), scope.correlation, dev, internal ? H(p.func) : 0, internal,
             c.symbol_name, grid, block, p.args, nullptr);
      break;
    }
    case Op::kLaunchKernelExC: {
      if (scope.launch_emitted) break;
      auto& p = P<cudaLaunchKernelExC_v11060_params>(c);
      uint32_t dev = device_of(c.context);
      uint32_t grid[3] = {p.config->gridDim.x, p.config->gridDim.y, p.config->gridDim.z};
      uint32_t block[3] = {p.config->blockDim.x, p.config->blockDim.y, p.config->blockDim.z};
      kernel(api, normalize_stream(H(p.config->stream), pt, dev), scope.correlation, dev, 0, false, c.symbol_name, grid,
             block, p.args, nullptr);
      break;
    }
    case Op::kGraphLaunch: {
      auto& p = P<cudaGraphLaunch_v10000_params>(c);
      trace::GraphLaunch r{};
      r.graph_exec = H(p.graphExec);
      r.stream = normalize_stream(H(p.stream), pt, device_of(c.context));
      r.correlation = scope.correlation;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kBeginCapture:
    case Op::kEndCapture: {
      // Both params structs start with the stream.
      trace::StreamCapture r{};
      r.stream = normalize_stream(H(P<cudaStreamBeginCapture_v10000_params>(c).stream), pt, device_of(c.context));
      r.begin = info.op == Op::kBeginCapture ? 1 : 0;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------
// Driver domain

void CudaCallHandler::on_driver(const ApiCall& c) {
  auto& ts = thread_state();
  const CbInfo& info = lookup(ApiDomain::kDriver, c.cbid);
  if (info.op == Op::kNone || c.enter) return;
  const bool launch = info.op == Op::kCuLaunchKernel || info.op == Op::kCuLaunchKernelEx ||
                      info.op == Op::kCuLaunchCooperative;
  if (ts.nccl_depth > 0) {
    if (launch && ts.nccl_launch_correlation == 0 && c.result == 0)
      ts.nccl_launch_correlation = ts.runtime_depth > 0 ? ts.runtime.correlation : c.correlation;
    return;
  }
  uint32_t api;
  uint64_t correlation;
  bool pt;
  uint64_t scope_stream = 0;  // set inside a runtime launch
  if (ts.runtime_depth > 0) {
    // Inside a runtime call: only its kernel launch is ours to record, once.
    if (!launch || !ts.runtime.launch || ts.runtime.launch_emitted) return;
    if (c.result != 0) return;
    ts.runtime.launch_emitted = true;
    api = api_id(ApiDomain::kRuntime, ts.runtime.cbid);
    correlation = ts.runtime.correlation;
    pt = ts.runtime.per_thread_default || info.ptsz;
    scope_stream = ts.runtime.stream;
  } else {
    if (c.result != 0 && info.op != Op::kCuEventQuery && info.op != Op::kCuStreamQuery) return;
    api = api_id(ApiDomain::kDriver, c.cbid);
    correlation = c.correlation;
    pt = info.ptsz;
  }

  switch (info.op) {
    case Op::kCuLaunchKernel:
    case Op::kCuLaunchCooperative: {
      // cuLaunchCooperativeKernel's params are cuLaunchKernel's without `extra`.
      auto& p = P<cuLaunchKernel_params>(c);
      uint32_t dev = device_of(c.context);
      uint32_t grid[3] = {p.gridDimX, p.gridDimY, p.gridDimZ};
      uint32_t block[3] = {p.blockDimX, p.blockDimY, p.blockDimZ};
      const void* packed = nullptr;
      if (info.op == Op::kCuLaunchKernel && p.kernelParams == nullptr && p.extra != nullptr) {
        for (void** e = p.extra; *e != CU_LAUNCH_PARAM_END; e += 2)
          if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) packed = e[1];
      }
      uint64_t stream = scope_stream ? scope_stream : normalize_stream(H(p.hStream), pt, dev);
      kernel(api, stream, correlation, dev, H(p.f), false, c.symbol_name, grid, block, p.kernelParams, packed);
      break;
    }
    case Op::kCuLaunchKernelEx: {
      auto& p = P<cuLaunchKernelEx_params>(c);
      uint32_t dev = device_of(c.context);
      uint32_t grid[3] = {p.config->gridDimX, p.config->gridDimY, p.config->gridDimZ};
      uint32_t block[3] = {p.config->blockDimX, p.config->blockDimY, p.config->blockDimZ};
      const void* packed = nullptr;
      if (p.kernelParams == nullptr && p.extra != nullptr) {
        for (void** e = p.extra; *e != CU_LAUNCH_PARAM_END; e += 2)
          if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) packed = e[1];
      }
      uint64_t stream = scope_stream ? scope_stream : normalize_stream(H(p.config->hStream), pt, dev);
      kernel(api, stream, correlation, dev, H(p.f), false, c.symbol_name, grid, block, p.kernelParams, packed);
      break;
    }
    case Op::kCuMemAlloc: {
      auto& p = P<cuMemAlloc_v2_params>(c);
      alloc(api, *p.dptr, p.bytesize, AllocKind::kDevice, 0, device_of(c.context));
      break;
    }
    case Op::kCuMemAllocPitch: {
      auto& p = P<cuMemAllocPitch_v2_params>(c);
      alloc(api, *p.dptr, uint64_t(*p.pPitch) * p.Height, AllocKind::kDevice, 0, device_of(c.context));
      break;
    }
    case Op::kCuMemAllocManaged: {
      auto& p = P<cuMemAllocManaged_params>(c);
      alloc(api, *p.dptr, p.bytesize, AllocKind::kManaged, 0, device_of(c.context));
      break;
    }
    case Op::kCuMemAllocHost: {
      auto& p = P<cuMemAllocHost_v2_params>(c);
      alloc(api, H(*p.pp), p.bytesize, AllocKind::kHostPinned, 0, device_of(c.context));
      break;
    }
    case Op::kCuMemHostAlloc: {
      auto& p = P<cuMemHostAlloc_params>(c);
      alloc(api, H(*p.pp), p.bytesize, AllocKind::kHostPinned, 0, device_of(c.context));
      break;
    }
    case Op::kCuMemHostRegister: {
      auto& p = P<cuMemHostRegister_v2_params>(c);
      alloc(api, H(p.p), p.bytesize, AllocKind::kHostRegistered, 0, device_of(c.context));
      break;
    }
    case Op::kCuMemHostUnregister:
      free(api, H(P<cuMemHostUnregister_params>(c).p), 0, AllocKind::kHostRegistered, 0, device_of(c.context), false);
      break;
    case Op::kCuMemFree:
      free(api, P<cuMemFree_v2_params>(c).dptr, 0, AllocKind::kDevice, 0, device_of(c.context), true);
      break;
    case Op::kCuMemFreeHost:
      free(api, H(P<cuMemFreeHost_params>(c).p), 0, AllocKind::kHostPinned, 0, device_of(c.context), true);
      break;
    case Op::kCuMemAllocAsync: {
      auto& p = P<cuMemAllocAsync_params>(c);
      uint32_t dev = device_of(c.context);
      alloc(api, *p.dptr, p.bytesize, AllocKind::kAsync, normalize_stream(H(p.hStream), pt, dev), dev);
      break;
    }
    case Op::kCuMemAllocFromPoolAsync: {
      auto& p = P<cuMemAllocFromPoolAsync_params>(c);
      uint32_t dev = device_of(c.context);
      alloc(api, *p.dptr, p.bytesize, AllocKind::kAsync, normalize_stream(H(p.hStream), pt, dev), dev);
      break;
    }
    case Op::kCuMemFreeAsync: {
      auto& p = P<cuMemFreeAsync_params>(c);
      uint32_t dev = device_of(c.context);
      free(api, p.dptr, 0, AllocKind::kAsync, normalize_stream(H(p.hStream), pt, dev), dev, false);
      break;
    }
    case Op::kCuMemMap: {
      auto& p = P<cuMemMap_params>(c);
      alloc(api, p.ptr, p.size, AllocKind::kVmmMap, 0, device_of(c.context));
      break;
    }
    case Op::kCuMemUnmap: {
      auto& p = P<cuMemUnmap_params>(c);
      allocs_.erase_range(p.ptr, p.size);
      trace::Free r{};
      r.ptr = p.ptr;
      r.bytes = p.size;
      r.device = device_of(c.context);
      r.kind = AllocKind::kVmmMap;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuMemcpy: {
      auto& p = P<cuMemcpy_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(0, pt, dev), correlation, p.dst, p.src, p.ByteCount, int(trace::CopyKind::kDefault),
             false, dev);
      break;
    }
    case Op::kCuMemcpyAsync: {
      auto& p = P<cuMemcpyAsync_params>(c);
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(H(p.hStream), pt, dev), correlation, p.dst, p.src, p.ByteCount,
             int(trace::CopyKind::kDefault), true, dev);
      break;
    }
    case Op::kCuMemcpyHtoD:
    case Op::kCuMemcpyHtoDAsync: {
      auto& p = P<cuMemcpyHtoDAsync_v2_params>(c);
      bool async = info.op == Op::kCuMemcpyHtoDAsync;
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(async ? H(p.hStream) : 0, pt, dev), correlation, p.dstDevice, H(p.srcHost),
             p.ByteCount, int(trace::CopyKind::kHostToDevice), async, dev);
      break;
    }
    case Op::kCuMemcpyDtoH:
    case Op::kCuMemcpyDtoHAsync: {
      auto& p = P<cuMemcpyDtoHAsync_v2_params>(c);
      bool async = info.op == Op::kCuMemcpyDtoHAsync;
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(async ? H(p.hStream) : 0, pt, dev), correlation, H(p.dstHost), p.srcDevice,
             p.ByteCount, int(trace::CopyKind::kDeviceToHost), async, dev);
      break;
    }
    case Op::kCuMemcpyDtoD:
    case Op::kCuMemcpyDtoDAsync: {
      auto& p = P<cuMemcpyDtoDAsync_v2_params>(c);
      bool async = info.op == Op::kCuMemcpyDtoDAsync;
      uint32_t dev = device_of(c.context);
      memcpy(api, normalize_stream(async ? H(p.hStream) : 0, pt, dev), correlation, p.dstDevice, p.srcDevice,
             p.ByteCount, int(trace::CopyKind::kDeviceToDevice), async, dev);
      break;
    }
    case Op::kCuMemsetD8:
    case Op::kCuMemsetD8Async:
    case Op::kCuMemsetD32:
    case Op::kCuMemsetD32Async: {
      // The D8 and D32 params structs differ only in the value's type, which sits before N
      // padded to 8 bytes either way.
      bool async = info.op == Op::kCuMemsetD8Async || info.op == Op::kCuMemsetD32Async;
      bool d32 = info.op == Op::kCuMemsetD32 || info.op == Op::kCuMemsetD32Async;
      auto& p = P<cuMemsetD32Async_params>(c);
      uint32_t dev = device_of(c.context);
      memset(api, normalize_stream(async ? H(p.hStream) : 0, pt, dev), correlation, p.dstDevice,
             uint64_t(p.N) * (d32 ? 4 : 1), async, dev);
      break;
    }
    case Op::kCuStreamCreate: {
      auto& p = P<cuStreamCreate_params>(c);
      stream_create(api, H(*p.phStream), device_of(c.context), p.Flags, 0);
      break;
    }
    case Op::kCuStreamCreatePriority: {
      auto& p = P<cuStreamCreateWithPriority_params>(c);
      stream_create(api, H(*p.phStream), device_of(c.context), p.flags, p.priority);
      break;
    }
    case Op::kCuStreamDestroy: {
      trace::StreamDestroy r{};
      r.stream = H(P<cuStreamDestroy_v2_params>(c).hStream);
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuEventCreate: {
      auto& p = P<cuEventCreate_params>(c);
      trace::EventCreate r{};
      r.event = H(*p.phEvent);
      r.flags = p.Flags;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuEventDestroy: {
      trace::EventDestroy r{};
      r.event = H(P<cuEventDestroy_v2_params>(c).hEvent);
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuEventRecord: {
      auto& p = P<cuEventRecord_params>(c);
      trace::EventRecord r{};
      r.event = H(p.hEvent);
      r.stream = normalize_stream(H(p.hStream), pt, device_of(c.context));
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuStreamWaitEvent: {
      auto& p = P<cuStreamWaitEvent_params>(c);
      trace::StreamWaitEvent r{};
      r.stream = normalize_stream(H(p.hStream), pt, device_of(c.context));
      r.event = H(p.hEvent);
      GilScope python_stack_matters;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuEventSynchronize: {
      trace::EventSynchronize r{};
      r.event = H(P<cuEventSynchronize_params>(c).hEvent);
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuEventQuery: {
      trace::EventQuery r{};
      r.event = H(P<cuEventQuery_params>(c).hEvent);
      r.result = c.result;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuStreamSynchronize: {
      trace::StreamSynchronize r{};
      r.stream = normalize_stream(H(P<cuStreamSynchronize_params>(c).hStream), pt, device_of(c.context));
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuStreamQuery: {
      trace::StreamQuery r{};
      r.stream = normalize_stream(H(P<cuStreamQuery_params>(c).hStream), pt, device_of(c.context));
      r.result = c.result;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuCtxSynchronize:
      device_sync(api, device_of(c.context));
      break;
    case Op::kCuGraphLaunch: {
      auto& p = P<cuGraphLaunch_params>(c);
      trace::GraphLaunch r{};
      r.graph_exec = H(p.hGraph);
      r.stream = normalize_stream(H(p.hStream), pt, device_of(c.context));
      r.correlation = correlation;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    case Op::kCuBeginCapture:
    case Op::kCuEndCapture: {
      trace::StreamCapture r{};
      r.stream = normalize_stream(H(P<cuStreamEndCapture_params>(c).hStream), pt, device_of(c.context));
      r.begin = info.op == Op::kCuBeginCapture ? 1 : 0;
      r.call = call_info(api);
      rec_->add(r);
      break;
    }
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------
// Record builders

void CudaCallHandler::stream_create(uint32_t api, uint64_t stream, uint32_t device, uint32_t flags, int32_t priority) {
  trace::StreamCreate r{};
  r.stream = stream;
  r.device = device;
  r.flags = flags & trace::kStreamNonBlocking;
  r.priority = priority;
  r.call = call_info(api);
  rec_->add(r);
}

void CudaCallHandler::alloc(uint32_t api, uint64_t ptr, uint64_t bytes, AllocKind kind, uint64_t stream,
                            uint32_t device) {
  if (ptr == 0) return;
  allocs_.insert(LiveAllocation{ptr, bytes, kind, device});
  trace::Alloc r{};
  r.ptr = ptr;
  r.bytes = bytes;
  r.stream = stream;
  r.device = device;
  r.kind = kind;
  r.call = call_info(api);
  rec_->add(r);
}

void CudaCallHandler::free(uint32_t api, uint64_t ptr, uint64_t bytes, AllocKind fallback, uint64_t stream,
                           uint32_t device, bool implicit_sync) {
  if (ptr == 0) return;  // cudaFree(0) only initialises the context
  auto a = allocs_.erase(ptr);
  // A synchronous free waits for all work on the device first: the host learns everything
  // the device did before the memory goes away.
  if (implicit_sync) device_sync(api, a ? a->device : device);
  trace::Free r{};
  r.ptr = ptr;
  r.bytes = bytes;
  r.stream = stream;
  r.device = a ? a->device : device;
  r.kind = a ? a->kind : fallback;
  r.call = call_info(api);
  rec_->add(r);
}

void CudaCallHandler::device_sync(uint32_t api, uint32_t device) {
  trace::DeviceSynchronize r{};
  r.device = device;
  r.call = call_info(api);
  rec_->add(r);
}

void CudaCallHandler::memcpy(uint32_t api, uint64_t stream, uint64_t correlation, uint64_t dst, uint64_t src,
                             uint64_t bytes, int copy_kind, bool async, uint32_t device) {
  GilScope python_stack_matters;
  trace::Memcpy r{};
  r.stream = stream;
  r.correlation = correlation;
  r.dst = dst;
  r.src = src;
  r.bytes = bytes;
  r.device = device;
  r.is_async = async ? 1 : 0;
  r.src_mem = mem_kind(src);
  r.dst_mem = mem_kind(dst);
  auto host = [](trace::MemKind k) { return k == trace::MemKind::kPageableHost || k == trace::MemKind::kPinnedHost; };
  if (copy_kind < 0 || copy_kind > int(trace::CopyKind::kDefault)) copy_kind = int(trace::CopyKind::kDefault);
  if (copy_kind == int(trace::CopyKind::kDefault)) {
    bool sh = host(r.src_mem), dh = host(r.dst_mem);
    copy_kind = sh ? (dh ? int(trace::CopyKind::kHostToHost) : int(trace::CopyKind::kHostToDevice))
                   : (dh ? int(trace::CopyKind::kDeviceToHost) : int(trace::CopyKind::kDeviceToDevice));
  }
  r.copy_kind = trace::CopyKind(copy_kind);
  r.call = call_info(api);
  rec_->add(r);
}

void CudaCallHandler::memset(uint32_t api, uint64_t stream, uint64_t correlation, uint64_t dst, uint64_t bytes,
                             bool async, uint32_t device) {
  GilScope python_stack_matters;
  trace::Memset r{};
  r.stream = stream;
  r.correlation = correlation;
  r.dst = dst;
  r.bytes = bytes;
  r.device = device;
  r.is_async = async ? 1 : 0;
  r.dst_mem = mem_kind(dst);
  r.call = call_info(api);
  rec_->add(r);
}

uint32_t CudaCallHandler::kernel_name_id(uint64_t func, const char* name) {
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::pair<TraceRecorder*, uint32_t>> cache;
  if (func != 0) {
    std::lock_guard lock(mu);
    auto it = cache.find(func);
    if (it != cache.end() && it->second.first == rec_) return it->second.second;
  }
  uint32_t id;
  if (name == nullptr) {
    id = rec_->strings().intern("<unknown kernel>");
  } else {
    int status = 0;
    char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    id = rec_->strings().intern(status == 0 && demangled ? demangled : name);
    std::free(demangled);
  }
  if (func != 0) {
    std::lock_guard lock(mu);
    cache[func] = {rec_, id};
  }
  return id;
}

void CudaCallHandler::kernel(uint32_t api, uint64_t stream, uint64_t correlation, uint32_t device, uint64_t func,
                             bool library_kernel, const char* name, const uint32_t grid[3], const uint32_t block[3],
                             void* const* args, const void* packed) {
  GilScope python_stack_matters;
  auto& ts = thread_state();
  // Precise mode: the launch callback marked this launch as patched (its exact accesses
  // follow as KernelAccess records) and may know the name the API callback did not give.
  const bool precise = ts.precise_correlation != 0 && ts.precise_correlation == correlation;
  if (name == nullptr) name = ts.launch_function;
  ts.precise_correlation = 0;
  ts.launch_function = nullptr;
  trace::KernelLaunchHead h{};
  h.stream = stream;
  h.correlation = correlation;
  h.device = device;
  h.name_id = kernel_name_id(func, name);
  for (int i = 0; i < 3; ++i) {
    h.grid[i] = grid[i];
    h.block[i] = block[i];
  }
  // Pointer arguments: every 8-byte word of every parameter (structs of pointers included,
  // as in PyTorch's elementwise kernels) that lands inside a live allocation.
  thread_local std::vector<ParamSlot> layout;
  thread_local std::vector<uint64_t> ptrs;
  ptrs.clear();
  layout.clear();
  bool scanned = false;
  if (func != 0 && (args != nullptr || packed != nullptr)) {
    bool have;
    {
      InternalCallGuard guard;
      have = queries_.param_layout(func, library_kernel, layout);
    }
    if (have) {
      scanned = true;
      for (size_t i = 0; i < layout.size(); ++i) {
        const uint8_t* base = packed ? static_cast<const uint8_t*>(packed) + layout[i].offset
                                     : static_cast<const uint8_t*>(args[i]);
        if (base == nullptr) continue;
        for (uint32_t off = 0; off + 8 <= layout[i].size; off += 8) {
          uint64_t w;
          std::memcpy(&w, base + off, 8);
          if (!allocs_.maybe_contains(w) || !allocs_.find(w)) continue;
          bool dup = false;
          for (uint64_t q : ptrs) dup |= q == w;
          if (!dup) ptrs.push_back(w);
        }
      }
    }
  }
  h.nptrs = uint32_t(ptrs.size());
  h.flags = (scanned ? uint32_t(trace::kKernelArgsScanned) : 0u) | (precise ? uint32_t(trace::kKernelPrecise) : 0u);
  h.call = call_info(api);
  rec_->add_kernel(h, ptrs);
}

}  // namespace streamrace::tracer
