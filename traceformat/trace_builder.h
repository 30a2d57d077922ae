// TraceBuilder: writes well-formed traces from code, through the real TraceWriter. Tests use
// it to build racy and clean programs, the benchmark to generate large traces, and replay to
// turn a schedule into a trace the analyzer can read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "traceformat/trace_file.h"

namespace streamrace::trace {

// One source location for a synthetic stack (Python-style: file, function, line).
struct SiteFrame {
  std::string file;
  std::string function;
  uint32_t line = 0;
  bool python = true;
};

class TraceBuilder {
 public:
  // Streams records to `path` in chunks of about `chunk_bytes`.
  TraceBuilder(const std::string& path, TraceHeader header, WriterOptions opts = {}, size_t chunk_bytes = 1 << 20);
  ~TraceBuilder();

  static TraceHeader default_header(int rank = 0);

  uint32_t str(std::string_view s);
  // Interns a stack (innermost frame first); equal stacks get equal ids.
  uint32_t stack(const std::vector<SiteFrame>& frames);
  // The stack attached to every following call until changed (0 = none).
  TraceBuilder& at(uint32_t stack_id) { cur_stack_ = stack_id; return *this; }
  TraceBuilder& at(std::string_view file, uint32_t line, std::string_view function = "<module>");
  TraceBuilder& thread(uint32_t t) { cur_thread_ = t; return *this; }
  // Host clock for the next call (each call advances it by 1 us).
  TraceBuilder& host_time(uint64_t ns) { ts_ = ns >= 1000 ? ns - 1000 : 0; return *this; }
  uint64_t next_seq() const { return seq_; }

  // Streams and events. Handles are assigned by the builder unless given.
  uint64_t create_stream(uint32_t flags = kStreamNonBlocking, uint32_t device = 0, int32_t priority = 0, uint64_t handle = 0);
  void destroy_stream(uint64_t stream);
  uint64_t create_event(uint32_t flags = 0, uint64_t handle = 0);
  void destroy_event(uint64_t event);
  void record_event(uint64_t event, uint64_t stream, std::string_view api = "cudaEventRecord");
  void wait_event(uint64_t stream, uint64_t event, std::string_view api = "cudaStreamWaitEvent");
  void event_synchronize(uint64_t event);
  void event_query(uint64_t event, int32_t result);
  void stream_synchronize(uint64_t stream);
  void stream_query(uint64_t stream, int32_t result);
  void device_synchronize(uint32_t device = 0, std::string_view api = "cudaDeviceSynchronize");

  // Memory.
  uint64_t alloc(uint64_t bytes, AllocKind kind = AllocKind::kDevice, uint64_t stream = 0, uint32_t device = 0,
                 uint64_t ptr = 0);
  void free(uint64_t ptr, AllocKind kind = AllocKind::kDevice, uint64_t stream = 0, uint32_t device = 0);
  // A PyTorch caching-allocator block event (AllocatorBlock record).
  void allocator_block(BlockAction action, uint64_t addr, uint64_t bytes, uint64_t stream, uint32_t device = 0);

  // Operations; each returns its correlation id.
  uint64_t kernel(uint64_t stream, std::string_view name, const std::vector<uint64_t>& ptrs, uint32_t device = 0,
                  uint32_t flags = kKernelArgsScanned);
  // A launch as the tracer writes it since 1.4: the arguments' hash after the pointers
  // (kKernelArgsHash is added to `flags` unless they hold 1.5's kKernelArgsHash2).
  uint64_t kernel_hashed(uint64_t stream, std::string_view name, const std::vector<uint64_t>& ptrs, uint64_t args_hash,
                         uint32_t flags = kKernelArgsScanned, uint32_t grid_x = 1);
  // A launch inside a cuBLAS call (1.5): the arguments' hash, then the call's byte ranges
  // (kKernelArgsHash and kKernelCallAccesses are added to `flags`).
  uint64_t kernel_in_call(uint64_t stream, std::string_view name, const std::vector<uint64_t>& ptrs,
                          const std::vector<CallAccessEntry>& ranges, uint32_t flags = kKernelArgsScanned);
  // overflowed: 0 exact, kAccessRegion (or true), kAccessHull (records.h)
  void kernel_access(uint64_t correlation, uint64_t addr, uint64_t bytes, AccessDir dir, uint8_t overflowed = 0);
  // A measured interval of kernel node `node` (named `kernel`) of the graph launch `correlation` (1.6).
  void kernel_node_access(uint64_t correlation, uint64_t node, std::string_view kernel, uint64_t addr, uint64_t bytes,
                          AccessDir dir, uint8_t overflowed = 0);
  uint64_t memcpy(uint64_t stream, uint64_t dst, uint64_t src, uint64_t bytes, CopyKind kind = CopyKind::kDeviceToDevice,
                  bool async = true, MemKind src_mem = MemKind::kDevice, MemKind dst_mem = MemKind::kDevice,
                  std::string_view api = "");
  uint64_t memset(uint64_t stream, uint64_t dst, uint64_t bytes, bool async = true, MemKind dst_mem = MemKind::kDevice);
  // A host access caught on a guarded page (--host-accesses): the fault at `addr`, on the page
  // of `page_bytes` holding it; `exact`: the address is the faulting byte's (HostAccess flags).
  void host_access(uint64_t addr, AccessDir dir, uint32_t page_bytes = 4096, bool exact = true);
  uint64_t comm_init(int32_t rank, int32_t nranks, uint64_t comm = 0, uint64_t parent = 0, uint32_t device = 0);
  uint64_t nccl(NcclOp op, uint64_t stream, uint64_t comm, uint64_t send, uint64_t recv, uint64_t count,
                NcclType type = NcclType::kFloat32, int32_t root_or_peer = -1);
  void group_start();
  void group_end();
  uint64_t graph_launch(uint64_t stream, uint64_t graph_exec = 0x6a00);
  // Begin: `flags` are CaptureFlags; end: `graph` is the graph the capture made (0: unnamed,
  // as in traces before 1.1).
  void capture(uint64_t stream, bool begin, uint64_t graph = 0, uint32_t flags = 0);
  // cudaGraphInstantiate (graph -> exec), cudaGraphExecUpdate, destroys, capture dependencies.
  void graph_call(GraphAction action, uint64_t graph, uint64_t graph_exec, uint64_t stream = 0);
  // cudaGraphInstantiateWithFlags with `flags` (GraphCallFlags).
  void instantiate(uint64_t graph, uint64_t graph_exec, uint32_t flags);

  // The explicit graph API (GraphEdit records).
  struct NodeWork {  // what a kernel, memcpy or memset node does (its payload)
    std::string kernel;  // kernel name
    std::vector<uint64_t> ptrs;
    uint32_t kernel_flags = kKernelArgsScanned;
    uint64_t dst = 0, src = 0, bytes = 0;
    CopyKind copy_kind = CopyKind::kDeviceToDevice;
    MemKind src_mem = MemKind::kDevice, dst_mem = MemKind::kDevice;
  };
  void graph_create(uint64_t graph);
  void graph_clone(uint64_t clone, uint64_t original);
  // kAddNode (deps), kSetNode (graph 0) or kExecSetNode (graph = the exec) of one node.
  void graph_node(GraphEditAction action, uint64_t graph, uint64_t node, GraphNodeType type,
                  const std::vector<uint64_t>& deps = {}, uint64_t other = 0, uint16_t flags = 0,
                  const NodeWork* work = nullptr);
  void graph_edges(GraphEditAction action, uint64_t graph, const std::vector<uint64_t>& from,
                   const std::vector<uint64_t>& to, uint16_t flags = 0);
  void graph_destroy_node(uint64_t node);
  // A capture window or ring mark (1.3, docs/long-runs.md).
  void capture_mark(CaptureAction action, CaptureReason reason, uint64_t step, uint64_t steps_dropped = 0,
                    uint64_t calls_left_out = 0);
  void timing(uint64_t correlation, uint64_t start_ns, uint64_t end_ns, uint32_t device = 0);
  void notice(NoticeLevel level, std::string_view text);

  // Writes the end marker and closes the file. Called by the destructor if not before.
  void finish();
  // Writes what is buffered as one chunk without closing (to make truncation tests).
  void flush();

 private:
  CallInfo call(std::string_view api);
  void maybe_flush();

  std::unique_ptr<TraceWriter> writer_;
  ChunkBuilder chunk_;
  size_t chunk_bytes_;
  std::unordered_map<std::string, uint32_t> strings_;
  std::unordered_map<std::string, uint32_t> stacks_;
  uint64_t seq_ = 0;
  uint64_t ts_ = 1'000'000;
  uint64_t next_handle_ = 0x1000;
  uint64_t next_ptr_ = 0x7f00'0000'0000ull;
  uint64_t next_corr_ = 1;
  uint32_t cur_stack_ = 0;
  uint32_t cur_thread_ = 0;
  uint32_t group_depth_ = 0;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> comms_;  // comm -> (rank, nranks)
  std::unordered_map<uint64_t, uint32_t> stream_device_;
};

}  // namespace streamrace::trace
