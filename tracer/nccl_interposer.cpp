// NCCL interposition: libstreamrace.so exports NCCL's public entry points, so a preloaded
// tracer sees every collective, point-to-point call, group and communicator creation. The
// real function is NCCL's strong `pnccl*` alias, looked up in the handle of the already
// loaded libnccl.so.2; dlsym(RTLD_NEXT) is never used because PyTorch loads NCCL in a local
// scope where RTLD_NEXT finds nothing. NCCL's own kernel launches inside a call are not
// recorded (thread_state().nccl_depth); the first one lends its correlation id to the call.
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "tracer/loaded_library.h"
#include "tracer/self_time.h"
#include "tracer/thread_state.h"
#include "tracer/tracer_process.h"

namespace streamrace::tracer {
namespace {

void* nccl_handle() {
  alignas(void*) static void* handle = nullptr;
  static const char* const kNames[] = {"libnccl.so.2", "libnccl.so"};
  return cached_library(handle, kNames, 2, "libnccl.so");
}

// The real entry point: `pncclX` in NCCL's own handle, else `ncclX` in that handle.
void* real_symbol(const char* pname, const char* name) {
  void* h = nccl_handle();
  void* fn = real_symbol_in(h, pname);
  return fn ? fn : real_symbol_in(h, name);
}

template <typename F>
F real(std::atomic<F>& cache, const char* pname, const char* name) {
  F fn = cache.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<F>(real_symbol(pname, name));
    cache.store(fn, std::memory_order_release);
  }
  return fn;
}
#define REAL(NAME) real(NAME##_real, "p" #NAME, #NAME)

struct CommInfo {
  int32_t rank = -1;
  int32_t nranks = -1;
  uint32_t device = 0;
};

// Never destroyed: a thread of the program may still call NCCL while exit() runs the library's
// static destructors (a destroyed map here crashed such a process at exit).
std::mutex& g_comm_mu = *new std::mutex;
std::unordered_map<uint64_t, CommInfo>& g_comms = *new std::unordered_map<uint64_t, CommInfo>;

thread_local uint32_t t_group_depth = 0;

std::atomic<decltype(&pncclCommUserRank)> ncclCommUserRank_real{nullptr};
std::atomic<decltype(&pncclCommCount)> ncclCommCount_real{nullptr};
std::atomic<decltype(&pncclCommCuDevice)> ncclCommCuDevice_real{nullptr};

CommInfo describe(ncclComm_t comm, int rank_hint, int nranks_hint) {
  {
    std::lock_guard lock(g_comm_mu);
    auto it = g_comms.find(reinterpret_cast<uint64_t>(comm));
    if (it != g_comms.end()) return it->second;
  }
  CommInfo info;
  info.rank = rank_hint;
  info.nranks = nranks_hint;
  int v = 0;
  if (auto f = REAL(ncclCommUserRank); f && f(comm, &v) == ncclSuccess) info.rank = v;
  if (auto f = REAL(ncclCommCount); f && f(comm, &v) == ncclSuccess) info.nranks = v;
  if (auto f = REAL(ncclCommCuDevice); f && f(comm, &v) == ncclSuccess && v >= 0) info.device = uint32_t(v);
  if (info.rank >= 0 && info.nranks > 0) {
    std::lock_guard lock(g_comm_mu);
    g_comms[reinterpret_cast<uint64_t>(comm)] = info;
  }
  return info;
}

// Marks the thread as inside NCCL for the duration of the real call.
struct NcclScope {
  NcclScope() {
    auto& ts = thread_state();
    if (ts.nccl_depth++ == 0) ts.nccl_launch_correlation = 0;
  }
  ~NcclScope() { --thread_state().nccl_depth; }
};

bool ok(ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; }

void record_comm(const char* api, ncclComm_t comm, ncclComm_t parent, int rank_hint, int nranks_hint) {
  if (!TracerProcess::enabled() || comm == nullptr) return;
  try {
    CommInfo info = describe(comm, rank_hint, nranks_hint);
    CudaCallHandler& h = TracerProcess::get().handler();
    trace::NcclCommInit r{};
    r.comm = reinterpret_cast<uint64_t>(comm);
    r.parent = reinterpret_cast<uint64_t>(parent);
    r.rank = info.rank;
    r.nranks = info.nranks;
    r.device = info.device;
    r.call = h.recorder().call(h.recorder().strings().intern(api), h.capture_stack());
    h.recorder().add(r);
  } catch (...) {
  }
}

void record_call(trace::NcclOp op, const void* send, const void* recv, size_t count, ncclDataType_t type,
                 int root_or_peer, ncclComm_t comm, cudaStream_t stream, uint64_t correlation) {
  if (!TracerProcess::enabled()) return;
  self_time::Scope timed(self_time::kNccl);
  try {
    CommInfo info = describe(comm, -1, -1);
    CudaCallHandler& h = TracerProcess::get().handler();
    trace::NcclCall r{};
    r.stream = h.normalize_stream(reinterpret_cast<uint64_t>(stream), false, info.device);
    r.comm = reinterpret_cast<uint64_t>(comm);
    r.sendbuff = reinterpret_cast<uint64_t>(send);
    r.recvbuff = reinterpret_cast<uint64_t>(recv);
    r.count = count;
    // Grouped operations launch at ncclGroupEnd, under no correlation of their own.
    r.correlation = t_group_depth == 0 ? correlation : 0;
    r.root_or_peer = root_or_peer;
    r.rank = info.rank;
    r.nranks = info.nranks;
    r.group_depth = t_group_depth;
    r.op = op;
    r.datatype = trace::NcclType(uint8_t(type));
    r.device = info.device;
    GilScope python_stack_matters;
    r.call = h.recorder().call(h.recorder().strings().intern(trace::nccl_op_name(op)), h.capture_stack());
    h.recorder().add(r);
  } catch (...) {
  }
}

void record_group(bool start) {
  if (!TracerProcess::enabled()) return;
  try {
    CudaCallHandler& h = TracerProcess::get().handler();
    auto call = h.recorder().call(h.recorder().strings().intern(start ? "ncclGroupStart" : "ncclGroupEnd"), 0);
    if (start) {
      trace::NcclGroupStart r{};
      r.call = call;
      r.depth = t_group_depth;
      h.recorder().add(r);
    } else {
      trace::NcclGroupEnd r{};
      r.call = call;
      r.depth = t_group_depth;
      h.recorder().add(r);
    }
  } catch (...) {
  }
}

}  // namespace
}  // namespace streamrace::tracer

using namespace streamrace::tracer;
using streamrace::trace::NcclOp;

#define SR_EXPORT extern "C" __attribute__((visibility("default")))

// One collective: call the real function inside an NcclScope, then record it.
#define SR_COLLECTIVE(NAME, OP, PARAMS, ARGS, SEND, RECV, COUNT, TYPE, ROOT, COMM, STREAM) \
  namespace streamrace::tracer {                                                           \
  std::atomic<decltype(&p##NAME)> NAME##_real{nullptr};                                    \
  }                                                                                        \
  SR_EXPORT ncclResult_t NAME PARAMS {                                                     \
    auto fn = REAL(NAME);                                                                  \
    if (!fn) return ncclSystemError;                                                       \
    ncclResult_t rc;                                                                       \
    uint64_t corr;                                                                         \
    {                                                                                      \
      NcclScope scope;                                                                     \
      rc = fn ARGS;                                                                        \
      corr = thread_state().nccl_launch_correlation;                                       \
    }                                                                                      \
    if (ok(rc) && thread_state().nccl_depth == 0)                                          \
      record_call(OP, SEND, RECV, COUNT, TYPE, ROOT, COMM, STREAM, corr);                  \
    return rc;                                                                             \
  }

SR_COLLECTIVE(ncclAllReduce, NcclOp::kAllReduce,
              (const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st),
              (s, r, n, t, op, c, st), s, r, n, t, -1, c, st)
SR_COLLECTIVE(ncclBroadcast, NcclOp::kBroadcast,
              (const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
              (s, r, n, t, root, c, st), s, r, n, t, root, c, st)
SR_COLLECTIVE(ncclReduce, NcclOp::kReduce,
              (const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
               cudaStream_t st),
              (s, r, n, t, op, root, c, st), s, r, n, t, root, c, st)
SR_COLLECTIVE(ncclReduceScatter, NcclOp::kReduceScatter,
              (const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t st),
              (s, r, n, t, op, c, st), s, r, n, t, -1, c, st)
SR_COLLECTIVE(ncclAllGather, NcclOp::kAllGather,
              (const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st),
              (s, r, n, t, c, st), s, r, n, t, -1, c, st)
SR_COLLECTIVE(ncclAlltoAll, NcclOp::kAlltoAll,
              (const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st),
              (s, r, n, t, c, st), s, r, n, t, -1, c, st)
SR_COLLECTIVE(ncclGather, NcclOp::kGather,
              (const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
              (s, r, n, t, root, c, st), s, r, n, t, root, c, st)
SR_COLLECTIVE(ncclScatter, NcclOp::kScatter,
              (const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st),
              (s, r, n, t, root, c, st), s, r, n, t, root, c, st)
SR_COLLECTIVE(ncclSend, NcclOp::kSend,
              (const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st),
              (s, n, t, peer, c, st), s, nullptr, n, t, peer, c, st)
SR_COLLECTIVE(ncclRecv, NcclOp::kRecv,
              (void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st),
              (r, n, t, peer, c, st), nullptr, r, n, t, peer, c, st)

namespace streamrace::tracer {
std::atomic<decltype(&pncclGroupStart)> ncclGroupStart_real{nullptr};
std::atomic<decltype(&pncclGroupEnd)> ncclGroupEnd_real{nullptr};
std::atomic<decltype(&pncclCommInitRank)> ncclCommInitRank_real{nullptr};
std::atomic<decltype(&pncclCommInitRankConfig)> ncclCommInitRankConfig_real{nullptr};
std::atomic<decltype(&pncclCommInitAll)> ncclCommInitAll_real{nullptr};
std::atomic<decltype(&pncclCommSplit)> ncclCommSplit_real{nullptr};
std::atomic<decltype(&pncclCommInitRankScalable)> ncclCommInitRankScalable_real{nullptr};
}  // namespace streamrace::tracer

SR_EXPORT ncclResult_t ncclGroupStart() {
  auto fn = REAL(ncclGroupStart);
  if (!fn) return ncclSystemError;
  ncclResult_t rc;
  {
    NcclScope scope;
    rc = fn();
  }
  if (ok(rc)) {
    ++t_group_depth;
    record_group(true);
  }
  return rc;
}

SR_EXPORT ncclResult_t ncclGroupEnd() {
  auto fn = REAL(ncclGroupEnd);
  if (!fn) return ncclSystemError;
  ncclResult_t rc;
  {
    NcclScope scope;
    rc = fn();
  }
  // NCCL leaves the group even when the end fails.
  if (t_group_depth > 0) --t_group_depth;
  record_group(false);
  return rc;
}

SR_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  auto fn = REAL(ncclCommInitRank);
  if (!fn) return ncclSystemError;
  ncclResult_t rc;
  {
    NcclScope scope;
    rc = fn(comm, nranks, id, rank);
  }
  if (ok(rc) && comm) record_comm("ncclCommInitRank", *comm, nullptr, rank, nranks);
  return rc;
}

SR_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                              ncclConfig_t* config) {
  auto fn = REAL(ncclCommInitRankConfig);
  if (!fn) return ncclSystemError;
  ncclResult_t rc;
  {
    NcclScope scope;
    rc = fn(comm, nranks, id, rank, config);
  }
  if (ok(rc) && comm) record_comm("ncclCommInitRankConfig", *comm, nullptr, rank, nranks);
  return rc;
}

SR_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  auto fn = REAL(ncclCommInitAll);
  if (!fn) return ncclSystemError;
  ncclResult_t rc;
  {
    NcclScope scope;
    rc = fn(comms, ndev, devlist);
  }
  if (ok(rc) && comms)
    for (int i = 0; i < ndev; ++i) record_comm("ncclCommInitAll", comms[i], nullptr, i, ndev);
  return rc;
}

SR_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  auto fn = REAL(ncclCommSplit);
  if (!fn) return ncclSystemError;
  ncclResult_t rc;
  {
    NcclScope scope;
    rc = fn(comm, color, key, newcomm, config);
  }
  if (ok(rc) && newcomm && *newcomm) record_comm("ncclCommSplit", *newcomm, comm, -1, -1);
  return rc;
}

SR_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                ncclUniqueId* commIds, ncclConfig_t* config) {
  auto fn = REAL(ncclCommInitRankScalable);
  if (!fn) return ncclSystemError;
  ncclResult_t rc;
  {
    NcclScope scope;
    rc = fn(newcomm, nranks, myrank, nId, commIds, config);
  }
  if (ok(rc) && newcomm) record_comm("ncclCommInitRankScalable", *newcomm, nullptr, myrank, nranks);
  return rc;
}
