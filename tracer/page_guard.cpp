// PageGuard: see page_guard.h.
//
// Async-signal safety of the handler (on_signal and what it calls). The faulting thread may
// have been interrupted anywhere, holding any lock (malloc's, the loader's, the recorder's), so
// the handler takes no lock and allocates nothing:
// - windows_ is a fixed array read through atomics; arm/release publish a window by its
//   `state` (release order) after its fields, and retire it as "releasing" before giving the
//   pages back, so a handler that sees a window free knows its pages are accessible again;
// - a fault is noted in a fixed slot claimed by compare-and-swap (free -> writing -> ready);
//   drain() reads ready slots from normal context and frees them. No free slot: the fault is
//   counted as dropped, the access still proceeds;
// - it calls only mprotect, clock_gettime, syscall(SYS_gettid), open/read/close (the stale
//   fault check), sigaction/pthread_sigmask/raise (passing a fault on), all async-signal-safe
//   system calls, and std::atomic operations that are lock-free on the targets we build for;
// - the seq is one fetch_add on the recorder's lock-free counter;
// - native frames come from LLVM libunwind (unw_getcontext / unw_step), which allocates only
//   when its FDE cache grows and reads a process-wide rwlock. It can therefore block (never
//   deadlock) unless the faulting thread itself held malloc's or that lock at the fault. The
//   faulting instruction is a host access to a guarded page, i.e. to the program's pinned copy
//   buffers, whose whole pages belong to the allocation (page rules in host_access_tracker.cpp:
//   no malloc metadata, no loader data, no unwinder state live there), so it is never inside
//   malloc or the unwinder. `stacks=none` turns the unwinding off altogether.
// - Python frames are not taken: reading them needs the GIL, which a handler cannot take.
#include "tracer/page_guard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <new>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace streamrace::tracer {

namespace {

void trampoline(int sig, siginfo_t* info, void* uctx) {
  const int saved = errno;
  PageGuard::process().on_signal(sig, info, uctx);
  errno = saved;
}

// 1: the access was a write, 0: a read, -1: the CPU did not say.
int fault_direction(void* uctx) {
#if defined(__x86_64__)
  if (uctx == nullptr) return -1;
  const auto* uc = static_cast<const ucontext_t*>(uctx);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;  // page-fault error code, bit 1: write
#else
  (void)uctx;
  return -1;
#endif
}

// Makes `ctx` (as unw_getcontext filled it) describe the interrupted thread at the fault, from
// the signal's ucontext. LLVM libunwind's x86-64 context is its register file in the order
// rax, rbx, rcx, rdx, rdi, rsi, rbp, rsp, r8-r15, rip (Registers_x86_64, as
// __unw_getcontext stores it). False where that layout is not known: unwind from the handler.
bool seed_from_fault(unw_context_t& ctx, void* uctx) {
#if defined(__x86_64__) && _LIBUNWIND_CONTEXT_SIZE >= 17
  if (uctx == nullptr) return false;
  const greg_t* g = static_cast<const ucontext_t*>(uctx)->uc_mcontext.gregs;
  const int order[17] = {REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RDI, REG_RSI, REG_RBP, REG_RSP, REG_R8,
                         REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (int i = 0; i < 17; ++i) ctx.data[i] = uint64_t(g[order[i]]);
  return true;
#else
  (void)ctx;
  (void)uctx;
  return false;
#endif
}

uint64_t fault_pc(void* uctx) {
#if defined(__x86_64__)
  if (uctx == nullptr) return 0;
  return uint64_t(static_cast<const ucontext_t*>(uctx)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  if (uctx == nullptr) return 0;
  return uint64_t(static_cast<const ucontext_t*>(uctx)->uc_mcontext.pc);
#else
  (void)uctx;
  return 0;
#endif
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Whether /proc/self/maps says the page holding `addr` now allows the access (`write`: 1
// write, 0 read, -1 unknown: both). Only open/read/close; a line is parsed from its first
// 64 characters ("start-end perms").
bool accessible_now(uint64_t addr, int write) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];  // small: the handler may run on a small alternate signal stack
  char line[64];
  size_t len = 0;
  bool answer = false, done = false;
  auto parse = [&]() {
    size_t i = 0;
    uint64_t lo = 0, hi = 0;
    for (int d; i < len && (d = hex_digit(line[i])) >= 0; ++i) lo = lo << 4 | uint64_t(d);
    if (i >= len || line[i] != '-') return;
    for (int d; ++i < len && (d = hex_digit(line[i])) >= 0;) hi = hi << 4 | uint64_t(d);
    if (i + 2 >= len || line[i] != ' ' || addr < lo || addr >= hi) return;
    const char r = line[i + 1], w = line[i + 2];
    answer = write == 1 ? w == 'w' : write == 0 ? r == 'r' : (r == 'r' && w == 'w');
    done = true;
  };
  while (!done) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t k = 0; k < n && !done; ++k) {
      if (buf[k] == '\n') {
        parse();
        len = 0;
      } else if (len < sizeof line) {
        line[len++] = buf[k];
      }
    }
  }
  close(fd);
  return answer;
}

}  // namespace

PageGuard& PageGuard::process() {
  static PageGuard* g = new PageGuard();  // never destroyed: a handler may run during exit
  return *g;
}

PageGuard::PageGuard() : page_(size_t(sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096)) {}

bool PageGuard::install(bool native_stacks) {
  std::lock_guard lock(mu_);
  native_stacks_.store(native_stacks);
  if (installed_.load()) return true;
  struct sigaction prev {};
  if (sigaction(SIGSEGV, nullptr, &prev) != 0) return false;
  previous_ = prev;  // written before our handler can run, never again
  struct sigaction sa {};
  sa.sa_sigaction = trampoline;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, nullptr) != 0) return false;
  installed_.store(true, std::memory_order_release);
  return true;
}

bool PageGuard::still_on_top() const {
  struct sigaction cur {};
  if (sigaction(SIGSEGV, nullptr, &cur) != 0) return false;
  return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == trampoline;
}

uint32_t PageGuard::arm(uint64_t lo, uint64_t hi, int prot, int original) {
  if (lo >= hi || lo % page_ || hi % page_ || (prot != PROT_READ && prot != PROT_NONE)) {
    refused_.fetch_add(1);
    return 0;
  }
  std::lock_guard lock(mu_);
  if (!installed_.load() || !still_on_top()) {
    refused_.fetch_add(1);
    return 0;
  }
  size_t free_slot = kMaxWindows;
  // A page already guarded more strictly (a pending device-to-host destination) stays so.
  for (size_t i = 0; i < kMaxWindows; ++i) {
    Window& w = windows_[i];
    uint32_t st = w.state.load(std::memory_order_relaxed);
    if (st == kWindowFree) {
      if (free_slot == kMaxWindows) free_slot = i;
      continue;
    }
    if (st == kWindowArmed && w.lo.load() < hi && lo < w.hi.load()) prot &= w.prot.load();
  }
  if (free_slot == kMaxWindows) {
    refused_.fetch_add(1);
    return 0;
  }
  Window& w = windows_[free_slot];
  w.lo.store(lo, std::memory_order_relaxed);
  w.hi.store(hi, std::memory_order_relaxed);
  w.prot.store(prot, std::memory_order_relaxed);
  w.original.store(original, std::memory_order_relaxed);
  w.generation = (w.generation + 1) & 0x3FFFFF;
  if (w.generation == 0) w.generation = 1;
  w.state.store(kWindowArmed, std::memory_order_release);
  ever_armed_.store(true, std::memory_order_release);
  if (mprotect(reinterpret_cast<void*>(lo), size_t(hi - lo), prot) != 0) {
    w.state.store(kWindowFree, std::memory_order_release);
    refused_.fetch_add(1);
    return 0;
  }
  armed_.fetch_add(1, std::memory_order_relaxed);
  return (w.generation << 10) | uint32_t(free_slot);
}

void PageGuard::release_slot_locked(size_t i) {
  Window& w = windows_[i];
  w.state.store(kWindowReleasing, std::memory_order_release);
  const uint64_t lo = w.lo.load(), hi = w.hi.load();
  mprotect(reinterpret_cast<void*>(lo), size_t(hi - lo), w.original.load());
  w.state.store(kWindowFree, std::memory_order_release);
}

void PageGuard::release(uint32_t id) {
  if (id == 0) return;
  const size_t i = id & (kMaxWindows - 1);
  std::lock_guard lock(mu_);
  Window& w = windows_[i];
  if (w.generation != (id >> 10) || w.state.load() != kWindowArmed) return;
  release_slot_locked(i);
}

void PageGuard::release_all() {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < kMaxWindows; ++i)
    if (windows_[i].state.load() == kWindowArmed) release_slot_locked(i);
}

void PageGuard::reset_after_fork() {
  // The parent's threads are gone in the child; one of them may have held mu_.
  new (&mu_) std::mutex();
  seq_.store(nullptr);
  release_all();
  for (auto& s : slots_) s.state.store(kSlotFree);
  pending_.store(0);
}

PageGuard::Counts PageGuard::counts() const {
  return Counts{armed_.load(), refused_.load(), faults_.load(), faults_dropped_.load(), retried_.load(),
                passed_on_.load()};
}

void PageGuard::on_signal(int sig, siginfo_t* info, void* uctx) {
  if (sig == SIGSEGV && info != nullptr && info->si_code == SEGV_ACCERR) {
    const uint64_t addr = reinterpret_cast<uint64_t>(info->si_addr);
    const int dir = fault_direction(uctx);
    if (handle_fault(addr, dir, uctx)) return;
    // Released by another thread between the fault and now: the access can simply run again.
    if (ever_armed_.load(std::memory_order_acquire) && accessible_now(addr, dir)) {
      retried_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  pass_on(sig, info, uctx);
}

bool PageGuard::handle_fault(uint64_t addr, int dir_hint, void* uctx) {
  bool found = false, armed = false;
  int prot = PROT_READ, original = PROT_READ | PROT_WRITE;
  uint64_t wlo = 0, whi = 0;
  for (auto& w : windows_) {
    const uint32_t st = w.state.load(std::memory_order_acquire);
    if (st == kWindowFree) continue;
    const uint64_t lo = w.lo.load(std::memory_order_relaxed), hi = w.hi.load(std::memory_order_relaxed);
    if (addr < lo || addr >= hi) continue;
    if (!found) {
      original = w.original.load(std::memory_order_relaxed);
      wlo = lo;
      whi = hi;
    }
    found = true;
    if (st == kWindowArmed) {
      armed = true;
      prot &= w.prot.load(std::memory_order_relaxed);
    }
  }
  if (!found) return false;
  const uint64_t page = addr & ~uint64_t(page_ - 1);
  // The rest of this window, the page is the program's again: each page faults once. Where
  // the page cannot be changed alone (a huge-page mapping refuses a 4 KiB range), the whole
  // window, which arm() could protect, gets its protection back: the access must proceed.
  if (mprotect(reinterpret_cast<void*>(page), page_, original) != 0 &&
      mprotect(reinterpret_cast<void*>(wlo), size_t(whi - wlo), original) != 0)
    return false;
  if (armed) note_fault(addr, page, prot, dir_hint, uctx);
  return true;
}

void PageGuard::note_fault(uint64_t addr, uint64_t page, int prot, int dir_hint, void* uctx) {
  faults_.fetch_add(1, std::memory_order_relaxed);
  Slot* slot = nullptr;
  for (size_t k = 0; k < kMaxSlots && slot == nullptr; ++k) {
    Slot& s = slots_[next_slot_.fetch_add(1, std::memory_order_relaxed) % kMaxSlots];
    uint32_t expected = kSlotFree;
    if (s.state.compare_exchange_strong(expected, kSlotWriting, std::memory_order_acq_rel)) slot = &s;
  }
  if (slot == nullptr) {
    faults_dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Fault& f = slot->fault;
  std::atomic<uint64_t>* seq = seq_.load(std::memory_order_acquire);
  f.seq = seq ? seq->fetch_add(1, std::memory_order_relaxed) : 0;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  f.host_ts_ns = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
  f.addr = addr;
  f.page = page;
  f.page_bytes = uint32_t(page_);
  f.tid = pid_t(syscall(SYS_gettid));
  f.exact_addr = true;  // si_addr of a protection fault is the faulting byte's address
  // A fault on a readable page can only be a write; on an unreadable one the CPU says which.
  if (prot == PROT_READ)
    f.dir = trace::AccessDir::kWrite;
  else
    f.dir = dir_hint == 1 ? trace::AccessDir::kWrite : dir_hint == 0 ? trace::AccessDir::kRead : trace::AccessDir::kReadWrite;
  f.nframes = 0;
  const uint64_t pc = fault_pc(uctx);
  if (pc != 0) f.pcs[f.nframes++] = pc;
  if (native_stacks_.load(std::memory_order_relaxed) && pc != 0) {
    unw_context_t ctx;
    unw_cursor_t cursor;
    if (unw_getcontext(&ctx) == 0 && seed_from_fault(ctx, uctx) && unw_init_local(&cursor, &ctx) == 0) {
      // The cursor starts at the faulting instruction: its callers follow.
      for (int steps = 0; steps < 256 && f.nframes < kMaxFrames && unw_step(&cursor) > 0; ++steps) {
        unw_word_t ip = 0;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        f.pcs[f.nframes++] = uint64_t(ip);
      }
    } else if (unw_getcontext(&ctx) == 0 && unw_init_local(&cursor, &ctx) == 0) {
      // Unwind from here through the signal frame; keep the frames below the faulting one.
      bool below = false;
      for (int steps = 0; steps < 256 && f.nframes < kMaxFrames && unw_step(&cursor) > 0; ++steps) {
        unw_word_t ip = 0;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        if (!below) {
          below = uint64_t(ip) == pc;
          continue;
        }
        f.pcs[f.nframes++] = uint64_t(ip);
      }
    }
  }
  slot->state.store(kSlotReady, std::memory_order_release);
  pending_.fetch_add(1, std::memory_order_acq_rel);
}

void PageGuard::pass_on(int sig, siginfo_t* info, void* uctx) {
  passed_on_.fetch_add(1, std::memory_order_relaxed);
  struct sigaction prev = previous_;
  const bool sent = info != nullptr && info->si_code <= 0;  // kill(), sigqueue(), tgkill(): not a fault
  const bool function = (prev.sa_flags & SA_SIGINFO) ? prev.sa_sigaction != nullptr
                                                      : (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN);
  if (function) {
    // As the kernel would have run it: its mask added, its own signal unblocked for SA_NODEFER.
    sigset_t old;
    sigset_t mask = prev.sa_mask;
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    if (prev.sa_flags & SA_NODEFER) {
      sigset_t self;
      sigemptyset(&self);
      sigaddset(&self, sig);
      pthread_sigmask(SIG_UNBLOCK, &self, nullptr);
    }
    if (prev.sa_flags & SA_RESETHAND) {
      previous_.sa_flags &= ~(SA_SIGINFO | SA_RESETHAND);
      previous_.sa_handler = SIG_DFL;
    }
    if (prev.sa_flags & SA_SIGINFO)
      prev.sa_sigaction(sig, info, uctx);
    else
      prev.sa_handler(sig);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return;
  }
  if (sent && prev.sa_handler == SIG_IGN) return;  // an ignored signal stays ignored
  // The default action. A real fault runs again under SIG_DFL and kills the process the way it
  // would have untraced (a fault the kernel forces cannot be ignored either).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  installed_.store(false, std::memory_order_release);
  if (sent) raise(sig);  // pending until this handler returns, then the default action
}

}  // namespace streamrace::tracer
