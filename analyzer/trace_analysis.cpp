// TraceAnalysis: decoding records into happens-before steps and byte-range accesses.
#include "analyzer/trace_analysis.h"

#include "analyzer/kernel_signature.h"
#include "traceformat/call_stream.h"

#include <charconv>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_set>

namespace streamrace::analysis {

using namespace streamrace::trace;

namespace {

// Word i of a kernel launch's tail (its pointer arguments, then with kKernelArgsHash(2) the
// arguments' hash); the caller has checked that the tail holds it.
uint64_t tail_word(std::span<const uint8_t> tail, size_t i) {
  uint64_t w;
  std::memcpy(&w, tail.data() + i * sizeof(uint64_t), sizeof(w));
  return w;
}

// Finding allocations that are a caching-allocator block, not a segment the trace allocated.
constexpr AllocKind kTorchBlockKind = AllocKind(200);

const char* alloc_kind_name(uint8_t k) {
  if (AllocKind(k) == kTorchBlockKind) return "PyTorch caching allocator block";
  switch (AllocKind(k)) {
    case AllocKind::kDevice: return "cudaMalloc";
    case AllocKind::kAsync: return "cudaMallocAsync";
    case AllocKind::kManaged: return "cudaMallocManaged";
    case AllocKind::kHostPinned: return "cudaHostAlloc";
    case AllocKind::kHostRegistered: return "cudaHostRegister";
    case AllocKind::kVmmMap: return "cuMemMap";
    case AllocKind::kArray: return "cudaMallocArray";
  }
  return "untracked memory";
}


}  // namespace

TraceAnalysis::TraceAnalysis(std::string path, const AnalyzerOptions& opts, ShadowShard shard)
    : path_(std::move(path)),
      opts_(opts),
      hb_(opts.separate_host_threads, opts.unknown_streams_blocking),
      shadow_(shard),
      shard_(shard) {
  if (opts_.signatures) book_ = *opts_.signatures;
}

const std::string& TraceAnalysis::str(uint32_t id) const { return dict_->str(id); }

void TraceAnalysis::run() {
  CallStream stream(path_);
  if (stream.header().mode == "precise") collect_precise_accesses();
  start(stream);
  RecordObserver* observer = opts_.observe_records ? opts_.observe_records(path_) : nullptr;
  try {
    if (observer)
      stream.for_each(
          [this, observer](const RecordView& r) {
            dispatch(r);
            observer->record(r);
          },
          opts_.progress);
    else
      stream.for_each([this](const RecordView& r) { dispatch(r); }, opts_.progress);
  } catch (const StreamLimitError& e) {
    throw TraceError(fmt::format("{}: chunk at offset {}: {}", path_, stream.chunk_offset(), e.what()));
  }
  finish(stream, observer);
}

void TraceAnalysis::begin(const CallStream& stream) {
  if (stream.header().mode == "precise")
    throw std::invalid_argument(path_ + ": a precise-mode trace is analysed from its file (its pre-pass reads it twice)");
  start(stream);
}

void TraceAnalysis::end(CallStream& stream) { finish(stream, nullptr); }

void TraceAnalysis::blind(const std::string& status) {
  summary_.capture_status = status;
  notices_.push_back({"error", path_,
                      "CUDA calls were not captured in this process (" + status +
                          "): its trace cannot show races; free the CUPTI slot (Nsight, the PyTorch profiler or "
                          "compute-sanitizer hold it) and run again"});
}

void TraceAnalysis::start(const CallStream& stream) {
  const TraceHeader& h = stream.header();
  summary_.path = path_;
  summary_.host = h.host;
  summary_.pid = h.pid;
  summary_.rank = h.rank;
  summary_.capture_status = h.capture_status;
  summary_.mode = h.mode;
  if (h.capture_status != "ok") blind(h.capture_status);
  dict_ = &stream.dictionary();
}

void TraceAnalysis::finish(CallStream& stream, RecordObserver* observer) {
  const TraceHeader& h = stream.header();
  // A trace cut before its first chunk was whole has nothing to judge: no verdict, never clean.
  if (stream.read_stats().chunks == 0)
    throw TraceError(fmt::format("{}: holds no whole chunk of records (the file ends at offset {}{}): no verdict",
                                 path_, stream.file_size(),
                                 stream.read_stats().truncated ? ", inside its first chunk" : ", after its header"));
  for (const auto& w : stream.warnings()) notices_.push_back({"warning", path_, w});
  if (observer) observer->end(stream);
  for (const auto& [why, n] : unanalysed_why_)
    notices_.push_back({"warning", path_,
                        fmt::format("{} CUDA graph launch{} not analysed: {}; races inside or against {} are not "
                                    "reported, so the verdict is partial",
                                    n, n == 1 ? " was" : "es were", why, n == 1 ? "it" : "them")});
  if (unnamed_captured_ops_)
    notices_.push_back({"warning", path_,
                        fmt::format("{} operations issued during stream capture were not analysed: the capture's end "
                                    "names no graph (it failed, or the trace was written before format 1.1)",
                                    unnamed_captured_ops_)});
  if (host_sides_dropped_)
    notices_.push_back({"warning", path_,
                        fmt::format("{} async copies to or from pinned host memory were left out of the host-access "
                                    "check: more than {} were in flight with no host synchronisation after them "
                                    "(the oldest were dropped)",
                                    host_sides_dropped_, kMaxHostSides)});
  if (precise_unmeasured_launches_) {
    std::string names;
    for (uint32_t id : precise_unmeasured_kernels_) names += (names.empty() ? "" : "; ") + str(id);
    notices_.push_back({"warning", path_,
                        fmt::format("{} pointer argument{} of {} precise-mode launch{} had no measured access (e.g. {}): "
                                    "the kernel may reach that memory by bulk tensor copies (TMA), which precise mode "
                                    "cannot see, or not at all; each keeps the default tier's access (possible "
                                    "findings at most)",
                                    precise_unmeasured_pointers_, precise_unmeasured_pointers_ == 1 ? "" : "s",
                                    precise_unmeasured_launches_, precise_unmeasured_launches_ == 1 ? "" : "es",
                                    names)});
  }
  if (call_range_unread_)
    notices_.push_back({"warning", path_,
                        fmt::format("cuBLAS: the call ranges of {} kernel launch{} could not be read (a malformed "
                                    "list): they keep the default tier's accesses (possible findings at most)",
                                    call_range_unread_, call_range_unread_ == 1 ? "" : "es")});
  if (call_range_launches_)
    notices_.push_back({"info", path_,
                        fmt::format("cuBLAS: {} kernel launch{} took their matrices' byte ranges from the cuBLAS "
                                    "call's arguments (exact where a matrix is contiguous)",
                                    call_range_launches_, call_range_launches_ == 1 ? "" : "es")});
  if (learned_launches_ || signature_launches_)
    notices_.push_back({"info", path_,
                        fmt::format("access signatures: {} measured launch{} taught {} ({} trusted: seen {} times "
                                    "alike); {} launch{} took exact accesses from one",
                                    learned_launches_, learned_launches_ == 1 ? "" : "es", observed_.size(),
                                    observed_.trusted_count(), SignatureBook::kMinSeen, signature_launches_,
                                    signature_launches_ == 1 ? "" : "es")});
  // A signature file learnt from launches hashed by the other function covers none of this
  // trace's: say so, rather than let the user think no kernel repeated.
  if (opts_.signatures) {
    auto format = [](ArgsHashKind kind) { return kind == ArgsHashKind::kMix64 ? "1.4" : "1.5 (XXH3)"; };
    for (ArgsHashKind mine : {ArgsHashKind::kMix64, ArgsHashKind::kXxh3}) {
      const ArgsHashKind other = mine == ArgsHashKind::kMix64 ? ArgsHashKind::kXxh3 : ArgsHashKind::kMix64;
      const uint64_t n = hashed_launches_[size_t(mine)];
      const size_t theirs = opts_.signatures->size(other);
      if (n == 0 || opts_.signatures->size(mine) != 0 || theirs == 0) continue;
      notices_.push_back(
          {"warning", path_,
           fmt::format("access signatures: {} launch{} of this trace {} the arguments' hash of trace format {}, the "
                       "signature file's {} signature{} that of format {}: none applies (two hash functions' values "
                       "are never compared); learn signatures from traces recorded like these (docs/signatures.md)",
                       n, n == 1 ? "" : "es", n == 1 ? "carries" : "carry", format(mine), theirs,
                       theirs == 1 ? "" : "s", format(other))});
    }
  }
  if (measured_hulls_)
    notices_.push_back({"info", path_,
                        fmt::format("{} measured interval{} of precise-mode launches spanned tensors the launch has "
                                    "no pointer argument to (the device keeps one hull per 1 MiB of what a launch "
                                    "touched): those parts count as hulls, possible findings at most",
                                    measured_hulls_, measured_hulls_ == 1 ? "" : "s")});
  if (precise_graph_kernels_)
    notices_.push_back({"warning", path_,
                        fmt::format("{} kernel nodes of CUDA graphs ran without measured accesses (none recorded "
                                    "for their launch and node: sampled out, no free interval slot, or a node the "
                                    "trace cannot name); their accesses are the default tier's (pointer arguments, "
                                    "possible findings at most)",
                                    precise_graph_kernels_)});
  if (capture_opens_ > 0 || h.extra.count("capture")) {
    auto cap = h.extra.find("capture");
    const std::string what = cap != h.extra.end() ? cap->second : "capture window";
    if (capture_reason_ == uint8_t(CaptureReason::kRing)) {
      summary_.capture = what;
      notices_.push_back({"warning", path_,
                          fmt::format("ring trace ({}): the first {} steps and {} calls in all were dropped; the "
                                      "trace holds a snapshot of their live state, then steps {} to the end. Races "
                                      "between a dropped call and a kept one are not reported",
                                      what, capture_steps_dropped_, capture_calls_left_out_, capture_first_step_)});
    } else if (capture_opens_ > 0) {
      summary_.capture = what;
      notices_.push_back({"warning", path_,
                          fmt::format("windowed trace ({}): {} window{} recorded; {} calls ({} steps) before {} were "
                                      "not recorded and count as complete at each window's start. Races that involve "
                                      "an unrecorded call are not reported",
                                      what, capture_opens_, capture_opens_ == 1 ? "" : "s", capture_calls_left_out_,
                                      capture_steps_dropped_, capture_opens_ == 1 ? "it" : "them")});
    } else if (auto seen = h.extra.find("ring_steps_seen"); seen != h.extra.end()) {
      notices_.push_back({"info", path_,
                          fmt::format("ring trace ({}): nothing was dropped ({} steps seen)", what, seen->second)});
    } else {
      summary_.capture = what;
      notices_.push_back({"warning", path_,
                          fmt::format("windowed trace ({}): the window never opened, so no call was recorded", what)});
    }
  }
  summary_.records = stream.read_stats().records;
  summary_.complete = stream.read_stats().complete;
  summary_.truncated = stream.read_stats().truncated;
  summary_.missing_records = stream.stats().seq_gaps;
  if (comm_rank_ >= 0) summary_.rank = comm_rank_;
  owned_dict_ = stream.release_dictionary();
  dict_ = &owned_dict_;
}

void TraceAnalysis::collect_precise_accesses() {
  // A launch's measured intervals reach the trace at the next synchronisation point, after
  // calls that followed the launch; a first pass gathers them so the main pass can apply
  // them where the launch happened.
  CallStream pre(path_);
  pre.for_each([this](const RecordView& r) {
    if (r.kind == RecordKind::kKernelAccess) {
      KernelAccess ka = r.as<KernelAccess>();
      precise_[ka.correlation].push_back(ka);
    } else if (r.kind == RecordKind::kKernelNodeAccess) {
      const auto na = r.as<KernelNodeAccess>();
      KernelAccess ka{};
      ka.correlation = na.correlation;
      ka.addr = na.addr;
      ka.bytes = na.bytes;
      ka.dir = na.dir;
      ka.overflowed = na.overflowed;
      node_precise_[{na.correlation, na.node}].push_back(ka);
      auto [it, fresh] = node_by_name_.try_emplace({na.correlation, na.name_id}, na.node);
      if (!fresh && it->second != na.node) it->second = 0;  // two nodes of one launch: the name names neither
    }
  });
}

void TraceAnalysis::dispatch(const RecordView& r) {
  switch (r.kind) {
    case RecordKind::kStringDef:
    case RecordKind::kStackDef:
      return;  // in the dictionary
    case RecordKind::kNotice: {
      auto h = r.as<NoticeHead>();
      auto t = r.tail<NoticeHead>();
      const char* lvl = h.level == NoticeLevel::kError ? "error" : h.level == NoticeLevel::kWarning ? "warning" : "info";
      std::string text(reinterpret_cast<const char*>(t.data()), t.size());
      // The tracer learnt its capture status after the header was written (CUPTI refused it
      // once records had already reached the file, or a check at exit): the trace is as blind
      // as one whose header says so, never a clean verdict.
      static constexpr std::string_view kChanged = "capture status changed: ";
      if (h.level == NoticeLevel::kError && text.starts_with(kChanged) && text.size() > kChanged.size() &&
          text.compare(kChanged.size(), std::string::npos, "ok") != 0 && summary_.capture_status == "ok") {
        blind(text.substr(kChanged.size()));
        return;
      }
      // Records the tracer dropped (trace_recorder.cpp's warnings): the verdict is partial.
      if (h.level == NoticeLevel::kWarning) {
        uint64_t n = 0;
        const auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        const std::string_view after(rest, size_t(text.data() + text.size() - rest));
        if (ec == std::errc() && n != 0 && (after.starts_with(" records dropped: ") || after.starts_with(" kernel launches dropped: ")))
          summary_.dropped_records += n;
      }
      notices_.push_back({lvl, path_, std::move(text)});
      return;
    }
    case RecordKind::kStreamCreate: {
      auto c = r.as<StreamCreate>();
      hb_.stream_created(c.stream, c.device, c.flags, c.priority);
      return;
    }
    case RecordKind::kStreamDestroy:
      hb_.stream_destroyed(r.as<StreamDestroy>().stream);
      return;
    case RecordKind::kEventCreate:
      hb_.event_created(r.as<EventCreate>().event);
      return;
    case RecordKind::kEventDestroy: {
      const uint64_t event = r.as<EventDestroy>().event;
      captures_.event_destroyed(event);
      hb_.event_destroyed(event);
      return;
    }
    case RecordKind::kEventRecord: {
      auto e = r.as<EventRecord>();
      if (captures_.event_recorded(e.event, e.stream, r)) return;  // a node of a capture
      hb_.event_recorded(e.event, e.stream, e.call.thread, e.call.seq);
      return;
    }
    case RecordKind::kStreamWaitEvent: {
      auto w = r.as<StreamWaitEvent>();
      if (captures_.stream_waits(w.stream, w.event, r)) return;  // a node (or the fork) of a capture
      hb_.stream_waits(w.stream, w.event, w.call.thread);
      return;
    }
    case RecordKind::kEventSynchronize: {
      auto e = r.as<EventSynchronize>();
      hb_.host_joins_event(e.event, e.call.thread);
      return;
    }
    case RecordKind::kEventQuery: {
      auto q = r.as<EventQuery>();
      if (q.result == 0) hb_.host_joins_event(q.event, q.call.thread);
      return;
    }
    case RecordKind::kStreamSynchronize: {
      auto q = r.as<StreamSynchronize>();
      hb_.host_joins_stream(q.stream, q.call.thread);
      return;
    }
    case RecordKind::kStreamQuery: {
      auto q = r.as<StreamQuery>();
      if (q.result == 0) hb_.host_joins_stream(q.stream, q.call.thread);
      return;
    }
    case RecordKind::kDeviceSynchronize: {
      auto d = r.as<DeviceSynchronize>();
      hb_.host_joins_device(d.device, d.call.thread);
      return;
    }
    case RecordKind::kKernelLaunch:
      if (captures_.add_if_capturing(r.as<KernelLaunchHead>().stream, r)) return;
      on_kernel(r.as<KernelLaunchHead>(), r.tail<KernelLaunchHead>());
      return;
    case RecordKind::kMemcpy:
      if (captures_.add_if_capturing(r.as<Memcpy>().stream, r)) return;
      on_memcpy(r.as<Memcpy>());
      return;
    case RecordKind::kMemset:
      if (captures_.add_if_capturing(r.as<Memset>().stream, r)) return;
      on_memset(r.as<Memset>());
      return;
    case RecordKind::kHostAccess:
      on_host_access(r.as<HostAccess>());
      return;
    case RecordKind::kKernelAccess:
    case RecordKind::kKernelNodeAccess:
      return;  // precise tier: gathered up front, applied with its launch or graph node (on_kernel)
    case RecordKind::kAlloc:
      on_alloc(r.as<Alloc>());
      return;
    case RecordKind::kFree: {
      auto f = r.as<Free>();
      // A stream-ordered free inside a capture is a graph memory node: the memory belongs to
      // the graph from then on; it is not released, and no access is made now.
      if (f.kind == AllocKind::kAsync && f.stream && captures_.capturing(f.stream)) return;
      on_free(f);
      return;
    }
      return;
    case RecordKind::kAllocatorBlock:
      blocks_.apply(r.as<trace::AllocatorBlock>());
      return;
    case RecordKind::kNcclCommInit: {
      auto c = r.as<NcclCommInit>();
      if (c.nranks > comm_size_) {
        comm_size_ = c.nranks;
        comm_rank_ = c.rank;
      }
      return;
    }
    case RecordKind::kNcclCall: {
      auto n = r.as<NcclCall>();
      // Captured (grouped or not): a node on its stream. A group's cross-stream joins inside a
      // capture are not modelled.
      if (captures_.add_if_capturing(n.stream, r)) return;
      if (n.group_depth > 0) {
        group_ops_.push_back(n);
        return;
      }
      on_nccl(n);
      return;
    }
    case RecordKind::kNcclGroupStart:
      return;
    case RecordKind::kNcclGroupEnd:
      on_group_end(r.as<NcclGroupEnd>());
      return;
    case RecordKind::kGraphLaunch: {
      auto g = r.as<GraphLaunch>();
      if (captures_.capturing(g.stream)) {
        // A graph launched into a capture becomes a child graph node: not modelled.
        captures_.mark_unsupported(g.stream, "holds a child graph (a graph launched during its capture)");
        return;
      }
      on_graph_launch(g);
      return;
    }
    case RecordKind::kStreamCapture: {
      auto c = r.as<StreamCapture>();
      if (c.begin)
        captures_.begin(c, hb_.stream(c.stream).device);
      else
        unnamed_captured_ops_ += captures_.end(c.stream, c.graph);
      return;
    }
    case RecordKind::kGraphCall: {
      auto g = r.as<GraphCall>();
      captures_.graph_call(g);
      if (g.action == GraphAction::kInstantiate && (g.flags & kGraphDeviceLaunch)) {
        // Launches from the device (cudaGraphLaunch in a kernel) are never seen: partial.
        ++unanalysed_launches_;
        ++unanalysed_why_["the exec was instantiated for device launch (cudaGraphInstantiateFlagDeviceLaunch): its "
                          "launches from the device are not seen (counted once per exec)"];
      }
      return;
    }
    case RecordKind::kGraphEdit:
      captures_.graph_edit(graph_edit_parts(r));
      return;
    case RecordKind::kOpTiming:
      return;
    case RecordKind::kCaptureMark: {
      auto m = r.as<CaptureMark>();
      if (m.action != CaptureAction::kWindowOpen) return;
      // Everything before the window counts as complete and ordered before it; the snapshot
      // that follows re-creates what is still live.
      hb_.barrier();
      if (capture_opens_++ == 0) capture_first_step_ = m.step;
      capture_reason_ = uint8_t(m.reason);
      capture_steps_dropped_ += m.steps_dropped;
      capture_calls_left_out_ += m.calls_left_out;
      return;
    }
  }
  // Unknown kinds from a newer writer are skipped.
}


AccessEpoch TraceAnalysis::epoch_for(const CallInfo& c, const StreamState& s, OpKind op, uint32_t name_id) const {
  AccessEpoch e;
  e.seq = c.seq;
  e.slot = s.slot;
  e.clock = s.vc.get(s.slot);
  e.stack_id = c.stack_id;
  e.name_id = name_id;
  e.thread = c.thread;
  e.launch = current_launch_;
  e.op = op;
  return e;
}

void TraceAnalysis::on_memcpy(const Memcpy& m) {
  const bool pageable_src = m.src_mem == MemKind::kPageableHost;
  const bool pageable_dst = m.dst_mem == MemKind::kPageableHost;
  // NVIDIA's "API synchronization behavior": copies from pageable host memory synchronise
  // with the stream before they start.
  // (A graph node's copy never makes the host wait: current_launch_.)
  if (pageable_src && m.dst_mem != MemKind::kPageableHost && !current_launch_) hb_.host_joins_stream(m.stream, m.call.thread);
  StreamState& s = hb_.begin_op(m.stream, m.call.thread);
  AccessEpoch base = epoch_for(m.call, s, OpKind::kMemcpy, m.call.api_id);
  scratch_.clear();
  if (m.bytes) {
    AccessEpoch rd = base;
    rd.addr = m.src;
    rd.bytes = m.bytes;
    AccessEpoch wr = base;
    wr.addr = m.dst;
    wr.bytes = m.bytes;
    wr.write = true;
    scratch_.push_back(rd);
    scratch_.push_back(wr);
  }
  apply(s, scratch_);
  // An async copy's pinned host side stays in use until the host is ordered after the copy:
  // host accesses caught meanwhile (--host-accesses) are checked against it.
  if (m.is_async && m.bytes) {
    if (m.src_mem == MemKind::kPinnedHost) remember_host_side(base, m.stream, m.src, m.bytes, false);
    if (m.dst_mem == MemKind::kPinnedHost) remember_host_side(base, m.stream, m.dst, m.bytes, true);
  }
  // When the host waits for the copy to finish.
  bool host_waits;
  if (!m.is_async) {
    host_waits = m.copy_kind != CopyKind::kDeviceToDevice && !(pageable_src && !pageable_dst);
    if (m.src_mem == MemKind::kDevice && m.dst_mem == MemKind::kDevice) host_waits = false;
  } else {
    host_waits = pageable_dst && !pageable_src;  // device to pageable host: staged, synchronous
  }
  if (host_waits && !current_launch_) hb_.host_joins_stream(m.stream, m.call.thread);
}

void TraceAnalysis::on_memset(const Memset& m) {
  StreamState& s = hb_.begin_op(m.stream, m.call.thread);
  scratch_.clear();
  if (m.bytes) {
    AccessEpoch wr = epoch_for(m.call, s, OpKind::kMemset, m.call.api_id);
    wr.addr = m.dst;
    wr.bytes = m.bytes;
    wr.write = true;
    scratch_.push_back(wr);
  }
  apply(s, scratch_);
  if (!m.is_async && !current_launch_ && (m.dst_mem == MemKind::kPinnedHost || m.dst_mem == MemKind::kPageableHost))
    hb_.host_joins_stream(m.stream, m.call.thread);
}

void TraceAnalysis::note_measured(uint32_t name_id) {
  if (name_id < kDenseNameIds) {
    if (name_id >= measured_name_ids_.size()) measured_name_ids_.resize(size_t(name_id) + 1);
    if (measured_name_ids_[name_id]) return;
    measured_name_ids_[name_id] = true;
  }
  const std::string& name = str(name_id);
  auto& m = summary_.measured_kernels;
  if (std::find(m.begin(), m.end(), name) == m.end()) m.push_back(name);
}

namespace {
// A measured interval as an access of the launch `base` describes: exact with its direction,
// a hull (direction known, extent not exact), or an overflowed region of unknown direction.
AccessEpoch measured_epoch(const AccessEpoch& base, const KernelAccess& ka) {
  AccessEpoch e = base;
  e.addr = ka.addr;
  e.bytes = ka.bytes;
  if (ka.overflowed == trace::kAccessHull) {
    e.write = ka.dir != AccessDir::kRead;
    e.also_reads = ka.dir == AccessDir::kReadWrite;
    e.inexact = true;
  } else if (ka.overflowed) {
    e.maybe_write = true;
  } else {
    e.write = ka.dir != AccessDir::kRead;
    e.also_reads = ka.dir == AccessDir::kReadWrite;
  }
  return e;
}
}  // namespace

const std::vector<KernelAccess>* TraceAnalysis::node_measurement(uint32_t name_id) const {
  if (current_node_handle_ != 0) {
    auto it = node_precise_.find({current_graph_correlation_, current_node_handle_});
    if (it != node_precise_.end()) return &it->second;
  }
  // The handle names no measured node (a captured graph's nodes have none in the trace, an
  // inlined child graph's are copies): the kernel's name does, if this graph has one kernel
  // node with it and one node with it was measured.
  auto n = current_kernel_names_.find(name_id);
  if (n == current_kernel_names_.end() || n->second != 1) return nullptr;
  auto by = node_by_name_.find({current_graph_correlation_, name_id});
  if (by == node_by_name_.end() || by->second == 0) return nullptr;
  auto it = node_precise_.find({current_graph_correlation_, by->second});
  return it == node_precise_.end() ? nullptr : &it->second;
}

// A measured interval is, per 1 MiB granule, the hull of what the launch touched there
// (tracer/precise/interval_buffer.h): between two small tensors a kernel reads, it spans every
// tensor the caching allocator packed between them, touched or not. So an interval that lies
// in one tensor's memory (a live block, else an allocation) is exact, as measured; one that
// crosses from one tensor's memory into another's is cut there, and each piece is exact only
// where the launch has a pointer argument into that tensor. The other pieces (tensors it has
// no pointer to, free memory between blocks) are hulls: direction known, extent not exact, so
// a race there is possible, never certain. (A kernel that reaches a tensor through pointers
// held in device memory loses certainty there, never the access.)
bool TraceAnalysis::apply_measured(StreamState& s, const AccessEpoch& base, const KernelAccess& ka,
                                   std::span<const uint8_t> tail, size_t nptrs) {
  const AccessEpoch whole = measured_epoch(base, ka);
  if (ka.overflowed || ka.bytes == 0 || ka.addr + ka.bytes < ka.addr) {
    apply_one(s, whole);
    return true;
  }
  // The tensor memory holding a: [lo, hi), and whether it is one tensor's. A block owns the
  // bytes up to its size rounded to the caching allocator's 512 (nothing else lives there).
  struct Unit {
    uint64_t lo, hi;
    bool tensor;
  };
  constexpr uint64_t kBlockRounding = 512;
  auto block_unit = [&](const LiveBlock& b) -> Unit {
    const uint64_t rounded = (b.addr + b.bytes + kBlockRounding - 1) / kBlockRounding * kBlockRounding;
    return {b.addr, std::max(b.addr + b.bytes, std::min(rounded, blocks_.next_live_after(b.addr))), true};
  };
  auto unit_at = [&](uint64_t a) -> Unit {
    if (blocks_.active() && blocks_.in_segment(a)) {
      if (const LiveBlock* b = blocks_.live(a)) return block_unit(*b);
      // In a block's rounding (the block's size is as requested).
      if (a >= kBlockRounding)
        if (const LiveBlock* b = blocks_.live(a & ~(kBlockRounding - 1)); b && block_unit(*b).hi > a) return block_unit(*b);
      const AllocationRange* al = shadow_.find(a);
      return {a, std::min(blocks_.next_live_after(a), al ? al->end : UINT64_MAX), false};
    }
    if (const AllocationRange* al = shadow_.find(a); al && al->kind != 0) return {al->base, al->end, true};
    return {a, UINT64_MAX, false};  // memory the trace never saw allocated: not split
  };
  const uint64_t end = ka.addr + ka.bytes;
  Unit u = unit_at(ka.addr);
  if (u.hi >= end) {
    apply_one(s, whole);
    return true;
  }
  const size_t n = std::min(nptrs, tail.size() / sizeof(uint64_t));
  auto pointed_into = [&](const Unit& unit) {
    for (size_t i = 0; i < n; ++i)
      if (const uint64_t p = tail_word(tail, i); p >= unit.lo && p < unit.hi) return true;
    return false;
  };
  bool exact_all = true;
  uint64_t at = ka.addr;
  // A hull over many tensors: the first 64 pieces are told apart, the rest is one hull.
  for (int pieces = 0; at < end; ++pieces) {
    if (pieces > 0) u = unit_at(at);
    uint64_t piece_end = pieces < 64 ? std::min(end, std::max(u.hi, at + 1)) : end;
    AccessEpoch e = whole;
    e.addr = at;
    e.bytes = piece_end - at;
    if (!(u.tensor && pieces < 64 && pointed_into(u))) {
      e.inexact = true;
      exact_all = false;
    }
    apply_one(s, e);
    at = piece_end;
  }
  if (!exact_all) ++measured_hulls_;
  return exact_all;
}

void TraceAnalysis::on_kernel(const KernelLaunchHead& k, std::span<const uint8_t> tail) {
  StreamState& s = hb_.begin_op(k.stream, k.call.thread);
  AccessEpoch base = epoch_for(k.call, s, OpKind::kKernel, k.name_id);
  // Precise tier: the exact read and write intervals the device measured for this launch.
  // An interval whose budget overflowed is a whole region with unknown direction, as in the
  // default tier. A pointer argument none of whose memory the measurement touched keeps the
  // default tier's access (below): the kernel may reach it by instructions precise mode
  // cannot see (bulk tensor copies, TMA, as cuBLAS's sm90 GEMMs do), so "measured nothing
  // there" is no proof of "touched nothing there".
  const KernelAccess* measured = nullptr;
  size_t measured_n = 0;
  std::optional<decltype(precise_.begin())> measured_entry;  // erased once used (an eager launch's)
  bool precise_launch = false;
  bool hulls = false;  // a measured interval spanned tensors the launch has no pointer to
  // A kernel of a cuBLAS call: the call's matrices, from its arguments, stand for the pointers
  // they touch, as a precise measurement does (and instead of one: a TMA GEMM's measurement
  // misses its matrices). Pointers they do not touch keep the default tier's access below.
  const bool call_ranges = (k.flags & kKernelCallAccesses) && read_call_ranges(k, tail);
  if ((k.flags & kKernelCallAccesses) && !call_ranges) ++call_range_unread_;
  if (call_ranges) {
    ++call_range_launches_;
    for (const KernelAccess& ka : call_ranges_) {
      ++access_number_;
      AccessEpoch e = base;
      e.addr = ka.addr;
      e.bytes = ka.bytes;
      e.write = ka.dir != AccessDir::kRead;
      e.also_reads = ka.dir == AccessDir::kReadWrite;
      e.inexact = ka.overflowed == trace::kAccessHull;
      e.by_call = true;
      apply_one(s, e);
    }
    measured = call_ranges_.data();
    measured_n = call_ranges_.size();
    precise_launch = true;
    if (k.flags & kKernelPrecise) {
      auto it = precise_.find(k.correlation);
      if (it != precise_.end() && !current_launch_) precise_.erase(it);
    }
  } else if (const std::vector<KernelAccess>* node = current_launch_ && !opts_.ignore_precise && !node_precise_.empty()
                                                         ? node_measurement(k.name_id)
                                                         : nullptr) {
    // A kernel node of a graph launch that precise mode measured (KernelNodeAccess).
    const std::string& name = str(k.name_id);
    auto& m = summary_.measured_graph_kernels;
    if (std::find(m.begin(), m.end(), name) == m.end()) m.push_back(name);
    for (const KernelAccess& ka : *node) {
      ++access_number_;
      hulls |= !apply_measured(s, base, ka, tail, k.nptrs);
    }
    measured = node->data();
    measured_n = node->size();
    precise_launch = true;
  } else if ((k.flags & kKernelPrecise) && !opts_.ignore_precise) {
    auto it = precise_.find(k.correlation);
    if (it != precise_.end()) {
      note_measured(k.name_id);
      for (const KernelAccess& ka : it->second) {
        ++access_number_;
        hulls |= !apply_measured(s, base, ka, tail, k.nptrs);
      }
      measured = it->second.data();
      measured_n = it->second.size();
      precise_launch = true;
      if (!current_launch_) measured_entry = it;
    } else if (current_launch_ == 0) {
      precise_launch = true;  // an eager launch that measured no access at all
    } else {
      // A kernel node of a graph launch with no measured intervals: its accesses are the
      // default tier's below (its pointer arguments, possible), never none.
      ++precise_graph_kernels_;
    }
  }
  // Whether the launch's measurement touched [p, p + bytes).
  auto touched = [&](uint64_t p, uint64_t bytes) {
    for (size_t j = 0; j < measured_n; ++j)
      if (measured[j].addr < p + bytes && p < measured[j].addr + measured[j].bytes) return true;
    return false;
  };
  bool unmeasured_pointer = false;
  base.maybe_write = true;
  size_t n = std::min<size_t>(k.nptrs, tail.size() / sizeof(uint64_t));
  // `T const*` parameters of a C++ kernel are reads (extent still unknown).
  const std::vector<bool>* read_only = nullptr;
  if (n > 0 && (k.flags & kKernelArgsScanned) && !opts_.kernel_pointers_unknown_direction) {
    // Name ids are dense in a tracer's trace; a stray large one gets a slot of its own.
    if (k.name_id < kDenseNameIds && k.name_id >= read_only_cache_.size()) read_only_cache_.resize(size_t(k.name_id) + 1);
    ReadOnlyEntry& entry = k.name_id < kDenseNameIds ? read_only_cache_[k.name_id] : read_only_sparse_[k.name_id];
    if (entry.nptrs_plus1 != n + 1) {
      entry.nptrs_plus1 = uint32_t(n + 1);
      entry.read_only = read_only_pointers(str(k.name_id), n).value_or(std::vector<bool>{});
    }
    if (entry.read_only.size() == n) read_only = &entry.read_only;
  }
  auto pointer = [&](size_t i) { return tail_word(tail, i); };
  // A precise launch: which pointers no measured interval touched, decided before the split's
  // ownership filter below, so every worker of a split analysis counts the same.
  if (precise_launch) {
    unmeasured_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t p = pointer(i);
      const AllocationRange* al = shadow_.find(p);  // every worker indexes every allocation
      if (!al || al->kind == 0) continue;
      bool in_block = false;
      const uint64_t bytes = blocks_.kernel_extent(p, al->end, in_block);
      if (bytes == 0 || touched(p, bytes)) continue;
      unmeasured_[i] = 1;
      unmeasured_pointer = true;
      if (!call_ranges) ++precise_unmeasured_pointers_;
    }
  }
  const ArgsHashKind hash_kind = args_hash_kind(k.flags);
  if (precise_launch && !call_ranges && measured_n > 0 && !unmeasured_pointer && !hulls &&
      hash_kind != ArgsHashKind::kNone)
    learn_signature(k, tail, measured, measured_n);
  // A launch the precise tier did not measure, whose kernel, shape and scalars a trusted
  // signature knows: its accesses are that signature's, exact.
  if (!precise_launch && hash_kind != ArgsHashKind::kNone) ++hashed_launches_[size_t(hash_kind)];
  if (!precise_launch && hash_kind != ArgsHashKind::kNone && !book_.empty() && apply_signature(s, k, tail, base)) return;
  // Each pointer's lookups are likely cache misses: start them all before the first.
  for (size_t i = 0; i < n; ++i)
    if (shadow_.may_own(pointer(i))) {
      shadow_.prefetch(pointer(i));
      exact_extent_.prefetch(pointer(i));
    }
  for (size_t i = 0; i < n; ++i) {
    ++access_number_;
    const uint64_t p = pointer(i);
    // In a split analysis, a pointer into another worker's allocation is counted and checked
    // there (its access lies within that allocation and sets no exact extent).
    if (!shadow_.may_own(p)) continue;
    const AllocationRange* al = shadow_.find(p);
    if (!al || al->kind == 0) continue;  // only pointers into memory we saw allocated
    if (!shadow_.owns(*al)) continue;
    AccessEpoch e = base;
    if (read_only && (*read_only)[i]) {
      e.maybe_write = false;
      e.inexact = true;
    }
    e.addr = p;
    e.bytes = blocks_.kernel_extent(p, al->end, e.in_block);  // extent unknown: from the pointer to the end...
    if (e.bytes == 0) continue;  // a stale word pointing at a freed tensor: no access
    if (precise_launch && !unmeasured_[i]) continue;  // measured: the exact intervals above stand for it
    ++pointer_accesses_;
    if (!opts_.kernel_extent_to_allocation_end) {
      uint64_t used = exact_extent_.get(p);  // ...unless an exact operation last used a range from here
      if (used != 0 && used < e.bytes) e.bytes = used;
    }
    apply_one(s, e);
  }
  if (measured_entry) precise_.erase(*measured_entry);
  if (unmeasured_pointer && !call_ranges) {
    ++precise_unmeasured_launches_;
    if (precise_unmeasured_kernels_.size() < 3 &&
        std::find(precise_unmeasured_kernels_.begin(), precise_unmeasured_kernels_.end(), k.name_id) ==
            precise_unmeasured_kernels_.end())
      precise_unmeasured_kernels_.push_back(k.name_id);
  }
}

// The ranges of a kKernelCallAccesses launch into call_ranges_: after the pointers and the
// arguments' hash, a count and that many CallAccessEntry. False (the launch keeps the default
// tier's accesses) when the tail does not hold them or an entry's direction is not one.
bool TraceAnalysis::read_call_ranges(const KernelLaunchHead& k, std::span<const uint8_t> tail) {
  call_ranges_.clear();
  const size_t words = tail.size() / sizeof(uint64_t);
  const size_t at = size_t(k.nptrs) + (args_hash_kind(k.flags) != ArgsHashKind::kNone ? 1 : 0);
  if (at >= words) return false;
  const uint64_t n = tail_word(tail, at);
  if (n == 0 || n > (words - at - 1) / 3) return false;
  for (size_t i = 0; i < n; ++i) {
    const size_t w = at + 1 + 3 * i;
    KernelAccess ka{};
    ka.correlation = k.correlation;
    ka.addr = tail_word(tail, w);
    ka.bytes = tail_word(tail, w + 1);
    const uint64_t info = tail_word(tail, w + 2);
    const uint64_t dir = info & 3;
    if (dir == 0 || ka.bytes == 0 || ka.addr + ka.bytes < ka.addr) {
      call_ranges_.clear();
      return false;
    }
    ka.dir = AccessDir(dir);
    ka.overflowed = (info & kCallAccessHull) ? trace::kAccessHull : 0;
    call_ranges_.push_back(ka);
  }
  return true;
}

namespace {
// The arguments' hash of a launch with kKernelArgsHash or kKernelArgsHash2: the word after its pointers.
std::optional<uint64_t> args_hash(const KernelLaunchHead& k, std::span<const uint8_t> tail) {
  if (args_hash_kind(k.flags) == ArgsHashKind::kNone || tail.size() < (size_t(k.nptrs) + 1) * sizeof(uint64_t))
    return std::nullopt;
  return tail_word(tail, k.nptrs);
}
}  // namespace

void TraceAnalysis::learn_signature(const KernelLaunchHead& k, std::span<const uint8_t> tail, const KernelAccess* measured,
                                    size_t measured_n) {
  const std::optional<uint64_t> hash = args_hash(k, tail);
  if (!hash) return;
  // The launch's pointers into traced memory, by address, each with its allocation's end.
  struct Ptr {
    uint64_t addr, alloc_end;
    uint32_t index;
  };
  std::vector<Ptr> ptrs;
  for (uint32_t i = 0; i < k.nptrs; ++i) {
    const uint64_t p = tail_word(tail, i);
    const AllocationRange* al = shadow_.find(p);
    if (al && al->kind != 0) ptrs.push_back(Ptr{p, al->end, i});
  }
  std::sort(ptrs.begin(), ptrs.end(), [](const Ptr& x, const Ptr& y) { return x.addr < y.addr; });
  // Each piece of an interval belongs to the nearest pointer at or below it, up to the next
  // pointer or that pointer's allocation end: a measured interval is a hull per granule and may
  // run over adjacent tensors' blocks (a reduction's output, its buffer and its semaphore).
  learning_.clear();
  for (size_t j = 0; j < measured_n; ++j) {
    const KernelAccess& ka = measured[j];
    if (ka.overflowed || ka.bytes == 0) return;  // not exact: nothing to learn
    uint64_t lo = ka.addr;
    const uint64_t hi = ka.addr + ka.bytes;
    while (lo < hi) {
      auto above = std::upper_bound(ptrs.begin(), ptrs.end(), lo, [](uint64_t a, const Ptr& p) { return a < p.addr; });
      if (above == ptrs.begin()) return;  // below every pointer: reached through memory, not an argument
      const Ptr& owner = *(above - 1);
      uint64_t end = std::min(hi, owner.alloc_end);
      if (above != ptrs.end()) end = std::min(end, above->addr);
      if (end <= lo) return;  // past its pointer's allocation: not a function of the pointers
      learning_.push_back(SignatureInterval{owner.index, lo - owner.addr, end - lo, ka.dir});
      lo = end;
    }
  }
  SignatureKey key{str(k.name_id), {k.grid[0], k.grid[1], k.grid[2]}, {k.block[0], k.block[1], k.block[2]}, k.nptrs, *hash,
                   false, args_hash_kind(k.flags)};
  book_.observe(key, learning_);
  observed_.observe(key, learning_);
  ++learned_launches_;
}

bool TraceAnalysis::apply_signature(StreamState& s, const KernelLaunchHead& k, std::span<const uint8_t> tail,
                                    const AccessEpoch& base) {
  const std::optional<uint64_t> hash = args_hash(k, tail);
  if (!hash) return false;
  const LearnedSignature* sig = book_.trusted(SignatureKeyView{
      str(k.name_id), {k.grid[0], k.grid[1], k.grid[2]}, {k.block[0], k.block[1], k.block[2]}, k.nptrs, *hash,
      false, args_hash_kind(k.flags)});
  if (!sig) return false;
  auto pointer = [&](uint32_t i) { return tail_word(tail, i); };
  // Every interval must still lie within its pointer's allocation; else the launch is not
  // like the ones the signature was learnt from, and keeps the default tier's accesses.
  for (const SignatureInterval& si : sig->intervals) {
    const uint64_t p = pointer(si.pointer);
    const AllocationRange* al = shadow_.find(p);
    if (!al || al->kind == 0 || si.offset + si.bytes > al->end - p) return false;
  }
  for (const SignatureInterval& si : sig->intervals) {
    ++access_number_;
    const uint64_t p = pointer(si.pointer);
    if (!shadow_.may_own(p)) continue;
    const AllocationRange* al = shadow_.find(p);
    if (!shadow_.owns(*al)) continue;
    AccessEpoch e = base;
    e.maybe_write = false;
    e.addr = p + si.offset;
    e.bytes = si.bytes;
    e.write = si.dir != AccessDir::kRead;
    e.also_reads = si.dir == AccessDir::kReadWrite;
    e.by_signature = true;
    apply_one(s, e);
  }
  ++signature_launches_;
  return true;
}

void TraceAnalysis::nccl_accesses(const NcclCall& n, const AccessEpoch& proto, std::vector<AccessEpoch>& out) const {
  const uint64_t es = nccl_type_size(n.datatype);
  const uint64_t nr = uint64_t(std::max(n.nranks, 1));
  const bool root = n.root_or_peer == n.rank;
  uint64_t rd_bytes = 0, wr_bytes = 0;
  bool reads = true, writes = true;
  switch (n.op) {
    case NcclOp::kAllReduce: rd_bytes = wr_bytes = n.count * es; break;
    case NcclOp::kBroadcast: rd_bytes = wr_bytes = n.count * es; reads = root; break;
    case NcclOp::kReduce: rd_bytes = wr_bytes = n.count * es; writes = root; break;
    case NcclOp::kReduceScatter: rd_bytes = nr * n.count * es; wr_bytes = n.count * es; break;
    case NcclOp::kAllGather: rd_bytes = n.count * es; wr_bytes = nr * n.count * es; break;
    case NcclOp::kAlltoAll: rd_bytes = wr_bytes = nr * n.count * es; break;
    case NcclOp::kGather: rd_bytes = n.count * es; wr_bytes = nr * n.count * es; writes = root; break;
    case NcclOp::kScatter: rd_bytes = nr * n.count * es; wr_bytes = n.count * es; reads = root; break;
    case NcclOp::kSend: rd_bytes = n.count * es; writes = false; break;
    case NcclOp::kRecv: wr_bytes = n.count * es; reads = false; break;
  }
  if (n.op == NcclOp::kSend && !n.sendbuff) return;
  AccessEpoch rd = proto, wr = proto;
  rd.addr = n.op == NcclOp::kRecv ? 0 : n.sendbuff;
  rd.bytes = rd_bytes;
  wr.addr = n.op == NcclOp::kSend ? 0 : n.recvbuff;
  wr.bytes = wr_bytes;
  wr.write = true;
  bool rd_ok = reads && rd.bytes && rd.addr;
  bool wr_ok = writes && wr.bytes && wr.addr;
  // One access when the write covers the read exactly (in place).
  if (rd_ok && wr_ok && rd.addr >= wr.addr && rd.addr + rd.bytes <= wr.addr + wr.bytes) {
    wr.also_reads = true;
    out.push_back(wr);
    return;
  }
  if (rd_ok) out.push_back(rd);
  if (wr_ok) out.push_back(wr);
}

void TraceAnalysis::on_nccl(const NcclCall& n) {
  StreamState& s = hb_.begin_op(n.stream, n.call.thread);
  scratch_.clear();
  nccl_accesses(n, epoch_for(n.call, s, OpKind::kNccl, n.call.api_id), scratch_);
  apply(s, scratch_);
}

void TraceAnalysis::on_group_end(const NcclGroupEnd& g) {
  if (g.depth > 0 || group_ops_.empty()) return;
  // The group's operations are issued now. Its streams wait for each other before NCCL's
  // kernel, and are all held until it completes.
  std::vector<uint64_t> streams;
  for (const auto& op : group_ops_)
    if (std::find(streams.begin(), streams.end(), op.stream) == streams.end()) streams.push_back(op.stream);
  for (uint64_t h : streams) hb_.begin_op(h, g.call.thread);
  hb_.join_streams(streams);
  for (const auto& op : group_ops_) {
    StreamState& s = hb_.stream(op.stream);
    scratch_.clear();
    nccl_accesses(op, epoch_for(op.call, s, OpKind::kNccl, op.call.api_id), scratch_);
    apply(s, scratch_);
  }
  hb_.join_streams(streams);
  group_ops_.clear();
}

void TraceAnalysis::on_graph_launch(const GraphLaunch& g) {
  // The launch is an op on its stream: ordered after what precedes it there (and, on a
  // blocking stream, after the legacy stream's work), and after what the host had seen.
  StreamState& s = hb_.begin_op(g.stream, g.call.thread);
  const GraphCaptures::Exec* ex = captures_.exec(g.graph_exec);
  const char* why = nullptr;
  if (!ex)
    why = "the executable graph was never instantiated in the trace (a trace written before format 1.1, or an "
          "exec made elsewhere)";
  else if (!ex->unsupported.empty()) {
    ++unanalysed_launches_;
    ++unanalysed_why_["the exec " + ex->unsupported];
    return;
  } else if (ex->built) {
    if (ex->built->unsupported.empty()) return on_built_graph_launch(g, s, *ex);
    ++unanalysed_launches_;
    ++unanalysed_why_["the graph " + ex->built->unsupported];
    return;
  } else if (!ex->graph)
    why = "the graph was made neither by a stream capture nor by explicit graph calls the trace shows (a trace "
          "written before format 1.2, or a graph made before tracing began)";
  if (why || !ex->graph->unsupported.empty()) {
    ++unanalysed_launches_;
    ++unanalysed_why_[why ? why : "the graph " + ex->graph->unsupported];
    return;
  }
  const CapturedGraph& graph = *ex->graph;
  launches_.push_back(LaunchSite{g.call.seq, g.graph_exec, g.stream, g.call.stack_id, g.call.api_id, g.call.thread});
  current_launch_ = uint32_t(launches_.size());
  // Launches of one exec are ordered (each after the previous one's nodes), whatever stream.
  ExecRun& run = exec_runs_[ex->id];
  VectorClock entry = s.vc;
  entry.join(run.end);
  const std::string label = s.label();
  launch_labels_.push_back(label);
  const uint32_t device = s.device;
  while (run.branches.size() < graph.streams.size())
    run.branches.push_back(trace::kGraphBranchStreamTag | next_virtual_stream_++);
  for (size_t b = 0; b < graph.streams.size(); ++b) {
    const std::string captured = hb_.stream(graph.streams[b]).label();
    StreamState& v = hb_.stream(run.branches[b]);
    v.known = true;
    v.blocking = false;  // ordered through the launch stream, never by the legacy stream itself
    v.device = device;
    v.shown_handle = g.stream;
    v.captured_on = graph.streams[b];
    v.graph_label = fmt::format("{} as captured into CUDA graph exec {:#x} (launched on {})", captured, g.graph_exec, label);
    v.vc.join(entry);
  }
  std::unordered_map<uint64_t, VectorClock> events;  // the capture's events, this launch
  begin_node_measurements(g.correlation, graph.nodes, [](const CapturedNode& n) { return std::pair{n.kind, &n.body}; });
  for (const CapturedNode& node : graph.nodes) replay_node(node, run.branches[node.branch], g.call.thread, events);
  current_launch_ = 0;
  current_graph_correlation_ = 0;
  VectorClock end;
  for (size_t b = 0; b < graph.streams.size(); ++b) end.join(hb_.stream(run.branches[b]).vc);
  hb_.stream(g.stream).vc.join(end);  // what follows on the launch stream waits for every node
  run.end = std::move(end);
}

void TraceAnalysis::on_built_graph_launch(const GraphLaunch& g, StreamState& s, const GraphCaptures::Exec& ex) {
  const RunnableGraph& graph = *ex.built;
  launches_.push_back(LaunchSite{g.call.seq, g.graph_exec, g.stream, g.call.stack_id, g.call.api_id, g.call.thread, true});
  current_launch_ = uint32_t(launches_.size());
  ExecRun& run = exec_runs_[ex.id];
  VectorClock entry = s.vc;
  entry.join(run.end);
  const std::string label = s.label();
  launch_labels_.push_back(label);
  const uint32_t device = s.device;
  while (run.branches.size() < graph.branches)
    run.branches.push_back(trace::kGraphBranchStreamTag | next_virtual_stream_++);
  for (uint32_t b = 0; b < graph.branches; ++b) {
    StreamState& v = hb_.stream(run.branches[b]);
    v.known = true;
    v.blocking = false;
    v.device = device;
    v.shown_handle = g.stream;
    v.captured_on = g.stream;
    v.graph_label = fmt::format("branch {} of CUDA graph exec {:#x} (launched on {})", b, g.graph_exec, label);
    v.vc.join(entry);
  }
  // Event wait nodes see the records issued before the launch (a record node of this launch
  // orders a wait of it only through the graph's own edges).
  std::unordered_map<uint64_t, VectorClock> before;
  for (const RunnableGraph::Node& n : graph.nodes)
    if (n.type == GraphNodeType::kEventWait && !before.count(n.event))
      if (const EventState* es = hb_.event(n.event); es && es->recorded) before[n.event] = es->snapshot;
  std::vector<VectorClock> done(graph.nodes.size());
  std::vector<std::pair<uint64_t, uint32_t>> records;  // event, node
  begin_node_measurements(g.correlation, graph.nodes,
                          [](const RunnableGraph::Node& n) { return std::pair{n.work_kind, &n.work}; });
  for (uint32_t i = 0; i < graph.nodes.size(); ++i) {
    const RunnableGraph::Node& n = graph.nodes[i];
    const uint64_t vs = run.branches[n.branch];
    for (uint32_t d : n.deps) hb_.stream(vs).vc.join(done[d]);
    switch (n.type) {
      case GraphNodeType::kEventWait:
        if (auto it = before.find(n.event); it != before.end()) hb_.stream(vs).vc.join(it->second);
        break;
      case GraphNodeType::kEventRecord:
        records.emplace_back(n.event, i);
        break;
      default:
        current_node_handle_ = n.handle;
        if (!n.work.empty()) replay_work(n.work_kind, n.work, vs, g.call.thread);
        current_node_handle_ = 0;
        break;
    }
    if (n.snapshot) done[i] = hb_.stream(vs).vc;
  }
  current_launch_ = 0;
  current_graph_correlation_ = 0;
  VectorClock end;
  for (uint32_t b = 0; b < graph.branches; ++b) end.join(hb_.stream(run.branches[b]).vc);
  hb_.stream(g.stream).vc.join(end);
  run.end = std::move(end);
  // A record node's event holds the point of the node (what its dependencies ordered).
  for (const auto& [event, i] : records) hb_.event_set(event, run.branches[graph.nodes[i].branch], g.call.seq, done[i]);
}

void TraceAnalysis::replay_work(RecordKind kind, const std::vector<uint8_t>& body, uint64_t stream, uint32_t thread) {
  const RecordView r{kind, std::span<const uint8_t>(body)};
  auto place = [&](auto rec) {
    rec.stream = stream;
    rec.call.thread = thread;
    return rec;
  };
  switch (kind) {
    case RecordKind::kKernelLaunch:
      on_kernel(place(r.as<KernelLaunchHead>()), r.tail<KernelLaunchHead>());
      return;
    case RecordKind::kMemcpy:
      on_memcpy(place(r.as<Memcpy>()));
      return;
    case RecordKind::kMemset:
      on_memset(place(r.as<Memset>()));
      return;
    case RecordKind::kNcclCall:
      on_nccl(place(r.as<NcclCall>()));
      return;
    default:
      return;
  }
}

void TraceAnalysis::replay_node(const CapturedNode& node, uint64_t stream, uint32_t thread,
                                std::unordered_map<uint64_t, VectorClock>& events) {
  const RecordView r{node.kind, std::span<const uint8_t>(node.body)};
  // The node runs from the launching thread (the host rule), on its branch's virtual stream.
  switch (node.kind) {
    case RecordKind::kEventRecord: {
      // Inside a capture an event record is a point of its branch that waits may join.
      StreamState& v = hb_.begin_op(stream, thread);
      events[r.as<EventRecord>().event] = v.vc;
      return;
    }
    case RecordKind::kStreamWaitEvent: {
      // Waits on events recorded outside the capture order nothing inside the graph.
      auto it = events.find(r.as<StreamWaitEvent>().event);
      if (it != events.end()) hb_.stream(stream).vc.join(it->second);
      return;
    }
    default:  // kernels, copies, sets, NCCL calls: the work itself
      replay_work(node.kind, node.body, stream, thread);
      return;
  }
}

void TraceAnalysis::remember_host_side(const AccessEpoch& copy, uint64_t stream, uint64_t addr, uint64_t bytes,
                                       bool device_writes) {
  // At most kMaxHostSides are kept, so a host access costs at most that many checks however
  // the trace was made. When full: copies the host has been ordered after can never conflict
  // with a later host access and go first (with one host clock; separate clocks keep them for
  // the other threads); then, if still more than half full, the oldest (counted, and said in a
  // notice). Either way at most half stays, so this costs O(1) per copy amortised.
  if (host_sides_.size() >= kMaxHostSides) {
    if (!opts_.separate_host_threads) {
      const VectorClock& host = hb_.host_clock(copy.thread);
      std::erase_if(host_sides_, [&](const HostSide& h) { return host.covers(h.copy.slot, h.copy.clock); });
    }
    if (host_sides_.size() > kMaxHostSides / 2) {
      const size_t drop = host_sides_.size() - kMaxHostSides / 2;
      host_sides_.erase(host_sides_.begin(), host_sides_.begin() + long(drop));
      host_sides_dropped_ += drop;
    }
  }
  AccessEpoch e = copy;
  e.addr = addr;
  e.bytes = bytes;
  e.write = device_writes;
  uint64_t hi = addr + bytes < addr ? UINT64_MAX : addr + bytes;
  host_sides_.push_back(HostSide{addr, hi, device_writes, stream, e});
}

void TraceAnalysis::on_host_access(const HostAccess& h) {
  const VectorClock& host = hb_.host_clock(h.call.thread);
  const bool exact = (h.flags & kHostAccessExactAddr) != 0 || h.page_bytes == 0;
  // An exact fault is known to touch the byte at its address; otherwise only its page is known.
  const uint64_t lo = exact ? h.addr : h.page;
  const uint64_t hi = exact ? (h.addr == UINT64_MAX ? h.addr : h.addr + 1)
                            : (h.page + h.page_bytes < h.page ? UINT64_MAX : h.page + h.page_bytes);
  const bool writes = h.dir != AccessDir::kRead;
  const bool reads = h.dir != AccessDir::kWrite;
  ++summary_.accesses;
  ++access_number_;
  AccessEpoch access;
  access.seq = h.call.seq;
  access.addr = lo;
  access.bytes = hi - lo;
  access.stack_id = h.call.stack_id;
  access.name_id = h.call.api_id;
  access.thread = h.call.thread;
  access.op = OpKind::kHost;
  access.write = h.dir == AccessDir::kWrite;
  access.maybe_write = h.dir == AccessDir::kReadWrite;
  access.inexact = !exact;
  size_t kept = 0;
  for (size_t i = 0; i < host_sides_.size(); ++i) {
    const HostSide& side = host_sides_[i];
    const bool ordered = host.covers(side.copy.slot, side.copy.clock);
    if (ordered && !opts_.separate_host_threads) continue;  // done for the one host clock: forget it
    host_sides_[kept++] = side;
    if (ordered) continue;
    if (shard_.index != 0) continue;  // a split analysis: worker 0 reports host accesses
    const uint64_t olo = std::max(lo, side.lo), ohi = std::min(hi, side.hi);
    if (olo >= ohi) continue;
    // The host may not write bytes a copy still reads or writes, nor read bytes it still writes.
    if (!(writes || (reads && side.device_writes))) continue;
    const RaceKind kind = h.dir == AccessDir::kRead ? RaceKind::kHostReadDuringCopy : RaceKind::kHostWriteDuringCopy;
    const Confidence conf = exact && h.dir != AccessDir::kReadWrite ? Confidence::kCertain : Confidence::kPossible;
    // One finding per copy site and kind of host access, whichever host stack touched the
    // bytes: the fix is at the copy (a synchronisation before the reuse), and which thread
    // faults on which page depends on scheduling (PyTorch's fill_ writes a pinned tensor from
    // the calling thread and its OpenMP workers), so keying on the host stack would split one
    // bug into a run-dependent number of findings. The first host access is the one shown.
    SiteKey key{side.copy.stack_id, side.copy.name_id, 0, access.name_id,
                uint32_t(kind) | uint32_t(conf) << 3 | uint32_t(OpKind::kHost) << 8 | uint32_t(side.device_writes) << 12 |
                    uint32_t(h.dir) << 14};
    auto [it, inserted] = pending_index_.emplace(key, pending_.size());
    if (inserted) {
      PendingFinding pf{};
      pending_keys_.push_back(key);
      pf.kind = kind;
      pf.confidence = conf;
      pf.earlier = side.copy;
      pf.later = access;
      const StreamState* es = hb_.streams_by_slot()[side.copy.slot];
      pf.earlier_stream = es ? es->shown() : side.stream;
      pf.earlier_label = es ? es->label() : dict_->label(side.stream);
      pf.later_stream = 0;
      pf.later_label = fmt::format("host thread {}", h.call.thread);
      pf.overlap_lo = olo;
      pf.overlap_hi = ohi;
      const AllocationRange* al = shadow_.find(olo);
      pf.alloc_base = al ? al->base : 0;
      pf.alloc_bytes = al ? al->end - al->base : 0;
      pf.alloc_kind = al ? al->kind : 0;
      pf.seen_clock = host.get(side.copy.slot);
      pf.first_seq = h.call.seq;
      pending_.push_back(std::move(pf));
    }
    count_occurrence(it->second, h.call.seq, when(side.copy));
  }
  host_sides_.resize(kept);
}

void TraceAnalysis::on_alloc(const Alloc& a) {
  shadow_.allocate(a.ptr, a.bytes, uint8_t(a.kind), a.call.seq);
}

void TraceAnalysis::on_free(const Free& f) {
  switch (f.kind) {
    case AllocKind::kAsync: {
      // Stream-ordered free: a write by the freeing stream over the whole allocation, whose
      // shadow lives on for whoever gets these addresses next.
      const AllocationRange* al = shadow_.find(f.ptr);
      if (!al) return;
      uint64_t base = al->base, bytes = al->end - al->base;
      uint64_t stream = f.stream ? f.stream : legacy_stream(f.device);
      StreamState& s = hb_.begin_op(stream, f.call.thread);
      AccessEpoch e = epoch_for(f.call, s, OpKind::kFree, f.call.api_id);
      e.addr = base;
      e.bytes = bytes;
      e.write = true;
      scratch_.clear();
      scratch_.push_back(e);
      apply(s, scratch_);
      shadow_.release(base, true);
      return;
    }
    case AllocKind::kVmmMap: {
      const AllocationRange* al = shadow_.find(f.ptr);
      if (al) blocks_.forget(al->base, al->end - al->base);
      shadow_.release(f.ptr, false);
      return;
    }
    default:
      // cudaFree, cudaFreeHost, cudaFreeArray: the device synchronises first (implicit
      // synchronisation). Arrays have no shadow (ptr is the cudaArray_t).
      if (free_synchronizes_device(f.kind)) hb_.host_joins_device(f.device, f.call.thread);
      if (const AllocationRange* al = f.kind != AllocKind::kArray ? shadow_.find(f.ptr) : nullptr;
          al && al->base == f.ptr)
        blocks_.forget(al->base, al->end - al->base);
      if (f.kind != AllocKind::kArray) shadow_.release(f.ptr, false);
      return;
  }
}

void TraceAnalysis::apply(StreamState& s, std::vector<AccessEpoch>& accesses) {
  // A copy's source and destination: start both lookups before the first.
  if (accesses.size() > 1)
    for (const AccessEpoch& a : accesses) {
      shadow_.prefetch(a.addr);
      exact_extent_.prefetch(a.addr);
    }
  for (const AccessEpoch& a : accesses) {
    ++access_number_;
    apply_one(s, a);
  }
}

void TraceAnalysis::apply_one(StreamState& s, const AccessEpoch& a) {
  if (!a.maybe_write && !a.inexact && a.op != OpKind::kFree) exact_extent_.set(a.addr, a.bytes);
  ++summary_.accesses;
  conflicts_.clear();
  const bool several_workers = shadow_.access(a, s.vc, conflicts_);
  if (conflicts_.empty()) return;
  if (several_workers) {
    // Which conflicts count depends on the other workers' conflicts of this access too:
    // held, each with its finding's first occurrence ready (merge_workers decides).
    for (const Conflict& c : conflicts_) {
      const Classified k = classify(a, c);
      log_.push_back(LoggedOccurrence{access_number_, uint32_t(held_.size()), true, when(a), when(c.earlier)});
      held_.push_back(HeldConflict{c, k.key, first_occurrence(s, a, c, k)});
    }
    return;
  }
  keep_one_per_stream(conflicts_);
  for (const Conflict& c : conflicts_) {
    const Classified k = classify(a, c);
    auto [it, inserted] = pending_index_.emplace(k.key, pending_.size());
    if (inserted) {
      pending_.push_back(first_occurrence(s, a, c, k));
      pending_keys_.push_back(k.key);
    }
    count_occurrence(it->second, when(a), when(c.earlier));
  }
}

void TraceAnalysis::keep_one_per_stream(std::vector<Conflict>& conflicts) {
  // Per earlier stream, keep the conflict that matters for a fix: the latest one (an event
  // after it orders everything before it on that stream), preferring exact accesses. Among
  // equals the sort decides; merge_workers sorts the same conflicts in the same order, so it
  // keeps the same one.
  std::sort(conflicts.begin(), conflicts.end(), [](const Conflict& x, const Conflict& y) {
    if (x.earlier.slot != y.earlier.slot) return x.earlier.slot < y.earlier.slot;
    const bool x_exact = !x.earlier.maybe_write && !x.earlier.inexact;
    const bool y_exact = !y.earlier.maybe_write && !y.earlier.inexact;
    if (x_exact != y_exact) return x_exact;
    return x.earlier.seq > y.earlier.seq;
  });
  uint32_t last_slot = UINT32_MAX;
  size_t kept = 0;
  for (const Conflict& c : conflicts) {
    if (c.earlier.slot == last_slot) continue;
    last_slot = c.earlier.slot;
    conflicts[kept++] = c;
  }
  conflicts.resize(kept);
}

TraceAnalysis::Classified TraceAnalysis::classify(const AccessEpoch& a, const Conflict& c) const {
  const bool later_writes = a.write || a.maybe_write;
  const bool earlier_writes = c.earlier.write || c.earlier.maybe_write;
  RaceKind kind = later_writes ? (earlier_writes ? RaceKind::kWriteAfterWrite : RaceKind::kWriteAfterRead)
                               : RaceKind::kReadAfterWrite;
  Confidence conf = (a.maybe_write || c.earlier.maybe_write || a.inexact || c.earlier.inexact) ? Confidence::kPossible
                                                                                               : Confidence::kCertain;
  // The earlier access was to a tensor that lived at these addresses before the allocator
  // handed them to the one accessed now. Where both accesses are bounded by their blocks
  // (or exact), the allocator's reuse itself is certain: the new tensor's op got memory the
  // earlier op may still use.
  const LiveBlock* blk = blocks_.active() ? blocks_.live(c.lo) : nullptr;
  const bool reuse = blk && when(c.earlier) < blk->alloc_seq;
  if (reuse) {
    kind = RaceKind::kUseAfterReuse;
    const bool earlier_bounded = (!c.earlier.maybe_write && !c.earlier.inexact) || c.earlier.in_block;
    const bool later_bounded = (!a.maybe_write && !a.inexact) || a.in_block;
    conf = earlier_bounded && later_bounded ? Confidence::kCertain : Confidence::kPossible;
  }
  SiteKey key{c.earlier.stack_id, c.earlier.name_id, a.stack_id, a.name_id,
              uint32_t(kind) | uint32_t(conf) << 2 | uint32_t(c.earlier.op) << 4 | uint32_t(a.op) << 8 |
                  uint32_t(c.earlier.write) << 12 | uint32_t(c.earlier.also_reads) << 13 | uint32_t(a.write) << 14 |
                  uint32_t(a.also_reads) << 15};
  return Classified{kind, conf, blk, reuse, key};
}

TraceAnalysis::PendingFinding TraceAnalysis::first_occurrence(const StreamState& s, const AccessEpoch& a,
                                                              const Conflict& c, const Classified& k) {
  PendingFinding pf{};
  pf.kind = k.kind;
  pf.confidence = k.confidence;
  pf.earlier = c.earlier;
  pf.later = a;
  const StreamState* es = hb_.streams_by_slot()[c.earlier.slot];
  // Two nodes of one launch: the edge belongs in the capture, between its streams.
  pf.same_launch = a.launch && c.earlier.launch == a.launch;
  pf.earlier_stream = es ? (pf.same_launch ? es->captured_on : es->shown()) : 0;
  pf.earlier_label = es ? es->label() : "unknown stream";
  pf.later_stream = pf.same_launch ? s.captured_on : s.shown();
  pf.later_label = s.label();
  pf.overlap_lo = c.lo;
  pf.overlap_hi = c.hi;
  const AllocationRange* al = shadow_.find(c.lo);
  pf.alloc_base = al ? al->base : 0;
  pf.alloc_bytes = al ? al->end - al->base : 0;
  pf.alloc_kind = al ? al->kind : 0;
  if (k.block) {
    pf.alloc_base = k.block->addr;
    pf.alloc_bytes = k.block->bytes;
    pf.alloc_kind = uint8_t(kTorchBlockKind);
  }
  if (const ReleasedBlock* rel = k.reuse ? blocks_.released(c.lo) : nullptr) {
    pf.has_released = true;
    pf.released = *rel;
  }
  pf.seen_clock = s.vc.get(c.earlier.slot);
  pf.first_seq = when(a);
  return pf;
}

void TraceAnalysis::count_occurrence(size_t index, uint64_t later_when, uint64_t earlier_when) {
  PendingFinding& pf = pending_[index];
  // The accesses of one op (a kernel's pointers, a copy's two sides) are one occurrence.
  if (pf.last_seq != later_when || pf.count == 0) {
    ++pf.count;
    if (pf.pairs.size() < opts_.racing_pairs_kept) pf.pairs.push_back(RacingPair{earlier_when, later_when});
  }
  pf.last_seq = later_when;
  if (split()) log_.push_back(LoggedOccurrence{access_number_, uint32_t(index), false, later_when, earlier_when});
}

void TraceAnalysis::merge_workers(const std::vector<const TraceAnalysis*>& workers) {
  // Every occurrence of every worker, in the order one analysis meets them: by access, and
  // within an access in the worker's own order (an access whose allocations are all one
  // worker's has its occurrences in that worker alone).
  struct Ref {
    uint64_t access;
    uint32_t worker, pos;
  };
  std::vector<Ref> refs;
  for (uint32_t w = 0; w < workers.size(); ++w)
    for (uint32_t i = 0; i < workers[w]->log_.size(); ++i) refs.push_back(Ref{workers[w]->log_[i].access, w, i});
  std::sort(refs.begin(), refs.end(), [](const Ref& x, const Ref& y) {
    return std::tie(x.access, x.worker, x.pos) < std::tie(y.access, y.worker, y.pos);
  });
  std::vector<PendingFinding> merged;
  std::vector<SiteKey> merged_keys;
  std::unordered_map<SiteKey, size_t, SiteKeyHash> index;
  auto count = [&](const SiteKey& key, const PendingFinding& first, uint64_t later_when, uint64_t earlier_when) {
    auto [it, inserted] = index.emplace(key, merged.size());
    if (inserted) {
      PendingFinding pf = first;
      pf.count = 0;
      pf.pairs.clear();
      pf.last_seq = 0;
      merged.push_back(std::move(pf));
      merged_keys.push_back(key);
    }
    PendingFinding& pf = merged[it->second];
    if (pf.last_seq != later_when || pf.count == 0) {
      ++pf.count;
      if (pf.pairs.size() < opts_.racing_pairs_kept) pf.pairs.push_back(RacingPair{earlier_when, later_when});
    }
    pf.last_seq = later_when;
  };
  std::vector<std::pair<const HeldConflict*, const LoggedOccurrence*>> held;
  std::vector<Conflict> together;
  for (size_t i = 0; i < refs.size();) {
    size_t j = i;
    while (j < refs.size() && refs[j].access == refs[i].access) ++j;
    const LoggedOccurrence& head = workers[refs[i].worker]->log_[refs[i].pos];
    if (!head.held) {
      for (size_t k = i; k < j; ++k) {
        const TraceAnalysis& w = *workers[refs[k].worker];
        const LoggedOccurrence& o = w.log_[refs[k].pos];
        count(w.pending_keys_[o.index], w.pending_[o.index], o.later_when, o.earlier_when);
      }
    } else {
      // The access's conflicts as one analysis collects them (allocation by allocation, each
      // allocation's in its owner's order), then the choice apply_one makes.
      held.clear();
      for (size_t k = i; k < j; ++k) {
        const TraceAnalysis& w = *workers[refs[k].worker];
        const LoggedOccurrence& o = w.log_[refs[k].pos];
        held.emplace_back(&w.held_[o.index], &o);
      }
      std::stable_sort(held.begin(), held.end(),
                       [](const auto& x, const auto& y) { return x.first->conflict.piece < y.first->conflict.piece; });
      together.clear();
      for (uint32_t k = 0; k < held.size(); ++k) {
        together.push_back(held[k].first->conflict);
        together.back().piece = k;  // from here on: which held conflict it is
      }
      keep_one_per_stream(together);
      for (const Conflict& c : together) {
        const auto& [h, o] = held[c.piece];
        count(h->key, h->first, o->later_when, o->earlier_when);
      }
    }
    i = j;
  }
  pending_ = std::move(merged);
  pending_keys_ = std::move(merged_keys);
  pending_index_ = std::move(index);
  // Every worker counted every other access; kernel pointers only in their owner.
  summary_.accesses -= pointer_accesses_;
  for (const TraceAnalysis* w : workers) summary_.accesses += w->pointer_accesses_;
}

std::vector<Frame> TraceAnalysis::resolve_stack(uint32_t id) const {
  std::vector<Frame> out;
  const std::vector<StackFrame>* frames = dict_->stack(id);
  if (!frames) return out;
  for (const StackFrame& f : *frames)
    out.push_back(Frame{str(f.file_id), str(f.function_id), f.line, f.kind == FrameKind::kPython, f.pc});
  return out;
}

Access TraceAnalysis::make_access(const AccessEpoch& e, uint64_t stream, const std::string& label,
                                  const PendingFinding& pf) const {
  Access a;
  a.op = str(e.name_id);
  if (a.op.empty()) a.op = op_kind_name(e.op);
  a.op_kind = op_kind_name(e.op);
  a.direction = e.maybe_write ? "read or write" : e.write ? (e.also_reads ? "read and write" : "write") : "read";
  a.exact = !e.maybe_write && !e.inexact;
  a.by_signature = e.by_signature;
  a.by_library_call = e.by_call;
  a.stream = stream;
  a.stream_label = label;
  a.addr = e.addr;
  a.bytes = e.bytes;
  a.alloc_base = pf.alloc_base;
  a.alloc_bytes = pf.alloc_bytes;
  a.alloc_kind = alloc_kind_name(pf.alloc_kind);
  a.seq = e.seq;
  a.thread = e.thread;
  a.stack = resolve_stack(e.stack_id);
  if (e.launch) {
    const LaunchSite& l = launches_[e.launch - 1];
    a.graph_launch =
        GraphLaunchSite{str(l.api_id), l.seq, l.graph_exec, l.stream, launch_labels_[e.launch - 1], l.thread,
                        resolve_stack(l.stack_id), l.built};
  }
  return a;
}

std::vector<Finding> TraceAnalysis::findings() const { return make_findings(nullptr); }

std::vector<Finding> TraceAnalysis::take_findings() { return make_findings(&pending_); }

std::vector<Finding> TraceAnalysis::make_findings(std::vector<PendingFinding>* take) const {
  std::vector<Finding> out;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const PendingFinding& pf = pending_[i];
    Finding f;
    f.kind = pf.kind;
    f.confidence = pf.confidence;
    f.mode = summary_.mode.empty() || opts_.ignore_precise ? "default" : summary_.mode;
    f.earlier = make_access(pf.earlier, pf.earlier_stream, pf.earlier_label, pf);
    f.later = make_access(pf.later, pf.later_stream, pf.later_label, pf);
    f.overlap_addr = pf.overlap_lo;
    f.overlap_bytes = pf.overlap_hi - pf.overlap_lo;
    // A graph node against anything but a node of its own launch: the fix goes around the launch.
    f.fix_edit = pf.same_launch ? FixEdit{pf.earlier_stream, pf.earlier.seq, pf.later_stream, pf.later.seq}
                                : FixEdit{pf.earlier_stream, when(pf.earlier), pf.later_stream, when(pf.later)};
    // A host access is ordered by a host synchronisation, which no stream edit expresses.
    if (pf.later.op == OpKind::kHost) f.fix_edit = FixEdit{};
    if (pf.has_released) {
      Access r;
      r.op = str(pf.released.api);
      if (r.op.empty()) r.op = "free";
      r.op_kind = "free";
      r.direction = "release";
      r.stream = pf.released.stream;
      r.stream_label = dict_->label(pf.released.stream);
      r.addr = pf.released.addr;
      r.bytes = pf.released.bytes;
      r.alloc_base = pf.released.addr;
      r.alloc_bytes = pf.released.bytes;
      r.alloc_kind = alloc_kind_name(uint8_t(kTorchBlockKind));
      r.seq = pf.released.seq;
      r.thread = pf.released.thread;
      r.stack = resolve_stack(pf.released.stack);
      f.released = std::move(r);
    }
    describe_missing_edge(f, pf.seen_clock, pf.earlier.clock);
    f.fingerprint = fingerprint_of(f);
    f.occurrences = pf.count;
    f.ranks = {summary_.rank};
    RacingPairs pairs = take ? std::move((*take)[i].pairs) : pf.pairs;
    pairs.shrink_to_fit();
    f.where.push_back(Occurrence{path_, summary_.rank, pf.count, pf.first_seq, pf.last_seq, std::move(pairs)});
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace streamrace::analysis
