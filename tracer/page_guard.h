// PageGuard: the mechanism behind --host-accesses. It write-protects (or read- and
// write-protects) whole pages of memory it was told are a pending copy's host side, catches the
// first host access to each such page in a SIGSEGV handler, notes it in a preallocated slot, and
// lets the access proceed by giving the page its original protection back. Nothing here knows
// CUDA: HostAccessTracker (host_access_tracker.h) decides which pages to guard and when the
// window ends, so this class is tested on plain mmap'd memory (tests/tracer/page_guard_test.cpp).
//
// One per process (signal dispositions are process-wide): PageGuard::process().
//
// Rules it keeps so that the traced program runs exactly as it would untraced:
// - it only ever calls mprotect on pages of a window armed through arm(), and only ever gives
//   them back the protection passed to arm() as their original one;
// - a SIGSEGV that is not an access to an armed page goes to the handler that was installed
//   before ours, exactly as the kernel would have delivered it (SA_SIGINFO or plain handler,
//   its sa_mask applied); where that was SIG_DFL or SIG_IGN, the default action happens: a real
//   fault is re-executed under SIG_DFL (the core dump shows the real fault), a signal sent with
//   kill() is raised again under SIG_DFL;
// - a fault on a page whose window another thread released between the fault and the handler
//   (the page is accessible again) is retried, never passed on as a crash;
// - arm() refuses when our handler is no longer the installed one (the program installed its
//   own SIGSEGV handler later): a guarded page would then fault into code that does not expect it.
//
// SIGBUS is never caused by page protection on Linux (protection faults are SIGSEGV with
// SEGV_ACCERR), so it is left alone.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "traceformat/records.h"

namespace streamrace::tracer {

class PageGuard {
 public:
  // What the handler noted about one caught access. Filled in the signal handler, read by drain().
  static constexpr size_t kMaxFrames = 32;
  struct Fault {
    uint64_t seq = 0;      // from the seq source (set_seq_source), taken when the access faulted
    uint64_t host_ts_ns = 0;
    uint64_t addr = 0;     // si_addr
    uint64_t page = 0;
    uint32_t page_bytes = 0;
    pid_t tid = 0;         // kernel thread id of the faulting thread
    trace::AccessDir dir = trace::AccessDir::kReadWrite;
    bool exact_addr = true;
    uint32_t nframes = 0;  // pcs[0] is the faulting instruction, then return addresses
    uint64_t pcs[kMaxFrames] = {};
  };

  struct Counts {
    uint64_t armed = 0;          // windows armed
    uint64_t refused = 0;        // arm() calls that guarded nothing (no slot, mprotect failed, handler replaced)
    uint64_t faults = 0;         // accesses caught on armed pages
    uint64_t faults_dropped = 0;  // ... that found no free slot (the drain was too slow)
    uint64_t retried = 0;        // stale faults on pages released meanwhile
    uint64_t passed_on = 0;      // faults that were not ours, handed to the previous handler
  };

  static PageGuard& process();

  // Installs the SIGSEGV handler (SA_SIGINFO | SA_ONSTACK), remembering the one before it.
  // Idempotent. `native_stacks`: the handler unwinds the faulting thread (else only the
  // faulting instruction is noted). Returns false when sigaction failed.
  bool install(bool native_stacks);
  bool installed() const { return installed_.load(std::memory_order_acquire); }
  // Whether the process's SIGSEGV disposition is still our handler.
  bool still_on_top() const;

  // The counter the handler takes each fault's seq from (TraceRecorder::seq_counter()), so the
  // record sits in call order where the access happened. Null: seq 0.
  void set_seq_source(std::atomic<uint64_t>* seq) { seq_.store(seq, std::memory_order_release); }

  // Guards [lo, hi) (page-aligned, non-empty) with `prot` (PROT_READ: writes fault; PROT_NONE:
  // reads and writes fault) until release(); `original` is the protection to give back.
  // Returns the window's id (> 0), or 0 when nothing was guarded.
  uint32_t arm(uint64_t lo, uint64_t hi, int prot, int original);
  // Gives the window's pages their original protection and forgets it. Ids of released
  // windows are ignored.
  void release(uint32_t id);
  // Releases every window (exit, and a fork's child: the child's copy of the pages keeps the
  // parent's protections otherwise).
  void release_all();
  // The child of a fork: releases every window (pages restored), forgets the faults noted so far
  // (they belong to the parent's trace), and takes seqs from nowhere until told otherwise.
  void reset_after_fork();

  // Hands every noted fault to `fn` (in no particular order) and frees its slot. Not from a
  // signal handler. Returns how many.
  template <typename Fn>
  size_t drain(Fn&& fn) {
    if (pending_.load(std::memory_order_acquire) == 0) return 0;
    size_t n = 0;
    for (auto& s : slots_) {
      if (s.state.load(std::memory_order_acquire) != kSlotReady) continue;
      fn(static_cast<const Fault&>(s.fault));
      s.state.store(kSlotFree, std::memory_order_release);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      ++n;
    }
    return n;
  }
  bool has_faults() const { return pending_.load(std::memory_order_acquire) != 0; }
  Counts counts() const;
  size_t page_bytes() const { return page_; }

  // The signal handler's body (public for the static trampoline).
  void on_signal(int sig, siginfo_t* info, void* uctx);

 private:
  PageGuard();

  static constexpr size_t kMaxWindows = 1024;
  static constexpr size_t kMaxSlots = 4096;  // faults noted between two drains (a 16 MiB refill at 4 KiB pages)
  enum : uint32_t { kWindowFree = 0, kWindowArmed = 1, kWindowReleasing = 2 };
  enum : uint32_t { kSlotFree = 0, kSlotWriting = 1, kSlotReady = 2 };

  // Read by the handler without locks: every field atomic, published by `state`.
  struct Window {
    std::atomic<uint32_t> state{kWindowFree};
    std::atomic<uint64_t> lo{0}, hi{0};
    std::atomic<int> prot{0}, original{0};
    uint32_t generation = 0;  // under mu_: makes ids of reused slots distinct
  };
  struct Slot {
    std::atomic<uint32_t> state{kSlotFree};
    Fault fault;
  };

  // True when the access at `addr` was to an armed page (handled: the page was given back its
  // protection and, for an armed window, the fault noted).
  bool handle_fault(uint64_t addr, int dir_hint, void* uctx);
  void note_fault(uint64_t addr, uint64_t page, int prot, int dir_hint, void* uctx);
  void pass_on(int sig, siginfo_t* info, void* uctx);
  void release_slot_locked(size_t i);

  const size_t page_;
  std::atomic<bool> installed_{false};
  std::atomic<bool> native_stacks_{true};
  std::atomic<bool> ever_armed_{false};
  std::atomic<std::atomic<uint64_t>*> seq_{nullptr};
  struct sigaction previous_ {};
  std::mutex mu_;  // arm/release (never taken by the handler)
  Window windows_[kMaxWindows];
  Slot slots_[kMaxSlots];
  std::atomic<uint32_t> pending_{0};
  std::atomic<uint32_t> next_slot_{0};
  std::atomic<uint64_t> armed_{0}, refused_{0}, faults_{0}, faults_dropped_{0}, retried_{0}, passed_on_{0};
};

}  // namespace streamrace::tracer
