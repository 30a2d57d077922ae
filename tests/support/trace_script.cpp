// The trace-script interpreter: each line is one TraceBuilder call (see trace_script.h).
#include "support/trace_script.h"

#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "traceformat/trace_builder.h"

namespace streamrace::testing {
namespace {

namespace fs = std::filesystem;
using trace::AllocKind;
using trace::CopyKind;
using trace::MemKind;
using trace::NcclOp;
using trace::NcclType;
using trace::TraceBuilder;

// "a b=1 \"k(float*, int)\"" -> {"a", "b=1", "k(float*, int)"}; '#' starts a comment.
std::vector<std::string> tokenize(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    if (std::isspace(static_cast<unsigned char>(line[i]))) {
      ++i;
      continue;
    }
    if (line[i] == '#') break;
    std::string tok;
    if (line[i] == '"') {
      size_t end = line.find('"', i + 1);
      if (end == std::string::npos) throw std::runtime_error("unterminated quote");
      tok = line.substr(i + 1, end - i - 1);
      i = end + 1;
    } else {
      while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) tok += line[i++];
    }
    out.push_back(tok);
  }
  return out;
}

// "AllReduce", "all-reduce", "all_reduce" -> "allreduce".
std::string fold(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '-' && c != '_') out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <typename E>
E lookup(const std::map<std::string, E>& table, const std::string& name, const char* what) {
  auto it = table.find(fold(name));
  if (it == table.end()) throw std::runtime_error(std::string("unknown ") + what + " '" + name + "'");
  return it->second;
}

const std::map<std::string, AllocKind> kAllocKinds{
    {"device", AllocKind::kDevice},   {"async", AllocKind::kAsync},           {"managed", AllocKind::kManaged},
    {"pinned", AllocKind::kHostPinned}, {"registered", AllocKind::kHostRegistered}, {"vmm", AllocKind::kVmmMap},
    {"array", AllocKind::kArray}};
const std::map<std::string, CopyKind> kCopyKinds{{"h2h", CopyKind::kHostToHost},
                                                 {"h2d", CopyKind::kHostToDevice},
                                                 {"d2h", CopyKind::kDeviceToHost},
                                                 {"d2d", CopyKind::kDeviceToDevice},
                                                 {"default", CopyKind::kDefault}};
const std::map<std::string, MemKind> kMemKinds{{"unknown", MemKind::kUnknown},
                                               {"device", MemKind::kDevice},
                                               {"pinned", MemKind::kPinnedHost},
                                               {"pageable", MemKind::kPageableHost},
                                               {"managed", MemKind::kManaged}};
const std::map<std::string, NcclOp> kNcclOps{
    {"allreduce", NcclOp::kAllReduce}, {"broadcast", NcclOp::kBroadcast}, {"reduce", NcclOp::kReduce},
    {"reducescatter", NcclOp::kReduceScatter}, {"allgather", NcclOp::kAllGather}, {"alltoall", NcclOp::kAlltoAll},
    {"gather", NcclOp::kGather}, {"scatter", NcclOp::kScatter}, {"send", NcclOp::kSend}, {"recv", NcclOp::kRecv}};
const std::map<std::string, NcclType> kNcclTypes{
    {"int8", NcclType::kInt8},       {"uint8", NcclType::kUint8},       {"int32", NcclType::kInt32},
    {"uint32", NcclType::kUint32},   {"int64", NcclType::kInt64},       {"uint64", NcclType::kUint64},
    {"float16", NcclType::kFloat16}, {"float32", NcclType::kFloat32},   {"float64", NcclType::kFloat64},
    {"bfloat16", NcclType::kBfloat16}, {"float8e4m3", NcclType::kFloat8e4m3}, {"float8e5m2", NcclType::kFloat8e5m2}};

uint64_t number(const std::string& s) {
  size_t used = 0;
  uint64_t v = 0;
  try {
    v = std::stoull(s, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) throw std::runtime_error("not a number: '" + s + "'");
  return v;
}

// One line's words: positional arguments and key=value options.
struct Args {
  std::vector<std::string> pos;
  std::map<std::string, std::string> opt;
  size_t used = 0;

  const std::string& at(size_t i, const char* what) const {
    if (i >= pos.size()) throw std::runtime_error(std::string("missing ") + what);
    return pos[i];
  }
  bool flag(const std::string& word) {
    for (auto it = pos.begin(); it != pos.end(); ++it)
      if (*it == word) {
        pos.erase(it);
        return true;
      }
    return false;
  }
  std::string option(const std::string& key, const std::string& fallback) {
    auto it = opt.find(key);
    if (it == opt.end()) return fallback;
    std::string v = it->second;
    opt.erase(it);
    return v;
  }
  void done(size_t positional) const {
    if (pos.size() > positional) throw std::runtime_error("unexpected argument '" + pos[positional] + "'");
    if (!opt.empty()) throw std::runtime_error("unknown option '" + opt.begin()->first + "'");
  }
};

class Interpreter {
 public:
  Interpreter(fs::path out_dir, std::string stem) : out_dir_(std::move(out_dir)), stem_(std::move(stem)) {}

  void line(const std::string& verb, Args a);
  std::vector<std::string> finish() {
    if (builder_) builder_->finish();
    builder_.reset();
    return paths_;
  }

 private:
  TraceBuilder& b() {
    if (!builder_) open(0, stem_ + ".srace");
    return *builder_;
  }
  void open(int rank, const std::string& name) {
    if (builder_) builder_->finish();
    names_.clear();
    paths_.push_back((out_dir_ / name).string());
    builder_ = std::make_unique<TraceBuilder>(paths_.back(), TraceBuilder::default_header(rank));
  }
  void bind(const std::string& name, uint64_t value) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) || name.find_first_of("+:=") != std::string::npos)
      throw std::runtime_error("bad name '" + name + "'");
    if (!names_.emplace(name, value).second) throw std::runtime_error("name '" + name + "' bound twice");
  }
  uint64_t name(const std::string& n) const {
    auto it = names_.find(n);
    if (it == names_.end()) throw std::runtime_error("unknown name '" + n + "'");
    return it->second;
  }
  // NAME, NAME+N or a number.
  uint64_t addr(const std::string& s) const {
    if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) return number(s);
    auto plus = s.find('+');
    if (plus == std::string::npos) return name(s);
    return name(s.substr(0, plus)) + number(s.substr(plus + 1));
  }
  // NAME, legacy[:DEVICE], per-thread:THREAD[:DEVICE] or a number.
  uint64_t stream(const std::string& s) const {
    auto field = [&](size_t i) -> uint32_t {
      size_t start = 0;
      for (size_t k = 0; k < i; ++k) {
        start = s.find(':', start);
        if (start == std::string::npos) return 0;
        ++start;
      }
      size_t end = s.find(':', start);
      return uint32_t(number(s.substr(start, end == std::string::npos ? std::string::npos : end - start)));
    };
    if (s == "legacy" || s.rfind("legacy:", 0) == 0) return trace::legacy_stream(field(1));
    if (s.rfind("per-thread:", 0) == 0) return trace::per_thread_stream(field(1), field(2));
    return addr(s);
  }

  fs::path out_dir_;
  std::string stem_;
  std::unique_ptr<TraceBuilder> builder_;
  std::unordered_map<std::string, uint64_t> names_;
  std::vector<std::string> paths_;
  bool ranked_ = false;
  uint64_t next_graph_ = 0x6b00, next_exec_ = 0x6c00;  // handles for capture-end and instantiate
  uint64_t next_node_ = 0x6e00;                         // explicit graph nodes
  // `after=A,B` of a node statement: the nodes it depends on.
  std::vector<uint64_t> deps(Args& a) {
    std::vector<uint64_t> out;
    std::string list = a.option("after", "");
    size_t at = 0;
    while (at < list.size()) {
      size_t comma = list.find(',', at);
      if (comma == std::string::npos) comma = list.size();
      out.push_back(addr(list.substr(at, comma - at)));
      at = comma + 1;
    }
    return out;
  }
  // A node statement: `node-KIND GRAPH NODE ...` adds (binding NODE), `set-KIND NODE ...` sets
  // it in its graph, `exec-set-KIND EXEC NODE ...` in an exec.
  void node_statement(const std::string& verb, Args& a);
};

void Interpreter::node_statement(const std::string& verb, Args& a) {
  using trace::GraphEditAction;
  using trace::GraphNodeType;
  static const std::map<std::string, GraphNodeType> kTypes = {
      {"kernel", GraphNodeType::kKernel},        {"memcpy", GraphNodeType::kMemcpy},
      {"memset", GraphNodeType::kMemset},        {"host", GraphNodeType::kHost},
      {"child", GraphNodeType::kChildGraph},     {"empty", GraphNodeType::kEmpty},
      {"wait", GraphNodeType::kEventWait},       {"record", GraphNodeType::kEventRecord},
      {"mem-alloc", GraphNodeType::kMemAlloc},   {"mem-free", GraphNodeType::kMemFree},
      {"conditional", GraphNodeType::kConditional}};
  const bool add = verb.rfind("node-", 0) == 0, exec = verb.rfind("exec-set-", 0) == 0;
  const std::string kind = verb.substr(add ? 5 : exec ? 9 : 4);
  const GraphNodeType type = lookup(kTypes, kind, "node kind");
  const GraphEditAction action = add ? GraphEditAction::kAddNode : exec ? GraphEditAction::kExecSetNode : GraphEditAction::kSetNode;
  std::vector<uint64_t> after = deps(a);
  const uint16_t flags = a.flag("params-unknown") ? uint16_t(trace::kEditParamsUnknown) : uint16_t(0);
  size_t i = 0;
  uint64_t graph = 0, node = 0;
  std::string node_name;
  if (add || exec) graph = addr(a.at(i++, add ? "graph" : "exec"));
  if (add) {
    node_name = a.at(i++, "node name");
    node = next_node_++;
  } else {
    node = addr(a.at(i++, "node"));
  }
  TraceBuilder::NodeWork work;
  const TraceBuilder::NodeWork* w = nullptr;
  uint64_t other = 0;
  switch (type) {
    case GraphNodeType::kKernel:
      work.kernel = a.at(i++, "kernel name");
      while (i < a.pos.size()) work.ptrs.push_back(addr(a.pos[i++]));
      w = &work;
      break;
    case GraphNodeType::kMemcpy:
      work.copy_kind = lookup(kCopyKinds, a.option("kind", "d2d"), "copy kind");
      work.src_mem = lookup(kMemKinds, a.option("src", "device"), "memory kind");
      work.dst_mem = lookup(kMemKinds, a.option("dst", "device"), "memory kind");
      work.dst = addr(a.at(i++, "destination"));
      work.src = addr(a.at(i++, "source"));
      work.bytes = number(a.at(i++, "bytes"));
      w = &work;
      break;
    case GraphNodeType::kMemset:
      work.dst = addr(a.at(i++, "destination"));
      work.bytes = number(a.at(i++, "bytes"));
      w = &work;
      break;
    case GraphNodeType::kEventRecord:
    case GraphNodeType::kEventWait:
      other = name(a.at(i++, "event"));
      break;
    case GraphNodeType::kChildGraph:
      if (add) other = addr(a.at(i++, "child graph"));
      break;
    default:
      break;
  }
  a.done(i);
  if (flags & trace::kEditParamsUnknown) w = nullptr;
  if (add) bind(node_name, node);
  b().graph_node(action, graph, node, type, after, other, flags, w);
}

void Interpreter::line(const std::string& verb, Args a) {
  if (verb == "rank") {
    int rank = int(number(a.at(0, "rank")));
    a.done(1);
    if (!ranked_ && builder_) throw std::runtime_error("`rank` must come before the first call");
    ranked_ = true;
    open(rank, stem_ + ".rank" + std::to_string(rank) + ".srace");
  } else if (verb == "stream") {
    bool blocking = a.flag("blocking");
    a.flag("nonblocking");
    uint32_t device = uint32_t(number(a.option("device", "0")));
    int32_t priority = int32_t(std::stol(a.option("priority", "0")));
    const std::string n = a.at(0, "stream name");
    a.done(1);
    bind(n, b().create_stream(blocking ? 0u : uint32_t(trace::kStreamNonBlocking), device, priority));
  } else if (verb == "destroy-stream") {
    b().destroy_stream(stream(a.at(0, "stream")));
    a.done(1);
  } else if (verb == "event") {
    uint32_t flags = uint32_t(number(a.option("flags", "0")));
    // handle=NAME|N: the handle of an event destroyed earlier, as cudaEventCreate may return again.
    const std::string h = a.option("handle", "0");
    const uint64_t handle = addr(h);
    const std::string n = a.at(0, "event name");
    a.done(1);
    bind(n, b().create_event(flags, handle));
  } else if (verb == "destroy-event") {
    b().destroy_event(name(a.at(0, "event")));
    a.done(1);
  } else if (verb == "alloc") {
    AllocKind kind = lookup(kAllocKinds, a.option("kind", "device"), "allocation kind");
    std::string s = a.option("stream", "");
    uint32_t device = uint32_t(number(a.option("device", "0")));
    std::string ptr = a.option("ptr", "");
    const std::string n = a.at(0, "allocation name");
    uint64_t bytes = number(a.at(1, "bytes"));
    a.done(2);
    uint64_t p = ptr.empty() ? 0 : addr(ptr);
    bind(n, b().alloc(bytes, kind, s.empty() ? 0 : stream(s), device, p));
  } else if (verb == "free") {
    AllocKind kind = lookup(kAllocKinds, a.option("kind", "device"), "allocation kind");
    std::string s = a.option("stream", "");
    uint32_t device = uint32_t(number(a.option("device", "0")));
    uint64_t p = addr(a.at(0, "address"));
    a.done(1);
    b().free(p, kind, s.empty() ? 0 : stream(s), device);
  } else if (verb == "segment") {
    // A caching-allocator segment: the allocator's own event for a traced allocation.
    uint32_t device = uint32_t(number(a.option("device", "0")));
    const std::string& al = a.at(0, "allocation");
    uint64_t bytes = number(a.at(1, "bytes"));
    a.done(2);
    b().allocator_block(trace::BlockAction::kSegmentAlloc, addr(al), bytes, 0, device);
  } else if (verb == "block") {
    // block NAME ADDRESS BYTES stream=S: the allocator hands out a tensor on stream S.
    uint32_t device = uint32_t(number(a.option("device", "0")));
    uint64_t s = stream(a.option("stream", "legacy"));
    const std::string n = a.at(0, "block name");
    uint64_t p = addr(a.at(1, "address"));
    uint64_t bytes = number(a.at(2, "bytes"));
    a.done(3);
    b().allocator_block(trace::BlockAction::kAlloc, p, bytes, s, device);
    bind(n, p);
  } else if (verb == "block-free") {
    // block-free ADDRESS BYTES stream=S [deferred]: the program frees a tensor; the
    // allocator completes the free at once unless `deferred` (record_stream uses pending).
    bool deferred = a.flag("deferred");
    uint32_t device = uint32_t(number(a.option("device", "0")));
    uint64_t s = stream(a.option("stream", "legacy"));
    uint64_t p = addr(a.at(0, "address"));
    uint64_t bytes = number(a.at(1, "bytes"));
    a.done(2);
    b().allocator_block(trace::BlockAction::kFreeRequested, p, bytes, s, device);
    if (!deferred) b().allocator_block(trace::BlockAction::kFreeCompleted, p, bytes, s, device);
  } else if (verb == "block-free-completed") {
    uint32_t device = uint32_t(number(a.option("device", "0")));
    uint64_t s = stream(a.option("stream", "legacy"));
    uint64_t p = addr(a.at(0, "address"));
    uint64_t bytes = number(a.at(1, "bytes"));
    a.done(2);
    b().allocator_block(trace::BlockAction::kFreeCompleted, p, bytes, s, device);
  } else if (verb == "comm") {
    const std::string n = a.at(0, "communicator name");
    int32_t rank = int32_t(number(a.at(1, "rank")));
    int32_t nranks = int32_t(number(a.at(2, "nranks")));
    a.done(3);
    bind(n, b().comm_init(rank, nranks));
  } else if (verb == "at") {
    const std::string& where = a.at(0, "FILE:LINE or none");
    if (where == "none") {
      a.done(1);
      b().at(0);
      return;
    }
    auto colon = where.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("expected FILE:LINE, got '" + where + "'");
    std::string function = a.pos.size() > 1 ? a.pos[1] : "<module>";
    a.done(2);
    b().at(where.substr(0, colon), uint32_t(number(where.substr(colon + 1))), function);
  } else if (verb == "thread") {
    b().thread(uint32_t(number(a.at(0, "thread"))));
    a.done(1);
  } else if (verb == "memset") {
    bool sync = a.flag("sync");
    MemKind dst_mem = lookup(kMemKinds, a.option("dst", "device"), "memory kind");
    uint64_t s = stream(a.at(0, "stream")), dst = addr(a.at(1, "destination")), bytes = number(a.at(2, "bytes"));
    a.done(3);
    b().memset(s, dst, bytes, !sync, dst_mem);
  } else if (verb == "memcpy") {
    bool sync = a.flag("sync");
    CopyKind kind = lookup(kCopyKinds, a.option("kind", "d2d"), "copy kind");
    MemKind src_mem = lookup(kMemKinds, a.option("src", "device"), "memory kind");
    MemKind dst_mem = lookup(kMemKinds, a.option("dst", "device"), "memory kind");
    std::string api = a.option("api", "");
    uint64_t s = stream(a.at(0, "stream")), dst = addr(a.at(1, "destination")), src = addr(a.at(2, "source"));
    uint64_t bytes = number(a.at(3, "bytes"));
    a.done(4);
    b().memcpy(s, dst, src, bytes, kind, !sync, src_mem, dst_mem, api);
  } else if (verb == "host-write" || verb == "host-read" || verb == "host-access") {
    // host-write ADDR [page=BYTES] [inexact]: a host access caught on a guarded page.
    bool inexact = a.flag("inexact");
    uint32_t page = uint32_t(number(a.option("page", "4096")));
    uint64_t at = addr(a.at(0, "address"));
    a.done(1);
    trace::AccessDir dir = verb == "host-write" ? trace::AccessDir::kWrite : verb == "host-read" ? trace::AccessDir::kRead : trace::AccessDir::kReadWrite;
    b().host_access(at, dir, page, !inexact);
  } else if (verb == "record") {
    uint64_t e = name(a.at(0, "event")), s = stream(a.at(1, "stream"));
    a.done(2);
    b().record_event(e, s);
  } else if (verb == "wait") {
    uint64_t s = stream(a.at(0, "stream")), e = name(a.at(1, "event"));
    a.done(2);
    b().wait_event(s, e);
  } else if (verb == "event-sync") {
    b().event_synchronize(name(a.at(0, "event")));
    a.done(1);
  } else if (verb == "event-query") {
    b().event_query(name(a.at(0, "event")), int32_t(number(a.at(1, "result"))));
    a.done(2);
  } else if (verb == "stream-sync") {
    b().stream_synchronize(stream(a.at(0, "stream")));
    a.done(1);
  } else if (verb == "stream-query") {
    b().stream_query(stream(a.at(0, "stream")), int32_t(number(a.at(1, "result"))));
    a.done(2);
  } else if (verb == "device-sync") {
    std::string api = a.option("api", "cudaDeviceSynchronize");
    uint32_t device = a.pos.empty() ? 0 : uint32_t(number(a.pos[0]));
    a.done(1);
    b().device_synchronize(device, api);
  } else if (verb == "kernel") {
    uint32_t device = uint32_t(number(a.option("device", "0")));
    uint64_t s = stream(a.at(0, "stream"));
    const std::string kname = a.at(1, "kernel name");
    std::vector<uint64_t> ptrs;
    for (size_t i = 2; i < a.pos.size(); ++i) ptrs.push_back(addr(a.pos[i]));
    a.done(a.pos.size());
    b().kernel(s, kname, ptrs, device);
  } else if (verb == "nccl") {
    NcclType type = lookup(kNcclTypes, a.option("type", "float32"), "NCCL type");
    int32_t peer = int32_t(std::stol(a.option("peer", "-1")));
    NcclOp op = lookup(kNcclOps, a.at(0, "NCCL operation"), "NCCL operation");
    uint64_t s = stream(a.at(1, "stream")), comm = name(a.at(2, "communicator"));
    uint64_t send = addr(a.at(3, "send buffer")), recv = addr(a.at(4, "recv buffer")), count = number(a.at(5, "count"));
    a.done(6);
    b().nccl(op, s, comm, send, recv, count, type, peer);
  } else if (verb == "group-start") {
    a.done(0);
    b().group_start();
  } else if (verb == "group-end") {
    a.done(0);
    b().group_end();
  } else if (verb == "graph-launch") {
    const std::string exec = a.pos.size() > 1 ? a.at(1, "exec") : std::string();
    b().graph_launch(stream(a.at(0, "stream")), exec.empty() ? 0x6a00 : addr(exec));
    a.done(exec.empty() ? 1 : 2);
  } else if (verb == "capture-begin") {
    static const std::map<std::string, uint32_t> kModes = {{"global", 0}, {"thread", 1}, {"relaxed", 2}};
    uint32_t flags = lookup(kModes, a.option("mode", "global"), "capture mode");
    if (a.flag("to-graph")) flags |= trace::kCaptureToGraph;
    b().capture(stream(a.at(0, "stream")), true, 0, flags);
    a.done(1);
  } else if (verb == "capture-end") {
    // With GRAPH: the graph the capture made is bound to that name; without: no graph is
    // named (a failed end, or a trace written before format 1.1).
    const uint64_t s = stream(a.at(0, "stream"));
    uint64_t graph = 0;
    if (a.pos.size() > 1) bind(a.at(1, "graph name"), graph = next_graph_++);
    a.done(graph ? 2 : 1);
    b().capture(s, false, graph);
  } else if (verb == "instantiate") {
    const uint64_t graph = addr(a.at(0, "graph"));
    const std::string n = a.at(1, "exec name");
    a.done(2);
    const uint64_t exec = next_exec_++;
    bind(n, exec);
    b().graph_call(trace::GraphAction::kInstantiate, graph, exec);
  } else if (verb == "exec-update") {
    b().graph_call(trace::GraphAction::kExecUpdate, addr(a.at(1, "graph")), addr(a.at(0, "exec")));
    a.done(2);
  } else if (verb == "exec-destroy") {
    b().graph_call(trace::GraphAction::kExecDestroy, 0, addr(a.at(0, "exec")));
    a.done(1);
  } else if (verb == "graph-destroy") {
    b().graph_call(trace::GraphAction::kGraphDestroy, addr(a.at(0, "graph")), 0);
    a.done(1);
  } else if (verb == "graph-create") {
    const std::string n = a.at(0, "graph name");
    a.done(1);
    const uint64_t g = next_graph_++;
    bind(n, g);
    b().graph_create(g);
  } else if (verb == "graph-clone") {
    const std::string n = a.at(0, "clone name");
    const uint64_t original = addr(a.at(1, "graph"));
    a.done(2);
    const uint64_t g = next_graph_++;
    bind(n, g);
    b().graph_clone(g, original);
  } else if (verb == "edge-add" || verb == "edge-remove") {
    const uint16_t flags = a.flag("programmatic") ? uint16_t(trace::kEditEdgeNotFull) : uint16_t(0);
    const uint64_t g = addr(a.at(0, "graph")), from = addr(a.at(1, "from node")), to = addr(a.at(2, "to node"));
    a.done(3);
    b().graph_edges(verb == "edge-add" ? trace::GraphEditAction::kAddEdges : trace::GraphEditAction::kRemoveEdges, g,
                    {from}, {to}, flags);
  } else if (verb == "node-destroy") {
    b().graph_destroy_node(addr(a.at(0, "node")));
    a.done(1);
  } else if (verb == "instantiate-device") {
    const uint64_t graph = addr(a.at(0, "graph"));
    const std::string n = a.at(1, "exec name");
    a.done(2);
    const uint64_t exec = next_exec_++;
    bind(n, exec);
    b().instantiate(graph, exec, trace::kGraphDeviceLaunch);
  } else if (verb.rfind("node-", 0) == 0 || verb.rfind("set-", 0) == 0 || verb.rfind("exec-set-", 0) == 0) {
    node_statement(verb, a);
  } else if (verb == "window-open" || verb == "state-end" || verb == "window-close" || verb == "step") {
    // Capture windows and ring mode (docs/long-runs.md): `step N`, `window-open [step=N]
    // [dropped=STEPS] [left-out=CALLS] [reason=steps|nvtx|profiler|ring]`, `state-end`, `window-close`.
    static const std::map<std::string, trace::CaptureReason> kReasons = {
        {"steps", trace::CaptureReason::kSteps}, {"nvtx", trace::CaptureReason::kNvtxRange},
        {"profiler", trace::CaptureReason::kProfiler}, {"ring", trace::CaptureReason::kRing}};
    const auto action = verb == "window-open"    ? trace::CaptureAction::kWindowOpen
                        : verb == "state-end"    ? trace::CaptureAction::kStateEnd
                        : verb == "window-close" ? trace::CaptureAction::kWindowClose
                                                 : trace::CaptureAction::kStep;
    uint64_t step = trace::kNoStep;
    if (action == trace::CaptureAction::kStep) {
      step = number(a.at(0, "step"));
      a.done(1);
    } else if (const std::string st = a.option("step", ""); !st.empty()) {
      step = number(st);
    }
    const auto reason = lookup(kReasons, a.option("reason", "steps"), "capture reason");
    const uint64_t dropped = number(a.option("dropped", "0")), left_out = number(a.option("left-out", "0"));
    b().capture_mark(action, reason, step, dropped, left_out);
  } else if (verb == "notice") {
    static const std::map<std::string, trace::NoticeLevel> kLevels = {
        {"info", trace::NoticeLevel::kInfo}, {"warning", trace::NoticeLevel::kWarning}, {"error", trace::NoticeLevel::kError}};
    const auto level = lookup(kLevels, a.at(0, "level"), "notice level");
    b().notice(level, a.at(1, "text"));
    a.done(2);
  } else if (verb == "capture-dependencies") {
    b().graph_call(trace::GraphAction::kCaptureDependencies, 0, 0, stream(a.at(0, "stream")));
    a.done(1);
  } else {
    throw std::runtime_error("unknown statement '" + verb + "'");
  }
}

}  // namespace

std::vector<std::string> run_trace_script(const fs::path& script, const fs::path& out_dir) {
  std::ifstream in(script);
  if (!in) throw std::runtime_error("cannot read " + script.string());
  Interpreter interp(out_dir, script.stem().string());
  std::string text;
  for (int lineno = 1; std::getline(in, text); ++lineno) {
    try {
      auto words = tokenize(text);
      if (words.empty()) continue;
      Args a;
      for (size_t i = 1; i < words.size(); ++i) {
        auto eq = words[i].find('=');
        if (eq != std::string::npos && eq > 0)
          a.opt[words[i].substr(0, eq)] = words[i].substr(eq + 1);
        else
          a.pos.push_back(words[i]);
      }
      interp.line(words[0], std::move(a));
    } catch (const std::exception& e) {
      throw std::runtime_error(script.string() + ":" + std::to_string(lineno) + ": " + e.what());
    }
  }
  return interp.finish();
}

}  // namespace streamrace::testing
