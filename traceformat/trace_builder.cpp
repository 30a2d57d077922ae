// TraceBuilder: synthetic traces written through the real writer.
#include "traceformat/trace_builder.h"

#include <algorithm>
#include <cstring>

namespace streamrace::trace {

TraceBuilder::TraceBuilder(const std::string& path, TraceHeader header, WriterOptions opts, size_t chunk_bytes)
    : writer_(std::make_unique<TraceWriter>(path, header, opts)), chunk_bytes_(chunk_bytes) {}

TraceBuilder::~TraceBuilder() {
  try {
    finish();
  } catch (...) {
  }
}

TraceHeader TraceBuilder::default_header(int rank) {
  TraceHeader h;
  h.producer = "streamrace test builder";
  h.host = "testhost";
  h.pid = 1000 + rank;
  h.rank = rank;
  h.devices = "0:synthetic";
  return h;
}

uint32_t TraceBuilder::str(std::string_view s) {
  if (s.empty()) return 0;
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second;
  uint32_t id = uint32_t(strings_.size() + 1);
  strings_.emplace(std::string(s), id);
  chunk_.add_string(id, s);
  return id;
}

uint32_t TraceBuilder::stack(const std::vector<SiteFrame>& frames) {
  std::string key;
  for (const auto& f : frames) key += f.file + "\x1f" + f.function + "\x1f" + std::to_string(f.line) + (f.python ? "p" : "n") + "\x1e";
  auto it = stacks_.find(key);
  if (it != stacks_.end()) return it->second;
  std::vector<StackFrame> out;
  for (const auto& f : frames)
    out.push_back(StackFrame{f.python ? FrameKind::kPython : FrameKind::kNative, str(f.file), str(f.function), f.line, 0});
  uint32_t id = uint32_t(stacks_.size() + 1);
  stacks_.emplace(key, id);
  chunk_.add_stack(id, out);
  return id;
}

TraceBuilder& TraceBuilder::at(std::string_view file, uint32_t line, std::string_view function) {
  cur_stack_ = stack({SiteFrame{std::string(file), std::string(function), line, true}});
  return *this;
}

CallInfo TraceBuilder::call(std::string_view api) {
  CallInfo c{};
  c.seq = seq_++;
  ts_ += 1000;
  c.host_ts_ns = ts_;
  c.thread = cur_thread_;
  c.stack_id = cur_stack_;
  c.api_id = str(api);
  return c;
}

void TraceBuilder::maybe_flush() {
  if (chunk_.bytes() >= chunk_bytes_) flush();
}

void TraceBuilder::flush() {
  if (!writer_ || chunk_.empty()) return;
  writer_->write_chunk(chunk_);
  chunk_.clear();
}

void TraceBuilder::finish() {
  if (!writer_) return;
  flush();
  writer_->close();
  writer_.reset();
}

uint64_t TraceBuilder::create_stream(uint32_t flags, uint32_t device, int32_t priority, uint64_t handle) {
  if (!handle) handle = next_handle_++;
  StreamCreate r{call("cudaStreamCreateWithPriority"), handle, device, flags, priority, 0};
  chunk_.add(r);
  stream_device_[handle] = device;
  maybe_flush();
  return handle;
}

void TraceBuilder::destroy_stream(uint64_t stream) {
  chunk_.add(StreamDestroy{call("cudaStreamDestroy"), stream});
  maybe_flush();
}

uint64_t TraceBuilder::create_event(uint32_t flags, uint64_t handle) {
  if (!handle) handle = next_handle_++;
  chunk_.add(EventCreate{call("cudaEventCreateWithFlags"), handle, flags, 0});
  maybe_flush();
  return handle;
}

void TraceBuilder::destroy_event(uint64_t event) {
  chunk_.add(EventDestroy{call("cudaEventDestroy"), event});
  maybe_flush();
}

void TraceBuilder::record_event(uint64_t event, uint64_t stream, std::string_view api) {
  chunk_.add(EventRecord{call(api), event, stream});
  maybe_flush();
}

void TraceBuilder::wait_event(uint64_t stream, uint64_t event, std::string_view api) {
  chunk_.add(StreamWaitEvent{call(api), stream, event});
  maybe_flush();
}

void TraceBuilder::event_synchronize(uint64_t event) {
  chunk_.add(EventSynchronize{call("cudaEventSynchronize"), event});
  maybe_flush();
}

void TraceBuilder::event_query(uint64_t event, int32_t result) {
  chunk_.add(EventQuery{call("cudaEventQuery"), event, result, 0});
  maybe_flush();
}

void TraceBuilder::stream_synchronize(uint64_t stream) {
  chunk_.add(StreamSynchronize{call("cudaStreamSynchronize"), stream});
  maybe_flush();
}

void TraceBuilder::stream_query(uint64_t stream, int32_t result) {
  chunk_.add(StreamQuery{call("cudaStreamQuery"), stream, result, 0});
  maybe_flush();
}

void TraceBuilder::device_synchronize(uint32_t device, std::string_view api) {
  chunk_.add(DeviceSynchronize{call(api), device, 0});
  maybe_flush();
}

uint64_t TraceBuilder::alloc(uint64_t bytes, AllocKind kind, uint64_t stream, uint32_t device, uint64_t ptr) {
  if (!ptr) {
    ptr = next_ptr_;
    next_ptr_ += (bytes + 0xFFFF) & ~uint64_t(0xFFFF);
  }
  const char* api = kind == AllocKind::kAsync ? "cudaMallocAsync"
                    : kind == AllocKind::kHostPinned ? "cudaHostAlloc"
                    : kind == AllocKind::kManaged ? "cudaMallocManaged"
                    : kind == AllocKind::kVmmMap ? "cuMemMap" : "cudaMalloc";
  chunk_.add(Alloc{call(api), ptr, bytes, stream, device, kind, 0, 0});
  maybe_flush();
  return ptr;
}

void TraceBuilder::free(uint64_t ptr, AllocKind kind, uint64_t stream, uint32_t device) {
  const char* api = kind == AllocKind::kAsync ? "cudaFreeAsync"
                    : kind == AllocKind::kHostPinned ? "cudaFreeHost"
                    : kind == AllocKind::kVmmMap ? "cuMemUnmap" : "cudaFree";
  chunk_.add(Free{call(api), ptr, 0, stream, device, kind, 0, 0});
  maybe_flush();
}

void TraceBuilder::allocator_block(BlockAction action, uint64_t addr, uint64_t bytes, uint64_t stream, uint32_t device) {
  const std::string api = std::string("CUDACachingAllocator ") + block_action_name(action);
  chunk_.add(AllocatorBlock{call(api), addr, bytes, stream, device, action, BlockAllocator::kTorchCaching, 0});
  maybe_flush();
}

uint64_t TraceBuilder::kernel(uint64_t stream, std::string_view name, const std::vector<uint64_t>& ptrs,
                              uint32_t device, uint32_t flags) {
  KernelLaunchHead h{};
  h.call = call("cudaLaunchKernel");
  h.stream = stream;
  h.correlation = next_corr_++;
  h.device = device;
  h.name_id = str(name);
  h.grid[0] = h.grid[1] = h.grid[2] = 1;
  h.block[0] = 128;
  h.block[1] = h.block[2] = 1;
  h.flags = flags;
  chunk_.add_kernel(h, ptrs);
  maybe_flush();
  return h.correlation;
}

uint64_t TraceBuilder::kernel_hashed(uint64_t stream, std::string_view name, const std::vector<uint64_t>& ptrs,
                                     uint64_t args_hash, uint32_t flags, uint32_t grid_x) {
  KernelLaunchHead h{};
  h.call = call("cudaLaunchKernel");
  h.stream = stream;
  h.correlation = next_corr_++;
  h.name_id = str(name);
  h.grid[0] = grid_x;
  h.grid[1] = h.grid[2] = 1;
  h.block[0] = 128;
  h.block[1] = h.block[2] = 1;
  h.flags = (flags & kKernelArgsHash2) ? flags : flags | kKernelArgsHash;
  h.nptrs = uint32_t(ptrs.size());
  std::vector<uint64_t> words = ptrs;
  words.push_back(args_hash);
  chunk_.add_raw(RecordKind::kKernelLaunch, &h, sizeof(h), words.data(), words.size() * sizeof(uint64_t));
  maybe_flush();
  return h.correlation;
}

uint64_t TraceBuilder::kernel_in_call(uint64_t stream, std::string_view name, const std::vector<uint64_t>& ptrs,
                                      const std::vector<CallAccessEntry>& ranges, uint32_t flags) {
  KernelLaunchHead h{};
  h.call = call("cudaLaunchKernel");
  h.stream = stream;
  h.correlation = next_corr_++;
  h.name_id = str(name);
  h.grid[0] = h.grid[1] = h.grid[2] = 1;
  h.block[0] = 128;
  h.block[1] = h.block[2] = 1;
  h.flags = flags | kKernelArgsHash | kKernelCallAccesses;
  h.nptrs = uint32_t(ptrs.size());
  std::vector<uint64_t> words = ptrs;
  words.push_back(0x5eed);  // the arguments' hash
  words.push_back(ranges.size());
  for (const CallAccessEntry& r : ranges) words.insert(words.end(), {r.addr, r.bytes, r.info});
  chunk_.add_raw(RecordKind::kKernelLaunch, &h, sizeof(h), words.data(), words.size() * sizeof(uint64_t));
  maybe_flush();
  return h.correlation;
}

void TraceBuilder::kernel_access(uint64_t correlation, uint64_t addr, uint64_t bytes, AccessDir dir, uint8_t overflowed) {
  chunk_.add(KernelAccess{correlation, addr, bytes, dir, overflowed, 0, 0});
  maybe_flush();
}

void TraceBuilder::kernel_node_access(uint64_t correlation, uint64_t node, std::string_view kernel, uint64_t addr,
                                      uint64_t bytes, AccessDir dir, uint8_t overflowed) {
  KernelNodeAccess r{};
  r.correlation = correlation;
  r.node = node;
  r.addr = addr;
  r.bytes = bytes;
  r.dir = dir;
  r.overflowed = overflowed;
  r.name_id = str(kernel);
  chunk_.add(r);
  maybe_flush();
}

uint64_t TraceBuilder::memcpy(uint64_t stream, uint64_t dst, uint64_t src, uint64_t bytes, CopyKind kind, bool async,
                              MemKind src_mem, MemKind dst_mem, std::string_view api) {
  Memcpy r{};
  r.call = call(api.empty() ? (async ? "cudaMemcpyAsync" : "cudaMemcpy") : api);
  r.stream = stream;
  r.correlation = next_corr_++;
  r.dst = dst;
  r.src = src;
  r.bytes = bytes;
  r.copy_kind = kind;
  r.is_async = async;
  r.src_mem = src_mem;
  r.dst_mem = dst_mem;
  chunk_.add(r);
  maybe_flush();
  return r.correlation;
}

uint64_t TraceBuilder::memset(uint64_t stream, uint64_t dst, uint64_t bytes, bool async, MemKind dst_mem) {
  Memset r{};
  r.call = call(async ? "cudaMemsetAsync" : "cudaMemset");
  r.stream = stream;
  r.correlation = next_corr_++;
  r.dst = dst;
  r.bytes = bytes;
  r.is_async = async;
  r.dst_mem = dst_mem;
  chunk_.add(r);
  maybe_flush();
  return r.correlation;
}

void TraceBuilder::host_access(uint64_t addr, AccessDir dir, uint32_t page_bytes, bool exact) {
  HostAccess r{};
  r.call = call(dir == AccessDir::kRead ? "host read" : dir == AccessDir::kWrite ? "host write" : "host access");
  r.addr = addr;
  r.page = page_bytes ? addr / page_bytes * page_bytes : addr;
  r.page_bytes = page_bytes;
  r.dir = dir;
  r.flags = exact ? uint8_t(kHostAccessExactAddr) : uint8_t(0);
  chunk_.add(r);
  maybe_flush();
}

void TraceBuilder::capture_mark(CaptureAction action, CaptureReason reason, uint64_t step, uint64_t steps_dropped,
                                uint64_t calls_left_out) {
  CaptureMark m{};
  m.call = call(action == CaptureAction::kWindowClose ? "cudaProfilerStop" : "nvtxRangePushA");
  m.action = action;
  m.reason = reason;
  m.step = step;
  m.steps_dropped = steps_dropped;
  m.calls_left_out = calls_left_out;
  chunk_.add(m);
  maybe_flush();
}

uint64_t TraceBuilder::comm_init(int32_t rank, int32_t nranks, uint64_t comm, uint64_t parent, uint32_t device) {
  if (!comm) comm = next_handle_++;
  chunk_.add(NcclCommInit{call(parent ? "ncclCommSplit" : "ncclCommInitRank"), comm, parent, rank, nranks, device, 0});
  comms_[comm] = {rank, nranks};
  maybe_flush();
  return comm;
}

uint64_t TraceBuilder::nccl(NcclOp op, uint64_t stream, uint64_t comm, uint64_t send, uint64_t recv, uint64_t count,
                            NcclType type, int32_t root_or_peer) {
  NcclCall r{};
  r.call = call(nccl_op_name(op));
  r.stream = stream;
  r.comm = comm;
  r.sendbuff = send;
  r.recvbuff = recv;
  r.count = count;
  r.correlation = next_corr_++;
  r.root_or_peer = root_or_peer;
  auto it = comms_.find(comm);
  r.rank = it == comms_.end() ? 0 : it->second.first;
  r.nranks = it == comms_.end() ? 1 : it->second.second;
  r.group_depth = group_depth_;
  r.op = op;
  r.datatype = type;
  chunk_.add(r);
  maybe_flush();
  return r.correlation;
}

void TraceBuilder::group_start() {
  ++group_depth_;
  chunk_.add(NcclGroupStart{call("ncclGroupStart"), group_depth_, 0});
  maybe_flush();
}

void TraceBuilder::group_end() {
  if (group_depth_) --group_depth_;
  chunk_.add(NcclGroupEnd{call("ncclGroupEnd"), group_depth_, 0});
  maybe_flush();
}

uint64_t TraceBuilder::graph_launch(uint64_t stream, uint64_t graph_exec) {
  GraphLaunch r{call("cudaGraphLaunch"), graph_exec, stream, next_corr_++};
  chunk_.add(r);
  maybe_flush();
  return r.correlation;
}

void TraceBuilder::capture(uint64_t stream, bool begin, uint64_t graph, uint32_t flags) {
  const char* api = !begin ? "cudaStreamEndCapture"
                    : (flags & kCaptureToGraph) ? "cudaStreamBeginCaptureToGraph"
                                                : "cudaStreamBeginCapture";
  chunk_.add(StreamCapture{call(api), stream, begin ? 1u : 0u, flags, graph});
  maybe_flush();
}

void TraceBuilder::graph_call(GraphAction action, uint64_t graph, uint64_t graph_exec, uint64_t stream) {
  const char* api = "cudaGraphInstantiate";
  switch (action) {
    case GraphAction::kInstantiate: break;
    case GraphAction::kExecUpdate: api = "cudaGraphExecUpdate"; break;
    case GraphAction::kExecDestroy: api = "cudaGraphExecDestroy"; break;
    case GraphAction::kGraphDestroy: api = "cudaGraphDestroy"; break;
    case GraphAction::kCaptureDependencies: api = "cudaStreamUpdateCaptureDependencies"; break;
  }
  chunk_.add(GraphCall{call(api), graph, graph_exec, stream, action, 0});
  maybe_flush();
}

void TraceBuilder::instantiate(uint64_t graph, uint64_t graph_exec, uint32_t flags) {
  chunk_.add(GraphCall{call("cudaGraphInstantiateWithFlags"), graph, graph_exec, 0, GraphAction::kInstantiate, flags});
  maybe_flush();
}

namespace {
const char* graph_node_api(GraphEditAction action, GraphNodeType type) {
  const bool add = action == GraphEditAction::kAddNode, exec = action == GraphEditAction::kExecSetNode;
  switch (type) {
    case GraphNodeType::kKernel:
      return add ? "cudaGraphAddKernelNode" : exec ? "cudaGraphExecKernelNodeSetParams" : "cudaGraphKernelNodeSetParams";
    case GraphNodeType::kMemcpy:
      return add ? "cudaGraphAddMemcpyNode1D" : exec ? "cudaGraphExecMemcpyNodeSetParams1D" : "cudaGraphMemcpyNodeSetParams1D";
    case GraphNodeType::kMemset:
      return add ? "cudaGraphAddMemsetNode" : exec ? "cudaGraphExecMemsetNodeSetParams" : "cudaGraphMemsetNodeSetParams";
    case GraphNodeType::kHost: return add ? "cudaGraphAddHostNode" : "cudaGraphHostNodeSetParams";
    case GraphNodeType::kChildGraph: return add ? "cudaGraphAddChildGraphNode" : "cudaGraphExecChildGraphNodeSetParams";
    case GraphNodeType::kEmpty: return "cudaGraphAddEmptyNode";
    case GraphNodeType::kEventWait: return add ? "cudaGraphAddEventWaitNode" : "cudaGraphEventWaitNodeSetEvent";
    case GraphNodeType::kEventRecord: return add ? "cudaGraphAddEventRecordNode" : "cudaGraphEventRecordNodeSetEvent";
    default: return add ? "cudaGraphAddNode" : exec ? "cudaGraphExecNodeSetParams" : "cudaGraphNodeSetParams";
  }
}
}  // namespace

void TraceBuilder::graph_create(uint64_t graph) {
  chunk_.add(GraphEdit{call("cudaGraphCreate"), graph, 0, 0, 0, GraphEditAction::kCreate, GraphNodeType::kEmpty, 0});
  maybe_flush();
}

void TraceBuilder::graph_clone(uint64_t clone, uint64_t original) {
  chunk_.add(GraphEdit{call("cudaGraphClone"), clone, 0, original, 0, GraphEditAction::kClone, GraphNodeType::kEmpty, 0});
  maybe_flush();
}

void TraceBuilder::graph_node(GraphEditAction action, uint64_t graph, uint64_t node, GraphNodeType type,
                              const std::vector<uint64_t>& deps, uint64_t other, uint16_t flags, const NodeWork* work) {
  GraphEdit g{call(graph_node_api(action, type)), graph, node, other, 0, action, type, flags};
  std::vector<uint8_t> tail;
  if (action == GraphEditAction::kAddNode) {
    g.count = uint32_t(deps.size());
    tail.resize(deps.size() * sizeof(uint64_t));
    if (!deps.empty()) std::memcpy(tail.data(), deps.data(), tail.size());
  }
  auto append = [&](const void* p, size_t n) {
    const size_t at = tail.size();
    tail.resize(at + n);
    std::memcpy(tail.data() + at, p, n);
  };
  if (work && type == GraphNodeType::kKernel) {
    KernelLaunchHead h{};
    h.call = g.call;
    h.correlation = next_corr_++;
    h.name_id = str(work->kernel);
    h.grid[0] = h.grid[1] = h.grid[2] = 1;
    h.block[0] = 128;
    h.block[1] = h.block[2] = 1;
    h.flags = work->kernel_flags;
    h.nptrs = uint32_t(work->ptrs.size());
    append(&h, sizeof(h));
    if (!work->ptrs.empty()) append(work->ptrs.data(), work->ptrs.size() * sizeof(uint64_t));
  } else if (work && type == GraphNodeType::kMemcpy) {
    Memcpy m{};
    m.call = g.call;
    m.correlation = next_corr_++;
    m.dst = work->dst;
    m.src = work->src;
    m.bytes = work->bytes;
    m.copy_kind = work->copy_kind;
    m.is_async = 1;
    m.src_mem = work->src_mem;
    m.dst_mem = work->dst_mem;
    append(&m, sizeof(m));
  } else if (work && type == GraphNodeType::kMemset) {
    Memset m{};
    m.call = g.call;
    m.correlation = next_corr_++;
    m.dst = work->dst;
    m.bytes = work->bytes;
    m.is_async = 1;
    m.dst_mem = work->dst_mem;
    append(&m, sizeof(m));
  }
  chunk_.add_raw(RecordKind::kGraphEdit, &g, sizeof(g), tail.data(), tail.size());
  maybe_flush();
}

void TraceBuilder::graph_edges(GraphEditAction action, uint64_t graph, const std::vector<uint64_t>& from,
                               const std::vector<uint64_t>& to, uint16_t flags) {
  const char* api = action == GraphEditAction::kAddEdges ? "cudaGraphAddDependencies" : "cudaGraphRemoveDependencies";
  const size_t n = std::min(from.size(), to.size());
  GraphEdit g{call(api), graph, 0, 0, uint32_t(n), action, GraphNodeType::kEmpty, flags};
  std::vector<uint64_t> tail(from.begin(), from.begin() + n);
  tail.insert(tail.end(), to.begin(), to.begin() + n);
  chunk_.add_raw(RecordKind::kGraphEdit, &g, sizeof(g), tail.data(), tail.size() * sizeof(uint64_t));
  maybe_flush();
}

void TraceBuilder::graph_destroy_node(uint64_t node) {
  chunk_.add(GraphEdit{call("cudaGraphDestroyNode"), 0, node, 0, 0, GraphEditAction::kDestroyNode, GraphNodeType::kEmpty, 0});
  maybe_flush();
}

void TraceBuilder::timing(uint64_t correlation, uint64_t start_ns, uint64_t end_ns, uint32_t device) {
  chunk_.add(OpTiming{correlation, start_ns, end_ns, device, 0});
  maybe_flush();
}

void TraceBuilder::notice(NoticeLevel level, std::string_view text) {
  chunk_.add_notice(level, text);
  maybe_flush();
}

}  // namespace streamrace::trace
