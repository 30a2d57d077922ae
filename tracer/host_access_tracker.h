// HostAccessTracker: the policy of --host-accesses (the `host_accesses` setting). It knows
// which host memory is pinned (cudaHostAlloc, cudaMallocHost, cudaHostRegister and their
// driver twins; PyTorch's pinned allocator uses cudaHostAlloc), guards the pages of an async
// copy's pinned host side through the PageGuard from the copy's enqueue until a host
// synchronisation that orders the host after it, and writes each access the guard caught as a
// HostAccess record. The analyzer decides whether an access raced with a copy.
//
// Windows end conservatively early, never late: unguarding too early only loses detection,
// while a page left guarded after the copy completed could make a system call on it fail
// (read(2) into a write-protected buffer returns EFAULT instead of faulting). So: a stream
// synchronisation or successful stream query, and an async copy from or to pageable memory
// (which synchronises with its stream), ends that stream's windows (the legacy default
// stream's: every window); an event synchronisation or successful query ends the windows
// enqueued on the event's stream before its record; a device synchronisation, a synchronising
// free and a synchronous copy or set end every window.
//
// Which pages may be guarded (the tracer never protects memory it does not know is a copy's
// host side): pages of a pinned allocation whose mapping was readable and writable (and not
// executable) when it was allocated. cudaMallocHost/cudaHostAlloc memory is the driver's own
// mapping, page-granular: its pages are guarded whole. Registered memory (cudaHostRegister of
// the program's own malloc/mmap memory) may share its first and last page with other data
// (malloc's chunk headers): only pages wholly inside the registered range are guarded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"
#include "tracer/page_guard.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer {

class HostAccessTracker {
 public:
  // `native_stacks`: the guard's handler unwinds the faulting thread (off with stacks=none).
  HostAccessTracker(PageGuard& guard, TraceRecorder& rec, bool native_stacks);

  // The guard's handler is installed and ours; false when sigaction failed.
  bool active() const { return guard_.installed(); }

  // A forked child's new recorder.
  void set_recorder(TraceRecorder& rec);

  // Pinned host memory came into being (at the allocating call's exit).
  void pinned_allocated(uint64_t ptr, uint64_t bytes, trace::AllocKind kind);
  // At a host free's or unregister's entry, before the memory goes: its windows end.
  void pinned_freeing(uint64_t ptr);

  // An async copy's record was written: guard the pinned host side at [host, host + bytes)
  // (`device_writes`: it is a device-to-host destination; reads fault too) on `stream`.
  void copy_enqueued(uint64_t host, uint64_t bytes, bool device_writes, uint64_t stream);
  void event_recorded(uint64_t event, uint64_t stream);
  // cudaStreamSynchronize, a successful cudaStreamQuery (and copies from pageable memory).
  void stream_synchronized(uint64_t stream);
  // cudaEventSynchronize, a successful cudaEventQuery.
  void event_synchronized(uint64_t event);
  // cudaDeviceSynchronize, cudaFree/cudaFreeHost, synchronous copies and sets: every window.
  void host_synchronized();

  // Writes the accesses caught so far as HostAccess records. Not from a signal handler.
  void drain();
  bool has_pending() const { return guard_.has_faults(); }
  // Process exit: every window ends, the last accesses are written, counts as a Notice.
  void finish();
  // A forked child: nothing of the parent's windows or memory is ours to guard.
  void reset_after_fork();

  // Windows open now (tests).
  size_t open_windows();

 private:
  struct Region {
    uint64_t base, bytes;  // the allocation
    uint64_t lo, hi;       // its guardable pages
  };
  struct Window {
    uint32_t id;
    uint64_t lo, hi;
    uint64_t stream;
    uint64_t order;  // enqueue order (order_ when armed)
    bool device_writes;
  };
  void end_windows_locked(bool (*pred)(const Window&, uint64_t, uint64_t), uint64_t a, uint64_t b);
  uint32_t thread_of(pid_t tid);

  PageGuard& guard_;
  TraceRecorder* rec_;
  std::mutex mu_;  // regions_, windows_, events_; never held while the guard's handler runs on this thread
  std::map<uint64_t, Region> regions_;  // by base
  std::vector<Window> windows_;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> events_;  // event -> (stream, order at record)
  uint64_t order_ = 0;
  uint64_t unguardable_ = 0;  // pinned allocations whose pages may not be guarded
  uint32_t api_write_ = 0, api_read_ = 0, api_unknown_ = 0;
};

}  // namespace streamrace::tracer
