// WindowedTraceWriter: see windowed_trace_writer.h.
#include "tracer/windowed_trace_writer.h"

#include "traceformat/ring_trace.h"
#include "tracer/trace_recorder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace streamrace::tracer {

using trace::CaptureAction;
using trace::CaptureMark;
using trace::ChunkBuilder;
using trace::RecordKind;
using trace::RecordView;

namespace {

trace::CaptureReason reason_of(const CaptureOptions& o) {
  if (o.ring) return trace::CaptureReason::kRing;
  switch (o.window) {
    case CaptureOptions::Window::kSteps: return trace::CaptureReason::kSteps;
    case CaptureOptions::Window::kNvtxRange: return trace::CaptureReason::kNvtxRange;
    case CaptureOptions::Window::kProfiler: return trace::CaptureReason::kProfiler;
    case CaptureOptions::Window::kAll: break;
  }
  return trace::CaptureReason::kSteps;
}

template <typename F>
void for_each_record(std::span<const uint8_t> payload, F&& fn) {
  size_t at = 0;
  while (at + sizeof(trace::RecordPrefix) <= payload.size()) {
    trace::RecordPrefix p;
    std::memcpy(&p, payload.data() + at, sizeof p);
    at += sizeof p;
    if (at + p.body_size > payload.size()) return;  // never: the recorder framed it
    fn(RecordKind(p.kind), payload.subspan(at, p.body_size));
    at += p.body_size;
  }
}

bool is_call(RecordKind k, size_t body) { return trace::has_call_info(k) && body >= sizeof(trace::CallInfo); }

uint64_t seq_of(std::span<const uint8_t> body) {
  uint64_t s;
  std::memcpy(&s, body.data(), sizeof s);
  return s;
}

// Adds a call record to `out` with its seq replaced.
void add_renumbered(ChunkBuilder& out, RecordKind kind, std::span<const uint8_t> body, uint64_t seq) {
  out.add_raw(kind, &seq, sizeof seq, body.data() + sizeof seq, body.size() - sizeof seq);
}

}  // namespace

WindowedTraceWriter::WindowedTraceWriter(CaptureOptions opts, std::string path, std::function<trace::TraceHeader()> header)
    : opts_(std::move(opts)), path_(std::move(path)), header_(std::move(header)), reason_(reason_of(opts_)) {
  if (is_ring()) ring_dir_ = path_ + ".ring";
}

WindowedTraceWriter::~WindowedTraceWriter() = default;

CaptureMark WindowedTraceWriter::mark(const trace::CallInfo& c, CaptureAction a, uint64_t seq) const {
  CaptureMark m{};
  m.call = c;
  m.call.seq = seq;
  m.step = step_;
  m.action = a;
  m.reason = reason_;
  return m;
}

bool WindowedTraceWriter::ensure_file() {
  if (file_) return true;
  if (failed_) return false;
  try {
    trace::TraceHeader h = header_ ? header_() : trace::TraceHeader{};
    h.extra["capture"] = opts_.describe();
    h.extra["step_range"] = opts_.step_range;
    file_ = std::make_unique<trace::TraceWriter>(path_, h);
    created_ = true;
    return true;
  } catch (const std::exception& e) {
    failed_ = true;
    std::fprintf(stderr, "streamrace: cannot write trace %s: %s\n", path_.c_str(), e.what());
    return false;
  }
}

void WindowedTraceWriter::write_out(const ChunkBuilder& c) {
  if (c.empty() || !ensure_file()) return;
  try {
    file_->write_chunk(c);
  } catch (const std::exception& e) {
    failed_ = true;
    std::fprintf(stderr, "streamrace: writing trace %s failed: %s\n", path_.c_str(), e.what());
    file_.reset();
  }
}

void WindowedTraceWriter::flush_pending_out() {
  if (is_ring()) {
    if (!seg_out_.empty() && !segments_.empty() && segments_.back().writer) {
      try {
        segments_.back().writer->write_chunk(seg_out_);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "streamrace: writing ring segment %s failed: %s\n", segments_.back().path.c_str(), e.what());
      }
    }
    seg_out_.clear();
    return;
  }
  write_out(out_);
  out_.clear();
}

void WindowedTraceWriter::definitions(const ChunkBuilder& defs) {
  if (defs.empty()) return;
  seen_any_ = true;
  if (is_ring()) {
    write_definitions(defs);
  } else {
    flush_pending_out();  // records already taken were defined by earlier chunks
    write_out(defs);
  }
}

void WindowedTraceWriter::boundary(const CaptureBoundary& b) {
  seen_any_ = true;
  boundaries_.push_back(b);
}

std::optional<uint64_t> WindowedTraceWriter::written_seq(uint64_t s) const {
  auto it = std::upper_bound(intervals_.begin(), intervals_.end(), s,
                             [](uint64_t v, const Interval& i) { return v < i.old_begin; });
  if (it == intervals_.begin()) return std::nullopt;
  --it;
  if (s >= it->old_end) return std::nullopt;
  return it->new_begin + (s - it->old_begin);
}

void WindowedTraceWriter::hold(const Pending& p) {
  held_.push_back(Held{p.seq, p.kind, held_bytes_.size(), p.body.size()});
  held_bytes_.insert(held_bytes_.end(), p.body.begin(), p.body.end());
}

void WindowedTraceWriter::records(const std::vector<ChunkBuilder>& drained, uint64_t horizon, bool final) {
  std::vector<Pending>& batch = batch_;
  batch.clear();
  // The records held by the last call; they may be held again (above the horizon still).
  std::vector<Held> prev_held;
  std::vector<uint8_t> prev_bytes;
  prev_held.swap(held_);
  prev_bytes.swap(held_bytes_);
  for (const Held& h : prev_held) {
    Pending p{h.seq, h.kind, std::span<const uint8_t>(prev_bytes.data() + h.offset, h.size)};
    if (!final && p.seq >= horizon)
      hold(p);
    else
      batch.push_back(p);
  }
  for (const auto& chunk : drained) {
    for_each_record(chunk.payload(), [&](RecordKind kind, std::span<const uint8_t> body) {
      seen_any_ = true;
      if (!is_call(kind, body.size())) {
        process_other(kind, body);
        return;
      }
      Pending p{seq_of(body), kind, body};
      if (!final && p.seq >= horizon)
        hold(p);
      else
        batch.push_back(p);
    });
  }
  std::stable_sort(batch.begin(), batch.end(), [](const Pending& a, const Pending& b) { return a.seq < b.seq; });
  size_t next = 0;
  for (const Pending& p : batch) {
    while (next < boundaries_.size() && boundaries_[next].call.seq <= p.seq) apply(boundaries_[next++]);
    process_call(p);
    if (seg_out_.bytes() > (8u << 20) || out_.bytes() > (8u << 20)) flush_pending_out();
  }
  while (next < boundaries_.size() && (final || boundaries_[next].call.seq < horizon)) apply(boundaries_[next++]);
  boundaries_.erase(boundaries_.begin(), boundaries_.begin() + long(next));
  flush_pending_out();
}

void WindowedTraceWriter::apply(const CaptureBoundary& b) {
  if (b.action == CaptureAction::kStep) {
    ++totals_.steps_seen;
    step_ = b.step;
    if (is_ring()) {
      new_segment(b);
      return;
    }
    if (opts_.window == CaptureOptions::Window::kSteps) {
      if (!open_ && step_ >= opts_.first_step && step_ < opts_.end_step) {
        open_window(b);
        return;
      }
      if (open_ && step_ >= opts_.end_step) {
        close_window(b);
        ++gap_steps_;  // the step this marker begins is not written
        return;
      }
    }
    if (open_) {
      if (auto ws = written_seq(b.call.seq)) out_.add(mark(b.call, CaptureAction::kStep, *ws));
    } else {
      ++gap_calls_;
      ++gap_steps_;
    }
    return;
  }
  if (b.action == CaptureAction::kWindowOpen && !open_) {
    open_window(b);
  } else if (b.action == CaptureAction::kWindowClose && open_) {
    close_window(b);
  } else if (!open_) {
    ++gap_calls_;  // an edge that changes nothing (the recorder sends only changes)
  }
}

void WindowedTraceWriter::open_window(const CaptureBoundary& b) {
  open_ = true;
  ++totals_.windows;
  const uint64_t seq0 = written_;
  CaptureMark m = mark(b.call, CaptureAction::kWindowOpen, seq0);
  m.steps_dropped = gap_steps_;
  m.calls_left_out = gap_calls_;
  out_.add(m);
  const uint64_t k = live_.write_snapshot(out_, seq0 + 1, [this](ChunkBuilder&) { flush_pending_out(); });
  out_.add(mark(b.call, CaptureAction::kStateEnd, seq0 + 1 + k));
  intervals_.push_back(Interval{b.call.seq + 1, ~0ull, seq0 + 2 + k});
  written_ = seq0 + 2 + k;
  totals_.steps_dropped += gap_steps_;
  totals_.calls_left_out += gap_calls_;
  gap_calls_ = gap_steps_ = 0;
}

void WindowedTraceWriter::close_window(const CaptureBoundary& b) {
  Interval& cur = intervals_.back();
  const uint64_t ws = cur.new_begin + (b.call.seq - cur.old_begin);
  out_.add(mark(b.call, CaptureAction::kWindowClose, ws));
  cur.old_end = b.call.seq + 1;
  written_ = ws + 1;
  open_ = false;
}

void WindowedTraceWriter::process_call(const Pending& p) {
  RecordView v{p.kind, p.body};
  if (is_ring()) {
    if (segments_.empty()) new_segment(CaptureBoundary{});  // the calls before the first step marker
    seg_out_.add_raw(p.kind, p.body.data(), p.body.size(), nullptr, 0);
    ++segments_.back().calls;
    return;
  }
  live_.observe(v);
  if (auto ws = written_seq(p.seq)) {
    add_renumbered(out_, p.kind, p.body, *ws);
    if (p.kind == RecordKind::kKernelLaunch) {
      auto k = v.as<trace::KernelLaunchHead>();
      if ((k.flags & trace::kKernelPrecise) && precise_written_.size() < (1u << 20)) precise_written_.insert(k.correlation);
    } else if (p.kind == RecordKind::kGraphLaunch && precise_written_.size() < (1u << 20)) {
      precise_written_.insert(v.as<trace::GraphLaunch>().correlation);  // its kernel nodes' intervals follow
    }
  } else {
    ++gap_calls_;
  }
}

void WindowedTraceWriter::process_other(RecordKind kind, std::span<const uint8_t> body) {
  if (kind == RecordKind::kNotice) {
    if (is_ring()) {
      ChunkBuilder c;  // notices are rare: one chunk each, kept with the definitions
      c.add_raw(kind, body.data(), body.size(), nullptr, 0);
      write_definitions(c);
    } else {
      out_.add_raw(kind, body.data(), body.size(), nullptr, 0);
    }
    return;
  }
  // Device timings and precise intervals belong to a launch made a little earlier. Ring:
  // with the segment being written. Windows: timings while the window is open; a precise
  // launch's intervals whenever the launch was written (they come at the next
  // synchronisation, which may be after the window closed).
  if (is_ring()) {
    if (segments_.empty()) new_segment(CaptureBoundary{});
    seg_out_.add_raw(kind, body.data(), body.size(), nullptr, 0);
    return;
  }
  bool keep = open_;
  if (kind == RecordKind::kKernelAccess && body.size() >= sizeof(trace::KernelAccess)) {
    trace::KernelAccess ka;
    std::memcpy(&ka, body.data(), sizeof ka);
    keep = precise_written_.count(ka.correlation) > 0;
  } else if (kind == RecordKind::kKernelNodeAccess && body.size() >= sizeof(trace::KernelNodeAccess)) {
    trace::KernelNodeAccess na;
    std::memcpy(&na, body.data(), sizeof na);
    keep = precise_written_.count(na.correlation) > 0;
  }
  if (keep) out_.add_raw(kind, body.data(), body.size(), nullptr, 0);
}

// ---------------------------------------------------------------------------------------
// Ring

bool WindowedTraceWriter::ensure_ring_files() {
  if (defs_file_) return true;
  if (failed_) return false;
  try {
    ::mkdir(ring_dir_.c_str(), 0755);
    trace::TraceHeader h = header_ ? header_() : trace::TraceHeader{};
    h.extra["capture"] = opts_.describe();
    h.extra["step_range"] = opts_.step_range;
    const std::string p = trace::RingFiles::definitions(ring_dir_);
    ::unlink(p.c_str());  // a stale one from a pid reused
    defs_file_ = std::make_unique<trace::TraceWriter>(p, h);
    return true;
  } catch (const std::exception& e) {
    failed_ = true;
    std::fprintf(stderr, "streamrace: cannot write the ring of %s: %s\n", path_.c_str(), e.what());
    return false;
  }
}

void WindowedTraceWriter::write_definitions(const ChunkBuilder& c) {
  if (c.empty() || !ensure_ring_files()) return;
  try {
    defs_file_->write_chunk(c);
  } catch (const std::exception& e) {
    failed_ = true;
    std::fprintf(stderr, "streamrace: writing the ring of %s failed: %s\n", path_.c_str(), e.what());
  }
}

void WindowedTraceWriter::new_segment(const CaptureBoundary& b) {
  flush_pending_out();
  if (!segments_.empty() && segments_.back().writer) {
    try {
      segments_.back().writer->close();
    } catch (...) {
    }
    segments_.back().writer.reset();
  }
  ensure_ring_files();
  Segment s;
  s.index = next_segment_++;
  s.path = trace::RingFiles::segment(ring_dir_, s.index);
  s.step = b.step;
  s.begin_seq = b.call.seq;
  s.marker = b.call;
  try {
    trace::TraceHeader h;
    h.producer = "libstreamrace ring segment";
    h.extra["ring_segment"] = std::to_string(s.index);
    h.extra["ring_step"] = s.step == trace::kNoStep ? "none" : std::to_string(s.step);
    h.extra["ring_begin_seq"] = std::to_string(s.begin_seq);
    ::unlink(s.path.c_str());  // a stale one from a pid reused
    s.writer = std::make_unique<trace::TraceWriter>(s.path, h);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamrace: cannot write ring segment: %s\n", e.what());
  }
  segments_.push_back(std::move(s));
  if (b.step != trace::kNoStep) {
    seg_out_.add(mark(b.call, CaptureAction::kStep, b.call.seq));
    ++segments_.back().calls;
  }
  while (segments_.size() > opts_.ring) drop_oldest_segment();
}

void WindowedTraceWriter::drop_oldest_segment() {
  Segment& s = segments_.front();
  if (s.writer) {
    try {
      s.writer->close();
    } catch (...) {
    }
    s.writer.reset();
  }
  try {
    trace::TraceReader r(s.path);
    r.for_each([&](const RecordView& v) { live_.observe(v); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamrace: reading back ring segment failed (its state is lost): %s\n", e.what());
  }
  folded_.push_back(s.path);
  newest_folded_ = s.index;
  if (s.step == trace::kNoStep)
    prologue_dropped_ = true;
  else
    ++totals_.steps_dropped;
  totals_.calls_left_out += s.calls;
  segments_.pop_front();
  maybe_checkpoint(false);
}

void WindowedTraceWriter::maybe_checkpoint(bool force) {
  if (newest_folded_ == ~0ull || (folded_.empty() && !force)) return;  // nothing folded (since the last)
  const uint64_t now = monotonic_ns();
  if (!force && folded_.size() < 64 && now - last_checkpoint_ns_ < 10'000'000'000ull) return;
  last_checkpoint_ns_ = now;
  const std::string tmp = trace::RingFiles::state_tmp(ring_dir_);
  try {
    trace::TraceHeader h;
    h.producer = "libstreamrace ring state";
    h.extra["ring_covers_segment"] = std::to_string(newest_folded_);
    h.extra["ring_steps_dropped"] = std::to_string(totals_.steps_dropped);
    ::unlink(tmp.c_str());
    trace::TraceWriter w(tmp, h);
    ChunkBuilder c;
    live_.write_snapshot(c, 0, [&w](ChunkBuilder& full) {
      w.write_chunk(full);
      full.clear();
    });
    w.write_chunk(c);
    w.close();
    if (::rename(tmp.c_str(), trace::RingFiles::state(ring_dir_).c_str()) != 0) return;  // the segments stay
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamrace: writing the ring's state checkpoint failed: %s\n", e.what());
    return;
  }
  for (const auto& p : folded_) ::unlink(p.c_str());
  folded_.clear();
}

void WindowedTraceWriter::assemble_ring() {
  flush_pending_out();
  if (!segments_.empty() && segments_.back().writer) {
    try {
      segments_.back().writer->close();
    } catch (...) {
    }
    segments_.back().writer.reset();
  }
  const uint64_t b0 = segments_.empty() ? 0 : segments_.front().begin_seq;
  // Calls of the dropped step before b0 that reached the flusher after its segment closed:
  // their state goes into the last checkpoint.
  if (b0 > 0) {
    try {
      trace::TraceReader r(segments_.front().path);
      r.for_each([&](const RecordView& v) {
        if (is_call(v.kind, v.body.size()) && seq_of(v.body) < b0) live_.observe(v);
      });
    } catch (const std::exception&) {
    }
  }
  // The last checkpoint: also when nothing was folded since the one before, for the late calls.
  if (b0 > 0) maybe_checkpoint(true);
  if (!ensure_ring_files()) return;
  try {
    defs_file_->close();
  } catch (...) {
  }
  trace::TraceHeader h = header_ ? header_() : trace::TraceHeader{};
  h.extra["capture"] = opts_.describe();
  h.extra["step_range"] = opts_.step_range;
  try {
    trace::assemble_ring(ring_dir_, path_, &h, false);
    created_ = true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamrace: assembling the ring trace %s failed: %s (its segments are left in %s)\n",
                 path_.c_str(), e.what(), ring_dir_.c_str());
    return;
  }
  segments_.clear();
  trace::remove_ring(ring_dir_);
}

void WindowedTraceWriter::finish() {
  if (finished_) return;
  finished_ = true;
  if (!seen_any_) return;
  if (is_ring()) {
    assemble_ring();
    return;
  }
  ChunkBuilder notes;
  if (totals_.windows == 0) {
    notes.add_notice(trace::NoticeLevel::kWarning,
                     "capture window (" + opts_.describe() + ") never opened: " + std::to_string(totals_.steps_seen) +
                         " step markers were seen" + (opts_.step_range.empty() ? "" : " (NVTX range '" + opts_.step_range + "')") +
                         "; no call was written");
  }
  flush_pending_out();
  write_out(notes);
  if (ensure_file()) {
    try {
      file_->close();
    } catch (...) {
    }
  }
}

}  // namespace streamrace::tracer
