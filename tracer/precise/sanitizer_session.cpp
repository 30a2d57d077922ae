// SanitizerSession: see sanitizer_session.h.
#include "tracer/precise/sanitizer_session.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <sanitizer.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracer/precise/interval_conversion.h"
#include "tracer/precise/sample_plan.h"
#include "tracer/thread_state.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer::precise {

// The handler's callback ids are CUPTI's; the Sanitizer API must number them the same way.
// (Checked for every id both headers of CUDA 13.0 define; a few samples here keep it so.)
static_assert(int(SANITIZER_CBID_RUNTIME_API_cudaLaunchKernel) == int(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
static_assert(int(SANITIZER_CBID_RUNTIME_API___cudaLaunchKernel) ==
              int(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
static_assert(int(SANITIZER_CBID_RUNTIME_API_cudaMemcpyAsync) == int(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
static_assert(int(SANITIZER_CBID_RUNTIME_API_cudaStreamWaitEvent) ==
              int(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020));
static_assert(int(SANITIZER_CBID_RUNTIME_API_cudaFreeAsync) == int(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020));
static_assert(int(SANITIZER_CBID_DRIVER_API_cuLaunchKernel) == int(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
static_assert(int(SANITIZER_CBID_DRIVER_API_cuLaunchKernelEx) == int(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
static_assert(int(SANITIZER_CBID_DRIVER_API_cuMemMap) == int(CUPTI_DRIVER_TRACE_CBID_cuMemMap));
static_assert(int(SANITIZER_CBID_DRIVER_API_cuMemFreeAsync) == int(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync));

namespace {

constexpr const char* kDeviceCallback = "streamrace_global_access";
// Async and bulk copies to or from global memory, and their device callbacks
// (access_aggregator.cu). Bulk tensor copies (TMA) have no instrumentation point.
constexpr std::pair<Sanitizer_InstructionId, const char*> kAsyncCopyCallbacks[] = {
    {SANITIZER_INSTRUCTION_MEMCPY_ASYNC, "streamrace_memcpy_async"},
    {SANITIZER_INSTRUCTION_BULK_COPY_GLOBAL_TO_SHARED, "streamrace_bulk_global_to_shared"},
    {SANITIZER_INSTRUCTION_BULK_COPY_SHARED_TO_GLOBAL, "streamrace_bulk_shared_to_global"},
    {SANITIZER_INSTRUCTION_BULK_REDUCTION_SHARED_TO_GLOBAL, "streamrace_bulk_reduce_to_global"},
};

struct SanitizerFns {
  decltype(&sanitizerSubscribe) subscribe = nullptr;
  decltype(&sanitizerEnableCallback) enable_callback = nullptr;
  decltype(&sanitizerAddPatchesFromFile) add_patches_from_file = nullptr;
  decltype(&sanitizerPatchInstructions) patch_instructions = nullptr;
  decltype(&sanitizerPatchModule) patch_module = nullptr;
  decltype(&sanitizerUnpatchModule) unpatch_module = nullptr;  // optional: without it nothing is unpatched
  decltype(&sanitizerSetLaunchCallbackData) set_launch_data = nullptr;
  decltype(&sanitizerAlloc) alloc = nullptr;
  decltype(&sanitizerFree) free = nullptr;
  decltype(&sanitizerMemcpyHostToDeviceAsync) copy_to_device = nullptr;
  decltype(&sanitizerMemcpyDeviceToHost) copy_to_host = nullptr;
  decltype(&sanitizerStreamSynchronize) stream_sync = nullptr;
  decltype(&sanitizerGetResultString) result_string = nullptr;
  decltype(&sanitizerGetStreamHandle) stream_handle = nullptr;  // optional: without it no graph node is measured
};
SanitizerFns g_fn;

// One patched launch whose slot has not been read back yet. A kernel node of a graph launch
// has its node handle and kernel name here (its intervals become KernelNodeAccess records) and
// the graph launch's API stream, which a synchronisation names (the node runs on the graph's
// own streams, all finished when the launch's stream has run past the launch).
struct Pending {
  uint32_t slot;
  uint64_t correlation;
  Sanitizer_StreamHandle stream;
  uint64_t node = 0;
  uint32_t name_id = 0;
  bool shared = false;  // another kernel node ran in the same graph launch: not measured (on_graph_kernel_node)
};

// A context's ring of LaunchIntervals slots, allocated at the first selected launch.
struct ContextState {
  bool patches_loaded = false;
  bool patches_failed = false;
  bool async_patch_failed = false;  // said once per context (under State::mu)
  LaunchIntervals* ring = nullptr;  // device memory
  std::vector<uint32_t> free_slots;
  std::vector<Pending> pending;
};

struct State {
  CudaCallHandler* handler = nullptr;
  SanitizerOptions options;
  std::mutex mu;
  std::unordered_map<CUcontext, ContextState> contexts;
  std::unique_ptr<LaunchIntervals> empty_slot;  // the image a slot is reset to; never changes
  std::atomic<uint32_t> next_correlation{1};
  std::atomic<uint64_t> api_callbacks{0};
  std::atomic<uint64_t> patched_modules{0};
  std::atomic<uint64_t> patched_launches{0};
  std::atomic<uint64_t> skipped_modules{0};
  std::atomic<uint64_t> graph_kernel_nodes{0};  // run unmeasured (sampled out, no slot, not selected)
  std::atomic<uint64_t> measured_graph_nodes{0};
  std::atomic<uint64_t> sampled_out{0};
  // Which launches are measured and when a module is unpatched (under mu).
  std::unique_ptr<SamplePlan> plan;
  std::atomic<bool> unpatch_work{false};  // plan->has_unpatch_work(), read without mu
};
std::atomic<State*> g_state{nullptr};

// The correlation id of this thread's outermost API call in progress (ApiCall carries
// CUPTI's 32-bit ids; the session numbers calls itself, skipping 0 when the count wraps).
thread_local uint32_t t_api_depth = 0;
thread_local uint32_t t_correlation = 0;

void notice(State& st, const std::string& text) {
  st.handler->recorder().add_notice(trace::NoticeLevel::kWarning, "precise mode: " + text);
}

std::string result_text(SanitizerResult r) {
  const char* s = nullptr;
  if (g_fn.result_string) g_fn.result_string(r, &s);
  return s ? s : "error " + std::to_string(int(r));
}

// Copies back and converts the slots of `which` pending launches; resets and frees them. The
// launches must have finished (their stream or context was synchronised). Requires st.mu.
template <typename Pred>
void collect_locked(State& st, ContextState& cs, Pred which) {
  if (cs.ring == nullptr) return;
  std::vector<Pending> keep;
  std::set<Sanitizer_StreamHandle> reset_streams;
  LaunchIntervals host{};
  for (const Pending& p : cs.pending) {
    if (!which(p)) {
      keep.push_back(p);
      continue;
    }
    LaunchIntervals* dev = cs.ring + p.slot;
    SanitizerResult r = g_fn.copy_to_host(&host, dev, sizeof host, p.stream);
    if (p.node != 0 && p.shared) {
      st.graph_kernel_nodes.fetch_add(1, std::memory_order_relaxed);  // its slot may hold other nodes' accesses
    } else if (r == SANITIZER_SUCCESS && p.node == 0) {
      for (const trace::KernelAccess& a : slot_to_accesses(host, p.correlation)) st.handler->recorder().add(a);
    } else if (r == SANITIZER_SUCCESS) {
      st.measured_graph_nodes.fetch_add(1, std::memory_order_relaxed);
      for (const trace::KernelAccess& a : slot_to_accesses(host, p.correlation)) {
        trace::KernelNodeAccess n{};
        n.correlation = a.correlation;
        n.node = p.node;
        n.addr = a.addr;
        n.bytes = a.bytes;
        n.dir = a.dir;
        n.overflowed = a.overflowed;
        n.name_id = p.name_id;
        st.handler->recorder().add(n);
      }
    } else {
      notice(st, "reading back the access intervals of launch " + std::to_string(p.correlation) +
                     " failed (" + result_text(r) + "); that launch has no exact ranges");
    }
    g_fn.copy_to_device(dev, st.empty_slot.get(), sizeof(LaunchIntervals), p.stream);
    reset_streams.insert(p.stream);
    cs.free_slots.push_back(p.slot);
  }
  cs.pending.swap(keep);
  // A freed slot may next serve a launch on another stream: its reset must be complete.
  for (Sanitizer_StreamHandle s : reset_streams) g_fn.stream_sync(s);
}

void collect_context_locked(State& st, ContextState& cs) {
  std::set<Sanitizer_StreamHandle> streams;
  for (const Pending& p : cs.pending) streams.insert(p.stream);
  for (Sanitizer_StreamHandle s : streams) g_fn.stream_sync(s);
  collect_locked(st, cs, [](const Pending&) { return true; });
}

bool ensure_ring_locked(State& st, CUcontext ctx, ContextState& cs, Sanitizer_StreamHandle stream) {
  if (cs.ring) return true;
  const size_t bytes = size_t(st.options.ring_slots) * sizeof(LaunchIntervals);
  void* dev = nullptr;
  SanitizerResult r = g_fn.alloc(ctx, &dev, bytes);
  if (r != SANITIZER_SUCCESS || dev == nullptr) {
    notice(st, "cannot allocate " + std::to_string(bytes) + " bytes of device memory for the access intervals (" +
                   result_text(r) + "); kernels of this context keep pointer-argument precision");
    return false;
  }
  cs.ring = static_cast<LaunchIntervals*>(dev);
  for (uint32_t i = 0; i < st.options.ring_slots; ++i) {
    g_fn.copy_to_device(cs.ring + i, st.empty_slot.get(), sizeof(LaunchIntervals), stream);
    cs.free_slots.push_back(st.options.ring_slots - 1 - i);
  }
  g_fn.stream_sync(stream);  // later launches on other streams must see initialised slots
  return true;
}

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : "";
  std::free(d);
  return out;
}

void unpatch_ready(State& st);

// At the start of a graph launch call (cudaGraphLaunch, cuGraphLaunch: the executable graph,
// then the stream), before the driver runs it: the context's ring of interval slots, which
// its kernel nodes' callbacks may not allocate themselves.
void prepare_graph_launch(State& st, const Sanitizer_CallbackData* cb) {
  struct GraphLaunchParams {
    void* exec;
    CUstream stream;
  };
  const auto* p = static_cast<const GraphLaunchParams*>(cb->functionParams);
  if (p == nullptr || cb->context == nullptr || g_fn.stream_handle == nullptr) return;
  std::lock_guard lock(st.mu);
  ContextState& cs = st.contexts[cb->context];
  if (cs.ring != nullptr || !cs.patches_loaded) return;
  Sanitizer_StreamHandle h = nullptr;
  if (g_fn.stream_handle(cb->context, p->stream, &h) != SANITIZER_SUCCESS || h == nullptr) return;
  ensure_ring_locked(st, cb->context, cs, h);
}

bool is_graph_launch(Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid) {
  return domain == SANITIZER_CB_DOMAIN_RUNTIME_API
             ? cbid == SANITIZER_CBID_RUNTIME_API_cudaGraphLaunch || cbid == SANITIZER_CBID_RUNTIME_API_cudaGraphLaunch_ptsz
             : cbid == SANITIZER_CBID_DRIVER_API_cuGraphLaunch || cbid == SANITIZER_CBID_DRIVER_API_cuGraphLaunch_ptsz;
}

void on_api(State& st, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const Sanitizer_CallbackData* cb) {
  ApiCall call;
  call.domain = domain == SANITIZER_CB_DOMAIN_RUNTIME_API ? ApiDomain::kRuntime : ApiDomain::kDriver;
  call.enter = cb->callbackSite == SANITIZER_API_ENTER;
  call.cbid = cbid;
  call.symbol_name = cb->symbolName;
  call.params = cb->functionParams;
  call.result = (!call.enter && cb->functionReturnValue) ? *static_cast<const int32_t*>(cb->functionReturnValue) : 0;
  call.context = reinterpret_cast<uint64_t>(cb->context);
  if (call.enter && t_api_depth == 0) unpatch_ready(st);
  if (call.enter && t_api_depth == 0 && st.options.graph_nodes && is_graph_launch(domain, cbid))
    prepare_graph_launch(st, cb);
  if (call.enter && t_api_depth++ == 0) {
    do {
      t_correlation = st.next_correlation.fetch_add(1, std::memory_order_relaxed);
    } while (t_correlation == 0);
  }
  call.correlation = t_correlation;
  st.api_callbacks.fetch_add(1, std::memory_order_relaxed);
  st.handler->on_call(call);
  if (!call.enter && t_api_depth > 0) --t_api_depth;
}

// Whether a module holds a kernel the selector patches. Modules without one (NCCL's, or
// everything outside --precise=REGEX) are left unpatched, so their kernels run at full speed.
// Answers true when the driver cannot list the module's functions (older drivers).
bool module_has_selected_kernel(State& st, CUmodule mod) {
  struct DriverFns {
    CUresult (*count)(unsigned int*, CUmodule) = nullptr;
    CUresult (*enumerate)(CUfunction*, unsigned int, CUmodule) = nullptr;
    CUresult (*name)(const char**, CUfunction) = nullptr;
  };
  // Looked up once, thread-safely: modules may load on several threads at once.
  static const DriverFns fn = [] {
    DriverFns f;
    if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      f.count = reinterpret_cast<decltype(f.count)>(dlsym(cuda, "cuModuleGetFunctionCount"));
      f.enumerate = reinterpret_cast<decltype(f.enumerate)>(dlsym(cuda, "cuModuleEnumerateFunctions"));
      f.name = reinterpret_cast<decltype(f.name)>(dlsym(cuda, "cuFuncGetName"));
    }
    return f;
  }();
  const auto count_fn = fn.count;
  const auto enum_fn = fn.enumerate;
  const auto name_fn = fn.name;
  if (!count_fn || !enum_fn || !name_fn) return true;
  InternalCallGuard guard;
  unsigned int n = 0;
  if (count_fn(&n, mod) != CUDA_SUCCESS) return true;
  std::vector<CUfunction> fns(n);
  if (n == 0 || enum_fn(fns.data(), n, mod) != CUDA_SUCCESS) return n != 0;
  for (CUfunction f : fns) {
    const char* name = nullptr;
    if (name_fn(&name, f) != CUDA_SUCCESS || name == nullptr) return true;
    if (st.options.selector.should_patch(name, demangle(name))) return true;
  }
  return false;
}

// Inserts the device callbacks into a module. Requires st.mu.
SanitizerResult patch_locked(State& st, ContextState& cs, CUmodule module) {
  SanitizerResult r = g_fn.patch_instructions(SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS, module, kDeviceCallback);
  // The other ways a kernel moves global memory that the API can instrument. One the driver
  // or the Sanitizer library refuses leaves those instructions unmeasured, not the module:
  // the analyzer keeps the default tier's access for a pointer with no measured access.
  if (r == SANITIZER_SUCCESS) {
    for (const auto& [kind, callback] : kAsyncCopyCallbacks) {
      SanitizerResult ar = g_fn.patch_instructions(kind, module, callback);
      if (ar != SANITIZER_SUCCESS && !std::exchange(cs.async_patch_failed, true))
        notice(st, std::string("cannot patch ") + callback + " instructions (" + result_text(ar) +
                       "): kernels that read or write global memory by async or bulk copies measure nothing there");
    }
  }
  if (r == SANITIZER_SUCCESS) r = g_fn.patch_module(module);
  return r;
}

// Takes the instrumentation out of the modules the plan says are done (SamplePlan), at the
// start of an outermost API call: not inside a launch of their own kernels. Their kernels
// still in flight finish first (every stream that ran one is synchronised).
void unpatch_ready(State& st) {
  if (!st.unpatch_work.exchange(false, std::memory_order_acq_rel)) return;
  std::lock_guard lock(st.mu);
  for (const SamplePlan::Unpatch& u : st.plan->take_unpatch_work()) {
    for (uint64_t s : u.streams) g_fn.stream_sync(reinterpret_cast<Sanitizer_StreamHandle>(s));
    SanitizerResult r = g_fn.unpatch_module(reinterpret_cast<CUmodule>(u.module));
    if (r != SANITIZER_SUCCESS)
      notice(st, "a fully sampled module could not be unpatched (" + result_text(r) + "); it stays patched");
    st.plan->unpatch_done(u.module, r == SANITIZER_SUCCESS);
  }
}

void on_module_loaded(State& st, const Sanitizer_ResourceModuleData* m) {
  if (st.options.filter_modules && !module_has_selected_kernel(st, m->module)) {
    st.skipped_modules.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::lock_guard lock(st.mu);
  ContextState& cs = st.contexts[m->context];
  if (cs.patches_failed) return;
  if (!cs.patches_loaded) {
    SanitizerResult r = g_fn.add_patches_from_file(st.options.patches_path.c_str(), m->context);
    if (r != SANITIZER_SUCCESS) {
      cs.patches_failed = true;
      notice(st, "cannot load the device callbacks from " + st.options.patches_path + " (" + result_text(r) +
                     "); kernels of this context keep pointer-argument precision");
      return;
    }
    cs.patches_loaded = true;
  }
  SanitizerResult r = patch_locked(st, cs, m->module);
  if (r != SANITIZER_SUCCESS) {
    notice(st, "a module could not be patched (" + result_text(r) + ")");
  } else {
    st.patched_modules.fetch_add(1, std::memory_order_relaxed);
    st.plan->module_patched(reinterpret_cast<uint64_t>(m->module));
  }
}

// Which launches are measured, for a launch and for a kernel node of a graph launch alike: a
// slot of the context's ring if the kernel is selected, the plan measures it, and one is free
// (nullptr: it runs unmeasured). `node` is 0 for a launch. Requires the caller's t_api_depth > 0.
LaunchIntervals* take_slot(State& st, const Sanitizer_LaunchData* l, const std::string& demangled, uint64_t node,
                           bool& selected) {
  const char* mangled = l->functionName ? l->functionName : "";
  const auto module = reinterpret_cast<uint64_t>(l->module);
  // The API stream of a graph launch: the node's own stream is the graph's.
  Sanitizer_StreamHandle stream = node ? l->hApiStream : l->hStream;
  selected = st.options.selector.should_patch(mangled, demangled);
  std::lock_guard lock(st.mu);
  if (!selected) {
    if (st.plan->tracks_streams()) st.plan->on_other_launch(module, reinterpret_cast<uint64_t>(l->hStream));
    return nullptr;
  }
  ContextState& cs = st.contexts[l->context];
  const LaunchShape shape{reinterpret_cast<uint64_t>(l->function),
                          {l->gridDim_x, l->gridDim_y, l->gridDim_z},
                          {l->blockDim_x, l->blockDim_y, l->blockDim_z}};
  const SamplePlan::Verdict v = st.plan->on_launch(module, shape, reinterpret_cast<uint64_t>(l->hStream));
  if (v == SamplePlan::Verdict::kSampledOut) st.sampled_out.fetch_add(1, std::memory_order_relaxed);
  if (v == SamplePlan::Verdict::kRepatch) st.plan->repatch_done(module, patch_locked(st, cs, l->module) == SANITIZER_SUCCESS);
  if (st.plan->has_unpatch_work()) st.unpatch_work.store(true, std::memory_order_release);
  if (v != SamplePlan::Verdict::kMeasure || !cs.patches_loaded) return nullptr;
  // A graph node's callback comes while the driver runs the graph launch: no allocation or
  // synchronisation there (the ring was made when the launch call began: prepare_graph_launch).
  if (node && (cs.ring == nullptr || cs.free_slots.empty())) return nullptr;
  if (!ensure_ring_locked(st, l->context, cs, stream)) return nullptr;
  // Every slot is waiting for a synchronisation the program has not made yet: make one.
  if (cs.free_slots.empty()) collect_context_locked(st, cs);
  if (cs.free_slots.empty()) return nullptr;
  uint32_t slot = cs.free_slots.back();
  cs.free_slots.pop_back();
  Pending p{slot, t_correlation, stream};
  if (node) {
    p.node = node;
    p.name_id = st.handler->kernel_name_id(reinterpret_cast<uint64_t>(l->function), l->functionName);
  }
  cs.pending.push_back(p);
  return cs.ring + slot;
}

void on_launch_begin(State& st, const Sanitizer_LaunchData* l) {
  void* data = nullptr;
  // A launch outside any API call the handler saw has no launch record to attach ranges to
  // (nor to take this name: the pointer is the Sanitizer's, valid during this callback's call).
  if (t_api_depth > 0) {
    thread_state().launch_function = l->functionName;
    bool selected = false;
    data = take_slot(st, l, demangle(l->functionName), 0, selected);
    if (data) {
      // The handler writes this launch's record when the launch call returns: mark it.
      thread_state().precise_correlation = t_correlation;
      st.patched_launches.fetch_add(1, std::memory_order_relaxed);
    }
  } else if (st.plan->tracks_streams()) {
    std::lock_guard lock(st.mu);
    st.plan->on_other_launch(reinterpret_cast<uint64_t>(l->module), reinterpret_cast<uint64_t>(l->hStream));
  }
  // Patched modules run the device callback in every kernel; without data it returns at once.
  g_fn.set_launch_data(l->hLaunch, l->function, l->hStream, data);
}

// A kernel node of a graph launch runs the device callback of its patched module too; no
// launch callback comes for it. Measured like a launch, its intervals tied to the graph
// launch (the outermost API call in progress: cudaGraphLaunch) and the node.
void on_graph_kernel_node(State& st, const Sanitizer_GraphNodeLaunchData* n) {
  const Sanitizer_LaunchData* l = &n->launchData;
  void* data = nullptr;
  // Only the only kernel node of a graph launch is measured. With several, the Sanitizer API
  // (CUDA 13.0, driver 580) ran them all with one data pointer: in a graph of GEMMs and
  // elementwise kernels, one node's slot held its neighbours' accesses too, and the others'
  // stayed empty. So a second kernel node in one launch withdraws the first's slot.
  thread_local uint32_t t_node_launch = 0;  // the graph launch (t_correlation) the count is of
  thread_local uint32_t t_kernel_nodes = 0;
  if (t_node_launch != t_correlation) {
    t_node_launch = t_correlation;
    t_kernel_nodes = 0;
  }
  const bool first = t_api_depth > 0 && ++t_kernel_nodes == 1;
  if (!first && t_api_depth > 0 && t_kernel_nodes == 2) {
    std::lock_guard lock(st.mu);
    if (auto it = st.contexts.find(l->context); it != st.contexts.end())
      for (Pending& p : it->second.pending)
        if (p.node != 0 && p.correlation == t_correlation) p.shared = true;
  }
  if (first && n->node != nullptr && st.options.graph_nodes) {
    bool selected = false;
    data = take_slot(st, l, demangle(l->functionName), reinterpret_cast<uint64_t>(n->node), selected);
    if (!data && selected) st.graph_kernel_nodes.fetch_add(1, std::memory_order_relaxed);
  } else {
    st.graph_kernel_nodes.fetch_add(1, std::memory_order_relaxed);
    if (st.plan->tracks_streams()) {
      std::lock_guard lock(st.mu);
      st.plan->on_other_launch(reinterpret_cast<uint64_t>(l->module), reinterpret_cast<uint64_t>(l->hStream));
    }
  }
  g_fn.set_launch_data(l->hLaunch, l->function, l->hStream, data);
}

void on_callback_body(void* userdata, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const void* data) {
  State* st = static_cast<State*>(userdata);
  if (st == nullptr || data == nullptr) return;
  switch (domain) {
    case SANITIZER_CB_DOMAIN_RUNTIME_API:
    case SANITIZER_CB_DOMAIN_DRIVER_API:
      on_api(*st, domain, cbid, static_cast<const Sanitizer_CallbackData*>(data));
      return;
    case SANITIZER_CB_DOMAIN_RESOURCE:
      if (cbid == SANITIZER_CBID_RESOURCE_MODULE_LOADED) {
        on_module_loaded(*st, static_cast<const Sanitizer_ResourceModuleData*>(data));
      } else if (cbid == SANITIZER_CBID_RESOURCE_STREAM_DESTROY_STARTING) {
        auto* s = static_cast<const Sanitizer_ResourceStreamData*>(data);
        std::lock_guard lock(st->mu);
        // A patched module that may be unpatched later must not wait on a stream that is gone.
        if (st->plan->stream_destroyed(reinterpret_cast<uint64_t>(s->hStream))) g_fn.stream_sync(s->hStream);
        auto it = st->contexts.find(s->context);
        if (it == st->contexts.end()) return;
        bool any = false;
        for (const Pending& p : it->second.pending) any |= p.stream == s->hStream;
        if (!any) return;
        g_fn.stream_sync(s->hStream);
        collect_locked(*st, it->second, [&](const Pending& p) { return p.stream == s->hStream; });
      } else if (cbid == SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        auto* c = static_cast<const Sanitizer_ResourceContextData*>(data);
        std::lock_guard lock(st->mu);
        auto it = st->contexts.find(c->context);
        if (it == st->contexts.end()) return;
        collect_context_locked(*st, it->second);
        if (it->second.ring) g_fn.free(c->context, it->second.ring);
        st->contexts.erase(it);
      }
      return;
    case SANITIZER_CB_DOMAIN_LAUNCH:
      if (cbid == SANITIZER_CBID_LAUNCH_BEGIN) on_launch_begin(*st, static_cast<const Sanitizer_LaunchData*>(data));
      return;
    case SANITIZER_CB_DOMAIN_GRAPHS:
      if (cbid == SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN) {
        auto* n = static_cast<const Sanitizer_GraphNodeLaunchData*>(data);
        if (n->nodeType == CU_GRAPH_NODE_TYPE_KERNEL && !n->isGraphUpload) on_graph_kernel_node(*st, n);
      }
      return;
    case SANITIZER_CB_DOMAIN_SYNCHRONIZE: {
      auto* s = static_cast<const Sanitizer_SynchronizeData*>(data);
      std::lock_guard lock(st->mu);
      auto it = st->contexts.find(s->context);
      if (it == st->contexts.end()) return;
      if (cbid == SANITIZER_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED) {
        collect_locked(*st, it->second, [](const Pending&) { return true; });
      } else if (cbid == SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED) {
        collect_locked(*st, it->second, [&](const Pending& p) { return p.stream == s->hStream; });
      }
      return;
    }
    default:
      return;
  }
}

// The Sanitizer library calls this from the program's threads (and from its own teardown at
// exit): nothing may escape into it, or the program dies in std::terminate.
void SANITIZERAPI on_callback(void* userdata, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid,
                              const void* data) {
  try {
    on_callback_body(userdata, domain, cbid, data);
  } catch (...) {
  }
}

template <typename F>
void find(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

bool SanitizerSession::load() {
  if (lib_) return true;
  const char* candidates[] = {"libsanitizer-public.so", "/usr/local/cuda/compute-sanitizer/libsanitizer-public.so"};
  void* lib = dlopen("libsanitizer-public.so", RTLD_NOW | RTLD_NOLOAD);
  for (const char* c : candidates) {
    if (lib) break;
    lib = dlopen(c, RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) return false;
  find(lib, g_fn.subscribe, "sanitizerSubscribe");
  find(lib, g_fn.enable_callback, "sanitizerEnableCallback");
  find(lib, g_fn.add_patches_from_file, "sanitizerAddPatchesFromFile");
  find(lib, g_fn.patch_instructions, "sanitizerPatchInstructions");
  find(lib, g_fn.patch_module, "sanitizerPatchModule");
  find(lib, g_fn.unpatch_module, "sanitizerUnpatchModule");
  find(lib, g_fn.set_launch_data, "sanitizerSetLaunchCallbackData");
  find(lib, g_fn.alloc, "sanitizerAlloc");
  find(lib, g_fn.free, "sanitizerFree");
  find(lib, g_fn.copy_to_device, "sanitizerMemcpyHostToDeviceAsync");
  find(lib, g_fn.copy_to_host, "sanitizerMemcpyDeviceToHost");
  find(lib, g_fn.stream_sync, "sanitizerStreamSynchronize");
  find(lib, g_fn.result_string, "sanitizerGetResultString");
  find(lib, g_fn.stream_handle, "sanitizerGetStreamHandle");
  if (!g_fn.subscribe || !g_fn.enable_callback || !g_fn.add_patches_from_file || !g_fn.patch_instructions ||
      !g_fn.patch_module || !g_fn.set_launch_data || !g_fn.alloc || !g_fn.free || !g_fn.copy_to_device ||
      !g_fn.copy_to_host || !g_fn.stream_sync)
    return false;
  lib_ = lib;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(g_fn.subscribe), &info) && info.dli_fname) path_ = info.dli_fname;
  return true;
}

std::string SanitizerSession::start(CudaCallHandler& handler, SanitizerOptions options) {
  if (subscriber_) return "";
  if (!load()) return "sanitizer-unavailable: libsanitizer-public.so (with the patching API) could not be loaded";
  if (options.granule_shift > 31) return "sanitizer-bad-option: granule_shift must be at most 31";
  if (options.ring_slots == 0) return "sanitizer-bad-option: ring_slots must be positive";
  auto* st = new State();  // lives as long as the process (callbacks may come until exit)
  st->handler = &handler;
  st->options = std::move(options);
  SamplePlan::Options plan;
  plan.sample = st->options.sample;
  plan.unpatch = st->options.unpatch && g_fn.unpatch_module != nullptr;
  plan.quiet_launches = st->options.unpatch_quiet;
  st->plan = std::make_unique<SamplePlan>(plan);
  st->empty_slot = std::make_unique<LaunchIntervals>();
  std::memset(st->empty_slot.get(), 0, sizeof(LaunchIntervals));
  st->empty_slot->granule_shift = st->options.granule_shift;

  Sanitizer_SubscriberHandle sub = nullptr;
  SanitizerResult rc = g_fn.subscribe(&sub, on_callback, st);
  if (rc != SANITIZER_SUCCESS) {
    delete st;
    return "sanitizer-subscribe-failed: " + result_text(rc);
  }
  subscriber_ = sub;
  g_state.store(st, std::memory_order_release);
  // Ids the Sanitizer API does not know (legacy calls CUDA 13 dropped) are refused; harmless.
  for (uint32_t cb : CudaCallHandler::runtime_cbids())
    g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_RUNTIME_API, Sanitizer_CallbackId(cb));
  for (uint32_t cb : CudaCallHandler::driver_cbids())
    g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_DRIVER_API, Sanitizer_CallbackId(cb));
  g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_MODULE_LOADED);
  g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_STREAM_DESTROY_STARTING);
  g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_LAUNCH, SANITIZER_CBID_LAUNCH_BEGIN);
  g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN);
  g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED);
  g_fn.enable_callback(1, sub, SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED);
  return "";
}

void SanitizerSession::collect_all() {
  State* st = g_state.load(std::memory_order_acquire);
  if (st == nullptr) return;
  std::lock_guard lock(st->mu);
  for (auto& [ctx, cs] : st->contexts) collect_context_locked(*st, cs);
}

SessionCounts SanitizerSession::counts() const {
  SessionCounts c;
  if (State* st = g_state.load(std::memory_order_acquire)) {
    c.api_callbacks = st->api_callbacks.load();
    c.patched_modules = st->patched_modules.load();
    c.patched_launches = st->patched_launches.load();
    c.skipped_modules = st->skipped_modules.load();
    c.graph_kernel_nodes = st->graph_kernel_nodes.load();
    c.measured_graph_nodes = st->measured_graph_nodes.load();
    c.sampled_out = st->sampled_out.load();
    std::lock_guard lock(st->mu);
    c.unpatched_modules = st->plan->unpatched();
    c.repatched_modules = st->plan->repatched();
    c.unmeasured_unpatched = st->plan->unmeasured_unpatched();
  }
  return c;
}

}  // namespace streamrace::tracer::precise
