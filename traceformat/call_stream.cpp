// CallStream: checked records in call order, and the trace's dictionary.
#include "traceformat/call_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace streamrace::trace {

namespace {

// A pending call buffer that never fills means a seq never came: give up waiting for it.
constexpr size_t kMaxPendingCalls = 1u << 20;

}  // namespace

std::string stream_label(uint64_t stream, const StreamTraits& traits) {
  if (is_legacy_stream(stream)) return fmt::format("legacy default stream (device {})", stream & 0xFFFFu);
  if (is_per_thread_stream(stream))
    return fmt::format("per-thread default stream (thread {}, device {})", (stream >> 16) & 0xFFFFu, stream & 0xFFFFu);
  return fmt::format("stream {:#x} ({}, device {})", stream,
                     !traits.known ? "untraced creation" : traits.non_blocking ? "non-blocking" : "blocking",
                     traits.device);
}

void TraceDictionary::define_string(uint32_t id, std::string text) {
  // Dense while ids stay within twice what was defined so far, so a stray large id costs one
  // map entry, never a table the size of the id.
  if (id < dense_strings_.size() || id < 2 * (dense_strings_.size() + sparse_strings_.size()) + 1024) {
    if (id >= dense_strings_.size()) dense_strings_.resize(size_t(id) + 1);
    dense_strings_[id] = std::move(text);
  } else {
    sparse_strings_[id] = std::move(text);
  }
}

void TraceDictionary::define_stack(uint32_t id, std::vector<StackFrame> frames) { stacks_[id] = std::move(frames); }

const std::string& TraceDictionary::str(uint32_t id) const {
  static const std::string empty;
  if (id < dense_strings_.size()) return dense_strings_[id];
  if (sparse_strings_.empty()) return empty;
  auto it = sparse_strings_.find(id);
  return it == sparse_strings_.end() ? empty : it->second;
}

const std::vector<StackFrame>* TraceDictionary::stack(uint32_t id) const {
  auto it = stacks_.find(id);
  return it == stacks_.end() ? nullptr : &it->second;
}

StreamTraits TraceDictionary::stream(uint64_t stream) const {
  auto it = streams_.find(stream);
  if (it != streams_.end()) return it->second;
  StreamTraits t;
  if (is_legacy_stream(stream) || is_per_thread_stream(stream)) {
    t.known = true;
    t.device = uint32_t(stream & 0xFFFFu);
  }
  return t;
}

std::string TraceDictionary::label(uint64_t s) const { return stream_label(s, stream(s)); }

size_t record_fixed_size(RecordKind kind) {
  switch (kind) {
    case RecordKind::kStringDef: return sizeof(StringDefHead);
    case RecordKind::kStackDef: return sizeof(StackDefHead);
    case RecordKind::kStreamCreate: return sizeof(StreamCreate);
    case RecordKind::kStreamDestroy: return sizeof(StreamDestroy);
    case RecordKind::kEventCreate: return sizeof(EventCreate);
    case RecordKind::kEventDestroy: return sizeof(EventDestroy);
    case RecordKind::kEventRecord: return sizeof(EventRecord);
    case RecordKind::kStreamWaitEvent: return sizeof(StreamWaitEvent);
    case RecordKind::kEventSynchronize: return sizeof(EventSynchronize);
    case RecordKind::kEventQuery: return sizeof(EventQuery);
    case RecordKind::kStreamSynchronize: return sizeof(StreamSynchronize);
    case RecordKind::kStreamQuery: return sizeof(StreamQuery);
    case RecordKind::kDeviceSynchronize: return sizeof(DeviceSynchronize);
    case RecordKind::kKernelLaunch: return sizeof(KernelLaunchHead);
    case RecordKind::kMemcpy: return sizeof(Memcpy);
    case RecordKind::kMemset: return sizeof(Memset);
    case RecordKind::kKernelAccess: return sizeof(KernelAccess);
    case RecordKind::kHostAccess: return sizeof(HostAccess);
    case RecordKind::kKernelNodeAccess: return sizeof(KernelNodeAccess);
    case RecordKind::kAlloc: return sizeof(Alloc);
    case RecordKind::kFree: return sizeof(Free);
    case RecordKind::kAllocatorBlock: return sizeof(AllocatorBlock);
    case RecordKind::kNcclCommInit: return sizeof(NcclCommInit);
    case RecordKind::kNcclCall: return sizeof(NcclCall);
    case RecordKind::kNcclGroupStart: return sizeof(NcclGroupStart);
    case RecordKind::kNcclGroupEnd: return sizeof(NcclGroupEnd);
    case RecordKind::kGraphLaunch: return sizeof(GraphLaunch);
    case RecordKind::kStreamCapture: return kStreamCaptureFixed10;  // 1.1 appended `graph`
    case RecordKind::kGraphCall: return sizeof(GraphCall);
    case RecordKind::kGraphEdit: return sizeof(GraphEdit);
    case RecordKind::kOpTiming: return sizeof(OpTiming);
    case RecordKind::kNotice: return sizeof(NoticeHead);
    case RecordKind::kCaptureMark: return sizeof(CaptureMark);
  }
  return 0;
}

std::optional<RecordKind> graph_node_payload_kind(const GraphEdit& g) {
  if (g.action != GraphEditAction::kAddNode && g.action != GraphEditAction::kSetNode &&
      g.action != GraphEditAction::kExecSetNode)
    return std::nullopt;
  switch (g.type) {
    case GraphNodeType::kKernel: return RecordKind::kKernelLaunch;
    case GraphNodeType::kMemcpy: return RecordKind::kMemcpy;
    case GraphNodeType::kMemset: return RecordKind::kMemset;
    default: return std::nullopt;
  }
}

const char* graph_node_type_name(GraphNodeType t) {
  switch (t) {
    case GraphNodeType::kKernel: return "kernel";
    case GraphNodeType::kMemcpy: return "memcpy";
    case GraphNodeType::kMemset: return "memset";
    case GraphNodeType::kHost: return "host";
    case GraphNodeType::kChildGraph: return "child graph";
    case GraphNodeType::kEmpty: return "empty";
    case GraphNodeType::kEventWait: return "event wait";
    case GraphNodeType::kEventRecord: return "event record";
    case GraphNodeType::kSemaphoreSignal: return "external semaphore signal";
    case GraphNodeType::kSemaphoreWait: return "external semaphore wait";
    case GraphNodeType::kMemAlloc: return "memory allocation";
    case GraphNodeType::kMemFree: return "memory free";
    case GraphNodeType::kBatchMemOp: return "batch memory operation";
    case GraphNodeType::kConditional: return "conditional";
    case GraphNodeType::kUnknown: break;
  }
  return "unknown";
}

GraphEditParts graph_edit_parts(const RecordView& r) {
  GraphEditParts p;
  p.head = r.as<GraphEdit>();
  const bool edges = p.head.action == GraphEditAction::kAddEdges || p.head.action == GraphEditAction::kRemoveEdges;
  const size_t n = p.head.action == GraphEditAction::kAddNode || edges ? p.head.count : 0;
  size_t at = sizeof(GraphEdit);
  auto words = [&](std::vector<uint64_t>& out) {
    const size_t fit = at <= r.body.size() ? (r.body.size() - at) / sizeof(uint64_t) : 0;
    out.resize(std::min(n, fit));
    if (!out.empty()) std::memcpy(out.data(), r.body.data() + at, out.size() * sizeof(uint64_t));
    at += out.size() * sizeof(uint64_t);
  };
  words(p.first);
  if (edges) words(p.second);
  if (at < r.body.size()) p.payload = r.body.subspan(at);
  return p;
}

CallStream::CallStream(const std::string& path) { reader_.emplace(path); }

CallStream::CallStream(std::string path, TraceHeader header)
    : fed_path_(std::move(path)), fed_header_(std::move(header)) {}

void CallStream::check(const RecordView& r) {
  const size_t fixed = record_fixed_size(r.kind);
  auto bad = [&](const std::string& what) {
    throw TraceError(fmt::format("{}: chunk at offset {}: {} record: {}", path(), chunk_offset(),
                                 record_kind_name(r.kind), what));
  };
  if (r.body.size() < fixed)
    bad(fmt::format("body of {} bytes is shorter than the {} bytes of its fixed part", r.body.size(), fixed));
  auto check_id = [&](const char* field, uint32_t id) {
    if (id > TraceDictionary::kMaxId) bad(fmt::format("{} {:#x} exceeds the limit {:#x}", field, id, TraceDictionary::kMaxId));
  };
  if (fixed != 0 && has_call_info(r.kind)) {
    CallInfo c;
    std::memcpy(&c, r.body.data(), sizeof(c));
    check_id("stack id", c.stack_id);
    check_id("api name id", c.api_id);
  }
  switch (r.kind) {
    case RecordKind::kStringDef: {
      auto h = r.as<StringDefHead>();
      if (h.id > TraceDictionary::kMaxId) bad(fmt::format("string id {:#x} exceeds the limit {:#x}", h.id, TraceDictionary::kMaxId));
      break;
    }
    case RecordKind::kStackDef: {
      auto h = r.as<StackDefHead>();
      if (h.id > TraceDictionary::kMaxId) bad(fmt::format("stack id {:#x} exceeds the limit {:#x}", h.id, TraceDictionary::kMaxId));
      if (size_t(h.nframes) * sizeof(StackFrame) > r.body.size() - fixed)
        bad(fmt::format("nframes {} does not fit in its {} bytes of frames", h.nframes, r.body.size() - fixed));
      for (uint16_t i = 0; i < h.nframes; ++i) {
        StackFrame f;
        std::memcpy(&f, r.body.data() + fixed + i * sizeof(StackFrame), sizeof(f));
        check_id("frame file id", f.file_id);
        check_id("frame function id", f.function_id);
      }
      break;
    }
    case RecordKind::kKernelLaunch: {
      auto k = r.as<KernelLaunchHead>();
      if (size_t(k.nptrs) * sizeof(uint64_t) > r.body.size() - fixed)
        bad(fmt::format("nptrs {} does not fit in its {} bytes of pointers", k.nptrs, r.body.size() - fixed));
      check_id("kernel name id", k.name_id);
      break;
    }
    case RecordKind::kGraphEdit: {
      auto g = r.as<GraphEdit>();
      const bool edges = g.action == GraphEditAction::kAddEdges || g.action == GraphEditAction::kRemoveEdges;
      const size_t words = g.action == GraphEditAction::kAddNode ? 1 : edges ? 2 : 0;
      const size_t room = r.body.size() - fixed;
      if (size_t(g.count) * words * sizeof(uint64_t) > room)
        bad(fmt::format("count {} does not fit in its {} bytes of {}", g.count, room, edges ? "edges" : "dependencies"));
      const auto payload = r.body.subspan(fixed + size_t(g.count) * words * sizeof(uint64_t));
      if (const auto kind = graph_node_payload_kind(g); kind && !payload.empty()) {
        const size_t need = record_fixed_size(*kind);
        if (payload.size() < need)
          bad(fmt::format("{} node parameters of {} bytes are shorter than the {} bytes of a {} record", graph_node_type_name(g.type),
                          payload.size(), need, record_kind_name(*kind)));
        if (*kind == RecordKind::kKernelLaunch) {
          KernelLaunchHead k;
          std::memcpy(&k, payload.data(), sizeof(k));
          if (size_t(k.nptrs) * sizeof(uint64_t) > payload.size() - need)
            bad(fmt::format("kernel node nptrs {} does not fit in its {} bytes of pointers", k.nptrs, payload.size() - need));
          check_id("kernel name id", k.name_id);
        }
      }
      break;
    }
    case RecordKind::kKernelNodeAccess:
      check_id("kernel node name id", r.as<KernelNodeAccess>().name_id);
      break;
    case RecordKind::kCaptureMark: {
      auto m = r.as<CaptureMark>();
      if (m.action < CaptureAction::kStep || m.action > CaptureAction::kWindowClose)
        bad(fmt::format("action {} is not one of 1 (step), 2 (window open), 3 (state end), 4 (window close)",
                        unsigned(m.action)));
      if (m.reason < CaptureReason::kSteps || m.reason > CaptureReason::kRing)
        bad(fmt::format("reason {} is not one of 1 (steps), 2 (NVTX range), 3 (profiler), 4 (ring)", unsigned(m.reason)));
      if (m.calls_left_out < m.steps_dropped)
        bad(fmt::format("{} steps dropped but only {} calls left out (every step has its marker)", m.steps_dropped,
                        m.calls_left_out));
      break;
    }
    default:
      break;
  }
}

void CallStream::define(const RecordView& r) {
  switch (r.kind) {
    case RecordKind::kStringDef: {
      auto t = r.tail<StringDefHead>();
      dict_.define_string(r.as<StringDefHead>().id, std::string(reinterpret_cast<const char*>(t.data()), t.size()));
      break;
    }
    case RecordKind::kStackDef: {
      auto h = r.as<StackDefHead>();
      std::vector<StackFrame> frames(h.nframes);
      if (h.nframes) std::memcpy(frames.data(), r.tail<StackDefHead>().data(), frames.size() * sizeof(StackFrame));
      dict_.define_stack(h.id, std::move(frames));
      break;
    }
    case RecordKind::kStreamCreate: {
      auto s = r.as<StreamCreate>();
      dict_.define_stream(s.stream, StreamTraits{true, (s.flags & kStreamNonBlocking) != 0, s.device});
      break;
    }
    default:
      break;
  }
}

void CallStream::deliver(const RecordView& r, const std::function<void(const RecordView&)>& fn) {
  define(r);
  ++stats_.delivered;
  fn(r);
}

void CallStream::drain(const std::function<void(const RecordView&)>& fn) {
  while (!pending_.empty() && pending_.begin()->first == next_seq_) {
    auto node = pending_.extract(pending_.begin());
    ++next_seq_;
    deliver(RecordView{node.mapped().first, node.mapped().second}, fn);
  }
}

void CallStream::accept(const RecordView& r, const std::function<void(const RecordView&)>& fn) {
  check(r);
  if (record_fixed_size(r.kind) == 0 || !has_call_info(r.kind)) {
    deliver(r, fn);
    return;
  }
  ++stats_.calls;
  uint64_t seq;
  std::memcpy(&seq, r.body.data(), sizeof(seq));
  if (seq == next_seq_ && pending_.empty()) {
    ++next_seq_;
    deliver(r, fn);
    return;
  }
  if (seq < next_seq_ || pending_.count(seq)) {
    ++stats_.duplicates;
    return;
  }
  pending_.emplace(seq, std::make_pair(r.kind, std::vector<uint8_t>(r.body.begin(), r.body.end())));
  drain(fn);
  if (pending_.size() > kMaxPendingCalls) {
    stats_.seq_gaps += pending_.begin()->first - next_seq_;
    next_seq_ = pending_.begin()->first;
    drain(fn);
  }
}

void CallStream::for_each(const std::function<void(const RecordView&)>& fn,
                          const std::function<void(uint64_t, uint64_t)>& progress) {
  if (!reader_) throw std::logic_error(fed_path_ + ": a handed-in stream is read by feed_chunk, not for_each");
  auto one = [&](const RecordView& r) { accept(r, fn); };
  while (reader_->next_chunk(one))
    if (progress) progress(reader_->stats().valid_bytes, reader_->file_size());
  flush_pending(fn);
}

void CallStream::feed_chunk(uint64_t offset, std::span<const uint8_t> payload, uint32_t records,
                            const std::function<void(const RecordView&)>& fn) {
  const std::span<const uint8_t> one[1] = {payload};
  feed_chunk(offset, one, records, fn);
}

void CallStream::feed_chunk(uint64_t offset, std::span<const std::span<const uint8_t>> payload, uint32_t records,
                            const std::function<void(const RecordView&)>& fn) {
  // The writer writes no empty chunk; the reader would count one like any other.
  fed_chunk_offset_ = offset;
  std::optional<uint32_t> n = 0;
  const std::function<void(const RecordView&)> one = [&](const RecordView& r) { accept(r, fn); };
  for (const auto& piece : payload) {
    const std::optional<uint32_t> got = for_each_framed_record(piece, one);
    if (!got) {
      n.reset();
      break;
    }
    *n += *got;
  }
  if (!n || *n != records)
    throw TraceError(fmt::format("{}: chunk at offset {}: {}", fed_path_, offset,
                                 n ? fmt::format("chunk says {} records, holds {}", records, *n)
                                   : std::string("record framing runs past the chunk")));
  ++fed_stats_.chunks;
  fed_stats_.records += *n;
}

void CallStream::feed_end(uint64_t file_bytes, const std::function<void(const RecordView&)>& fn) {
  // The end-of-trace marker is a chunk of no records.
  ++fed_stats_.chunks;
  fed_stats_.complete = true;
  fed_stats_.valid_bytes = file_bytes;
  fed_chunk_offset_ = file_bytes;
  flush_pending(fn);
}

void CallStream::flush_pending(const std::function<void(const RecordView&)>& fn) {
  // Whatever still waits for a seq that never came runs in order now.
  if (!pending_.empty()) {
    stats_.seq_gaps += pending_.begin()->first - next_seq_;
    auto rest = std::move(pending_);
    pending_.clear();
    for (auto& [seq, rec] : rest) {
      next_seq_ = seq + 1;
      deliver(RecordView{rec.first, rec.second}, fn);
    }
  }
}

std::vector<std::string> CallStream::warnings() const {
  // A handed-in stream is a whole file (its end marker written): the reader would warn of nothing.
  std::vector<std::string> out = reader_ ? reader_->warnings() : std::vector<std::string>{};
  if (stats_.seq_gaps)
    out.push_back(fmt::format("{} call records are missing from the sequence (records lost?)", stats_.seq_gaps));
  if (stats_.duplicates)
    out.push_back(fmt::format("{} call records repeat a sequence number already read and were left out", stats_.duplicates));
  return out;
}

}  // namespace streamrace::trace
