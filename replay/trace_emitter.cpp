// Schedule -> trace.
#include "replay/trace_emitter.h"

#include <algorithm>
#include <stdexcept>

#include "traceformat/trace_builder.h"

namespace streamrace::replay {

namespace {

using trace::TraceBuilder;

constexpr uint64_t kSyntheticBase = 0x7f10'0000'0000ull;

trace::NcclType nccl_type(const std::string& dtype) {
  if (dtype == "fp16" || dtype == "float16") return trace::NcclType::kFloat16;
  if (dtype == "bf16" || dtype == "bfloat16") return trace::NcclType::kBfloat16;
  if (dtype == "fp64" || dtype == "float64") return trace::NcclType::kFloat64;
  if (dtype == "int32") return trace::NcclType::kInt32;
  if (dtype == "int64") return trace::NcclType::kInt64;
  if (dtype == "int8") return trace::NcclType::kInt8;
  if (dtype == "uint8") return trace::NcclType::kUint8;
  return trace::NcclType::kFloat32;
}

trace::AllocKind alloc_kind(const std::string& a) {
  if (a == "async") return trace::AllocKind::kAsync;
  if (a == "managed") return trace::AllocKind::kManaged;
  if (a == "pinned-host") return trace::AllocKind::kHostPinned;
  if (a == "registered-host") return trace::AllocKind::kHostRegistered;
  if (a == "vmm") return trace::AllocKind::kVmmMap;
  return trace::AllocKind::kDevice;
}

trace::MemKind mem_kind(const Buffer& b) {
  if (b.alloc == "external") return trace::MemKind::kPageableHost;
  if (b.alloc == "pinned-host" || b.alloc == "registered-host") return trace::MemKind::kPinnedHost;
  if (b.alloc == "managed") return trace::MemKind::kManaged;
  return trace::MemKind::kDevice;
}

trace::CopyKind copy_kind(trace::MemKind src, trace::MemKind dst) {
  const bool sh = src == trace::MemKind::kPageableHost || src == trace::MemKind::kPinnedHost;
  const bool dh = dst == trace::MemKind::kPageableHost || dst == trace::MemKind::kPinnedHost;
  if (sh && dh) return trace::CopyKind::kHostToHost;
  if (sh) return trace::CopyKind::kHostToDevice;
  if (dh) return trace::CopyKind::kDeviceToHost;
  return trace::CopyKind::kDeviceToDevice;
}

const char* kernel_name(const Action& a) {
  switch (a.kind) {
    case ActionKind::kProduce: return "autograd_backward_kernel";
    case ActionKind::kDivide: return "vectorized_elementwise_kernel<div_true>";
    case ActionKind::kSpin: return "streamrace_spin_kernel";
    default: return "compute_kernel";
  }
}

}  // namespace

namespace {

uint64_t synthetic_span(const Buffer& b) { return (b.bytes + 0xFFFF) & ~uint64_t(0xFFFF); }

// Every buffer's (first) address: its own when lifted, else the next 64 KiB-aligned synthetic
// one. `next` gets the first synthetic address after them.
std::vector<uint64_t> emitted_addresses(const Schedule& s, uint64_t* next_out = nullptr) {
  std::vector<uint64_t> out(s.buffers.size());
  uint64_t next = kSyntheticBase;
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    out[i] = s.buffers[i].address ? s.buffers[i].address : next;
    if (!s.buffers[i].address) next += synthetic_span(s.buffers[i]);
  }
  if (next_out) *next_out = next;
  return out;
}

// A schedule of EmitOptions::step_schedule must fit the buffers, streams and events that
// the first schedule set up.
void check_step_schedule(const Schedule& first, const Schedule& s, uint32_t step) {
  const auto bad = [&](const std::string& what) {
    throw std::invalid_argument("step " + std::to_string(step) + "'s schedule differs from the first: " + what);
  };
  if (s.buffers.size() != first.buffers.size()) bad("buffer count");
  for (size_t i = 0; i < s.buffers.size(); ++i)
    if (s.buffers[i].bytes != first.buffers[i].bytes || s.buffers[i].alloc != first.buffers[i].alloc ||
        s.buffers[i].address != first.buffers[i].address)
      bad("buffer " + s.buffers[i].name);
  if (s.streams.size() != first.streams.size()) bad("stream count");
  for (size_t i = 0; i < s.streams.size(); ++i)
    if (s.streams[i].kind != first.streams[i].kind || s.streams[i].handle != first.streams[i].handle)
      bad("stream " + s.streams[i].name);
  if (s.events.size() != first.events.size()) bad("event count");
  if (s.elem_bytes != first.elem_bytes || s.dtype != first.dtype || s.rank != first.rank || s.world != first.world)
    bad("element type, rank or world");
  if (s.live_at_start() != first.live_at_start() || !s.lifetimes_balanced()) bad("allocation lifetimes");
  auto errs = s.validate();
  if (!errs.empty()) bad("not well formed: " + errs.front());
}

}  // namespace

uint64_t emitted_address(const Schedule& s, uint32_t buffer) { return emitted_addresses(s)[buffer]; }

EmitResult emit_trace(const Schedule& s, const std::string& path, const EmitOptions& opts) {
  auto errs = s.validate();
  if (!errs.empty()) throw std::invalid_argument("schedule is not well formed: " + errs.front());
  auto header = TraceBuilder::default_header(s.rank);
  header.producer = opts.producer;
  header.host = "replay";
  header.pid = opts.pid ? opts.pid : 1000 + s.rank;
  header.mode = opts.precise_kernels ? "precise" : "default";
  header.command = s.name;
  header.devices = "0:simulated";
  trace::WriterOptions wo;
  wo.compress = opts.compress;
  TraceBuilder b(path, header, wo);
  EmitResult res;
  res.path = path;
  res.seq_of_action.assign(s.actions.size(), 0);

  const uint32_t nsteps = std::max<uint32_t>(1, opts.steps);
  if (nsteps > 1 && !s.lifetimes_balanced())
    throw std::invalid_argument("schedule is not repeatable: some buffer is not allocated at its end as at its start");
  // addr: each buffer's address in its current lifetime. A buffer allocated again after a free
  // gets the next synthetic address, as a bump allocator would (one with its own address in
  // the schedule keeps it); its first allocation gets its first address.
  uint64_t next_synthetic = 0;
  std::vector<uint64_t> addr = emitted_addresses(s, &next_synthetic);
  std::vector<uint8_t> was_freed(s.buffers.size(), 0);
  const std::vector<uint8_t> live_at_start = s.live_at_start();
  for (uint32_t i = 0; i < s.buffers.size(); ++i) {
    if (s.buffers[i].alloc != "external" && live_at_start[i])
      b.alloc(s.buffers[i].bytes, alloc_kind(s.buffers[i].alloc), 0, 0, addr[i]);
  }
  for (const auto& st : s.streams) {
    if (st.kind == StreamKind::kLegacyDefault) {
      res.stream_handle.push_back(trace::legacy_stream(0));
    } else {
      uint32_t flags = st.kind == StreamKind::kNonBlocking ? uint32_t(trace::kStreamNonBlocking) : 0u;
      res.stream_handle.push_back(b.create_stream(flags, 0, 0, st.handle));
    }
  }
  std::vector<uint64_t> ev;
  for (size_t i = 0; i < s.events.size(); ++i) ev.push_back(b.create_event());
  uint64_t comm = 0;
  for (const auto& a : s.actions)
    if (a.kind == ActionKind::kCollective) {
      comm = b.comm_init(s.rank, s.world);
      break;
    }
  const auto ptr = [&](const ByteRange& r) { return addr[r.buffer] + r.offset; };
  std::vector<uint64_t> freed;
  const uint32_t es = s.elem_bytes ? s.elem_bytes : 1;

  // Stack ids, interned in the first step and reused by the others (interned again for each
  // schedule of opts.step_schedule).
  std::vector<uint32_t> stack_of_action(s.actions.size(), 0);
  Schedule step_copy;
  for (uint32_t step = 0; step < nsteps; ++step) {
    const bool fresh = step == 0 || bool(opts.step_schedule);
    if (step > 0 && opts.step_schedule) {
      step_copy = opts.step_schedule(step);
      check_step_schedule(s, step_copy, step);
      stack_of_action.assign(step_copy.actions.size(), 0);
    }
    const Schedule& cur = step > 0 && opts.step_schedule ? step_copy : s;
    for (uint32_t i = 0; i < cur.actions.size(); ++i) {
      const Action& a = cur.actions[i];
      if (fresh && !a.stack.empty()) {
        std::vector<trace::SiteFrame> frames;
        for (const auto& f : a.stack) frames.push_back(trace::SiteFrame{f.file, f.function, f.line, f.python});
        stack_of_action[i] = b.stack(frames);
      }
      b.at(stack_of_action[i]);
      if (step == 0) res.seq_of_action[i] = b.next_seq();
      const uint64_t stream = a.stream < res.stream_handle.size() ? res.stream_handle[a.stream] : 0;
      switch (a.kind) {
        case ActionKind::kProduce:
        case ActionKind::kCompute:
        case ActionKind::kDivide:
        case ActionKind::kSpin: {
          std::vector<uint64_t> ptrs = a.kernel_ptrs;
          if (ptrs.empty()) {
            for (const auto* list : {&a.reads, &a.writes})
              for (const auto& r : *list)
                if (std::find(ptrs.begin(), ptrs.end(), ptr(r)) == ptrs.end()) ptrs.push_back(ptr(r));
          }
          const bool precise = opts.precise_kernels && a.exact && a.kind != ActionKind::kSpin;
          uint32_t flags = trace::kKernelArgsScanned | (precise ? uint32_t(trace::kKernelPrecise) : 0u);
          const std::string name = a.api.empty() ? kernel_name(a) : a.api;
          uint64_t corr = b.kernel(stream, name, ptrs, 0, flags);
          if (precise) {
            for (const auto& r : a.reads) {
              bool rw = std::find(a.writes.begin(), a.writes.end(), r) != a.writes.end();
              b.kernel_access(corr, ptr(r), r.bytes, rw ? trace::AccessDir::kReadWrite : trace::AccessDir::kRead);
            }
            for (const auto& w : a.writes)
              if (std::find(a.reads.begin(), a.reads.end(), w) == a.reads.end())
                b.kernel_access(corr, ptr(w), w.bytes, trace::AccessDir::kWrite);
          }
          break;
        }
        case ActionKind::kCopy:
        case ActionKind::kCopyBack: {
          auto sm = mem_kind(s.buffers[a.reads[0].buffer]), dm = mem_kind(s.buffers[a.writes[0].buffer]);
          b.memcpy(stream, ptr(a.writes[0]), ptr(a.reads[0]), a.writes[0].bytes, copy_kind(sm, dm), !a.host_blocking,
                   sm, dm, a.api);
          break;
        }
        case ActionKind::kMemset:
          b.memset(stream, ptr(a.writes[0]), a.writes[0].bytes, !a.host_blocking, mem_kind(s.buffers[a.writes[0].buffer]));
          break;
        case ActionKind::kCollective: {
          const auto& send = a.reads[0];
          const auto& recv = a.writes[0];
          trace::NcclOp op = a.collective == CollectiveKind::kAllReduce       ? trace::NcclOp::kAllReduce
                             : a.collective == CollectiveKind::kReduceScatter ? trace::NcclOp::kReduceScatter
                                                                              : trace::NcclOp::kAllGather;
          uint64_t count = (a.collective == CollectiveKind::kAllGather ? send.bytes : recv.bytes) / es;
          b.nccl(op, stream, comm, ptr(send), ptr(recv), count, nccl_type(s.dtype));
          break;
        }
        case ActionKind::kEventRecord:
          b.record_event(ev[a.event], stream);
          break;
        case ActionKind::kStreamWait:
          b.wait_event(stream, ev[a.event]);
          break;
        case ActionKind::kStreamSync:
          b.stream_synchronize(stream);
          break;
        case ActionKind::kEventSync:
          b.event_synchronize(ev[a.event]);
          break;
        case ActionKind::kDeviceSync:
          if (a.kernel_ptrs.size() == 1 && a.api.rfind("cudaFree", 0) == 0) {
            // A lifted free: it synchronises the device and ends the allocation.
            uint64_t p = a.kernel_ptrs[0];
            auto it = std::find(addr.begin(), addr.end(), p);
            auto kind = it == addr.end() ? trace::AllocKind::kDevice : alloc_kind(s.buffers[size_t(it - addr.begin())].alloc);
            b.free(p, kind);
            freed.push_back(p);
          } else {
            b.device_synchronize(0);
          }
          break;
        case ActionKind::kAlloc:
          if (was_freed[a.buffer] && !s.buffers[a.buffer].address) {
            addr[a.buffer] = next_synthetic;
            next_synthetic += synthetic_span(s.buffers[a.buffer]);
          }
          b.alloc(s.buffers[a.buffer].bytes, alloc_kind(s.buffers[a.buffer].alloc), 0, 0, addr[a.buffer]);
          break;
        case ActionKind::kFree:
          b.free(addr[a.buffer], alloc_kind(s.buffers[a.buffer].alloc));
          was_freed[a.buffer] = 1;
          break;
      }
    }
  }
  b.at(0);
  const std::vector<uint8_t> live_at_end = s.live_at_end();
  for (uint32_t i = 0; i < s.buffers.size(); ++i)
    if (s.buffers[i].alloc != "external" && live_at_end[i] && std::find(freed.begin(), freed.end(), addr[i]) == freed.end())
      b.free(addr[i], alloc_kind(s.buffers[i].alloc));
  res.calls = b.next_seq();
  b.finish();
  return res;
}

}  // namespace streamrace::replay
