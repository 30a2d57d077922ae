// TraceRecorder: see trace_recorder.h.
#include "tracer/trace_recorder.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "tracer/windowed_trace_writer.h"

namespace streamrace::tracer {

namespace {
std::atomic<uint64_t> g_next_recorder_id{1};

pid_t current_tid() { return pid_t(syscall(SYS_gettid)); }

// How long a fatal-signal handler waits for another thread's flush before it gives up on the
// trace. A flush takes milliseconds (tens for a burst of full chunks); one that takes longer
// is most likely stuck on a lock that the interrupted thread holds, and then waiting longer
// only delays the program's death.
constexpr int kFatalFlushWaitMs = 2000;
}  // namespace

class TraceRecorder::FlushLock {
 public:
  explicit FlushLock(TraceRecorder& r) : r_(r) {
    r_.flush_mu_.lock();
    r_.flush_owner_.store(current_tid(), std::memory_order_relaxed);
  }
  // flush_mu_ already taken (by try_lock).
  FlushLock(TraceRecorder& r, std::adopt_lock_t) : r_(r) {
    r_.flush_owner_.store(current_tid(), std::memory_order_relaxed);
  }
  ~FlushLock() {
    r_.flush_owner_.store(0, std::memory_order_relaxed);
    r_.flush_mu_.unlock();
  }
  FlushLock(const FlushLock&) = delete;
  FlushLock& operator=(const FlushLock&) = delete;

 private:
  TraceRecorder& r_;
};

// Set when the calling thread's ThreadSlot was destroyed (trivially destructible, so readable
// for the rest of the thread's exit). exit() runs the main thread's thread_local destructors
// before its atexit handlers and the libraries' destructors, and the tracer records there.
thread_local bool t_slot_destroyed = false;

// The calling thread's buffer in the current recorder. Marked dead when the thread exits so
// the flusher writes what is left and forgets it.
struct TraceRecorder::ThreadSlot {
  uint64_t recorder = 0;
  std::shared_ptr<ThreadBuffer> buf;
  ~ThreadSlot() {
    if (buf) buf->dead.store(true);
    t_slot_destroyed = true;
    current_buffer() = CurrentBuffer{};  // a record during the rest of the thread's exit takes the slow path
  }
};

TraceRecorder::TraceRecorder(RecorderOptions opts) : id_(g_next_recorder_id.fetch_add(1)), opts_(std::move(opts)) {
  if (opts_.capture.active()) {
    windowed_ = std::make_unique<WindowedTraceWriter>(opts_.capture, opts_.path, [this] {
      // Called under flush_mu_.
      trace::TraceHeader h = prepared_header_ ? *prepared_header_
                                              : (opts_.header_provider ? opts_.header_provider() : trace::TraceHeader{});
      h.capture_status = capture_status_;
      return h;
    });
    recording_hint_.store(opts_.capture.ring > 0);
  }
}

void TraceRecorder::mark_step(uint32_t api_id) {
  if (!windowed_ || closed_.load(std::memory_order_relaxed)) return;
  start_once();
  CaptureBoundary b;
  b.call.thread = buffer().index;  // before marks_mu_: buffer() may take registry_mu_
  b.call.api_id = api_id;
  b.action = trace::CaptureAction::kStep;
  std::lock_guard lock(marks_mu_);
  b.call.seq = seq_.fetch_add(1, std::memory_order_relaxed);
  b.call.host_ts_ns = monotonic_ns();
  b.step = next_step_++;
  const CaptureOptions& o = opts_.capture;
  if (o.window == CaptureOptions::Window::kSteps)
    recording_hint_.store(b.step >= o.first_step && b.step < o.end_step, std::memory_order_relaxed);
  marks_.push_back(b);
}

void TraceRecorder::mark_window(bool open, uint32_t api_id) {
  if (!windowed_ || closed_.load(std::memory_order_relaxed)) return;
  const CaptureOptions::Window w = opts_.capture.window;
  if (w != CaptureOptions::Window::kNvtxRange && w != CaptureOptions::Window::kProfiler) return;
  start_once();
  CaptureBoundary b;
  b.call.thread = buffer().index;
  b.call.api_id = api_id;
  b.action = open ? trace::CaptureAction::kWindowOpen : trace::CaptureAction::kWindowClose;
  std::lock_guard lock(marks_mu_);
  if (window_open_ == open) return;
  window_open_ = open;
  b.call.seq = seq_.fetch_add(1, std::memory_order_relaxed);
  b.call.host_ts_ns = monotonic_ns();
  b.step = next_step_ ? next_step_ - 1 : trace::kNoStep;
  recording_hint_.store(open, std::memory_order_relaxed);
  marks_.push_back(b);
}

TraceRecorder::~TraceRecorder() {
  try {
    close();
  } catch (...) {
  }
}

TraceRecorder::ThreadBuffer& TraceRecorder::new_buffer(CurrentBuffer& current) {
  if (t_slot_destroyed) {
    // The thread is exiting and its slot is gone (touching it now would reach a buffer the
    // flusher may have freed: the exit crash of precise mode, whose closing notice is written
    // from an atexit handler). Its later records go to a buffer only the registry owns, never
    // marked dead (the thread may record again through `current`): written with the rest, kept
    // until the recorder closes.
    auto b = std::make_shared<ThreadBuffer>();
    b->tid = pid_t(syscall(SYS_gettid));
    b->index = next_thread_.fetch_add(1);
    {
      std::lock_guard lock(registry_mu_);
      buffers_.push_back(b);
    }
    current = CurrentBuffer{id_, b.get()};
    return *b;
  }
  thread_local ThreadSlot slot;
  if (slot.recorder != id_ || !slot.buf) {
    if (slot.buf) slot.buf->dead.store(true);
    auto b = std::make_shared<ThreadBuffer>();
    b->tid = pid_t(syscall(SYS_gettid));
    {
      // A thread that an index was handed out for before it recorded anything keeps it.
      std::lock_guard lock(registry_mu_);
      for (auto& [tid, index] : foreign_threads_)
        if (tid == b->tid) b->index = index + 1;
    }
    b->index = b->index ? b->index - 1 : next_thread_.fetch_add(1);
    {
      std::lock_guard lock(registry_mu_);
      buffers_.push_back(b);
    }
    slot.buf = std::move(b);
    slot.recorder = id_;
  }
  current = CurrentBuffer{id_, slot.buf.get()};
  return *slot.buf;
}

uint32_t TraceRecorder::thread_index() { return buffer().index; }

uint32_t TraceRecorder::thread_index_of(pid_t tid) {
  std::lock_guard lock(registry_mu_);
  for (auto& b : buffers_)
    if (b->tid == tid && !b->dead.load()) return b->index;
  for (auto& [t, index] : foreign_threads_)
    if (t == tid) return index;
  uint32_t index = next_thread_.fetch_add(1);
  foreign_threads_.emplace_back(tid, index);
  return index;
}

trace::CallInfo TraceRecorder::call(uint32_t api_id, uint32_t stack_id) {
  trace::CallInfo c;
  take_call(c, api_id, stack_id);
  return c;
}

TraceRecorder::ThreadBuffer& TraceRecorder::take_call(trace::CallInfo& c, uint32_t api_id, uint32_t stack_id,
                                                     CurrentBuffer& current) {
  start_once();
  ThreadBuffer& b = buffer(current);
  fill_call(c, b, api_id, stack_id);
  return b;
}

void TraceRecorder::fill_call(trace::CallInfo& c, ThreadBuffer& b, uint32_t api_id, uint32_t stack_id) {
  c = trace::CallInfo{};
  if (bench_unlocked_seq_) [[unlikely]] {
    c.seq = seq_.load(std::memory_order_relaxed);
    seq_.store(c.seq + 1, std::memory_order_relaxed);
  } else {
    c.seq = seq_.fetch_add(1, std::memory_order_relaxed);
  }
  c.host_ts_ns = host_clock::now_ns_after(b.last_ts_ns);
  c.thread = b.index;
  c.stack_id = stack_id;
  c.api_id = api_id;
}

void TraceRecorder::add_raw(trace::RecordKind kind, const void* fixed, size_t fixed_size, const void* tail,
                            size_t tail_size) {
  if (closed_.load(std::memory_order_relaxed)) return;
  start_once();
  append(buffer(), kind, fixed, fixed_size, tail, tail_size);
}

void TraceRecorder::append(ThreadBuffer& b, trace::RecordKind kind, const void* fixed, size_t fixed_size,
                           const void* tail, size_t tail_size) {
  size_t body = fixed_size + tail_size;
  if (body > 0xFFFF) {  // the only variable parts are strings and lists; cut, never overflow
    tail_size = 0xFFFF - fixed_size;
    body = 0xFFFF;
  }
  ThreadChunk* c = room_for(b, sizeof(trace::RecordPrefix) + body);
  if (c == nullptr) return;
  write_record(*c, kind, fixed, fixed_size, tail, tail_size);
}

TraceRecorder::ThreadChunk* TraceRecorder::next_chunk(ThreadBuffer& b, size_t need) {
  bool handed_off = false;
  ThreadChunk* next;
  {
    std::lock_guard lock(b.handoff_mu);
    ThreadChunk* c = b.chunk.get();
    const size_t unflushed = c ? c->pos - c->flushed : 0;
    if (b.pending_full + unflushed + need > opts_.max_buffer_bytes) return nullptr;
    size_t capacity = std::min(opts_.handoff_bytes, opts_.max_buffer_bytes);
    capacity = c ? std::min(capacity, c->capacity * 2) : std::min(capacity, kFirstChunkBytes);
    capacity = std::max(capacity, need);
    if (c && c->pos > 0) {
      b.pending_full += unflushed;
      b.full.push_back(std::move(b.chunk));
      handed_off = true;
    }
    if (b.spare && b.spare->capacity >= need) {
      b.chunk = std::move(b.spare);
    } else {
      b.chunk = std::make_unique<ThreadChunk>();
      b.chunk->data.reset(new uint8_t[capacity]);  // not zeroed: pages are touched as records land
      b.chunk->capacity = capacity;
    }
    next = b.chunk.get();
  }
  if (handed_off && opts_.background_flusher) {
    {
      std::lock_guard wl(wake_mu_);
      handed_off_ = true;
    }
    wake_.notify_one();
  }
  return next;
}

void TraceRecorder::set_deferred_resolver(std::shared_ptr<DeferredResolver> resolver) {
  FlushLock lock(*this);
  resolver_ = std::move(resolver);
  has_resolver_.store(resolver_ != nullptr, std::memory_order_relaxed);
}

void TraceRecorder::add_kernel(const trace::KernelLaunchHead& head, std::span<const uint64_t> ptrs) {
  add_raw(trace::RecordKind::kKernelLaunch, &head, sizeof(head), ptrs.data(), ptrs.size_bytes());
}

void TraceRecorder::add_notice(trace::NoticeLevel level, std::string_view text) {
  add_raw(trace::RecordKind::kNotice, &level, sizeof(level), text.data(), text.size());
}

void TraceRecorder::set_capture_status(const std::string& status) {
  bool already;
  {
    FlushLock lock(*this);
    capture_status_ = status;
    already = writer_ != nullptr;
  }
  // The analyzer reads this exact text as the trace's capture status (analyzer/trace_analysis.cpp).
  if (already) add_notice(trace::NoticeLevel::kError, "capture status changed: " + status);
}

void TraceRecorder::start_flusher() {
  bool expected = false;
  if (!started_.compare_exchange_strong(expected, true)) return;
  if (opts_.background_flusher) {
    try {
      flusher_ = std::thread([this] { flusher_main(); });
    } catch (...) {
      // No thread: records still reach the file at flush()/close().
    }
  }
}

bool TraceRecorder::ensure_open_locked(trace::TraceHeader* prepared) {
  if (writer_) return true;
  if (failed_.load()) return false;
  try {
    trace::TraceHeader h = prepared ? *prepared : (opts_.header_provider ? opts_.header_provider() : trace::TraceHeader{});
    h.capture_status = capture_status_;
    writer_ = std::make_unique<trace::TraceWriter>(opts_.path, h);
    created_.store(true);
    return true;
  } catch (const std::exception& e) {
    failed_.store(true);
    std::fprintf(stderr, "streamrace: cannot write trace %s: %s\n", opts_.path.c_str(), e.what());
    return false;
  }
}

void TraceRecorder::open_now() {
  start_once();
  // A windowed trace is created by its writer, which writes whatever it was given at close
  // (a capture failure's notice included).
  if (windowed_) return;
  trace::TraceHeader h;
  bool need = false;
  {
    FlushLock lock(*this);
    need = !writer_;
  }
  if (need && opts_.header_provider) h = opts_.header_provider();
  FlushLock lock(*this);
  ensure_open_locked(need && opts_.header_provider ? &h : nullptr);
}

void TraceRecorder::flush_locked(bool nonblocking, bool final, bool drain_only) {
  if (windowed_) {
    flush_windowed_locked(nonblocking, final);
    return;
  }
  if (sealed_) {
    // The end-of-trace marker is written for an exec (seal_for_exec): records wait, unless the
    // exec failed and the marker is to be taken back (whoever flushes first: the flusher, or a
    // close or fatal signal before it got to it).
    take_back_marker_locked();
    if (sealed_) return;
  }
  // 1. Drain the thread buffers first: every record drained here was appended after the
  //    strings and stacks it names were interned, so step 2 sees all of them.
  std::vector<trace::ChunkBuilder>& drained = drained_;
  {
    std::unique_lock reg(registry_mu_, std::defer_lock);
    if (nonblocking) {
      // A fatal signal's flush with the registry taken (a thread being added): no drain, but
      // what earlier drains kept is written below.
      if (reg.try_lock()) {
        drain_buffers_locked(nonblocking, drained);
      } else if (drained.empty() || drained.front().empty()) {
        return;
      }
    } else {
      reg.lock();
      drain_buffers_locked(nonblocking, drained);
    }
  }
  if (drain_only) {
    size_t waiting = 0;
    for (const auto& c : drained) waiting += c.bytes();
    if (waiting < kWriteBytes) return;
  }
  // What was drained is written below (or, without a file to write to, dropped): the builders
  // are emptied for the next drain however this returns.
  struct Emptied {
    std::vector<trace::ChunkBuilder>& d;
    ~Emptied() { empty_builders(d); }
  } emptied{drained};
  const bool none = drained.empty() || drained.front().empty();
  // Interned strings alone (no record yet) never create the file.
  if (none && !writer_ && deferred_unresolved_ == 0) return;
  // 2. Definitions, stacks before strings since symbolizing interns module names.
  auto stacks = stacks_.take_pending(strings_);
  auto strings = strings_.take_pending();
  if (none && stacks.empty() && strings.empty() && dropped_.load() == dropped_reported_ && deferred_notice_.empty() &&
      deferred_unresolved_ == 0)
    return;
  if (!ensure_open_locked(nullptr)) return;
  try {
    trace::ChunkBuilder defs = definitions_locked(strings, stacks);
    if (!defs.empty()) writer_->write_chunk(defs);
    for (const auto& c : drained)
      if (!c.empty()) writer_->write_chunk(c);
  } catch (const std::exception& e) {
    failed_.store(true);
    std::fprintf(stderr, "streamrace: writing trace %s failed: %s\n", opts_.path.c_str(), e.what());
    writer_.reset();
  }
}

trace::ChunkBuilder TraceRecorder::definitions_locked(const std::vector<std::pair<uint32_t, std::string>>& strings,
                                                      const std::vector<PendingStack>& stacks) {
  trace::ChunkBuilder defs;
  for (auto& [id, text] : strings) defs.add_string(id, text);
  for (auto& s : stacks) defs.add_stack(s.id, s.frames);
  uint64_t dropped = dropped_.load();
  if (dropped != dropped_reported_) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "%llu records dropped: a thread's buffer outgrew its limit",
                  static_cast<unsigned long long>(dropped - dropped_reported_));
    defs.add_notice(trace::NoticeLevel::kWarning, msg);
    dropped_reported_ = dropped;
  }
  if (!deferred_notice_.empty()) {
    defs.add_notice(trace::NoticeLevel::kWarning, deferred_notice_);
    deferred_notice_.clear();
  }
  if (deferred_unresolved_ != 0) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "%llu kernel launches dropped: their argument scan had no one to finish it",
                  static_cast<unsigned long long>(deferred_unresolved_));
    defs.add_notice(trace::NoticeLevel::kWarning, msg);
    deferred_unresolved_ = 0;
  }
  return defs;
}

void TraceRecorder::empty_builders(std::vector<trace::ChunkBuilder>& drained) {
  if (drained.size() > 2) drained.resize(2);  // after a burst, the memory goes back
  for (auto& c : drained) c.clear();
}

void TraceRecorder::drain_buffers_locked(bool nonblocking, std::vector<trace::ChunkBuilder>& drained) {
  std::vector<DrainedRange> ranges;
  std::vector<std::unique_ptr<ThreadChunk>> done;  // drained full chunks, recycled after the copy
  for (size_t i = 0; i < buffers_.size();) {
    auto& b = buffers_[i];
    // Read before the chunks: a thread publishes its last record before it is marked dead.
    const bool dead = b->dead.load();
    std::unique_lock lock(b->handoff_mu, std::defer_lock);
    if (nonblocking) {
      if (!lock.try_lock()) {
        ++i;
        continue;
      }
    } else {
      lock.lock();
    }
    const bool filled = !b->full.empty();  // it filled a chunk since the last drain
    for (auto& c : b->full) {
      ranges.push_back({c.get(), c->flushed, c->committed.load(std::memory_order_acquire)});
      done.push_back(std::move(c));
    }
    b->full.clear();
    b->pending_full = 0;
    if (ThreadChunk* c = b->chunk.get()) {
      const size_t to = c->committed.load(std::memory_order_acquire);
      if (to > c->flushed) ranges.push_back({c, c->flushed, to});
      c->flushed = to;
    }
    // A thread that fills chunks between drains gets its next one ready.
    if (!dead && filled && !b->spare && !spare_chunks_.empty()) {
      b->spare = std::move(spare_chunks_.back());
      spare_chunks_.pop_back();
    }
    lock.unlock();
    if (dead) {
      // Its chunk is kept alive by `done` until the copy below.
      if (b->chunk) done.push_back(std::move(b->chunk));
      buffers_.erase(buffers_.begin() + long(i));
    } else {
      ++i;
    }
  }
  // Deferred records first (tracer/deferred_scan.h): the resolver finishes all of the drain's
  // at once (it replays the allocation table's changes in version order), before the copy.
  std::vector<DeferredResolver::Item>& items = deferred_items_;
  items.clear();
  for (const DrainedRange& r : ranges) {
    const uint8_t* p = r.chunk->data.get() + r.from;
    const uint8_t* end = r.chunk->data.get() + r.to;
    while (p < end) {
      trace::RecordPrefix prefix;
      std::memcpy(&prefix, p, sizeof(prefix));
      if (trace::RecordKind(prefix.kind) == kDeferredKernelLaunch)
        items.push_back({p + sizeof(prefix), prefix.body_size});
      p += sizeof(prefix) + prefix.body_size;
    }
  }
  // Every drain, deferred records or not: the resolver takes the allocation table's changes
  // each time, so its log never grows with a run's allocations.
  if (!items.empty() || resolver_) {
    bool resolved = false;
    if (resolver_) {
      try {
        resolver_->resolve(items, deferred_out_, nonblocking);
        resolved = true;
      } catch (...) {
      }
    }
    if (!resolved) {
      for (auto& item : items) item.out_size = 0;
      deferred_unresolved_ += items.size();
    }
    if (resolver_) deferred_notice_ += resolver_->take_notice();
  }
  size_t next_item = 0;
  // Into builders of up to 8 MiB (one compressed chunk each), reused from the last drain so
  // that their pages are faulted in once; each record copied whole (a range is whole records).
  size_t out_index = 0;  // after the last builder that holds records
  while (out_index + 1 < drained.size() && !drained[out_index + 1].empty()) ++out_index;
  for (const DrainedRange& r : ranges) {
    if (drained.empty()) drained.emplace_back();
    if (drained[out_index].bytes() + (r.to - r.from) > (8u << 20) && !drained[out_index].empty()) {
      if (++out_index == drained.size()) drained.emplace_back();
    }
    trace::ChunkBuilder& out = drained[out_index];
    const uint8_t* p = r.chunk->data.get() + r.from;
    const uint8_t* end = r.chunk->data.get() + r.to;
    while (p < end) {
      trace::RecordPrefix prefix;
      std::memcpy(&prefix, p, sizeof(prefix));
      if (trace::RecordKind(prefix.kind) == kDeferredKernelLaunch) [[unlikely]] {
        const DeferredResolver::Item& item = items[next_item++];
        if (item.out_size != 0)
          out.add_raw(trace::RecordKind::kKernelLaunch, deferred_out_.data() + item.out_offset, item.out_size, nullptr, 0);
      } else {
        out.add_raw(trace::RecordKind(prefix.kind), p + sizeof(prefix), prefix.body_size, nullptr, 0);
      }
      p += sizeof(prefix) + prefix.body_size;
    }
  }
  for (auto& c : done) {
    if (spare_chunks_.size() >= kSpareChunks || c->capacity != opts_.handoff_bytes) continue;
    c->pos = 0;
    c->flushed = 0;
    c->committed.store(0, std::memory_order_relaxed);
    spare_chunks_.push_back(std::move(c));
  }
}

void TraceRecorder::flush_windowed_locked(bool nonblocking, bool final) {
  // The boundaries known now, and the seq below which every boundary is among them (a
  // marker takes its seq and adds its boundary under marks_mu_). Read before draining, so
  // every call drained with a seq below `horizon` is placed by a known boundary.
  std::vector<CaptureBoundary> marks;
  uint64_t horizon = 0;
  std::vector<trace::ChunkBuilder>& drained = drained_;
  {
    std::unique_lock reg(registry_mu_, std::defer_lock);
    if (nonblocking) {
      if (!reg.try_lock()) return;
    } else {
      reg.lock();
    }
    // A marker holds marks_mu_ alone (never registry_mu_ inside it), so taking it here, inside
    // registry_mu_, cannot deadlock; a signal handler only tries.
    {
      std::unique_lock ml(marks_mu_, std::defer_lock);
      if (nonblocking ? ml.try_lock() : (ml.lock(), true)) {
        marks.swap(marks_);
        horizon = seq_.load();
      } else {
        final = false;  // nothing is placed without its boundaries
      }
    }
    empty_builders(drained);  // the last windowed flush placed all it drained
    drain_buffers_locked(nonblocking, drained);
  }
  auto stacks = stacks_.take_pending(strings_);
  auto strings = strings_.take_pending();
  try {
    trace::ChunkBuilder defs = definitions_locked(strings, stacks);
    windowed_->definitions(defs);
    for (const auto& m : marks) windowed_->boundary(m);
    windowed_->records(drained, horizon, final);
    if (final) windowed_->finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamrace: writing trace %s failed: %s\n", opts_.path.c_str(), e.what());
  }
  if (windowed_->file_created()) created_.store(true);
}

void TraceRecorder::flush() {
  FlushLock lock(*this);
  flush_locked(false);
}

void TraceRecorder::emergency_flush(bool finish) {
  if (!flush_mu_.try_lock()) {
    // Not finishing: the process goes on, and the flush in progress (or the next) writes the
    // records; nothing is lost by leaving now.
    if (!finish) return;
    // The process is about to die. Most often the flush lock is held by the flusher thread,
    // which takes no signal and gives the lock back within milliseconds: the flusher creates
    // the file (open, then the header) under it when it starts, so a short program killed just
    // then used to leave an empty file, and one killed during a periodic flush a trace without
    // its end marker. Wait for it, a bounded time, but never for the thread this handler
    // interrupted: it cannot give the lock back before the handler returns (interrupted in
    // the few instructions between taking the lock and naming itself the owner, it costs the
    // whole bound). Only async-signal-safe calls here (syscall, nanosleep) besides try_lock.
    const pid_t self = current_tid();
    for (int waited_ms = 0; !flush_mu_.try_lock(); ++waited_ms) {
      if (waited_ms >= kFatalFlushWaitMs || flush_owner_.load(std::memory_order_relaxed) == self) return;
      timespec ms{0, 1000000};
      nanosleep(&ms, nullptr);
    }
  }
  FlushLock lock(*this, std::adopt_lock);
  flush_locked(true, finish);
  if (!finish) return;
  try {
    if (writer_) writer_->close();
  } catch (...) {
  }
}

void TraceRecorder::flusher_main() {
  // Never let the flusher take signals meant for the program's own threads.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_setname_np(pthread_self(), "streamrace-flush");
  // Build the header (it may ask the driver about devices) before taking any lock.
  trace::TraceHeader header;
  if (opts_.header_provider) header = opts_.header_provider();
  {
    FlushLock lock(*this);
    if (windowed_)
      prepared_header_ = header;  // the windowed writer creates its file when it has something
    else if (!closed_.load())
      ensure_open_locked(&header);
  }
  std::unique_lock wl(wake_mu_);
  const auto period = std::chrono::milliseconds(opts_.period_ms);
  auto last_write = std::chrono::steady_clock::now();
  while (!stop_) {
    wake_.wait_until(wl, last_write + period, [this] { return stop_ || handed_off_; });
    if (stop_) break;
    handed_off_ = false;
    wl.unlock();
    if (exec_state_.load(std::memory_order_relaxed) == kExecWanted || unseal_wanted_.load(std::memory_order_relaxed)) {
      do_exec_requests();
      if (closed_.load()) return;  // a windowed trace closed for an exec: this thread is detached
    }
    // A chunk handed off before the period is up: drained now (the thread gets it back while
    // it is still in the CPU's caches), written with the period's flush.
    const auto now = std::chrono::steady_clock::now();
    if (now < last_write + period) {
      FlushLock lock(*this);
      flush_locked(false, false, /*drain_only=*/true);
    } else {
      flush();
      last_write = now;
      host_clock::adjust();  // setting host_clock=tsc: the counter's scale, once a period
    }
    wl.lock();
  }
}

TraceRecorder::ExecSeal TraceRecorder::do_exec_seal() {
  if (exec_before_) {
    try {
      exec_before_();
    } catch (...) {
    }
  }
  if (windowed_) {
    close();  // from the flusher: it detaches itself and stops
    return ExecSeal::kClosed;
  }
  FlushLock lock(*this);
  if (closed_.load() || sealed_) return ExecSeal::kNone;
  flush_locked(false, false);
  if (!writer_) return ExecSeal::kNone;  // nothing was ever written: nothing to finish
  try {
    writer_->write_end_marker();
  } catch (const std::exception& e) {
    failed_.store(true);
    std::fprintf(stderr, "streamrace: writing trace %s failed: %s\n", opts_.path.c_str(), e.what());
    writer_.reset();
    return ExecSeal::kNone;
  }
  sealed_ = true;
  return ExecSeal::kSealed;
}

void TraceRecorder::do_exec_requests() {
  int wanted = kExecWanted;
  if (exec_state_.compare_exchange_strong(wanted, kExecRunning)) {
    exec_result_.store(int(do_exec_seal()));
    exec_state_.store(kExecDone);
  }
  if (unseal_wanted_.load()) {
    // After the seal above, or with none in progress (one the exec's wait gave up on and
    // cancelled before it ran): take the marker back if it is there.
    FlushLock lock(*this);
    take_back_marker_locked();
  }
}

void TraceRecorder::take_back_marker_locked() {
  if (!unseal_wanted_.exchange(false)) return;
  if (sealed_) {
    sealed_ = false;
    try {
      if (writer_) writer_->remove_end_marker();
    } catch (const std::exception& e) {
      failed_.store(true);
      std::fprintf(stderr, "streamrace: trace %s: %s; later records are not written\n", opts_.path.c_str(), e.what());
      writer_.reset();
    }
  }
  exec_state_.store(kExecIdle);
}

void TraceRecorder::wake_flusher_if_free() {
  // Not waiting for wake_mu_ (its holder may be the thread a signal handler interrupted): if
  // it is taken, the flusher wakes at its period (200 ms) all the same.
  if (!wake_mu_.try_lock()) return;
  handed_off_ = true;
  wake_mu_.unlock();
  wake_.notify_one();
}

TraceRecorder::ExecSeal TraceRecorder::seal_for_exec(std::function<void()> before, int wait_ms) {
  if (!started_.load() || closed_.load()) return ExecSeal::kNone;  // nothing recorded, or finished
  // Claimed by this thread until the request is published (another thread's exec in progress,
  // or a failed one's not yet taken back: this exec goes on without one).
  int idle = kExecIdle;
  if (!exec_state_.compare_exchange_strong(idle, kExecClaimed)) return ExecSeal::kNone;
  exec_before_ = std::move(before);
  if (!has_flusher_thread()) {
    // No flusher thread (tests, or none could be started): the calling thread does it.
    exec_state_.store(kExecRunning);
    const ExecSeal r = do_exec_seal();
    exec_result_.store(int(r));
    exec_state_.store(r == ExecSeal::kSealed ? kExecDone : kExecIdle);  // only a seal is taken back
    return r;
  }
  exec_state_.store(kExecWanted);
  wake_flusher_if_free();
  for (int waited_ms = 0; exec_state_.load() != kExecDone; ++waited_ms) {
    if (waited_ms >= wait_ms) {
      int wanted = kExecWanted;
      if (exec_state_.compare_exchange_strong(wanted, kExecIdle)) return ExecSeal::kNone;  // never ran
      // Running: the exec goes on without waiting for it; a failed one asks to take the
      // marker back, which the flusher does after the seal (a windowed trace's close, though,
      // is not undone: a failed exec's later records are then dropped).
      return ExecSeal::kSealed;
    }
    timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
  const ExecSeal r = ExecSeal(exec_result_.load());
  if (r != ExecSeal::kSealed) exec_state_.store(kExecIdle);  // only a seal is taken back
  return r;
}

void TraceRecorder::unseal_after_exec() {
  unseal_wanted_.store(true);
  if (!has_flusher_thread()) {
    do_exec_requests();
    return;
  }
  wake_flusher_if_free();
}

void TraceRecorder::close() {
  {
    std::lock_guard wl(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  {
    // Two closers at once (exit handlers racing a signal, a destructor) must not both join:
    // the second pthread_join would fail with EINVAL and throw.
    std::lock_guard cl(close_mu_);
    if (flusher_.joinable()) {
      try {
        if (flusher_.get_id() == std::this_thread::get_id()) {
          flusher_.detach();
        } else {
          flusher_.join();
        }
      } catch (const std::system_error&) {
        if (flusher_.joinable()) flusher_.detach();
      }
    }
  }
  FlushLock lock(*this);
  if (closed_.exchange(true)) return;
  flush_locked(false, true);
  try {
    if (writer_) writer_->close();
  } catch (...) {
  }
}

}  // namespace streamrace::tracer
