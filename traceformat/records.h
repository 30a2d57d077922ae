// The trace schema, version 1: every record the tracer writes and the analyzer reads.
// This header is the contract between tracer/ and analyzer/ (docs/trace-format.md is its
// prose twin). Records are plain little-endian structs copied byte for byte; each sits in
// a chunk behind a RecordPrefix. Never reorder or resize a field: add a new record kind or
// bump kVersionMinor and append fields at the end (readers accept longer bodies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace streamrace::trace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the trace format is little-endian");

inline constexpr char kFileMagic[8] = {'S', 'R', 'A', 'C', 'E', 'T', 'R', 'C'};
inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 6;  // 1.1: StreamCapture.graph, GraphCall; 1.2: GraphEdit, GraphCall.flags, HostAccess; 1.3: CaptureMark; 1.4: KernelLaunch arguments' hash; 1.5: its XXH3 twin; 1.6: KernelNodeAccess
inline constexpr uint32_t kChunkMagic = 0x4B4E4843;  // "CHNK"
inline constexpr uint32_t kMaxChunkBytes = 64u << 20;  // sanity bound on raw and stored size
inline constexpr uint32_t kMaxHeaderBytes = 1u << 20;
// A zstd chunk's raw size may be at most this many times its stored size. The tracer's
// chunks compress 5-20x; the bound keeps a small file from claiming gigabytes of records
// (a reader's work stays linear in the file). Every record takes at least its 4-byte prefix,
// so a chunk holds at most raw_size / 4 records.
inline constexpr uint32_t kMaxCompressionRatio = 256;

enum ChunkFlags : uint32_t {
  kChunkZstd = 1u << 0,        // payload is one zstd frame
  kChunkEndOfTrace = 1u << 1,  // written by a clean close; its absence means the writer died
};

enum class RecordKind : uint16_t {
  kStringDef = 1,
  kStackDef = 2,
  kStreamCreate = 10,
  kStreamDestroy = 11,
  kEventCreate = 12,
  kEventDestroy = 13,
  kEventRecord = 14,
  kStreamWaitEvent = 15,
  kEventSynchronize = 16,
  kEventQuery = 17,
  kStreamSynchronize = 18,
  kStreamQuery = 19,
  kDeviceSynchronize = 20,  // cudaDeviceSynchronize and every other device-wide implicit sync
  kKernelLaunch = 30,
  kMemcpy = 31,
  kMemset = 32,
  kKernelAccess = 33,  // precise tier: one exact interval of one launch
  kHostAccess = 34,    // --host-accesses: the host touched a guarded page of a pinned copy's host side
  kKernelNodeAccess = 35,  // 1.6, precise tier: one exact interval of one kernel node of one graph launch
  kAlloc = 40,
  kFree = 41,
  kAllocatorBlock = 42,  // a framework allocator's block event (PyTorch's caching allocator)
  kNcclCommInit = 50,
  kNcclCall = 51,
  kNcclGroupStart = 52,
  kNcclGroupEnd = 53,
  kGraphLaunch = 60,
  kStreamCapture = 61,
  kGraphCall = 62,  // instantiate, exec update, destroy; capture dependencies updated
  kGraphEdit = 63,  // 1.2: the explicit graph API (graphs created, cloned; nodes, edges, node parameters)
  kOpTiming = 70,
  kNotice = 80,
  kCaptureMark = 81,  // 1.3: capture windows and ring mode (docs/long-runs.md)
};

const char* record_kind_name(RecordKind kind);

// Whether records of this kind start with CallInfo (come from one API call, carry a seq).
constexpr bool has_call_info(RecordKind k) {
  switch (k) {
    case RecordKind::kStringDef:
    case RecordKind::kStackDef:
    case RecordKind::kKernelAccess:
    case RecordKind::kKernelNodeAccess:
    case RecordKind::kOpTiming:
    case RecordKind::kNotice:
      return false;
    default:
      return true;
  }
}

// Framing in front of every record body inside a chunk payload.
struct RecordPrefix {
  uint16_t kind;
  uint16_t body_size;  // bytes after this prefix
};
static_assert(sizeof(RecordPrefix) == 4);

// ---------------------------------------------------------------------------------------
// Stream identity. Handles are process-wide except the two implicit streams, which exist
// once per device (legacy) or per host thread and device (per-thread default stream). The
// tracer normalises them to these synthetic ids so the analyzer never has to guess.
inline constexpr uint64_t kLegacyStreamTag = 0xFFFF'FFFF'0000'0000ull;
inline constexpr uint64_t kPerThreadStreamTag = 0xFFFF'FFFE'0000'0000ull;
inline constexpr uint64_t kStreamTagMask = 0xFFFF'FFFF'0000'0000ull;
// Never written by the tracer: the analyzer's virtual streams for the branches of a CUDA
// graph launch (analyzer/trace_analysis.cpp).
inline constexpr uint64_t kGraphBranchStreamTag = 0xFFFF'FFFD'0000'0000ull;
constexpr uint64_t legacy_stream(uint32_t device) { return kLegacyStreamTag | (device & 0xFFFFu); }
constexpr uint64_t per_thread_stream(uint32_t thread, uint32_t device) {
  return kPerThreadStreamTag | ((uint64_t(thread) & 0xFFFFu) << 16) | (device & 0xFFFFu);
}
constexpr bool is_legacy_stream(uint64_t s) { return (s & kStreamTagMask) == kLegacyStreamTag; }
constexpr bool is_per_thread_stream(uint64_t s) { return (s & kStreamTagMask) == kPerThreadStreamTag; }

enum StreamFlags : uint32_t { kStreamNonBlocking = 1u };  // cudaStreamNonBlocking

// ---------------------------------------------------------------------------------------
// Common fields of every record that comes from one API call.
struct CallInfo {
  uint64_t seq;         // dense, process-wide order of calls (0, 1, 2, ...)
  uint64_t host_ts_ns;  // CLOCK_MONOTONIC at the call
  uint32_t thread;      // small host-thread index assigned by the tracer
  uint32_t stack_id;    // StackDef id, 0 = none
  uint32_t api_id;      // StringDef id of the API name ("cudaMemcpyAsync"), 0 = none
  uint32_t reserved;
};
static_assert(sizeof(CallInfo) == 32);

#define SR_RECORD(NAME) static constexpr RecordKind kKind = RecordKind::NAME

// Variable-size records: StringDef = {uint32 id; char text[body_size - 4]}.
struct StringDefHead {
  SR_RECORD(kStringDef);
  uint32_t id;
};

// StackDef = StackDefHead followed by nframes StackFrame, innermost first.
struct StackDefHead {
  SR_RECORD(kStackDef);
  uint32_t id;
  uint16_t nframes;
  uint16_t reserved;
};
enum class FrameKind : uint32_t { kNative = 0, kPython = 1 };
struct StackFrame {
  FrameKind kind;
  uint32_t file_id;      // StringDef: source file (Python) or module path (native)
  uint32_t function_id;  // StringDef: function name, 0 = unknown
  uint32_t line;         // source line, 0 = unknown
  uint64_t pc;           // native: offset in module; Python: 0
};
static_assert(sizeof(StackFrame) == 24);

struct StreamCreate {
  SR_RECORD(kStreamCreate);
  CallInfo call;
  uint64_t stream;
  uint32_t device;
  uint32_t flags;  // StreamFlags
  int32_t priority;
  uint32_t reserved;
};

struct StreamDestroy {
  SR_RECORD(kStreamDestroy);
  CallInfo call;
  uint64_t stream;
};

struct EventCreate {
  SR_RECORD(kEventCreate);
  CallInfo call;
  uint64_t event;
  uint32_t flags;
  uint32_t reserved;
};

struct EventDestroy {
  SR_RECORD(kEventDestroy);
  CallInfo call;
  uint64_t event;
};

struct EventRecord {
  SR_RECORD(kEventRecord);
  CallInfo call;
  uint64_t event;
  uint64_t stream;
};

struct StreamWaitEvent {
  SR_RECORD(kStreamWaitEvent);
  CallInfo call;
  uint64_t stream;
  uint64_t event;
};

struct EventSynchronize {
  SR_RECORD(kEventSynchronize);
  CallInfo call;
  uint64_t event;
};

struct EventQuery {
  SR_RECORD(kEventQuery);
  CallInfo call;
  uint64_t event;
  int32_t result;  // cudaError_t; 0 = cudaSuccess (the event has completed)
  uint32_t reserved;
};

struct StreamSynchronize {
  SR_RECORD(kStreamSynchronize);
  CallInfo call;
  uint64_t stream;
};

struct StreamQuery {
  SR_RECORD(kStreamQuery);
  CallInfo call;
  uint64_t stream;
  int32_t result;
  uint32_t reserved;
};

struct DeviceSynchronize {
  SR_RECORD(kDeviceSynchronize);
  CallInfo call;  // api_id names the call (cudaDeviceSynchronize, cudaFree, ...)
  uint32_t device;
  uint32_t reserved;
};

enum KernelFlags : uint32_t {
  kKernelArgsScanned = 1u << 0,  // ptrs[] holds every argument that pointed into live memory
  kKernelPrecise = 1u << 1,      // exact accesses follow as KernelAccess records
  // A kernel signature bounded the words scanned in one of the parameters (tracer/kernel_signatures.h):
  // ptrs[] holds every argument the kernel can read as a pointer that pointed into live memory.
  kKernelArgsBySignature = 1u << 2,
  // 1.4: one more uint64 follows the pointers: a hash of the launch's parameter bytes other
  // than its pointer arguments (the scalars: sizes, strides, flags), which with the kernel, its
  // launch shape and its pointer count keys learned access signatures (analyzer/access_signatures.h).
  kKernelArgsHash = 1u << 3,
  // 1.5: the launch ran inside a cuBLAS call whose matrices the tracer read from the call's
  // arguments (tracer/cublas_interposer.cpp). After the pointers (and the hash) follow one
  // uint64 count and that many CallAccessEntry: the call's byte ranges, which stand for the
  // accesses of this kernel's pointer arguments they touch (as precise mode's intervals do).
  kKernelCallAccesses = 1u << 4,
  // 1.5: the word after the pointers is the arguments' hash of the same words by XXH3_64bits,
  // not by 1.4's multiply-xor chain (never both bits). Its values are another function's: the
  // analyzer never compares them with 1.4's (ArgsHashKind).
  kKernelArgsHash2 = 1u << 5,
};

// One byte range of a library call (kKernelCallAccesses): `info` bits 0-1 an AccessDir, bit 8
// set when the range is a hull of a strided matrix (direction known, extent not exact).
struct CallAccessEntry {
  uint64_t addr;
  uint64_t bytes;
  uint64_t info;
};
inline constexpr uint64_t kCallAccessHull = 1u << 8;

// Which function a launch's arguments' hash is, by its KernelFlags: signature keys of one
// kind never match launches of the other (docs/signatures.md).
enum class ArgsHashKind : uint8_t {
  kNone = 0,   // no hash (before 1.4, or the arguments were not scanned)
  kMix64 = 1,  // 1.4, kKernelArgsHash
  kXxh3 = 2,   // 1.5, kKernelArgsHash2
};
inline constexpr ArgsHashKind args_hash_kind(uint32_t kernel_flags) {
  return (kernel_flags & kKernelArgsHash2) ? ArgsHashKind::kXxh3
         : (kernel_flags & kKernelArgsHash) ? ArgsHashKind::kMix64
                                            : ArgsHashKind::kNone;
}

// KernelLaunch = KernelLaunchHead followed by nptrs uint64 pointer arguments (and, with
// kKernelArgsHash or kKernelArgsHash2, the arguments' hash; with kKernelCallAccesses, the
// call's ranges).
struct KernelLaunchHead {
  SR_RECORD(kKernelLaunch);
  CallInfo call;
  uint64_t stream;
  uint64_t correlation;  // joins OpTiming and KernelAccess
  uint32_t device;
  uint32_t name_id;  // StringDef: kernel name
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t nptrs;
  uint32_t flags;  // KernelFlags
};

enum class MemKind : uint8_t { kUnknown = 0, kDevice = 1, kPinnedHost = 2, kPageableHost = 3, kManaged = 4 };
enum class CopyKind : uint8_t { kHostToHost = 0, kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3, kDefault = 4 };

struct Memcpy {
  SR_RECORD(kMemcpy);
  CallInfo call;
  uint64_t stream;
  uint64_t correlation;
  uint64_t dst;
  uint64_t src;
  uint64_t bytes;  // 2D/3D copies: the extent from the first to the last byte touched
  uint32_t device;
  CopyKind copy_kind;
  uint8_t is_async;
  MemKind src_mem;
  MemKind dst_mem;
};

struct Memset {
  SR_RECORD(kMemset);
  CallInfo call;
  uint64_t stream;
  uint64_t correlation;
  uint64_t dst;
  uint64_t bytes;
  uint32_t device;
  uint8_t is_async;
  MemKind dst_mem;
  uint16_t reserved;
};

enum class AccessDir : uint8_t { kRead = 1, kWrite = 2, kReadWrite = 3 };

inline constexpr uint8_t kAccessRegion = 1;
inline constexpr uint8_t kAccessHull = 2;

struct KernelAccess {
  SR_RECORD(kKernelAccess);
  uint64_t correlation;
  uint64_t addr;
  uint64_t bytes;
  AccessDir dir;
  uint8_t overflowed;  // 0: exact; 1 (kAccessRegion): the device-side interval budget ran out,
                       // a whole region of unknown direction; 2 (kAccessHull): `dir` is known,
                       // the extent is the hull of the accesses in a coarse region (not exact)
  uint16_t reserved0;
  uint32_t reserved1;
};

// 1.6, precise tier: one interval a kernel node of a CUDA graph launch touched, as KernelAccess
// is for a launch. `correlation` is the GraphLaunch's; `node` the node's handle as the Compute
// Sanitizer API names it in its node-launch callback (for a graph built with the explicit API,
// the handle cudaGraphAdd*Node returned: GraphEdit.node); `name_id` the kernel's name (a
// StringDef id), which identifies the node where its handle does not (captured graphs).
struct KernelNodeAccess {
  SR_RECORD(kKernelNodeAccess);
  uint64_t correlation;
  uint64_t node;
  uint64_t addr;
  uint64_t bytes;
  AccessDir dir;
  uint8_t overflowed;  // as KernelAccess::overflowed
  uint16_t reserved0;
  uint32_t name_id;
};
static_assert(sizeof(KernelNodeAccess) == 40);

// --host-accesses (tracer/page_guard.h): between an async copy's enqueue and the first host
// synchronisation that orders the host after it, the tracer write-protects the pages of the
// copy's pinned host side (read-protects them too for a device-to-host destination). The
// first host access to each such page faults and becomes one HostAccess; the page is then
// unguarded for the rest of that window, so later accesses to it are not seen. `call.seq` is
// taken when the access faulted, so the record sits in call order where the access happened;
// `call.api_id` names it ("host write", "host read"), `call.stack_id` is the faulting
// thread's native stack (no Python frames: it is taken in the signal handler).
enum HostAccessFlags : uint8_t {
  kHostAccessExactAddr = 1u << 0,  // `addr` is the faulting byte's address (si_addr); else only the page is known
};
struct HostAccess {
  SR_RECORD(kHostAccess);
  CallInfo call;
  uint64_t addr;        // the faulting address (the first byte of the access that faulted)
  uint64_t page;        // the start of the guarded page it fell in
  uint32_t page_bytes;  // that page's size
  AccessDir dir;        // kRead, kWrite, or kReadWrite when the CPU did not say which
  uint8_t flags;        // HostAccessFlags
  uint16_t reserved;
};
static_assert(sizeof(HostAccess) == 56);

enum class AllocKind : uint8_t {
  kDevice = 1,       // cudaMalloc / cuMemAlloc / cudaMallocPitch / cudaMalloc3D
  kAsync = 2,        // cudaMallocAsync / cudaMallocFromPoolAsync (stream-ordered)
  kManaged = 3,      // cudaMallocManaged
  kHostPinned = 4,   // cudaMallocHost / cudaHostAlloc / cuMemHostAlloc
  kHostRegistered = 5,  // cudaHostRegister
  kVmmMap = 6,       // cuMemMap of a cuMemCreate handle (expandable segments)
  kArray = 7,        // cudaFreeArray (Free only: arrays are not tracked; ptr is the cudaArray_t)
};

struct Alloc {
  SR_RECORD(kAlloc);
  CallInfo call;
  uint64_t ptr;
  uint64_t bytes;
  uint64_t stream;  // stream-ordered allocations; 0 otherwise
  uint32_t device;
  AllocKind kind;
  uint8_t reserved0;
  uint16_t reserved1;
};

struct Free {
  SR_RECORD(kFree);
  CallInfo call;
  uint64_t ptr;
  uint64_t bytes;   // cuMemUnmap size; 0 when the allocation's own size applies
  uint64_t stream;  // stream-ordered frees; 0 otherwise
  uint32_t device;
  AllocKind kind;
  uint8_t reserved0;
  uint16_t reserved1;
};

// A framework allocator's own view of memory: the blocks (tensor storages) it carves out of
// the segments it got from cudaMalloc/cuMemMap, as PyTorch's CUDA caching allocator reports
// them through its trace tracker. `stream` is the block's stream: the allocator hands a
// freed block out again for work on that stream without waiting for any other.
enum class BlockAction : uint8_t {
  kAlloc = 1,          // a block handed to the program (a tensor storage): [addr, addr + bytes)
  kFreeRequested = 2,  // the program released it (may wait for record_stream uses)
  kFreeCompleted = 3,  // the allocator may reuse it now
  kSegmentAlloc = 4,   // the allocator got a segment (cudaMalloc) of its own
  kSegmentFree = 5,    // ... and gave it back (cudaFree)
  kSegmentMap = 6,     // expandable segments: a range mapped (cuMemMap)
  kSegmentUnmap = 7,   // ... and unmapped
};
const char* block_action_name(BlockAction a);

enum class BlockAllocator : uint8_t { kTorchCaching = 1 };

struct AllocatorBlock {
  SR_RECORD(kAllocatorBlock);
  CallInfo call;    // api_id names the allocator event; only free requests carry a stack
  uint64_t addr;
  uint64_t bytes;   // kAlloc: the size requested (the tensor's bytes, not the rounded block)
  uint64_t stream;  // the block's stream (normalised as every stream in a trace)
  uint32_t device;
  BlockAction action;
  BlockAllocator allocator;
  uint16_t reserved;
};

struct NcclCommInit {
  SR_RECORD(kNcclCommInit);
  CallInfo call;
  uint64_t comm;
  uint64_t parent;  // ncclCommSplit's parent, 0 otherwise
  int32_t rank;
  int32_t nranks;
  uint32_t device;
  uint32_t reserved;
};

enum class NcclOp : uint8_t {
  kAllReduce = 1, kBroadcast = 2, kReduce = 3, kReduceScatter = 4, kAllGather = 5,
  kAlltoAll = 6, kGather = 7, kScatter = 8, kSend = 9, kRecv = 10,
};
const char* nccl_op_name(NcclOp op);

// ncclDataType_t values as in nccl.h.
enum class NcclType : uint8_t {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};
uint32_t nccl_type_size(NcclType t);  // 0 for an unknown type

struct NcclCall {
  SR_RECORD(kNcclCall);
  CallInfo call;
  uint64_t stream;
  uint64_t comm;
  uint64_t sendbuff;
  uint64_t recvbuff;
  uint64_t count;  // elements, as passed to the call (recvcount/sendcount where NCCL says so)
  uint64_t correlation;
  int32_t root_or_peer;  // -1 when the op has neither
  int32_t rank;
  int32_t nranks;
  uint32_t group_depth;  // ncclGroupStart nesting at the call, 0 = not in a group
  NcclOp op;
  NcclType datatype;
  uint16_t reserved;
  uint32_t device;
};

struct NcclGroupStart {
  SR_RECORD(kNcclGroupStart);
  CallInfo call;
  uint32_t depth;  // nesting after the call
  uint32_t reserved;
};

struct NcclGroupEnd {
  SR_RECORD(kNcclGroupEnd);
  CallInfo call;
  uint32_t depth;  // nesting after the call; 0 = the group's operations are issued now
  uint32_t reserved;
};

struct GraphLaunch {
  SR_RECORD(kGraphLaunch);
  CallInfo call;
  uint64_t graph_exec;
  uint64_t stream;
  uint64_t correlation;
};

// cudaStreamBeginCapture* / cudaStreamEndCapture on the capture's origin stream.
enum CaptureFlags : uint32_t {
  kCaptureModeMask = 0xFF,         // begin: cudaStreamCaptureMode (0 global, 1 thread-local, 2 relaxed)
  kCaptureToGraph = 1u << 8,       // begin: cudaStreamBeginCaptureToGraph (into a graph that may hold nodes)
};
struct StreamCapture {
  SR_RECORD(kStreamCapture);
  CallInfo call;
  uint64_t stream;
  uint32_t begin;  // 1 = cudaStreamBeginCapture, 0 = cudaStreamEndCapture
  uint32_t flags;  // CaptureFlags (was `reserved`, always 0, before 1.1)
  // 1.1: end: the graph the capture made (*pGraph); begin (to graph): the graph captured into.
  // 0 in traces before 1.1, whose bodies end before this field.
  uint64_t graph;
};
// The body size of a 1.0 StreamCapture: the least a reader accepts.
inline constexpr size_t kStreamCaptureFixed10 = 48;
static_assert(offsetof(StreamCapture, graph) == kStreamCaptureFixed10);

// Calls on graph objects that tie a launch's exec to the graph a capture made.
enum class GraphAction : uint32_t {
  kInstantiate = 1,     // cudaGraphInstantiate*, cuGraphInstantiate*: graph -> graph_exec
  kExecUpdate = 2,      // cudaGraphExecUpdate: graph_exec now runs graph's nodes
  kExecDestroy = 3,     // cudaGraphExecDestroy: graph_exec
  kGraphDestroy = 4,    // cudaGraphDestroy: graph
  kCaptureDependencies = 5,  // cudaStreamUpdateCaptureDependencies on `stream`: not modelled
};
enum GraphCallFlags : uint32_t {
  // 1.2, instantiate: the exec may be launched from the device (cudaGraphInstantiateFlagDeviceLaunch);
  // such launches are not seen. 0 in traces before 1.2 (the field was `reserved`).
  kGraphDeviceLaunch = 1u << 0,
};
struct GraphCall {
  SR_RECORD(kGraphCall);
  CallInfo call;
  uint64_t graph;
  uint64_t graph_exec;
  uint64_t stream;
  GraphAction action;
  uint32_t flags;  // GraphCallFlags (was `reserved`, always 0, before 1.2)
};

// The explicit graph API (1.2). One record per call that changes what a graph holds. The
// analyzer rebuilds each graph from them and runs a launch of an exec made from it like a
// captured one (analyzer/graph_captures.h).
enum class GraphEditAction : uint8_t {
  kCreate = 1,       // cudaGraphCreate: `graph`
  kClone = 2,        // cudaGraphClone: `graph` is the clone of `other`
  kAddNode = 3,      // cudaGraphAdd*Node, cudaGraphAddNode: `node` into `graph`, after `count` dependencies
  kSetNode = 4,      // cudaGraph*NodeSetParams, cudaGraphNodeSetParams: `node`'s new parameters (in its graph)
  kExecSetNode = 5,  // cudaGraphExec*NodeSetParams, cudaGraphExecNodeSetParams: in exec `graph` only
  kDestroyNode = 6,  // cudaGraphDestroyNode: `node` and its edges
  kAddEdges = 7,     // cudaGraphAddDependencies: `count` edges from[i] -> to[i] in `graph`
  kRemoveEdges = 8,  // cudaGraphRemoveDependencies
};
// The node's type; the values are CUDA's cudaGraphNodeType.
enum class GraphNodeType : uint8_t {
  kKernel = 0,
  kMemcpy = 1,
  kMemset = 2,
  kHost = 3,
  kChildGraph = 4,
  kEmpty = 5,
  kEventWait = 6,
  kEventRecord = 7,
  kSemaphoreSignal = 8,
  kSemaphoreWait = 9,
  kMemAlloc = 10,
  kMemFree = 11,
  kBatchMemOp = 12,
  kConditional = 13,
  kUnknown = 255,  // a type this tracer does not know
};
enum GraphEditFlags : uint16_t {
  kEditParamsUnknown = 1u << 0,  // the node's memory could not be read from its parameters (symbol, array)
  kEditEdgeNotFull = 1u << 1,    // an edge is not a full dependency (programmatic, or with ports)
  kEditDepsLeftOut = 1u << 2,    // more dependencies than one record holds (4096): some are left out
};
// Body: GraphEdit, then for kAddNode `count` u64 dependencies, for the edge actions `count` u64
// `from` then `count` u64 `to`; then, for kernel, memcpy and memset nodes (add and set), the
// body of the KernelLaunch, Memcpy or Memset record the node's work would be as a call
// (its CallInfo this call's, its stream 0).
struct GraphEdit {
  SR_RECORD(kGraphEdit);
  CallInfo call;
  uint64_t graph;  // kExecSetNode: the exec
  uint64_t node;
  uint64_t other;  // kChildGraph: the child graph; event nodes: the event; kClone: the original
  uint32_t count;
  GraphEditAction action;
  GraphNodeType type;
  uint16_t flags;  // GraphEditFlags
};
static_assert(sizeof(GraphEdit) == 64);

// Device start/end of one op, from CUPTI activity records, joined by correlation id.
struct OpTiming {
  SR_RECORD(kOpTiming);
  uint64_t correlation;
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t device;
  uint32_t reserved;
};

// Notice = {uint32 level; char text[]}: things the tracer wants the report to show
// (CUPTI slot taken, records dropped, unsupported call seen).
enum class NoticeLevel : uint32_t { kInfo = 0, kWarning = 1, kError = 2 };
struct NoticeHead {
  SR_RECORD(kNotice);
  NoticeLevel level;
};

// Capture windows and ring mode (1.3, docs/long-runs.md). A trace that records only part of a run
// (`--steps A:B`, an NVTX range, cudaProfilerStart/Stop, `--ring N`) says where its parts begin
// and end with these records, in call order. At kWindowOpen, the calls before it that were not
// written (`calls_left_out` of them in all, `steps_dropped` whole steps) count as complete and
// ordered before everything after it; the records up to the matching kStateEnd are a snapshot
// of what those calls left behind (live streams, events and their last record, communicators,
// allocations and allocator blocks), each with the CallInfo of the call that made it.
enum class CaptureAction : uint8_t {
  kStep = 1,        // step `step` begins (counted by the step marker)
  kWindowOpen = 2,  // recording starts here; a state snapshot follows
  kStateEnd = 3,    // the snapshot is over
  kWindowClose = 4, // recording stops here
};
enum class CaptureReason : uint8_t {
  kSteps = 1,     // --steps A:B
  kNvtxRange = 2, // inside an NVTX range of a given name
  kProfiler = 3,  // between cudaProfilerStart and cudaProfilerStop
  kRing = 4,      // --ring N: the last N steps
};
struct CaptureMark {
  SR_RECORD(kCaptureMark);
  CallInfo call;
  uint64_t step;            // the step this mark is in (UINT64_MAX: before the first step marker)
  uint64_t steps_dropped;   // kWindowOpen: whole steps before it that were not written
  uint64_t calls_left_out;  // kWindowOpen: calls before it that were not written, in all
  CaptureAction action;
  CaptureReason reason;
  uint16_t reserved0;
  uint32_t reserved1;
};
static_assert(sizeof(CaptureMark) == 64);
inline constexpr uint64_t kNoStep = ~0ull;

#undef SR_RECORD

template <typename T>
concept FixedRecord = std::is_trivially_copyable_v<T> && requires { T::kKind; };

}  // namespace streamrace::trace
