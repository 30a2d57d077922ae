// Trace -> schedule.
#include "replay/trace_lifter.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "traceformat/call_stream.h"

namespace streamrace::replay {

namespace {

std::string dtype_name(trace::NcclType t) {
  switch (t) {
    case trace::NcclType::kFloat16: return "fp16";
    case trace::NcclType::kBfloat16: return "bf16";
    case trace::NcclType::kFloat32: return "fp32";
    case trace::NcclType::kFloat64: return "fp64";
    case trace::NcclType::kInt32:
    case trace::NcclType::kUint32: return "int32";
    case trace::NcclType::kInt64:
    case trace::NcclType::kUint64: return "int64";
    default: return "uint8";
  }
}

const char* alloc_name(trace::AllocKind k) {
  switch (k) {
    case trace::AllocKind::kAsync: return "async";
    case trace::AllocKind::kManaged: return "managed";
    case trace::AllocKind::kHostPinned: return "pinned-host";
    case trace::AllocKind::kHostRegistered: return "registered-host";
    case trace::AllocKind::kVmmMap: return "vmm";
    default: return "device";
  }
}

class Lifter {
 public:
  // `shape_only`: see lift_trace_shape.
  Lifter(const std::string& path, bool shape_only) : path_(path), shape_only_(shape_only) {}

  LiftResult run() {
    trace::CallStream reader(path_);
    dict_ = &reader.dictionary();
    s_.rank = reader.header().rank < 0 ? 0 : reader.header().rank;
    s_.world = std::max(1, s_.rank + 1);
    s_.name = "lifted " + path_;
    s_.description = "schedule lifted from " + path_ + " (" + reader.header().producer + ")";
    s_.meta["source_trace"] = path_;
    s_.meta["source_mode"] = reader.header().mode;
    s_.dtype = "uint8";
    s_.elem_bytes = 1;
    reader.for_each([&](const trace::RecordView& r) { on_record(r); });
    for (const auto& w : reader.warnings()) res_.warnings.push_back(w);
    if (group_calls_) res_.warnings.push_back(fmt::format(
        "{} NCCL calls inside ncclGroupStart/End are lifted as separate calls on their own streams", group_calls_));
    res_.schedule = std::move(s_);
    return std::move(res_);
  }

 private:
  std::string str(uint32_t id) const { return dict_->str(id); }

  // The stack's frames as replay sites (resolved once per stack).
  const std::vector<Site>* sites(uint32_t id) {
    auto it = stacks_.find(id);
    if (it != stacks_.end()) return &it->second;
    const std::vector<trace::StackFrame>* frames = dict_->stack(id);
    if (!frames) return nullptr;
    std::vector<Site>& out = stacks_[id];
    for (const auto& f : *frames)
      out.push_back(Site{str(f.file_id), str(f.function_id), f.line, f.kind == trace::FrameKind::kPython});
    return &out;
  }

  uint32_t stream(uint64_t handle) {
    auto it = streams_.find(handle);
    if (it != streams_.end()) return it->second;
    StreamKind kind = trace::is_legacy_stream(handle)       ? StreamKind::kLegacyDefault
                      : trace::is_per_thread_stream(handle) ? StreamKind::kBlocking
                                                            : StreamKind::kNonBlocking;
    std::string name = kind == StreamKind::kLegacyDefault ? "legacy default"
                       : kind == StreamKind::kBlocking    ? fmt::format("per-thread 0x{:x}", handle)
                                                          : fmt::format("stream 0x{:x}", handle);
    uint32_t id = s_.add_stream(name, kind, handle);
    streams_[handle] = id;
    return id;
  }

  uint32_t event(uint64_t handle) {
    auto it = events_.find(handle);
    if (it != events_.end()) return it->second;
    uint32_t id = s_.add_event(fmt::format("event 0x{:x}", handle));
    events_[handle] = id;
    return id;
  }

  // The live allocation holding addr, else an external (host) buffer for [addr, addr+bytes).
  std::optional<ByteRange> resolve(uint64_t addr, uint64_t bytes, bool make_external) {
    auto it = live_.upper_bound(addr);
    if (it != live_.begin()) {
      --it;
      const Buffer& b = s_.buffers[it->second];
      if (addr >= b.address && addr < b.address + b.bytes) {
        uint64_t off = addr - b.address;
        return ByteRange{it->second, off, std::min(bytes, b.bytes - off)};
      }
    }
    if (!make_external || bytes == 0) return std::nullopt;
    auto key = std::make_pair(addr, bytes);
    auto e = external_.find(key);
    if (e == external_.end())
      e = external_.emplace(key, s_.add_buffer(fmt::format("host 0x{:x}", addr), bytes, "external", addr, "external")).first;
    return ByteRange{e->second, 0, bytes};
  }

  Action& add(ActionKind kind, const trace::CallInfo& c, uint32_t st, std::string label) {
    Action a;
    a.kind = kind;
    a.stream = st;
    a.source_seq = c.seq;
    if (!shape_only_) {
      a.label = std::move(label);
      a.api = str(c.api_id);
      if (const auto* st = sites(c.stack_id)) a.stack = *st;
    }
    s_.actions.push_back(std::move(a));
    return s_.actions.back();
  }

  void on_record(const trace::RecordView& r) {
    using namespace trace;
    switch (r.kind) {
      case RecordKind::kStreamCreate: {
        auto c = r.as<StreamCreate>();
        StreamKind kind = (c.flags & kStreamNonBlocking) ? StreamKind::kNonBlocking : StreamKind::kBlocking;
        uint32_t id = s_.add_stream(fmt::format("stream 0x{:x}", c.stream), kind, c.stream);
        streams_[c.stream] = id;
        break;
      }
      case RecordKind::kEventCreate:
        event(r.as<EventCreate>().event);
        break;
      case RecordKind::kEventRecord: {
        auto c = r.as<EventRecord>();
        auto& a = add(ActionKind::kEventRecord, c.call, stream(c.stream), "");
        a.event = event(c.event);
        if (!shape_only_) a.label = "record " + s_.events[a.event];
        break;
      }
      case RecordKind::kStreamWaitEvent: {
        auto c = r.as<StreamWaitEvent>();
        auto& a = add(ActionKind::kStreamWait, c.call, stream(c.stream), "");
        a.event = event(c.event);
        if (!shape_only_) a.label = s_.streams[a.stream].name + " waits on " + s_.events[a.event];
        break;
      }
      case RecordKind::kEventSynchronize: {
        auto c = r.as<EventSynchronize>();
        auto& a = add(ActionKind::kEventSync, c.call, kNone, "");
        a.event = event(c.event);
        if (!shape_only_) a.label = "host waits for " + s_.events[a.event];
        break;
      }
      case RecordKind::kEventQuery: {
        auto c = r.as<EventQuery>();
        if (c.result != 0) break;  // only a successful query orders anything
        auto& a = add(ActionKind::kEventSync, c.call, kNone, "");
        a.event = event(c.event);
        if (!shape_only_) a.label = "host saw " + s_.events[a.event] + " complete";
        break;
      }
      case RecordKind::kStreamSynchronize: {
        auto c = r.as<StreamSynchronize>();
        uint32_t st = stream(c.stream);
        add(ActionKind::kStreamSync, c.call, st, "host waits for " + s_.streams[st].name);
        break;
      }
      case RecordKind::kStreamQuery: {
        auto c = r.as<StreamQuery>();
        if (c.result != 0) break;
        uint32_t st = stream(c.stream);
        add(ActionKind::kStreamSync, c.call, st, "host saw " + s_.streams[st].name + " idle");
        break;
      }
      case RecordKind::kDeviceSynchronize: {
        auto c = r.as<DeviceSynchronize>();
        add(ActionKind::kDeviceSync, c.call, kNone, str(c.call.api_id).empty() ? "device synchronize" : str(c.call.api_id));
        break;
      }
      case RecordKind::kAlloc: {
        auto c = r.as<Alloc>();
        uint32_t id = s_.add_buffer(fmt::format("alloc 0x{:x}", c.ptr), c.bytes, "allocation", c.ptr, alloc_name(c.kind));
        live_[c.ptr] = id;
        break;
      }
      case RecordKind::kFree: {
        auto c = r.as<Free>();
        live_.erase(c.ptr);
        // cudaFree and friends synchronise the device.
        // The action keeps the pointer so that writing the schedule back frees it again.
        if (c.kind == AllocKind::kDevice || c.kind == AllocKind::kHostPinned || c.kind == AllocKind::kManaged) {
          auto& a = add(ActionKind::kDeviceSync, c.call, kNone, shape_only_ ? "" : fmt::format("free 0x{:x}", c.ptr));
          if (!shape_only_) {
            if (a.api.empty()) a.api = "cudaFree";
            a.kernel_ptrs = {c.ptr};
          }
        }
        break;
      }
      case RecordKind::kMemcpy: {
        auto c = r.as<Memcpy>();
        auto src = resolve(c.src, c.bytes, true), dst = resolve(c.dst, c.bytes, true);
        if (!src || !dst) break;
        uint64_t n = std::min(src->bytes, dst->bytes);
        src->bytes = dst->bytes = n;
        auto& a = add(ActionKind::kCopy, c.call, stream(c.stream),
                      shape_only_ ? ""
                                  : fmt::format("memcpy {} -> {}", s_.buffers[src->buffer].name, s_.buffers[dst->buffer].name));
        a.reads = {*src};
        a.writes = {*dst};
        a.host_blocking = !c.is_async;
        break;
      }
      case RecordKind::kMemset: {
        auto c = r.as<Memset>();
        auto dst = resolve(c.dst, c.bytes, true);
        if (!dst) break;
        auto& a = add(ActionKind::kMemset, c.call, stream(c.stream), "memset " + s_.buffers[dst->buffer].name);
        a.writes = {*dst};
        a.host_blocking = !c.is_async;
        break;
      }
      case RecordKind::kKernelLaunch: {
        auto h = r.as<KernelLaunchHead>();
        auto tail = r.tail<KernelLaunchHead>();
        std::vector<uint64_t> ptrs(std::min<size_t>(h.nptrs, tail.size() / 8));
        if (!ptrs.empty()) std::memcpy(ptrs.data(), tail.data(), ptrs.size() * 8);
        auto& a = add(ActionKind::kCompute, h.call, stream(h.stream), shape_only_ ? "" : "kernel " + str(h.name_id));
        if (!shape_only_) {
          a.api = str(h.name_id);
          a.kernel_ptrs = ptrs;
        }
        if (h.flags & kKernelPrecise) {
          kernel_by_corr_[h.correlation] = s_.actions.size() - 1;
        } else {
          // Pointer arguments: extent and direction unknown, so from the pointer to the end
          // of its allocation, read and written.
          a.exact = false;
          for (uint64_t p : ptrs) {
            auto rr = resolve(p, ~uint64_t(0) - p, false);
            if (!rr) continue;
            a.reads.push_back(*rr);
            a.writes.push_back(*rr);
          }
        }
        break;
      }
      case RecordKind::kKernelAccess: {
        auto k = r.as<KernelAccess>();
        auto it = kernel_by_corr_.find(k.correlation);
        if (it == kernel_by_corr_.end()) break;
        auto rr = resolve(k.addr, k.bytes, false);
        if (!rr) break;
        Action& a = s_.actions[it->second];
        if (k.overflowed) a.exact = false;
        if (uint8_t(k.dir) & uint8_t(AccessDir::kRead)) a.reads.push_back(*rr);
        if (uint8_t(k.dir) & uint8_t(AccessDir::kWrite)) a.writes.push_back(*rr);
        break;
      }
      case RecordKind::kNcclCall: {
        auto c = r.as<NcclCall>();
        on_nccl(c);
        break;
      }
      case RecordKind::kNcclGroupStart:
        break;
      case RecordKind::kGraphLaunch:
        res_.warnings.push_back(fmt::format("graph launch at seq {} is not modelled by the replay", r.as<GraphLaunch>().call.seq));
        break;
      case RecordKind::kStreamCapture:
        res_.warnings.push_back(fmt::format("stream capture at seq {} is not modelled by the replay", r.as<StreamCapture>().call.seq));
        break;
      default:
        break;
    }
  }

  void on_nccl(const trace::NcclCall& c) {
    using trace::NcclOp;
    const uint32_t es = std::max<uint32_t>(1, trace::nccl_type_size(c.datatype));
    if (c.group_depth) ++group_calls_;
    const int nranks = std::max(1, c.nranks);
    s_.world = std::max(s_.world, nranks);
    s_.rank = c.rank >= 0 ? c.rank : s_.rank;
    if (s_.dtype == "uint8") {
      s_.dtype = dtype_name(c.datatype);
      s_.elem_bytes = std::max<uint32_t>(1, dtype_bytes(s_.dtype));
    }
    const uint64_t n = c.count * es;
    uint64_t send_bytes = n, recv_bytes = n;
    CollectiveKind kind = CollectiveKind::kAllReduce;
    bool collective = true;
    switch (c.op) {
      case NcclOp::kAllReduce: break;
      case NcclOp::kReduceScatter: kind = CollectiveKind::kReduceScatter; send_bytes = n * uint64_t(nranks); break;
      case NcclOp::kAllGather: kind = CollectiveKind::kAllGather; recv_bytes = n * uint64_t(nranks); break;
      case NcclOp::kAlltoAll: send_bytes = recv_bytes = n * uint64_t(nranks); collective = false; break;
      default: collective = false; break;
    }
    auto send = resolve(c.sendbuff, send_bytes, false);
    auto recv = resolve(c.recvbuff, recv_bytes, false);
    const std::string label = fmt::format("{} {} elements", trace::nccl_op_name(c.op), c.count);
    if (collective && send && recv && send->bytes == send_bytes && recv->bytes == recv_bytes && nranks == s_.world) {
      auto& a = add(ActionKind::kCollective, c.call, stream(c.stream), label);
      a.collective = kind;
      a.reads = {*send};
      a.writes = {*recv};
      return;
    }
    // Other NCCL calls: an exact but opaque op on the stream (reads send, writes receive).
    auto& a = add(ActionKind::kCompute, c.call, stream(c.stream), label);
    if (!shape_only_) a.api = trace::nccl_op_name(c.op);
    if (send) a.reads.push_back(*send);
    if (recv) a.writes.push_back(*recv);
  }

  std::string path_;
  bool shape_only_;
  Schedule s_;
  LiftResult res_;
  const trace::TraceDictionary* dict_ = nullptr;
  std::unordered_map<uint32_t, std::vector<Site>> stacks_;
  std::unordered_map<uint64_t, uint32_t> streams_, events_;
  std::map<uint64_t, uint32_t> live_;  // allocation base -> buffer
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> external_;
  std::unordered_map<uint64_t, size_t> kernel_by_corr_;
  uint64_t group_calls_ = 0;
};

}  // namespace

LiftResult lift_trace(const std::string& path) { return Lifter(path, false).run(); }

LiftResult lift_trace_shape(const std::string& path) { return Lifter(path, true).run(); }

}  // namespace streamrace::replay
