// CudaCallHandler: see cuda_call_handler.h. The happens-before meaning of each record is
// the analyzer's business; this file only says which record each CUDA call becomes.
#include "tracer/cuda_call_handler.h"
#include "tracer/kernel_signatures.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "tracer/args_hash.h"
#include "tracer/launch_corpus.h"
#include "tracer/self_time.h"
#include "tracer/thread_state.h"

namespace streamrace::tracer {

namespace {

using trace::AllocKind;

CudaCall extract(const CallSpec& spec, const void* params) {
  CudaCall call;
  call.kind = spec.kind;
  if (spec.extract != nullptr && params != nullptr) spec.extract(params, call);
  return call;
}

// Queries are recorded whatever they returned: "not ready" is the fact the analyzer needs.
// Other failed calls did nothing and are not recorded.
// Queries report their result; a failed cudaStreamEndCapture (an invalidated capture) still
// ends the capture, so it is recorded with no graph (a failed begin is dropped in emit).
bool recorded_on_failure(CallKind kind) {
  return kind == CallKind::kEventQuery || kind == CallKind::kStreamQuery || kind == CallKind::kStreamCapture;
}

// The rows of `domain`, less the runtime's kernel launches unless `launches`.
std::vector<uint32_t> cbids_of(ApiDomain domain, bool launches = true) {
  std::vector<uint32_t> out;
  for (const CallSpec& s : call_table())
    if (s.domain == domain && (launches || s.kind != CallKind::kKernelLaunch)) out.push_back(s.cbid);
  return out;
}

}  // namespace

CudaCallHandler::CudaCallHandler(TraceRecorder& rec, AllocationTable& allocs, CudaQueries& queries, StackCapture* stacks)
    : rec_(&rec),
      allocs_(allocs),
      queries_(queries),
      stacks_(stacks),
      runtime_calls_(max_cbid(ApiDomain::kRuntime) + 1),
      driver_calls_(max_cbid(ApiDomain::kDriver) + 1),
      markers_(rec) {
  static_assert(sizeof(CallEntry) == 64);
  for (auto* calls : {&runtime_calls_, &driver_calls_}) {
    const ApiDomain d = calls == &runtime_calls_ ? ApiDomain::kRuntime : ApiDomain::kDriver;
    for (uint32_t cbid = 0; cbid < calls->size(); ++cbid) {
      if (const CallSpec* spec = find_call(d, cbid)) {
        (*calls)[cbid].row = *spec;
        (*calls)[cbid].spec = &(*calls)[cbid].row;
      }
    }
  }
  set_deferred_scan(true);
}

void CudaCallHandler::set_deferred_scan(bool on) {
  // The scanner stays with the recorder once made: launches deferred before this call are
  // still finished.
  if (on && !deferred_) start_scanner();
  defer_ = on;
}

void CudaCallHandler::start_scanner() {
  deferred_ = std::make_shared<DeferredScan>(allocs_.start_change_log());
  rec_->set_deferred_resolver(deferred_);
}

void CudaCallHandler::set_recorder(TraceRecorder& rec) {
  rec_ = &rec;
  markers_.set_recorder(rec);
  // A scanner of its own, with a log of its own, made at the first launch that defers (in a
  // forked child this runs inside fork(), where the table's lock may be held by a thread the
  // child does not have; the child's launches scan at the launch until then).
  if (deferred_) {
    deferred_.reset();
    scanner_wanted_.store(true, std::memory_order_release);
  }
  for (auto& n : runtime_calls_) n.api.store(0);
  for (auto& n : driver_calls_) n.api.store(0);
}

std::vector<uint32_t> CudaCallHandler::runtime_cbids() { return cbids_of(ApiDomain::kRuntime); }
std::vector<uint32_t> CudaCallHandler::cupti_runtime_cbids(bool runtime_launches) {
  return cbids_of(ApiDomain::kRuntime, runtime_launches);
}
std::vector<uint32_t> CudaCallHandler::driver_cbids() { return cbids_of(ApiDomain::kDriver); }

uint32_t CudaCallHandler::api_id(ApiDomain d, uint32_t cbid) {
  auto& calls = d == ApiDomain::kRuntime ? runtime_calls_ : driver_calls_;
  if (cbid >= calls.size()) return 0;
  CallEntry& entry = calls[cbid];
  uint32_t id = entry.api.load(std::memory_order_relaxed);
  if (id == 0) {
    id = rec_->strings().intern(entry.spec ? entry.spec->name : "?");
    entry.api.store(id, std::memory_order_relaxed);
  }
  return id;
}

uint32_t CudaCallHandler::device_of(uint64_t context) { return device_of(thread_state(), context); }

uint32_t CudaCallHandler::device_of(TracerThreadState& ts, uint64_t context) {
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
  TracerThreadState& ts = thread_state();  // once per callback, passed on
  if (ts.internal > 0) return;
  std::vector<CallEntry>& calls = c.domain == ApiDomain::kRuntime ? runtime_calls_ : driver_calls_;
  if (c.cbid >= calls.size()) return;
  CallEntry& entry = calls[c.cbid];
  const CallSpec* spec = entry.spec;
  if (spec == nullptr) return;
  if (bench_cut_ != 0 && bench_cut_ <= 2 && spec->kind == CallKind::kKernelLaunch) [[unlikely]]
    return;
  try {
    // The lean path: a driver launch's exit outside any runtime or NCCL call, its scan deferred
    // (most of a traced program's calls). It writes the record on_driver, emit and kernel would,
    // without their CudaCall; what it does not take goes on to them.
    if (spec->launch != nullptr && !c.enter && c.result == 0 && (ts.runtime_depth | ts.nccl_depth) == 0 &&
        lean_launches_ && defer_ && host_ == nullptr && !self_time::enabled()) {
      if (lean_launch(ts, c, *spec, entry)) return;
    }
    if (host_) {
      // Accesses caught since the last call reach the trace before this call's record.
      if (host_->has_pending()) host_->drain();
      if (c.enter && spec->kind == CallKind::kFree) before_free(*spec, c.params);
    }
    if (c.domain == ApiDomain::kRuntime) {
      on_runtime(ts, c, *spec);
    } else {
      on_driver(ts, c, *spec);
    }
  } catch (...) {
    // Never let the tracer's trouble reach the traced program.
  }
}

void CudaCallHandler::before_free(const CallSpec& spec, const void* params) {
  CudaCall call = extract(spec, params);
  if (call.alloc_kind == AllocKind::kHostPinned || call.alloc_kind == AllocKind::kHostRegistered)
    host_->pinned_freeing(call.ptr);
}

// A runtime call: its scope opens at enter, its record is written at exit.
void CudaCallHandler::on_runtime(TracerThreadState& ts, const ApiCall& c, const CallSpec& spec) {
  const bool launch = spec.kind == CallKind::kKernelLaunch;
  if (c.enter) {
    if (ts.runtime_depth++ == 0) {
      ts.runtime = RuntimeScope{c.cbid, c.correlation, 0, spec.per_thread_default, launch, false, false, 0};
      if (spec.kind == CallKind::kGraphEdit)
        ts.runtime.graph_kernel_node = extract(spec, c.params).node_type == trace::GraphNodeType::kKernel;
      // The driver launch inside may name the runtime's default stream by an internal
      // handle: remember the stream as the user named it.
      if (launch) {
        ts.runtime.stream =
            normalize_stream(extract(spec, c.params).stream, spec.per_thread_default, device_of(ts, c.context));
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
  if (c.result != 0 && !recorded_on_failure(spec.kind)) return;
  // A launch whose driver launch was recorded is done; one whose driver launch was not seen
  // (or not reported) is recorded from the runtime's arguments: unscanned for
  // cudaLaunchKernel's host stub, scanned for CUDA 13's __cudaLaunchKernel, which passes a
  // CUkernel the driver can describe.
  if (spec.kind == CallKind::kScopeOnly || scope.launch_emitted) return;
  Emission e;
  e.ts = &ts;
  e.api = api_id(ApiDomain::kRuntime, c.cbid);
  e.correlation = scope.correlation;
  e.per_thread_default = spec.per_thread_default;
  e.context = c.context;
  e.result = c.result;
  e.symbol = c.symbol_name;
  emit(extract(spec, c.params), e);
}

bool CudaCallHandler::lean_launch(TracerThreadState& ts, const ApiCall& c, const CallSpec& spec, CallEntry& entry) {
  LaunchArgs a;
  spec.launch(c.params, a);
  // on_driver's emission of a driver call outside a runtime call, and emit's stream and device.
  const uint32_t device = c.context != 0 && c.context == ts.last_context ? ts.last_device : device_of(ts, c.context);
  const uint64_t stream = a.stream > 2 ? a.stream : normalize_stream(a.stream, spec.per_thread_default, device);
  uint32_t api = entry.api.load(std::memory_order_relaxed);
  if (api == 0) [[unlikely]]
    api = api_id(ApiDomain::kDriver, c.cbid);
  return deferred_launch(ts, a, c.symbol_name, api, c.correlation, stream, device);
}

// A driver call: recorded at exit, unless it is part of a runtime call or of an NCCL call.
void CudaCallHandler::on_driver(TracerThreadState& ts, const ApiCall& c, const CallSpec& spec) {
  if (c.enter) return;
  if (spec.kind == CallKind::kFunctionsUnload) [[unlikely]] {  // whoever unloads (the runtime, NCCL, the user)
    if (c.result == 0) forget_functions();
    return;
  }
  const bool launch = spec.kind == CallKind::kKernelLaunch;
  if (ts.nccl_depth > 0) {
    if (launch && ts.nccl_launch_correlation == 0 && c.result == 0)
      ts.nccl_launch_correlation = ts.runtime_depth > 0 ? ts.runtime.correlation : c.correlation;
    return;
  }
  Emission e;
  e.ts = &ts;
  e.context = c.context;
  e.result = c.result;
  e.symbol = c.symbol_name;
  if (ts.runtime_depth > 0) {
    // Inside a runtime call: only its kernel launch is ours to record, once, under the
    // runtime call's name, correlation and stream; likewise the driver call that adds or sets
    // a runtime call's kernel node (it names the CUfunction, the runtime call a host stub).
    if (spec.kind == CallKind::kGraphEdit && ts.runtime.graph_kernel_node && !ts.runtime.launch_emitted &&
        c.result == 0) {
      CudaCall call = extract(spec, c.params);
      if (call.node_type != trace::GraphNodeType::kKernel) return;
      ts.runtime.launch_emitted = true;
      e.api = api_id(ApiDomain::kRuntime, ts.runtime.cbid);
      e.correlation = ts.runtime.correlation;
      emit(call, e);
      return;
    }
    if (!launch || !ts.runtime.launch || ts.runtime.launch_emitted || c.result != 0) return;
    ts.runtime.launch_emitted = true;
    e.api = api_id(ApiDomain::kRuntime, ts.runtime.cbid);
    e.correlation = ts.runtime.correlation;
    e.per_thread_default = ts.runtime.per_thread_default || spec.per_thread_default;
    e.stream_named = true;
    e.stream = ts.runtime.stream;
  } else {
    if (c.result != 0 && !recorded_on_failure(spec.kind)) return;
    e.api = api_id(ApiDomain::kDriver, c.cbid);
    e.correlation = c.correlation;
    e.per_thread_default = spec.per_thread_default;
  }
  emit(extract(spec, c.params), e);
}

// ---------------------------------------------------------------------------------------
// Records

template <typename R, typename Fill>
void CudaCallHandler::record(uint32_t api, Fill&& fill) {
  R r{};
  fill(r);
  rec_->add_call(r, api, capture_stack());
}

void CudaCallHandler::emit(const CudaCall& call, const Emission& e) {
  uint32_t device_memo = UINT32_MAX;
  auto device = [&] {
    if (device_memo == UINT32_MAX) device_memo = e.ts ? device_of(*e.ts, e.context) : device_of(e.context);
    return device_memo;
  };
  auto stream = [&] { return e.stream_named ? e.stream : normalize_stream(call.stream, e.per_thread_default, device()); };
  using namespace trace;
  switch (call.kind) {
    case CallKind::kScopeOnly:
    case CallKind::kFunctionsUnload:  // handled in on_driver
      return;
    case CallKind::kProfilerStart:
    case CallKind::kProfilerStop:
      markers_.profiler(call.kind == CallKind::kProfilerStart, e.api);
      return;
    case CallKind::kStreamCreate:
      return record<StreamCreate>(e.api, [&](auto& r) {
        r.stream = call.stream;
        r.device = device();
        r.flags = call.flags & kStreamNonBlocking;
        r.priority = call.priority;
      });
    case CallKind::kStreamDestroy:
      return record<StreamDestroy>(e.api, [&](auto& r) { r.stream = call.stream; });
    case CallKind::kEventCreate:
      return record<EventCreate>(e.api, [&](auto& r) { r.event = call.event; r.flags = call.flags; });
    case CallKind::kEventDestroy:
      return record<EventDestroy>(e.api, [&](auto& r) { r.event = call.event; });
    case CallKind::kEventRecord:
      record<EventRecord>(e.api, [&](auto& r) { r.event = call.event; r.stream = stream(); });
      if (host_) host_->event_recorded(call.event, stream());
      return;
    case CallKind::kStreamWaitEvent: {
      GilScope python_stack_matters;  // overlap reports name the wait's Python line
      return record<StreamWaitEvent>(e.api, [&](auto& r) { r.stream = stream(); r.event = call.event; });
    }
    case CallKind::kEventSynchronize:
      record<EventSynchronize>(e.api, [&](auto& r) { r.event = call.event; });
      if (host_) host_->event_synchronized(call.event);
      return;
    case CallKind::kEventQuery:
      record<EventQuery>(e.api, [&](auto& r) { r.event = call.event; r.result = e.result; });
      if (host_ && e.result == 0) host_->event_synchronized(call.event);
      return;
    case CallKind::kStreamSynchronize:
      record<StreamSynchronize>(e.api, [&](auto& r) { r.stream = stream(); });
      if (host_) host_->stream_synchronized(stream());
      return;
    case CallKind::kStreamQuery:
      record<StreamQuery>(e.api, [&](auto& r) { r.stream = stream(); r.result = e.result; });
      if (host_ && e.result == 0) host_->stream_synchronized(stream());
      return;
    case CallKind::kDeviceSynchronize:
      record<DeviceSynchronize>(e.api, [&](auto& r) { r.device = device(); });
      if (host_) host_->host_synchronized();
      return;
    case CallKind::kAlloc:
      if (call.ptr == 0) return;
      allocs_.insert(LiveAllocation{call.ptr, call.bytes, call.alloc_kind, device()});
      if (host_ && (call.alloc_kind == AllocKind::kHostPinned || call.alloc_kind == AllocKind::kHostRegistered))
        host_->pinned_allocated(call.ptr, call.bytes, call.alloc_kind);
      record<Alloc>(e.api, [&](auto& r) {
        r.ptr = call.ptr;
        r.bytes = call.bytes;
        r.stream = call.has_stream ? stream() : 0;
        r.device = device();
        r.kind = call.alloc_kind;
      });
      if (torch_hook_ && (call.alloc_kind == AllocKind::kDevice || call.alloc_kind == AllocKind::kVmmMap))
        torch_hook_->maybe_attach();
      return;
    case CallKind::kFree:
      return free(call, e, call.has_stream ? stream() : 0);
    case CallKind::kMemcpy:
      return memcpy(call, e, stream(), device());
    case CallKind::kMemset: {
      GilScope python_stack_matters;
      if (host_ && !call.async) host_->host_synchronized();
      return record<Memset>(e.api, [&](auto& r) {
        r.stream = stream();
        r.correlation = e.correlation;
        r.dst = call.ptr;
        r.bytes = call.bytes;
        r.device = device();
        r.is_async = call.async ? 1 : 0;
        r.dst_mem = mem_kind(call.ptr);
      });
    }
    case CallKind::kKernelLaunch:
      return kernel(call, e, stream(), device());
    case CallKind::kGraphLaunch: {
      // A graph node's findings show the launch's stack beside the capture's: PyTorch's
      // CUDAGraph.replay() releases the GIL around cudaGraphLaunch, like its kernel launches.
      GilScope python_stack_matters;
      return record<GraphLaunch>(e.api, [&](auto& r) {
        r.graph_exec = call.ptr;
        r.stream = stream();
        r.correlation = e.correlation;
      });
    }
    case CallKind::kStreamCapture:
      if (e.result != 0 && call.capture_begin) return;  // no capture began
      return record<StreamCapture>(e.api, [&](auto& r) {
        r.stream = stream();
        r.begin = call.capture_begin ? 1 : 0;
        r.flags = call.capture_flags;
        r.graph = e.result == 0 ? call.graph : 0;
      });
    case CallKind::kGraphCall:
      return record<GraphCall>(e.api, [&](auto& r) {
        r.graph = call.graph;
        r.graph_exec = call.ptr;
        r.stream = call.has_stream ? stream() : 0;
        r.action = call.graph_action;
        r.flags = call.graph_flags;
      });
    case CallKind::kGraphEdit:
      return graph_edit(call, e, device());
  }
}

void CudaCallHandler::graph_edit(const CudaCall& call, const Emission& e, uint32_t device) {
  using namespace trace;
  GilScope python_stack_matters;  // a node's site is where the program added it
  GraphEdit g{};
  g.graph = call.graph;
  g.node = call.node;
  g.other = call.other;
  g.action = call.edit;
  g.type = call.node_type;
  g.flags = call.edit_flags;
  // A body holds less than 64 KiB: dependencies beyond 4096 (or the room a node's work leaves)
  // are left out and said so (the analyzer then does not run the graph); edges are split over
  // records of 2048 pairs.
  constexpr size_t kMaxHandles = 4096, kMaxEdges = 2048;
  const bool edges = call.edit == GraphEditAction::kAddEdges || call.edit == GraphEditAction::kRemoveEdges;
  thread_local std::vector<uint64_t> words;
  thread_local std::vector<uint8_t> tail;
  auto handle = [](const void* const* a, size_t i) { return reinterpret_cast<uint64_t>(a[i]); };
  if (edges) {
    if (call.deps == nullptr || call.edges_to == nullptr) return;
    const trace::CallInfo info = call_info(e.api);
    for (size_t at = 0; at < call.ndeps; at += kMaxEdges) {
      const size_t n = std::min(kMaxEdges, call.ndeps - at);
      words.clear();
      for (size_t i = 0; i < n; ++i) words.push_back(handle(call.deps, at + i));
      for (size_t i = 0; i < n; ++i) words.push_back(handle(call.edges_to, at + i));
      g.count = uint32_t(n);
      g.call = at == 0 ? info : call_info(e.api);
      rec_->add_raw(RecordKind::kGraphEdit, &g, sizeof(g), words.data(), words.size() * sizeof(uint64_t));
    }
    return;
  }
  g.call = call_info(e.api);
  // The node's work first: the dependencies get the room it leaves.
  thread_local std::vector<uint8_t> work;
  work.clear();
  auto append = [](std::vector<uint8_t>& to, const void* p, size_t n) {
    const size_t at = to.size();
    to.resize(at + n);
    std::memcpy(to.data() + at, p, n);
  };
  constexpr size_t kRoom = 0xFFFF - sizeof(GraphEdit);
  const bool params = call.edit == GraphEditAction::kAddNode || call.edit == GraphEditAction::kSetNode ||
                      call.edit == GraphEditAction::kExecSetNode;
  if (params && !(g.flags & kEditParamsUnknown)) {
    switch (call.node_type) {
      case GraphNodeType::kKernel: {
        KernelLaunchHead h{};
        thread_local std::vector<uint64_t> ptrs;
        kernel_head(call, e, 0, device, h, ptrs);
        h.call = g.call;
        size_t n = ptrs.size();  // the pointers and, with kKernelArgsHash2, the arguments' hash
        if (sizeof(h) + n * sizeof(uint64_t) > kRoom) {
          // More pointer words than a record holds: the node's accesses would be incomplete.
          g.flags |= kEditParamsUnknown;
          break;
        }
        append(work, &h, sizeof(h));
        if (n) append(work, ptrs.data(), n * sizeof(uint64_t));
        break;
      }
      case GraphNodeType::kMemcpy: {
        Memcpy m = memcpy_record(call, e, 0, device);
        m.is_async = 1;
        m.call = g.call;
        append(work, &m, sizeof(m));
        break;
      }
      case GraphNodeType::kMemset: {
        Memset m{};
        m.call = g.call;
        m.correlation = e.correlation;
        m.dst = call.ptr;
        m.bytes = call.bytes;
        m.device = device;
        m.is_async = 1;
        m.dst_mem = mem_kind(call.ptr);
        append(work, &m, sizeof(m));
        break;
      }
      default:
        break;
    }
  }
  tail.clear();
  if (call.edit == GraphEditAction::kAddNode && call.deps != nullptr) {
    size_t n = call.ndeps;
    const size_t fit = std::min(kMaxHandles, (kRoom - work.size()) / sizeof(uint64_t));
    if (n > fit) {
      n = fit;
      g.flags |= kEditDepsLeftOut;
    }
    g.count = uint32_t(n);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t h = handle(call.deps, i);
      append(tail, &h, sizeof(h));
    }
  }
  tail.insert(tail.end(), work.begin(), work.end());
  rec_->add_raw(RecordKind::kGraphEdit, &g, sizeof(g), tail.data(), tail.size());
}

void CudaCallHandler::free(const CudaCall& call, const Emission& e, uint64_t stream) {
  if (host_ && call.alloc_kind != AllocKind::kAsync && call.alloc_kind != AllocKind::kVmmMap)
    host_->host_synchronized();  // cudaFree, cudaFreeHost, cudaHostUnregister wait for the device
  if (call.ptr == 0) return;  // cudaFree(0) only initialises the context
  // Only the fact: which memory went away. What a free implies for ordering (cudaFree waits
  // for the device, cudaFreeAsync is ordered on its stream) is the analyzer's rule.
  record<trace::Free>(e.api, [&](auto& r) {
    r.ptr = call.ptr;
    r.bytes = call.bytes;
    r.stream = stream;
    if (call.bytes != 0) {  // an unmap: a range, not one allocation
      allocs_.erase_range(call.ptr, call.bytes);
      r.device = device_of(e.context);
      r.kind = call.alloc_kind;
    } else {
      auto a = allocs_.erase(call.ptr);
      r.device = a ? a->device : device_of(e.context);
      r.kind = a ? a->kind : call.alloc_kind;
    }
  });
}

void CudaCallHandler::memcpy(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device) {
  GilScope python_stack_matters;
  trace::Memcpy r = memcpy_record(call, e, stream, device);
  rec_->add_call(r, e.api, capture_stack());
  if (host_) {
    const bool pageable_src = r.src_mem == trace::MemKind::kPageableHost;
    const bool pageable_dst = r.dst_mem == trace::MemKind::kPageableHost;
    if (!call.async) {
      host_->host_synchronized();
    } else if (pageable_src != pageable_dst) {
      // A copy from pageable memory synchronises with its stream first; one to pageable memory
      // makes the host wait for it (as the analyzer models them): that stream's windows end.
      host_->stream_synchronized(stream);
    } else {
      // The pinned host side is in use until the host synchronises with the copy: guard it.
      if (r.src_mem == trace::MemKind::kPinnedHost) host_->copy_enqueued(r.src, r.bytes, false, stream);
      if (r.dst_mem == trace::MemKind::kPinnedHost) host_->copy_enqueued(r.dst, r.bytes, true, stream);
    }
  }
}

trace::Memcpy CudaCallHandler::memcpy_record(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device) {
  trace::Memcpy r{};
  r.stream = stream;
  r.correlation = e.correlation;
  r.dst = call.ptr;
  r.src = call.src;
  r.bytes = call.bytes;
  r.device = device;
  r.is_async = call.async ? 1 : 0;
  r.src_mem = mem_kind(call.src);
  r.dst_mem = mem_kind(call.ptr);
  // cudaMemcpyDefault: the direction follows from what the pointers are.
  auto host = [](trace::MemKind k) { return k == trace::MemKind::kPageableHost || k == trace::MemKind::kPinnedHost; };
  r.copy_kind = call.copy_kind;
  if (r.copy_kind == trace::CopyKind::kDefault) {
    bool sh = host(r.src_mem), dh = host(r.dst_mem);
    r.copy_kind = sh ? (dh ? trace::CopyKind::kHostToHost : trace::CopyKind::kHostToDevice)
                     : (dh ? trace::CopyKind::kDeviceToHost : trace::CopyKind::kDeviceToDevice);
  }
  return r;
}

namespace {
// Kernel name ids by function handle, for every recorder (each entry says whose id it is).
// Never destroyed (a thread may launch while exit() runs static destructors).
struct KernelNames {
  std::mutex mu;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint32_t>> by_func;  // func -> (recorder uid, name id)
};
KernelNames& kernel_names() {
  static KernelNames& names = *new KernelNames;
  return names;
}
}  // namespace

void CudaCallHandler::forget_functions() {
  functions_generation_.fetch_add(1, std::memory_order_relaxed);
  {
    KernelNames& names = kernel_names();
    std::lock_guard lock(names.mu);
    names.by_func.clear();
  }
  queries_.forget_functions();
}

uint32_t CudaCallHandler::kernel_name_id(uint64_t func, const char* name) {
  KernelNames& names = kernel_names();
  std::mutex& mu = names.mu;
  auto& cache = names.by_func;
  if (func != 0) {
    std::lock_guard lock(mu);
    auto it = cache.find(func);
    if (it != cache.end() && it->second.first == rec_->uid()) return it->second.second;
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
    cache[func] = {rec_->uid(), id};
  }
  return id;
}

namespace {
// What a launch needs to know of its function, cached per thread: a training step launches the
// same few hundred functions thousands of times, and the shared caches behind this (the name
// table, the driver's parameter layouts) take a process-wide lock and copy the layout per call.
struct FunctionFacts {
  uint64_t recorder = 0;  // the recorder's uid: name ids belong to one recorder (a forked child has its own)
  uint32_t name_id = 0;
  bool have_layout = false;
  std::vector<ParamSlot> layout;
  const KernelSignature* signature = nullptr;  // tracer/kernel_signatures.h
  // Likewise: a pointer argument's alignment less one (a power of two: a mask, not a division).
  uint64_t pointer_misalignment = 0;
};
constexpr size_t kFunctionCacheLimit = 4096;  // per thread; cleared when full

// A launch's facts as the scan reads them, in two adjacent cache lines: the front of the
// thread's facts, direct-mapped by function. Behind it the map of all of them; a function whose
// entry another took is found there and takes the entry back. A map lookup reads the bucket,
// the node and the layout's own allocation (three lines PyTorch's work between two launches
// may have evicted); an entry holds the layout of up to kInlineSlots parameters itself.
// The first line holds the first four parameters' slots (most of PyTorch's kernels take no
// more).
struct alignas(64) FrontFacts {
  static constexpr uint32_t kInlineSlots = 9;
  uint64_t func = 0;      // 0: empty
  uint64_t recorder = 0;  // as FunctionFacts::recorder
  const KernelSignature* signature = nullptr;
  uint32_t name_id = 0;
  uint16_t nslots = 0;
  uint8_t pointer_misalignment = 0;  // as FunctionFacts's (an alignment of at most 256)
  bool have_layout = false;
  ParamSlot inline_slots[kInlineSlots];
  const ParamSlot* long_slots = nullptr;  // the map's layout, when longer than kInlineSlots
  // A deferred launch's words (each parameter's size, then its bytes in words), as
  // DeferredLaunchTail::nwords (at most UINT32_MAX; more does not fit a record anyway).
  uint32_t tail_words = 0;
  // The words the scan copies (each parameter's size, then its bytes in words) when the
  // launch memo keeps launches of the function (at most MemoEntry::kExactWords); else 0.
  uint16_t memo_words = 0;
  // The function's memo lookups and hits since its facts were filled: a function whose
  // launches rarely repeat (a struct whose padding holds stack garbage, a counter passed by
  // value) stops being memoised (MemoEntry).
  uint16_t memo_lookups = 0;
  uint16_t memo_hits = 0;
  const ParamSlot* slots() const { return nslots <= kInlineSlots ? inline_slots : long_slots; }
};
static_assert(sizeof(FrontFacts) == 128);

// The launch memo: a scan's outcome (the pointers found, the arguments' hash, whether a
// signature narrowed the words), kept per thread under the function, the allocation table's
// version, the grid (a signature's words depend on it) and the words the scan read (each
// parameter's size, then its bytes, as the scan copies them), for launches of at most
// kExactWords words. The outcome is a function of exactly those (the layout, the signature and
// the alignment are the function's; a pointer is found only through the table), so a launch
// with the same function, version, grid and words takes it instead of scanning. A launch loop
// repeats its last launch, and a training step the last step's launches (the caching
// allocator hands out the same blocks); the table changes only with a cudaMalloc or a free.
// Longer parameter lists (cuBLAS's 1.7 KB blocks, reductions' 1 KB ReduceOp) are not kept: a
// key hashed from them cost as much as it saved on the GPU machine (a third of the scan's time
// with XXH3-128; bench/results/realistic_overhead.md, session 33). Every kMemoCheckEvery-th hit
// scans all the same and compares, and a difference turns the memo off for the process, with a
// warning in the trace.
struct alignas(64) MemoEntry {
  static constexpr uint32_t kData = 19;
  static constexpr uint32_t kExactWords = 12;
  uint64_t func = 0;  // 0: empty
  uint64_t version = 0;
  uint64_t hash = 0;
  uint32_t grid[3] = {0, 0, 0};
  uint8_t nwords = 0;  // the launch's words, data[0, nwords)
  uint8_t nptrs = 0;   // the pointers, data[nwords, nwords + nptrs)
  bool by_signature = false;
  uint64_t data[kData] = {};
};
static_assert(sizeof(MemoEntry) == 192);
constexpr uint32_t kMemoBits = 11;  // 2,048 entries, 384 KiB per launching thread
constexpr uint32_t kMemoCheckEvery = 1024;
// After this many lookups, a function with fewer than one hit in kMemoMinHitShare of them is
// not memoised any more (its misses copy their words into an entry for nothing).
constexpr uint16_t kMemoTrialLookups = 256;
constexpr uint16_t kMemoMinHitShare = 16;

// The calling thread's launch scratch, reached from its TracerThreadState (no thread_local of
// its own to look up): the pointer list a launch record carries and the facts of functions.
struct LaunchScratch {
  static constexpr int kFrontBits = 10;  // 1024 entries, 128 KiB
  std::vector<uint64_t> ptrs;  // (beside front: a launch reads both)
  std::unique_ptr<FrontFacts[]> front{new FrontFacts[1u << kFrontBits]};
  uint64_t generation = 0;  // CudaCallHandler::functions_generation_ when the facts were filled
  uint64_t memo_hits = 0;   // launches that took a memo'd scan (MemoEntry)
  uint32_t memo_until_check = kMemoCheckEvery;
  std::unordered_map<uint64_t, FunctionFacts> functions;
  std::unique_ptr<MemoEntry[]> memo;  // made at the first launch that uses it
  // A deferred launch's tail (DeferredLaunchTail, the words, the library call's ranges),
  // made at the first deferred launch.
  static constexpr size_t kRawWords = 4096;
  std::unique_ptr<uint64_t[]> raw;
  uint64_t* raw_words() {
    if (!raw) [[unlikely]]
      raw.reset(new uint64_t[kRawWords]);
    return raw.get();
  }
  FrontFacts& front_for(uint64_t func) {
    return front[(func * 0x9E3779B97F4A7C15ull) >> (64 - kFrontBits)];
  }
  MemoEntry& memo_at(uint64_t index) {
    if (!memo) [[unlikely]]
      memo.reset(new MemoEntry[1u << kMemoBits]);
    return memo[index & ((1u << kMemoBits) - 1)];
  }
  // Every function's facts go (the front's longer layouts point into the map: all go), and
  // the memo with them (a handle may name another kernel now).
  void forget() {
    functions.clear();
    for (uint32_t i = 0; i < (1u << kFrontBits); ++i) front[i].func = 0;
    memo.reset();
  }
};
LaunchScratch& launch_scratch(TracerThreadState& ts) {
  return thread_owned<LaunchScratch, &TracerThreadState::launch_scratch>(ts);
}
}  // namespace

uint64_t CudaCallHandler::memo_hits_of_this_thread() { return launch_scratch(thread_state()).memo_hits; }

void CudaCallHandler::reset_launch_memo_of_this_thread() {
  LaunchScratch& scratch = launch_scratch(thread_state());
  scratch.memo.reset();
  scratch.memo_hits = 0;
  scratch.memo_until_check = kMemoCheckEvery;
}

void CudaCallHandler::spoil_launch_memo_of_this_thread() {
  LaunchScratch& scratch = launch_scratch(thread_state());
  if (!scratch.memo) return;
  for (uint32_t i = 0; i < (1u << kMemoBits); ++i) scratch.memo[i].hash ^= 1;
  scratch.memo_until_check = 1;
}


namespace {
// A function this thread has not launched since its front entry went to another (or ever):
// its facts from the map, or from the driver and the name table, into the front. Out of line
// and cold: rarely run, kept apart from the launch path's code.
__attribute__((noinline, cold)) void fill_facts(CudaCallHandler& handler, bool kernel_signatures,
                                                LaunchScratch& scratch, FrontFacts& front, uint64_t func,
                                                bool library_kernel, const char* name, uint64_t recorder) {
  CudaQueries& queries = handler.queries();
  auto& functions = scratch.functions;
  auto it = functions.find(func);
  FunctionFacts* full;
  if (it != functions.end() && it->second.recorder == recorder) {
    full = &it->second;
  } else {
    if (functions.size() >= kFunctionCacheLimit) scratch.forget();
    full = &functions[func];
    full->recorder = recorder;
    if (name == nullptr) {  // graph kernel nodes: the callback names no symbol
      InternalCallGuard guard;
      name = queries.function_name(func, library_kernel);
    }
    full->name_id = handler.kernel_name_id(func, name);
    full->signature = kernel_signatures && name != nullptr ? signature_for(name) : nullptr;
    full->pointer_misalignment = kernel_signatures && name != nullptr ? pointer_alignment(name) - 1 : 0;
    {
      InternalCallGuard guard;
      full->have_layout = queries.param_layout(func, library_kernel, full->layout);
    }
  }
  front.func = func;
  front.recorder = recorder;
  front.signature = full->signature;
  front.pointer_misalignment = uint8_t(std::min<uint64_t>(full->pointer_misalignment, 255));
  front.name_id = full->name_id;
  front.have_layout = full->have_layout;
  const size_t n = full->have_layout ? full->layout.size() : 0;
  front.long_slots = nullptr;
  uint64_t words = 0;
  for (size_t i = 0; i < n; ++i) words += 1 + (uint64_t(full->layout[i].size) + 7) / 8;
  front.memo_words = n > 0 && words <= MemoEntry::kExactWords ? uint16_t(words) : 0;
  front.tail_words = uint32_t(std::min<uint64_t>(words, UINT32_MAX));
  front.memo_lookups = 0;
  front.memo_hits = 0;
  if (n <= FrontFacts::kInlineSlots) {
    std::copy_n(full->layout.begin(), n, front.inline_slots);
    front.nslots = uint16_t(n);
  } else if (n <= UINT16_MAX) {
    front.long_slots = full->layout.data();
    front.nslots = uint16_t(n);
  } else {  // more parameters than any kernel can take: as if no layout were known
    front.have_layout = false;
    front.nslots = 0;
  }
}
}  // namespace

namespace {
// A parameter's bytes: at its layout offset in a packed buffer, else behind its own pointer.
inline const uint8_t* parameter_bytes(void* const* args, const void* packed, std::span<const ParamSlot> layout,
                                      size_t i) {
  return packed ? static_cast<const uint8_t*>(packed) + layout[i].offset : static_cast<const uint8_t*>(args[i]);
}
inline const uint8_t* parameter_bytes(const CudaCall& call, std::span<const ParamSlot> layout, size_t i) {
  return parameter_bytes(call.args, call.packed, layout, i);
}

// A parameter's bytes copied into words at `out` as the scan hashes them (the leftover bytes
// zero-extended to a word). Copies of a constant size are a load and a store each; the sizes
// most parameters have (a pointer, a size, an int, a flag, PyTorch's two-pointer array) take
// no call.
inline __attribute__((always_inline)) void copy_words(void* out, const uint8_t* base, uint32_t size) {
  // Stores by memcpy: `out` may be a record's place in a chunk, not 8-byte aligned.
  auto word = [out](uint64_t v) { std::memcpy(out, &v, 8); };
  switch (size) {
    case 8: std::memcpy(out, base, 8); break;
    case 4: { uint32_t v; std::memcpy(&v, base, 4); word(v); break; }
    case 1: word(base[0]); break;
    case 16: std::memcpy(out, base, 16); break;
    case 2: { uint16_t v; std::memcpy(&v, base, 2); word(v); break; }
    default:
      if (size % 8 != 0) std::memset(static_cast<uint8_t*>(out) + size_t(size / 8) * 8, 0, 8);
      std::memcpy(out, base, size);
  }
}

// A deferred launch's tail: DeferredLaunchTail, then each parameter's size and its bytes in
// words as the scan copies them, then the cuBLAS call's ranges. Its length in words, or 0 when
// it would not fit LaunchScratch's raw words (the launch is then scanned here).
inline size_t deferred_words_count(const FrontFacts& facts, const TracerThreadState& ts) {
  const uint32_t blas = ts.blas_access_count;
  if (blas > LaunchScratch::kRawWords / 4) [[unlikely]]
    return 0;
  const size_t n = kDeferredTailWords + size_t(facts.tail_words) + size_t(blas) * 3;
  return n <= LaunchScratch::kRawWords ? n : 0;
}

// Writes the tail (deferred_words_count's words) at `out`, which need not be 8-byte aligned;
// false when a parameter has no bytes.
inline __attribute__((always_inline)) bool write_deferred_words(uint8_t* out, void* const* args, const void* packed,
                                                                const FrontFacts& facts, const TracerThreadState& ts,
                                                                uint64_t version) {
  const std::span<const ParamSlot> layout(facts.slots(), facts.nslots);
  uint8_t* at = out + sizeof(DeferredLaunchTail);
  for (size_t i = 0; i < layout.size(); ++i) {
    const uint8_t* base = parameter_bytes(args, packed, layout, i);
    if (base == nullptr) [[unlikely]]
      return false;
    const uint64_t size = layout[i].size;
    std::memcpy(at, &size, 8);
    copy_words(at + 8, base, uint32_t(size));
    at += 8 + (size + 7) / 8 * 8;
  }
  DeferredLaunchTail t;
  t.version = version;
  t.signature = reinterpret_cast<uint64_t>(facts.signature);
  t.nwords = facts.tail_words;
  t.nparams = uint32_t(layout.size());
  t.blas_count = ts.blas_access_count;
  t.misaligned = facts.pointer_misalignment;
  std::memcpy(out, &t, sizeof(t));
  for (uint32_t i = 0; i < t.blas_count; ++i) {
    const trace::CallAccessEntry& a = ts.blas_accesses[i];
    const uint64_t w[3] = {a.addr, a.bytes, a.info};
    std::memcpy(at, w, sizeof(w));
    at += sizeof(w);
  }
  return true;
}

// The tail in the thread's raw words; empty when it does not fit or a parameter has no bytes.
inline std::span<const uint64_t> deferred_words(void* const* args, const void* packed, const FrontFacts& facts,
                                                LaunchScratch& scratch, const TracerThreadState& ts,
                                                uint64_t version) {
  const size_t n = deferred_words_count(facts, ts);
  if (n == 0) [[unlikely]]
    return {};
  uint64_t* const raw = scratch.raw_words();
  if (!write_deferred_words(reinterpret_cast<uint8_t*>(raw), args, packed, facts, ts, version)) [[unlikely]]
    return {};
  return {raw, n};
}

__attribute__((noinline, cold)) void memo_mismatch(CudaCallHandler& handler, std::atomic<bool>& off) {
  if (off.exchange(true, std::memory_order_relaxed)) return;
  handler.recorder().add_notice(trace::NoticeLevel::kWarning,
                                "a memoised kernel-argument scan differed from a new scan of the same launch: "
                                "the launch memo is off for the rest of the process (please report this)");
}
}  // namespace

void CudaCallHandler::kernel(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device) {
  if (self_time::enabled()) [[unlikely]]
    return timed_kernel<true>(call, e, stream, device);
  if (defer_ && deferred_kernel(call, e, stream, device)) return;
  timed_kernel<false>(call, e, stream, device);
}

// The launch path when the scan is deferred, apart from the scan's code: the function's facts,
// the head, the stack, the record with the words copied into it. A launch it cannot take (no
// layout or no arguments, a graph's kernel node, the launch corpus on, a parameter without
// bytes) is left to timed_kernel, which scans it.
bool CudaCallHandler::deferred_kernel(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device) {
  if (call.kind != CallKind::kKernelLaunch) return false;
  LaunchArgs a;
  a.func = call.func;
  a.library_kernel = call.library_kernel;
  for (int i = 0; i < 3; ++i) {
    a.grid[i] = call.grid[i];
    a.block[i] = call.block[i];
  }
  a.args = call.args;
  a.packed = call.packed;
  return deferred_launch(e.ts != nullptr ? *e.ts : thread_state(), a, e.symbol, e.api, e.correlation, stream, device);
}

bool CudaCallHandler::deferred_launch(TracerThreadState& ts, const LaunchArgs& a, const char* symbol, uint32_t api,
                                      uint64_t correlation, uint64_t stream, uint32_t device) {
  if (a.func == 0 || (a.args == nullptr && a.packed == nullptr) || corpus_ != nullptr) return false;
  if (!rec_->has_deferred_resolver()) [[unlikely]] {
    // After set_recorder: the first launch makes the new recorder's scanner (one thread does).
    if (!scanner_wanted_.load(std::memory_order_acquire) || !scanner_wanted_.exchange(false)) return false;
    start_scanner();
  }
  LaunchScratch& scratch = launch_scratch(ts);
  if (const uint64_t g = functions_generation_.load(std::memory_order_relaxed); scratch.generation != g) [[unlikely]] {
    scratch.forget();
    scratch.generation = g;
  }
  const char* name = ts.launch_function != nullptr ? ts.launch_function : symbol;
  FrontFacts& facts = scratch.front_for(a.func);
  const uint64_t recorder = rec_->uid();
  if (facts.func != a.func || facts.recorder != recorder) [[unlikely]]
    fill_facts(*this, kernel_signatures_, scratch, facts, a.func, a.library_kernel, name, recorder);
  if (!facts.have_layout) return false;
  const size_t words = deferred_words_count(facts, ts);
  if (words == 0) [[unlikely]]
    return false;
  // The table's version before the words are copied (they are copied after the stack).
  const uint64_t version = allocs_.version();
  trace::KernelLaunchHead h{};
  const uint64_t precise_correlation = ts.precise_correlation;
  const char* const launch_function = ts.launch_function;
  const bool precise = precise_correlation != 0 && precise_correlation == correlation;
  ts.precise_correlation = 0;
  ts.launch_function = nullptr;
  h.stream = stream;
  h.correlation = correlation;
  h.device = device;
  h.name_id = facts.name_id;
  for (int i = 0; i < 3; ++i) {
    h.grid[i] = a.grid[i];
    h.block[i] = a.block[i];
  }
  h.flags = precise ? uint32_t(trace::kKernelPrecise) : 0u;
  if (bench_cut_ == 3) [[unlikely]]
    return true;
  GilScope python_stack_matters(ts);
  const uint32_t stack = capture_stack(ts);
  if (bench_cut_ == 4) [[unlikely]]
    return true;
  // The words go straight into the record. A parameter without bytes (rare) leaves the launch to
  // the general path, which takes its stack again and reads what the launch callback left.
  if (rec_->add_deferred_kernel_in_place(ts, h, api, stack, words, [&](uint8_t* out) {
        return write_deferred_words(out, a.args, a.packed, facts, ts, version);
      }))
    return true;
  ts.precise_correlation = precise_correlation;
  ts.launch_function = launch_function;
  return false;
}

template <bool kTimed>
void CudaCallHandler::timed_kernel(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device) {
  TracerThreadState& ts = e.ts != nullptr ? *e.ts : thread_state();
  GilScope python_stack_matters(ts);
  trace::KernelLaunchHead h{};
  std::vector<uint64_t>& ptrs = launch_scratch(ts).ptrs;
  std::span<const uint64_t> deferred;
  {
    self_time::Scope timed(self_time::kScan, kTimed);
    timed_kernel_head<kTimed>(call, e, stream, device, h, ptrs, defer_ ? &deferred : nullptr);
  }
  const uint32_t stack = capture_stack(ts);
  self_time::Scope timed(self_time::kRecord, kTimed);
  if (!deferred.empty()) {
    rec_->add_deferred_kernel(ts, h, e.api, stack, deferred);
  } else {
    rec_->add_call(ts, h, e.api, stack, ptrs);
  }
}

void CudaCallHandler::kernel_head(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device,
                                  trace::KernelLaunchHead& h, std::vector<uint64_t>& ptrs) {
  if (self_time::enabled()) [[unlikely]]
    return timed_kernel_head<true>(call, e, stream, device, h, ptrs);
  timed_kernel_head<false>(call, e, stream, device, h, ptrs);
}

template <bool kTimed>
void CudaCallHandler::timed_kernel_head(const CudaCall& call, const Emission& e, uint64_t stream, uint32_t device,
                                        trace::KernelLaunchHead& h, std::vector<uint64_t>& ptrs,
                                        std::span<const uint64_t>* deferred) {
  TracerThreadState& ts = e.ts != nullptr ? *e.ts : thread_state();
  // Precise mode: the launch callback marked this launch as patched (its exact accesses
  // follow as KernelAccess records) and may know the name the API callback did not give.
  // Only a launch has a launch callback behind it: a graph's kernel node (added or set) takes
  // its name from the function, never from the last launch this thread made.
  const bool launch = call.kind == CallKind::kKernelLaunch;
  const bool precise = launch && ts.precise_correlation != 0 && ts.precise_correlation == e.correlation;
  // The launch callback's name first: for some driver launches (cuBLAS's cuLaunchKernelEx) the
  // Sanitizer API's symbolName is not the kernel's (it demangled to "unsigned char").
  const char* name = !launch ? nullptr : ts.launch_function != nullptr ? ts.launch_function : e.symbol;
  if (launch) {
    ts.precise_correlation = 0;
    ts.launch_function = nullptr;
  }
  h.stream = stream;
  h.correlation = e.correlation;
  h.device = device;
  FrontFacts* facts = nullptr;
  LaunchScratch* scratch_of_facts = nullptr;
  constexpr bool timing = kTimed;
  self_time::Scope timed_facts(self_time::kFacts, timing);
  if (call.func != 0) {
    LaunchScratch& scratch = launch_scratch(ts);
    // A module, library or context went since this thread's facts were filled: its handles
    // may now name other kernels.
    if (const uint64_t g = functions_generation_.load(std::memory_order_relaxed); scratch.generation != g) [[unlikely]] {
      scratch.forget();
      scratch.generation = g;
    }
    FrontFacts& front = scratch.front_for(call.func);
    const uint64_t recorder = rec_->uid();
    if (front.func != call.func || front.recorder != recorder) [[unlikely]]
      fill_facts(*this, kernel_signatures_, scratch, front, call.func, call.library_kernel, name, recorder);
    facts = &front;
    scratch_of_facts = &scratch;
  }
  h.name_id = facts ? facts->name_id : kernel_name_id(call.func, name);
  timed_facts.end();
  for (int i = 0; i < 3; ++i) {
    h.grid[i] = call.grid[i];
    h.block[i] = call.block[i];
  }
  // Deferred (tracer/deferred_scan.h): the words the scan below would read, copied as it
  // copies them, for the flusher to scan; the record's pointers and hash come from there.
  if (deferred != nullptr && facts != nullptr && facts->have_layout && launch && corpus_ == nullptr &&
      (call.args != nullptr || call.packed != nullptr) && rec_->has_deferred_resolver()) {
    *deferred = deferred_words(call.args, call.packed, *facts, *scratch_of_facts, ts, allocs_.version());
    if (!deferred->empty()) [[likely]] {
      h.nptrs = 0;
      h.flags = precise ? uint32_t(trace::kKernelPrecise) : 0u;
      return;
    }
  }
  // Pointer arguments: every 8-byte word of every parameter (structs of pointers included,
  // as in PyTorch's elementwise kernels) that lands inside a live allocation; of a parameter a
  // kernel signature describes, only the words the launch uses (tracer/kernel_signatures.h).
  // The same walk hashes every other byte of the parameters (the scalars), so that a launch
  // of the same kernel with the same shape and scalars can be told from one without them
  // (learned access signatures, analyzer/access_signatures.h); a pointer argument enters the
  // hash as its index in ptrs[], not its address, which changes from step to step. The words
  // hashed, per parameter: its size, then each 8-byte word (a pointer as kPointerMark + its
  // index), then the bytes left over, zero-extended to a word (1.4's hash took the same words).
  ptrs.clear();
  bool scanned = false;
  bool by_signature = false;
  uint64_t hash_value = 0;  // the arguments' hash
  ArgsHash args_hash;
  uint64_t* const hashed = args_hash.words();
  size_t nhashed = 0;
  auto hash = [&](uint64_t w) {
    if (nhashed == ArgsHash::kBufferWords) [[unlikely]]
      nhashed = args_hash.spill(nhashed);
    hashed[nhashed++] = w;
  };
  if (facts && (call.args != nullptr || call.packed != nullptr)) {
    const std::span<const ParamSlot> layout(facts->slots(), facts->nslots);
    if (facts->have_layout) {
      scanned = true;
      const AllocationTable::Finder lookup = allocs_.finder(ts.allocation_cache);
      // A word can point into a live allocation only inside [lo, lo + span): one subtraction
      // and one comparison per word (span 0: the table is empty).
      const AllocationTable::Bounds bounds = allocs_.bounds();
      const uint64_t lo = bounds.lo, span = bounds.hi > bounds.lo ? bounds.hi - bounds.lo : 0;
      const uint64_t misaligned = facts->pointer_misalignment;
      // A parameter's words as copied into the hash's buffer, the first n of them checked: a
      // pointer into a live allocation is replaced there by its mark.
      auto scan_words = [&](uint64_t* out, uint32_t n) __attribute__((always_inline)) {
        mark_pointers(out, n, lo, span, misaligned, ptrs, [&](uint64_t w) __attribute__((always_inline)) {
          self_time::Scope timed(self_time::kLookup, timing);
          return lookup.find(w).has_value();
        });
      };
      bool done = false;
      // The launch memo (MemoEntry): every parameter copied first, the copy keyed and the memo
      // asked; on a miss the copy is scanned where it lies and its outcome memoised.
      if (facts->memo_words != 0 && !memo_off_.load(std::memory_order_relaxed)) {
        const uint64_t version = allocs_.version();  // before any lookup of this scan
        bool complete = true;
        for (size_t i = 0; i < layout.size(); ++i) {
          const uint8_t* base = parameter_bytes(call, layout, i);
          if (base == nullptr) [[unlikely]] {
            complete = false;
            break;
          }
          const uint32_t size = layout[i].size;
          hashed[nhashed++] = size;
          copy_words(hashed + nhashed, base, size);
          nhashed += (size + 7) / 8;
        }
        if (complete) {
          // A fold of the words picks the entry; the words themselves are the key.
          uint64_t fold = 0;
          for (size_t k = 0; k < nhashed; ++k) fold = (fold ^ hashed[k]) * 0x9E3779B97F4A7C15ull;
          const uint64_t index = fold >> (64 - kMemoBits);
          const uint32_t nwords = uint32_t(nhashed);
          LaunchScratch& scratch = *scratch_of_facts;
          MemoEntry& m = scratch.memo_at(index);
          if (facts->memo_lookups < kMemoTrialLookups) [[unlikely]] {
            ++facts->memo_lookups;
          } else if (facts->memo_lookups == kMemoTrialLookups) [[unlikely]] {
            // The trial's end: kept on for good, or off.
            facts->memo_lookups = kMemoTrialLookups + 1;
            if (facts->memo_hits * kMemoMinHitShare < kMemoTrialLookups) facts->memo_words = 0;
          }
          bool same = m.func == call.func && m.version == version && m.nwords == nwords &&
                      m.grid[0] == call.grid[0] && m.grid[1] == call.grid[1] && m.grid[2] == call.grid[2];
          if (same) {
            uint64_t differ = 0;  // no branch per word
            for (uint32_t k = 0; k < nwords; ++k) differ |= m.data[k] ^ hashed[k];
            same = differ == 0;
          }
          bool check = false;
          if (same) {
            if (--scratch.memo_until_check != 0) [[likely]] {
              ++scratch.memo_hits;
              if (facts->memo_hits < kMemoTrialLookups) ++facts->memo_hits;
              ptrs.assign(m.data + nwords, m.data + nwords + m.nptrs);
              by_signature = m.by_signature;
              hash_value = m.hash;
              done = true;
            } else {
              scratch.memo_until_check = kMemoCheckEvery;
              check = true;  // scanned all the same, and compared
            }
          }
          if (!done) {
            if (!check) {  // the words kept before the scan marks the pointers in the copy
              m.func = 0;
              std::copy(hashed, hashed + nwords, m.data);
            }
            size_t at = 0;
            for (size_t i = 0; i < layout.size(); ++i) {
              const uint32_t size = layout[i].size;
              const uint32_t all_words = size / 8;
              ++at;  // the size's word
              const uint32_t words =
                  facts->signature ? pointer_words(facts->signature, uint32_t(i), all_words, call.grid) : all_words;
              by_signature |= words < all_words;
              scan_words(hashed + at, words);
              at += (size + 7) / 8;
            }
            {
              self_time::Scope timed(self_time::kHash, timing);
              hash_value = args_hash.value(nhashed);
            }
            if (check) {
              if (m.hash != hash_value || m.by_signature != by_signature || m.nptrs != ptrs.size() ||
                  !std::equal(ptrs.begin(), ptrs.end(), m.data + nwords)) [[unlikely]]
                memo_mismatch(*this, memo_off_);
            } else if (ptrs.size() <= MemoEntry::kData - nwords) {
              m.func = call.func;
              m.version = version;
              m.hash = hash_value;
              for (int k = 0; k < 3; ++k) m.grid[k] = call.grid[k];
              m.nwords = uint8_t(nwords);
              m.nptrs = uint8_t(ptrs.size());
              m.by_signature = by_signature;
              std::copy(ptrs.begin(), ptrs.end(), m.data + nwords);
            } else {
              facts->memo_words = 0;  // more pointers than fit beside the words: not memoised
            }
            done = true;
          }
        } else {
          nhashed = 0;  // a parameter without bytes: the scan below starts again
        }
      }
      // Per parameter: its size, then its bytes copied as they are (the leftover bytes
      // zero-extended to a word), then the first `words` of those words checked against the
      // bounds in a loop that does nothing else; a pointer into a live allocation is then
      // replaced in the copy by its mark. The words hashed are those of 1.4's hash.
      const size_t nscanned = done ? 0 : layout.size();
      for (size_t i = 0; i < nscanned; ++i) {
        const uint8_t* base = parameter_bytes(call, layout, i);
        const uint32_t size = layout[i].size;
        const uint32_t padded = (size + 7) / 8;
        if (base == nullptr || 1 + padded > ArgsHash::kBufferWords - nhashed) [[unlikely]] {
          hash(size);
          if (base == nullptr) continue;
          // Longer than what is left of the hash's buffer: in pieces, spilling in between.
          const uint32_t words = pointer_words(facts->signature, uint32_t(i), size / 8, call.grid);
          by_signature |= words < size / 8;
          for (uint32_t piece_at = 0; piece_at < padded;) {
            if (nhashed == ArgsHash::kBufferWords) nhashed = args_hash.spill(nhashed);
            const uint32_t piece = std::min<uint32_t>(padded - piece_at, uint32_t(ArgsHash::kBufferWords - nhashed));
            const size_t piece_bytes = std::min<size_t>(size_t(piece) * 8, size - size_t(piece_at) * 8);
            uint64_t* const out = hashed + nhashed;
            if (piece_bytes < size_t(piece) * 8) out[piece - 1] = 0;  // the leftover bytes' word
            std::memcpy(out, base + size_t(piece_at) * 8, piece_bytes);
            scan_words(out, words > piece_at ? std::min(words - piece_at, piece) : 0);
            nhashed += piece;
            piece_at += piece;
          }
          continue;
        }
        hashed[nhashed++] = size;
        uint64_t* const out = hashed + nhashed;
        const uint32_t all_words = size / 8;
        copy_words(out, base, size);
        const uint32_t words =
            facts->signature ? pointer_words(facts->signature, uint32_t(i), all_words, call.grid) : all_words;
        by_signature |= words < all_words;
        scan_words(out, words);
        nhashed += padded;
      }
      if (!done) {
        self_time::Scope timed(self_time::kHash, timing);
        hash_value = args_hash.value(nhashed);
      }
      if (corpus_ != nullptr && launch) [[unlikely]]
        corpus_->add(call.func, name, layout, call, ptrs, allocs_);
    }
  }
  h.nptrs = uint32_t(ptrs.size());
  h.flags = (scanned ? uint32_t(trace::kKernelArgsScanned) | uint32_t(trace::kKernelArgsHash2) : 0u) |
            (precise ? uint32_t(trace::kKernelPrecise) : 0u) | (by_signature ? uint32_t(trace::kKernelArgsBySignature) : 0u);
  if (scanned) ptrs.push_back(hash_value);  // after the pointers: the caller writes them all as the tail
  // A launch inside a cuBLAS call: the call's byte ranges follow (trace format 1.5).
  if (launch && ts.blas_access_count != 0) {
    h.flags |= trace::kKernelCallAccesses;
    ptrs.push_back(ts.blas_access_count);
    for (uint32_t i = 0; i < ts.blas_access_count; ++i) {
      const trace::CallAccessEntry& a = ts.blas_accesses[i];
      ptrs.insert(ptrs.end(), {a.addr, a.bytes, a.info});
    }
  }
}

}  // namespace streamrace::tracer
