// TraceRecorder: where the tracer's records go. Each host thread appends to chunks of its own
// without taking a lock: it writes a record past the end of the last one and then publishes
// the chunk's new length (a release store), and the flusher reads only up to the published
// length, so neither ever writes what the other reads. A full chunk (handoff_bytes, less for a
// thread's first ones) is handed off whole under a lock the thread takes only then, and
// replaced by a spare the flusher gave back: a thread never grows a buffer (no copy, no fresh
// pages in the steady state). A background flusher drains the buffers when a chunk was handed
// off (the chunk then goes back to its thread while still in the CPU's caches) and every period;
// each period, or once kWriteBytes of drained records wait, it writes the strings and stacks they
// refer to first, and appends the records to the trace file through trace::TraceWriter. The file is created on the first
// record, so a process that never uses CUDA leaves nothing behind.
//
// Lock order: close_mu_ (close() only, held while joining the flusher, which takes the
// others) then flush_mu_ -> registry_mu_ -> ThreadBuffer::handoff_mu (capture windows:
// marks_mu_, below). Appending threads take only their own ThreadBuffer::handoff_mu, and only
// to hand off a chunk. No lock is held while calling into CUDA. The drain's resolver of
// deferred records (tracer/deferred_scan.h) takes, under flush_mu_ and registry_mu_, only the
// allocation table's AllocationChangeLog lock, which the table takes inside its own lock and
// nothing else takes at all (never the table's lock itself).
#pragma once

#include <atomic>
#include <cstring>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <thread>
#include <vector>

#include "traceformat/trace_file.h"
#include "tracer/capture_options.h"
#include "tracer/host_clock.h"
#include "tracer/stack_table.h"
#include "tracer/string_table.h"
#include "tracer/thread_state.h"

namespace streamrace::tracer {

struct RecorderOptions {
  std::string path;                                     // the trace file to create
  std::function<trace::TraceHeader()> header_provider;  // called once, before the file is created
  bool background_flusher = true;  // false: records reach the file only on flush()/close()
  uint32_t period_ms = 200;
  // A thread's chunk at most (setting chunk_kib): when full, handed off and the flusher woken to
  // drain it, so that the thread writes the same memory again while it is still in the CPU's
  // caches (4 MiB until session 39: a loop launch's record cost ~0.07 µs more on the GPU host).
  size_t handoff_bytes = 256u << 10;
  size_t max_buffer_bytes = 48u << 20;  // beyond this, records are dropped (and counted)
  CaptureOptions capture;  // active: only a window or a ring of steps is written (windowed_trace_writer.h)
};

class WindowedTraceWriter;
struct CaptureBoundary;

// A record a thread writes in a form only the flusher finishes (tracer/deferred_scan.h): this
// kind never reaches a file. The drain hands every such record to the recorder's resolver,
// which writes the KernelLaunch it stands for (without a resolver it is dropped and counted).
inline constexpr trace::RecordKind kDeferredKernelLaunch = trace::RecordKind(0x7F01);

class DeferredResolver {
 public:
  virtual ~DeferredResolver() = default;
  struct Item {
    const uint8_t* body;  // the deferred record's body (fixed part and tail)
    uint32_t size;
    uint32_t out_offset = 0;  // set by resolve(): the KernelLaunch body in `out`
    uint32_t out_size = 0;    // 0: nothing written for it
  };
  // Called under the recorder's flush lock (one call at a time), from the flusher or from a
  // thread that flushes; `nonblocking` from a fatal-signal handler (take no lock that may be
  // held). Writes each item's KernelLaunch body into `out`.
  virtual void resolve(std::vector<Item>& items, std::vector<uint8_t>& out, bool nonblocking) = 0;
  // A warning for the trace since the last call, or "" (written with the next definitions).
  virtual std::string take_notice() = 0;
};

class TraceRecorder {
 public:
  // Unique per recorder in the process (never reused, unlike its address): per-thread caches of
  // facts that belong to one recorder (string ids) key on it.
  uint64_t uid() const { return id_; }
  explicit TraceRecorder(RecorderOptions opts);
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  StringTable& strings() { return strings_; }
  StackTable& stacks() { return stacks_; }

  // The common part of a call record: next seq, CLOCK_MONOTONIC, this thread's index.
  trace::CallInfo call(uint32_t api_id, uint32_t stack_id);
  // Small index of the calling thread in this trace (0, 1, ...).
  uint32_t thread_index();
  // The index of the thread with kernel thread id `tid` (one that has recorded, else a new
  // index kept for it): records written on its behalf by another thread (HostAccess).
  uint32_t thread_index_of(pid_t tid);
  // The seq counter itself, for a signal handler that must take a seq without a call (one
  // lock-free fetch_add; see page_guard.cpp).
  std::atomic<uint64_t>& seq_counter() { return seq_; }
  // Setting bench_cut 6 (benchmarks only): a record's sequence number from a load and a store,
  // not a locked add, to measure what the add's fence costs a launch on the GPU machine. Threads
  // that record at once may then take the same number. Set before the first record.
  void set_bench_unlocked_seq(bool on) { bench_unlocked_seq_ = on; }

  template <trace::FixedRecord T>
  void add(const T& rec) {
    add_raw(T::kKind, &rec, sizeof(T), nullptr, 0);
  }
  // A call record: sets rec.call as call(api_id, stack_id) would, then appends the record with
  // `tail` after it; the thread's buffer is looked up once for both (in libstreamrace.so each
  // look-up is a call of __tls_get_addr).
  template <trace::FixedRecord T>
  void add_call(T& rec, uint32_t api_id, uint32_t stack_id, std::span<const uint64_t> tail = {}) {
    add_call(thread_state(), rec, api_id, stack_id, tail);
  }
  // The same for a caller that has the thread's state.
  template <trace::FixedRecord T>
  void add_call(TracerThreadState& ts, T& rec, uint32_t api_id, uint32_t stack_id, std::span<const uint64_t> tail = {}) {
    ThreadBuffer& b = take_call(rec.call, api_id, stack_id, ts.recorder_buffer);
    if (closed_.load(std::memory_order_relaxed)) return;
    append_record(b, rec, tail);
  }
  // A kernel launch whose argument scan the flusher finishes (kDeferredKernelLaunch): `rec`
  // with its CallInfo taken as add_call's, then `tail` (tracer/deferred_scan.h's layout).
  void add_deferred_kernel(TracerThreadState& ts, trace::KernelLaunchHead& rec, uint32_t api_id, uint32_t stack_id,
                           std::span<const uint64_t> tail) {
    ThreadBuffer& b = take_call(rec.call, api_id, stack_id, ts.recorder_buffer);
    if (closed_.load(std::memory_order_relaxed)) return;
    append_record(b, rec, tail, kDeferredKernelLaunch);
  }
  // The same with the tail written in place: `fill(out)` writes the tail, `words` words, straight
  // into the thread's chunk (no copy through a scratch buffer) and answers whether it could;
  // when it could not, nothing is recorded and this answers false (the caller records the launch
  // another way). A closed recorder, or a chunk that cannot be had within max_buffer_bytes
  // (counted as dropped, as add_deferred_kernel's would be), takes the launch and records nothing.
  template <typename Fill>
  bool add_deferred_kernel_in_place(TracerThreadState& ts, trace::KernelLaunchHead& rec, uint32_t api_id,
                                    uint32_t stack_id, size_t words, Fill&& fill) {
    start_once();
    const size_t body = sizeof(rec) + words * sizeof(uint64_t);
    if (body > 0xFFFF) [[unlikely]]
      return false;
    if (closed_.load(std::memory_order_relaxed)) return true;
    ThreadBuffer& b = buffer(ts.recorder_buffer);
    ThreadChunk* c = room_for(b, sizeof(trace::RecordPrefix) + body);
    if (c == nullptr) return true;
    uint8_t* at = c->data.get() + c->pos;
    if (!fill(at + sizeof(trace::RecordPrefix) + sizeof(rec))) [[unlikely]]  // (not aligned: stores by memcpy)
      return false;
    fill_call(rec.call, b, api_id, stack_id);
    commit_record(*c, at, kDeferredKernelLaunch, &rec, sizeof(rec), body);
    return true;
  }
  // Who finishes deferred records (replacing any earlier one). Kept alive by the recorder.
  void set_deferred_resolver(std::shared_ptr<DeferredResolver> resolver);
  bool has_deferred_resolver() const { return has_resolver_.load(std::memory_order_relaxed); }
  void add_kernel(const trace::KernelLaunchHead& head, std::span<const uint64_t> ptrs);
  void add_notice(trace::NoticeLevel level, std::string_view text);
  void add_raw(trace::RecordKind kind, const void* fixed, size_t fixed_size, const void* tail, size_t tail_size);

  // Header field set before the file exists (a Notice is added as well if it already does).
  void set_capture_status(const std::string& status);
  // Creates the file now even without records (the user must learn that capture failed).
  void open_now();
  // Writes everything buffered so far. Safe from any thread; not from a signal handler.
  void flush();
  // Flushes, writes the end-of-trace marker, stops the flusher. Later records are dropped.
  void close();
  // A process about to exec (its image, threads and buffers go). The flusher thread runs
  // `before` (the process's last collection: CUPTI's activity, caught host accesses), then
  // writes everything recorded so far and the end-of-trace marker after it, the file staying
  // open (until unseal_after_exec() nothing more is written: records wait in their buffers);
  // a windowed trace (written whole only at close) is closed instead. The calling thread waits
  // for that at most `wait_ms`: an exec may come from a signal handler that interrupted a
  // thread holding a lock the work needs (malloc's, the tracer's), and must not wait for
  // itself. Inline where there is no flusher thread.
  enum class ExecSeal { kNone, kSealed, kClosed };
  ExecSeal seal_for_exec(std::function<void()> before, int wait_ms);
  // The exec failed and the process goes on: the flusher takes the marker back (after a seal
  // still in progress), without waiting for it; the records meanwhile wait in their buffers.
  void unseal_after_exec();
  // From a fatal-signal handler: flushes what it can without waiting on any lock but the
  // flush lock. `finish`: the process is about to die, so the file is finished too, after
  // waiting (a bounded time) for a flush that another thread (the flusher) is in the middle of;
  // otherwise (the program handles the signal itself and may go on) the file stays open for
  // the records that follow, and a flush in progress is left to do its work.
  void emergency_flush(bool finish = true);

  // Capture windows and ring mode (docs/long-runs.md). A step marker (the step range was
  // pushed) or a window edge takes a seq like a call; the flusher decides from those seqs
  // which calls are written. Only changes of the window are kept (an open window is not
  // opened again). No-ops when the policy is not active.
  const CaptureOptions& capture() const { return opts_.capture; }
  void mark_step(uint32_t api_id);
  void mark_window(bool open, uint32_t api_id);
  // Whether calls made now are likely written (false between windows: stacks can be skipped).
  bool recording_hint() const { return recording_hint_.load(std::memory_order_relaxed); }

  bool file_created() const { return created_.load(); }
  const std::string& path() const { return opts_.path; }
  uint64_t dropped() const { return dropped_.load(); }

 private:
  // Records of one thread: [0, committed) are whole records, written by the thread before it
  // published `committed`; the flusher has taken [0, flushed).
  struct ThreadChunk {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
    size_t pos = 0;                    // the thread's own: where its next record goes
    std::atomic<size_t> committed{0};  // stored by the thread (release), read by the flusher
    size_t flushed = 0;                // under the buffer's handoff_mu
  };
  struct ThreadBuffer {
    // The chunk being appended to: replaced by its thread alone, under handoff_mu.
    std::unique_ptr<ThreadChunk> chunk;
    uint32_t index = 0;  // (beside chunk: a record reads both)
    pid_t tid = 0;
    uint64_t last_ts_ns = 0;  // host_clock=tsc: the thread's last record time (host_clock::now_ns_after)
    std::mutex handoff_mu;
    std::vector<std::unique_ptr<ThreadChunk>> full;  // handed off since the last drain, oldest first
    size_t pending_full = 0;                         // their bytes not yet flushed
    std::unique_ptr<ThreadChunk> spare;              // given back by the flusher: the next chunk
    std::atomic<bool> dead{false};
  };
  // A range of a thread chunk to copy into the drained records (outside handoff_mu: bytes
  // below `committed` never change, and a chunk is recycled only by a later drain).
  struct DrainedRange {
    const ThreadChunk* chunk;
    size_t from, to;
  };
  struct ThreadSlot;
  // The calling thread's buffer in the recorder it used last, read on every record: kept in
  // the thread's TracerThreadState (trivially destructible, so reading it takes no guard, and
  // a caller that has the state finds it without a thread_local: in libstreamrace.so each
  // naming of one is a __tls_get_addr call); ThreadSlot owns the buffer.
  using CurrentBuffer = RecorderBufferRef;
  static CurrentBuffer& current_buffer() { return thread_state().recorder_buffer; }
  ThreadBuffer& buffer() { return buffer(current_buffer()); }
  ThreadBuffer& buffer(CurrentBuffer& current) {
    if (current.recorder == id_ && current.buf != nullptr) [[likely]] return *static_cast<ThreadBuffer*>(current.buf);
    return new_buffer(current);
  }
  ThreadBuffer& new_buffer(CurrentBuffer& current);
  // call()'s work, returning the buffer it looked up.
  ThreadBuffer& take_call(trace::CallInfo& c, uint32_t api_id, uint32_t stack_id) {
    return take_call(c, api_id, stack_id, current_buffer());
  }
  ThreadBuffer& take_call(trace::CallInfo& c, uint32_t api_id, uint32_t stack_id, CurrentBuffer& current);
  // take_call's work once the buffer is found: the sequence number, the time, the thread.
  void fill_call(trace::CallInfo& c, ThreadBuffer& b, uint32_t api_id, uint32_t stack_id);
  // add_raw() once the recorder is known open and the buffer found.
  void append(ThreadBuffer& b, trace::RecordKind kind, const void* fixed, size_t fixed_size, const void* tail,
              size_t tail_size);
  // The thread's current chunk is full for `need` more bytes: hands it off and returns the next
  // one, or nullptr when the thread's unflushed records would exceed max_buffer_bytes.
  ThreadChunk* next_chunk(ThreadBuffer& b, size_t need);
  // append() of a fixed record and its words, inline: the record's size is known, so its copy
  // is a few moves (no call); a chunk that is full, or a body too long, goes through append().
  template <trace::FixedRecord T>
  void append_record(ThreadBuffer& b, const T& rec, std::span<const uint64_t> tail, trace::RecordKind kind = T::kKind) {
    const size_t tail_bytes = tail.size_bytes();
    const size_t need = sizeof(trace::RecordPrefix) + sizeof(T) + tail_bytes;
    ThreadChunk* c = b.chunk.get();
    if (sizeof(T) + tail_bytes > 0xFFFF || c == nullptr || c->pos + need > c->capacity) [[unlikely]]
      return append(b, kind, &rec, sizeof(T), tail.data(), tail_bytes);
    write_record(*c, kind, &rec, sizeof(T), tail.data(), tail_bytes);
  }
  // The thread's chunk with room for `need` more bytes (the next one when it is full), or nullptr
  // when the thread's unflushed records would exceed max_buffer_bytes (the record is counted as
  // dropped).
  ThreadChunk* room_for(ThreadBuffer& b, size_t need) {
    ThreadChunk* c = b.chunk.get();
    if (c == nullptr || c->pos + need > c->capacity) [[unlikely]] {
      c = next_chunk(b, need);
      if (c == nullptr) dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    return c;
  }
  // One record into a chunk with room for it (its body at most 0xFFFF bytes), committed.
  static void write_record(ThreadChunk& c, trace::RecordKind kind, const void* fixed, size_t fixed_size,
                           const void* tail, size_t tail_size) {
    uint8_t* at = c.data.get() + c.pos;
    if (tail_size != 0) std::memcpy(at + sizeof(trace::RecordPrefix) + fixed_size, tail, tail_size);
    commit_record(c, at, kind, fixed, fixed_size, fixed_size + tail_size);
  }
  // The prefix and the fixed part of a record at `at` (the chunk's end) whose body (`body_size`
  // bytes, the fixed part first) is otherwise in place; the record committed.
  static void commit_record(ThreadChunk& c, uint8_t* at, trace::RecordKind kind, const void* fixed,
                            size_t fixed_size, size_t body_size) {
    const trace::RecordPrefix p{uint16_t(kind), uint16_t(body_size)};
    std::memcpy(at, &p, sizeof(p));
    if (fixed_size != 0) std::memcpy(at + sizeof(p), fixed, fixed_size);
    c.pos += sizeof(p) + body_size;
    c.committed.store(c.pos, std::memory_order_release);
  }
  // Holds flush_mu_ and records the holder in flush_owner_ (every taker of flush_mu_ but the
  // fatal-signal path uses it).
  class FlushLock;
  // The flusher starts with the first record (inline: every record asks).
  void start_once() {
    if (!started_.load(std::memory_order_acquire)) [[unlikely]] start_flusher();
  }
  void start_flusher();
  void flusher_main();
  // Requires flush_mu_. `nonblocking`: skip buffers whose lock is taken.
  // `drain_only` (the flusher woken by a handed-off chunk before its period is up; not in
  // windowed mode, whose every flush writes: tracer_process keeps its chunks at 4 MiB): the
  // threads' records are drained (their chunks go back to them, still in the CPU's caches) and
  // kept, and written only once kWriteBytes of them wait; any other flush writes them all.
  void flush_locked(bool nonblocking, bool final = false, bool drain_only = false);
  void flush_windowed_locked(bool nonblocking, bool final);
  bool ensure_open_locked(trace::TraceHeader* prepared);
  // Requires flush_mu_ and registry_mu_: copies every thread buffer's unflushed records into
  // `drained` (skipping buffers whose lock is taken when `nonblocking`), forgets dead threads'
  // buffers, recycles drained chunks and gives a spare to each thread that filled one.
  // The records go after what `drained` holds (what a drain-only flush kept).
  void drain_buffers_locked(bool nonblocking, std::vector<trace::ChunkBuilder>& drained);
  // Empties the builders for the next drain (and gives back all but two).
  static void empty_builders(std::vector<trace::ChunkBuilder>& drained);
  // Requires flush_mu_: the definitions chunk of one flush (strings, stacks, and a notice of
  // the records dropped since the last one).
  trace::ChunkBuilder definitions_locked(const std::vector<std::pair<uint32_t, std::string>>& strings,
                                         const std::vector<PendingStack>& stacks);

  // What every record reads (and seq_, which it takes), in one cache line: a line a record
  // need not touch is one the program's own work between two calls may have evicted.
  alignas(64) const uint64_t id_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<bool> started_{false};
  std::atomic<bool> closed_{false};
  bool sealed_ = false;  // the end marker is written for an exec, not taken back (under flush_mu_)
  // seal_for_exec's request to the flusher: kExecIdle, kExecClaimed (a thread is posting it),
  // kExecWanted (posted), kExecRunning (taken by the flusher), kExecDone (exec_result_ holds
  // what it did), back to kExecIdle once the flusher has taken an unseal request.
  static constexpr int kExecIdle = 0, kExecClaimed = 4, kExecWanted = 1, kExecRunning = 2, kExecDone = 3;
  std::atomic<int> exec_state_{kExecIdle};
  std::atomic<int> exec_result_{0};          // an ExecSeal
  std::atomic<bool> unseal_wanted_{false};  // unseal_after_exec's request
  std::function<void()> exec_before_;       // set before kExecWanted is published
  ExecSeal do_exec_seal();                  // the flusher's part (or inline)
  void do_exec_requests();                  // on the flusher: what was asked, in order
  void take_back_marker_locked();           // unseal_wanted_: the marker goes (requires flush_mu_)
  void wake_flusher_if_free();              // notify without waiting for wake_mu_
  bool has_flusher_thread() const { return opts_.background_flusher && flusher_.joinable(); }
  std::atomic<bool> recording_hint_{true};
  bool bench_unlocked_seq_ = false;  // setting bench_cut 6 (set_bench_unlocked_seq)
  alignas(64) RecorderOptions opts_;
  StringTable strings_;
  StackTable stacks_;
  std::atomic<uint32_t> next_thread_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<bool> created_{false};
  std::atomic<bool> failed_{false};

  std::mutex registry_mu_;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers_;
  std::vector<std::pair<pid_t, uint32_t>> foreign_threads_;  // thread_index_of for threads without a buffer

  std::mutex flush_mu_;
  // The kernel thread id of flush_mu_'s holder, 0 when none: a fatal-signal handler waits for
  // another thread's flush to end, never for the flush of the thread it interrupted.
  std::atomic<pid_t> flush_owner_{0};
  // Drained full thread chunks, handed back to threads at the next drain (under flush_mu_): a
  // thread appends into memory it already has, instead of faulting in fresh pages.
  std::vector<std::unique_ptr<ThreadChunk>> spare_chunks_;
  static constexpr size_t kSpareChunks = 8;
  static constexpr size_t kFirstChunkBytes = 64u << 10;  // a thread's chunks double up to handoff_bytes
  // Drained records written at once from this size on, whatever woke the flusher: what is
  // compressed together (a larger chunk compresses better; chunk_kib made them small).
  static constexpr size_t kWriteBytes = 4u << 20;
  // Set by a thread that handed off a chunk (under wake_mu_, so the flusher cannot miss it
  // between looking and waiting); the flusher clears it when it wakes.
  bool handed_off_ = false;
  // Drained records not yet written (a drain-only flush keeps them), in builders of up to 8 MiB
  // (drain_buffers_locked).
  std::vector<trace::ChunkBuilder> drained_;
  // Deferred records (under flush_mu_): who finishes them, and one drain's of them.
  std::shared_ptr<DeferredResolver> resolver_;
  std::atomic<bool> has_resolver_{false};
  std::vector<DeferredResolver::Item> deferred_items_;
  std::vector<uint8_t> deferred_out_;
  uint64_t deferred_unresolved_ = 0;  // dropped for want of a resolver, reported with the definitions
  std::string deferred_notice_;       // the resolver's warning, written with the next definitions
  std::unique_ptr<trace::TraceWriter> writer_;
  std::string capture_status_ = "ok";
  uint64_t dropped_reported_ = 0;

  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread flusher_;
  std::mutex close_mu_;  // one close() at a time joins the flusher

  // Capture policy. marks_mu_ is taken alone by the marking thread (seq and boundary under
  // it, so a flusher holding it knows every boundary below the seq it reads) and by the
  // flusher just before it drains (flush_mu_ -> registry_mu_ -> marks_mu_, released before
  // any ThreadBuffer::handoff_mu).
  std::unique_ptr<WindowedTraceWriter> windowed_;
  std::mutex marks_mu_;
  std::vector<CaptureBoundary> marks_;
  uint64_t next_step_ = 0;
  bool window_open_ = false;
  std::optional<trace::TraceHeader> prepared_header_;
};

// CLOCK_MONOTONIC in nanoseconds: the trace's host clock (tracer/host_clock.h).
inline uint64_t monotonic_ns() { return host_clock::now_ns(); }

}  // namespace streamrace::tracer
