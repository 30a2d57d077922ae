// NativeUnwinder: see native_unwind.h.
#include "tracer/native_unwind.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace streamrace::tracer {

namespace {

#if defined(__x86_64__)
constexpr bool kSupported = true;
#else
constexpr bool kSupported = false;
#endif

// One learned rule per pc, packed into 64 bits:
//   bits 0-3 observations (saturating), 4 CFA = sp + sp_off holds, 5 CFA = fp + fp_off holds,
//   6 caller fp = this fp holds, 7 caller fp saved at CFA - slot holds, 8 terminal (the
//   reference walk ends here), 9 poisoned (no simple rule), 16-31 sp_off, 32-47 slot, 48-63 fp_off.
struct Rule {
  uint64_t v = 0;
  unsigned obs() const { return unsigned(v & 0xF); }
  bool sp_ok() const { return v & (1u << 4); }
  bool fp_ok() const { return v & (1u << 5); }
  bool fp_same() const { return v & (1u << 6); }
  bool fp_slot() const { return v & (1u << 7); }
  bool terminal() const { return v & (1u << 8); }
  bool poisoned() const { return v & (1u << 9); }
  uint64_t sp_off() const { return (v >> 16) & 0xFFFF; }
  uint64_t slot() const { return (v >> 32) & 0xFFFF; }
  uint64_t fp_off() const { return (v >> 48) & 0xFFFF; }
  bool trusted() const {
    // Without fp_same or fp_slot the caller's frame pointer is unknown: the fast walk goes on
    // only while no later frame needs it for its CFA.
    return v != 0 && !poisoned() && obs() >= 2 && (terminal() || sp_ok() || fp_ok());
  }
};
constexpr uint64_t kPoisoned = 1u << 9;

// Why a pc was poisoned (diagnostics: NativeUnwinder::why_slow()).
enum Poison : unsigned { kBadStep = 1, kSteppedPastEnd, kNoRule, kEndedAfterStep };
const char* poison_text(unsigned why) {
  switch (why) {
    case kBadStep: return "the reference step did not find the return address at its CFA - 8";
    case kSteppedPastEnd: return "a walk ended here once and stepped past it later";
    case kNoRule: return "neither the stack pointer nor the frame pointer gives its CFA at a fixed offset";
    case kEndedAfterStep: return "a walk stepped past it once and ended here later";
    default: return "unknown";
  }
}

// The rules, shared by all threads: open addressing on the pc, never deleted (a pc of code
// that is unloaded and replaced keeps its rule only until the periodic check disagrees).
constexpr size_t kSlots = 1 << 16;
struct Slot {
  std::atomic<uint64_t> pc{0};
  std::atomic<uint64_t> rule{0};
};
Slot g_rules[kSlots];
std::atomic<bool> g_fast_on{true};
std::atomic<uint64_t> g_fast{0}, g_reference{0}, g_checked{0}, g_mismatches{0};
// Why fast walks gave up (each then took the reference walk), and the first poisoned pc that
// stopped one: diagnostics for the summary line, relaxed and approximate.
std::atomic<uint64_t> g_gave_up_bounds{0}, g_gave_up_poisoned{0}, g_gave_up_frame{0}, g_gave_up_fp{0};
std::atomic<uint64_t> g_first_poisoned_pc{0}, g_first_poisoned_depth{0}, g_first_fp_pc{0};
// The last poisoning: pc, why, and the offsets observed before (old) and at it (new).
std::atomic<uint64_t> g_poison_pc{0}, g_poison_why{0}, g_poison_old{0}, g_poison_sp_off{0}, g_poison_fp_off{0};

void poison(std::atomic<uint64_t>* slot, uint64_t pc, unsigned why, uint64_t old, uint64_t sp_off, uint64_t fp_off) {
  slot->store(kPoisoned, std::memory_order_relaxed);
  g_poison_pc.store(pc, std::memory_order_relaxed);
  g_poison_why.store(why, std::memory_order_relaxed);
  g_poison_old.store(old, std::memory_order_relaxed);
  g_poison_sp_off.store(sp_off, std::memory_order_relaxed);
  g_poison_fp_off.store(fp_off, std::memory_order_relaxed);
}

size_t slot_of(uint64_t pc) { return size_t((pc * 0x9E3779B97F4A7C15ull) >> 48) & (kSlots - 1); }

Rule find_rule(uint64_t pc) {
  for (size_t i = slot_of(pc), probes = 0; probes < 16; i = (i + 1) & (kSlots - 1), ++probes) {
    const uint64_t p = g_rules[i].pc.load(std::memory_order_acquire);
    if (p == pc) return Rule{g_rules[i].rule.load(std::memory_order_relaxed)};
    if (p == 0) return Rule{};
  }
  return Rule{};
}

// The calling thread's copy of the trusted rules it used: the shared table is 1 MiB and a
// launch walks 30-40 frames through CUDA's libraries after the driver's own work has left the
// caches cold, so a small direct-mapped per-thread copy keeps the lookups in L1/L2. Only
// trusted rules are copied, and a copy is never updated: a later observation that poisons the
// rule or drops one of its parts (a frame-pointer slot, the stack pointer's offset) reaches only
// threads that had not copied it. A copy that has become wrong gives wrong return addresses until
// the sampled comparison with the DWARF walk turns the fast path off for the process.
struct ThreadRules {
  static constexpr size_t kEntries = 1024;
  uint64_t pc[kEntries] = {};
  uint64_t rule[kEntries] = {};
};
Rule find_rule_fast(uint64_t pc) {
  thread_local ThreadRules t;
  const size_t i = size_t((pc ^ (pc >> 10)) & (ThreadRules::kEntries - 1));
  if (t.pc[i] == pc) return Rule{t.rule[i]};
  const Rule r = find_rule(pc);
  if (r.trusted()) {
    t.pc[i] = pc;
    t.rule[i] = r.v;
  }
  return r;
}

std::atomic<uint64_t>* rule_slot(uint64_t pc) {
  for (size_t i = slot_of(pc), probes = 0; probes < 16; i = (i + 1) & (kSlots - 1), ++probes) {
    uint64_t p = g_rules[i].pc.load(std::memory_order_acquire);
    if (p == pc) return &g_rules[i].rule;
    if (p == 0) {
      if (g_rules[i].pc.compare_exchange_strong(p, pc, std::memory_order_acq_rel) || p == pc) return &g_rules[i].rule;
    }
  }
  return nullptr;  // table full around this pc: never learned, always the reference walk
}

struct StackBounds {
  uint64_t lo = 0, hi = 0;
  bool known = false, usable = false;
};
StackBounds& bounds() {
  thread_local StackBounds b;
  if (!b.known) {
    b.known = true;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr != nullptr && size > 0) {
        b.lo = reinterpret_cast<uint64_t>(addr);
        b.hi = b.lo + size;
        b.usable = true;
      }
      pthread_attr_destroy(&attr);
    }
  }
  return b;
}

bool in_stack(const StackBounds& b, uint64_t addr) { return addr >= b.lo && addr + 8 <= b.hi && (addr & 7) == 0; }
uint64_t load(uint64_t addr) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
  return v;
}

struct RegState {
  uint64_t ip, sp, fp;
};

// Merges one observed step (from `s` to `next`, `next.sp` being s's CFA) into s.ip's rule.
void learn(const StackBounds& b, const RegState& s, const RegState& next) {
  std::atomic<uint64_t>* slot = rule_slot(s.ip);
  if (slot == nullptr) return;
  Rule old{slot->load(std::memory_order_relaxed)};
  if (old.poisoned()) return;
  const uint64_t cfa = next.sp;
  if (cfa <= s.sp || !in_stack(b, cfa - 8) || load(cfa - 8) != next.ip) {
    poison(slot, s.ip, kBadStep, old.v, cfa - s.sp, cfa - s.fp);
    return;
  }
  const uint64_t sp_off = cfa - s.sp;
  const bool fp_below = s.fp < cfa && cfa - s.fp < 0x10000;
  const uint64_t fp_off = fp_below ? cfa - s.fp : 0;
  uint64_t slot_off = 0;
  // The saved frame pointer lies in this frame, between its stack pointer and its CFA.
  for (uint64_t j = 16; j <= 2048 && j <= sp_off; j += 8)
    if (in_stack(b, cfa - j) && load(cfa - j) == next.fp) {
      slot_off = j;
      break;
    }
  uint64_t v;
  if (old.v == 0) {
    v = 1;
    if (sp_off < 0x10000) v |= (1u << 4) | (sp_off << 16);
    if (fp_below) v |= (1u << 5) | (fp_off << 48);
    if (next.fp == s.fp) v |= 1u << 6;
    if (slot_off != 0) v |= (1u << 7) | (slot_off << 32);
  } else {
    v = old.v & ~uint64_t(0xF);
    v |= old.obs() < 15 ? old.obs() + 1 : 15;
    if (old.sp_ok() && old.sp_off() != sp_off) v &= ~uint64_t(1u << 4);
    if (old.fp_ok() && (!fp_below || old.fp_off() != fp_off)) v &= ~uint64_t(1u << 5);
    if (old.fp_same() && next.fp != s.fp) v &= ~uint64_t(1u << 6);
    if (old.fp_slot() && (!in_stack(b, cfa - old.slot()) || load(cfa - old.slot()) != next.fp))
      v &= ~uint64_t(1u << 7);
    if (old.terminal()) {  // ended a walk once, stepped on now: no fixed rule
      poison(slot, s.ip, kSteppedPastEnd, old.v, sp_off, fp_off);
      return;
    }
  }
  if (const Rule nr{v}; !(nr.sp_ok() || nr.fp_ok())) {
    poison(slot, s.ip, kNoRule, old.v, sp_off, fp_off);
    return;
  }
  slot->store(v, std::memory_order_relaxed);
}

void learn_terminal(uint64_t ip) {
  std::atomic<uint64_t>* slot = rule_slot(ip);
  if (slot == nullptr) return;
  Rule old{slot->load(std::memory_order_relaxed)};
  if (old.poisoned()) return;
  if (old.v != 0 && !old.terminal()) {
    poison(slot, ip, kEndedAfterStep, old.v, 0, 0);
    return;
  }
  const unsigned obs = old.v == 0 ? 1 : (old.obs() < 15 ? old.obs() + 1 : 15);
  slot->store((1u << 8) | obs, std::memory_order_relaxed);
}

constexpr size_t kMaxSteps = 192;

// Appends pc to the output unless it is still in the leading run of skipped frames.
struct Output {
  uint64_t* pcs;
  size_t max;
  bool (*skip)(const void*, uint64_t);
  const void* ctx;
  size_t n = 0;
  bool skipping = true;
  bool full() const { return n >= max; }
  void add(uint64_t pc) {
    if (skipping && skip != nullptr && skip(ctx, pc)) return;
    skipping = false;
    pcs[n++] = pc;
  }
};

// The reference walk, learning as it goes. `start` is the register state captured in
// NativeUnwinder::capture (its own frame at a fixed pc); libunwind's frames 0 and 1 are this
// function and capture, so capture's caller is frame 2 and `start` steps to it.
// The thread's stack bounds as far as a walk from `start` may read them: nothing below the
// stack pointer of the walk's first frame (below it the main thread's stack may be unmapped).
StackBounds walk_bounds(const RegState& start) {
  StackBounds b = bounds();
  if (b.usable && start.sp > b.lo) b.lo = start.sp;
  if (b.usable && (start.sp < b.lo || start.sp >= b.hi)) b.usable = false;
  return b;
}

__attribute__((noinline)) size_t reference_walk(const RegState& start, Output& out, bool learn_rules) {
  const StackBounds b = walk_bounds(start);
  learn_rules = learn_rules && kSupported && b.usable;
  unw_context_t ctx;
  unw_cursor_t cursor;
  if (unw_getcontext(&ctx) != 0 || unw_init_local(&cursor, &ctx) != 0) return 0;
  if (unw_step(&cursor) <= 0 || unw_step(&cursor) <= 0) return 0;  // to capture's caller
  RegState prev = start;
  for (size_t steps = 0; steps < kMaxSteps && !out.full(); ++steps) {
    unw_word_t ip = 0, sp = 0, fp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0) break;
#if defined(__x86_64__)
    if (unw_get_reg(&cursor, UNW_X86_64_RBP, &fp) != 0) fp = 0;
#endif
    RegState cur{ip, sp, fp};
    if (learn_rules && in_stack(b, sp)) learn(b, prev, cur);
    if (ip == 0) break;
    out.add(ip);
    prev = cur;
    if (out.full()) break;
    const int r = unw_step(&cursor);
    if (r <= 0) {
      // The walk ends here (the outermost frame, or a frame libunwind cannot step from, such
      // as code without unwind information): the learned walk must end here too.
      if (learn_rules) learn_terminal(ip);
      break;
    }
  }
  return out.n;
}

// The learned walk: kDone, or why not: a pc whose rule is still being learned (kLearn), or
// one with no usable rule / an address outside the stack (kGiveUp: the reference walk then
// learns nothing, so a stack that can never be walked fast costs no more than DWARF).
enum class Walk { kDone, kLearn, kGiveUp };
Walk fast_walk(const RegState& start, Output& out) {
  const StackBounds b = walk_bounds(start);
  if (!b.usable || !in_stack(b, start.sp)) {
    g_gave_up_bounds.fetch_add(1, std::memory_order_relaxed);
    return Walk::kGiveUp;
  }
  RegState s = start;
  bool fp_known = true;  // s.fp is the frame's real frame pointer
  for (size_t steps = 0; steps < kMaxSteps && !out.full(); ++steps) {
    const Rule r = find_rule_fast(s.ip);
    if (r.poisoned()) {
      if (g_gave_up_poisoned.fetch_add(1, std::memory_order_relaxed) == 0) {
        g_first_poisoned_pc.store(s.ip, std::memory_order_relaxed);
        g_first_poisoned_depth.store(steps, std::memory_order_relaxed);
      }
      return Walk::kGiveUp;
    }
    if (!r.trusted()) return Walk::kLearn;
    if (r.terminal()) return Walk::kDone;
    if (!r.sp_ok() && !fp_known) {  // the CFA needs a frame pointer an inner frame did not keep
      if (g_gave_up_fp.fetch_add(1, std::memory_order_relaxed) == 0) g_first_fp_pc.store(s.ip, std::memory_order_relaxed);
      return Walk::kGiveUp;
    }
    const uint64_t cfa = r.sp_ok() ? s.sp + r.sp_off() : s.fp + r.fp_off();
    if (cfa <= s.sp || !in_stack(b, cfa - 8)) {
      g_gave_up_frame.fetch_add(1, std::memory_order_relaxed);
      return Walk::kGiveUp;
    }
    const uint64_t ra = load(cfa - 8);
    uint64_t fp = s.fp;
    if (r.fp_slot()) {
      if (!in_stack(b, cfa - r.slot())) {
        g_gave_up_frame.fetch_add(1, std::memory_order_relaxed);
        return Walk::kGiveUp;
      }
      fp = load(cfa - r.slot());
      fp_known = true;  // the caller's own, from where this frame saved it
    } else if (!r.fp_same()) {
      fp_known = false;
    }
    s = RegState{ra, cfa, fp};
    if (ra == 0) return Walk::kDone;
    out.add(ra);
  }
  return Walk::kDone;
}

}  // namespace

// No sibling calls: the reference walk counts on this frame being on the stack under it.
__attribute__((noinline, optimize("no-optimize-sibling-calls"))) size_t NativeUnwinder::capture(uint64_t* pcs, size_t max,
                                                         bool (*skip)(const void*, uint64_t), const void* ctx,
                                                         bool fast) {
  RegState start{0, 0, 0};
#if defined(__x86_64__)
  // This frame's pc, stack and frame pointer at one fixed instruction: the walks start here.
  asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(start.ip), "=r"(start.sp), "=r"(start.fp));
#endif
  thread_local uint32_t fast_walks = 0;
  bool learn_rules = kSupported && fast;
  if (kSupported && fast && g_fast_on.load(std::memory_order_relaxed)) {
    Output out{pcs, max, skip, ctx};
    const Walk w = fast_walk(start, out);
    learn_rules = w == Walk::kLearn;
    if (w == Walk::kDone) {
      if ((++fast_walks & 255) != 1) {
        g_fast.fetch_add(1, std::memory_order_relaxed);
        return out.n;
      }
      // The sampled check: the reference walk must give the same return addresses.
      uint64_t ref[256];
      Output check{ref, max < 256 ? max : 256, skip, ctx};
      reference_walk(start, check, false);
      g_checked.fetch_add(1, std::memory_order_relaxed);
      if (check.n == out.n && std::memcmp(ref, pcs, out.n * sizeof(uint64_t)) == 0) return out.n;
      g_mismatches.fetch_add(1, std::memory_order_relaxed);
      g_fast_on.store(false, std::memory_order_relaxed);
      std::memcpy(pcs, ref, check.n * sizeof(uint64_t));
      return check.n;
    }
  }
  Output out{pcs, max, skip, ctx};
  g_reference.fetch_add(1, std::memory_order_relaxed);
  const size_t n = reference_walk(start, out, learn_rules);
  asm volatile("" ::: "memory");
  return n;
}

NativeUnwinder::Counts NativeUnwinder::counts() {
  return Counts{g_fast.load(),
                g_reference.load(),
                g_checked.load(),
                g_mismatches.load(),
                g_gave_up_poisoned.load() + g_gave_up_bounds.load() + g_gave_up_frame.load() + g_gave_up_fp.load(),
                g_gave_up_fp.load()};
}

bool NativeUnwinder::fast_path_on() { return g_fast_on.load(std::memory_order_relaxed); }

namespace {
// "libcuda.so.1+0x2a3f1 (symbol)" for a code address.
std::string where(uint64_t pc) {
  Dl_info info{};
  char buf[64];
  if (pc == 0 || dladdr(reinterpret_cast<const void*>(pc), &info) == 0 || info.dli_fname == nullptr) {
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(pc));
    return buf;
  }
  std::string file = info.dli_fname;
  if (const size_t slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
  std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(pc - reinterpret_cast<uint64_t>(info.dli_fbase)));
  std::string out = file + buf;
  if (info.dli_sname != nullptr) out += std::string(" (") + info.dli_sname + ")";
  return out;
}
}  // namespace

std::string NativeUnwinder::slow_notice(const Counts& c, const std::string& why) {
  if (c.gave_up < kSlowNotice || c.gave_up <= c.fast) return "";
  return "native stacks were slow: " + std::to_string(c.gave_up) + " of " + std::to_string(c.gave_up + c.fast) +
         " walks could not follow learned unwind rules and took the DWARF walk (microseconds each; the "
         "stacks are right, the job ran slower)" + (why.empty() ? "" : ": " + why);
}

std::string NativeUnwinder::why_slow() {
  const uint64_t poisoned = g_gave_up_poisoned.load(), outside = g_gave_up_bounds.load(), frame = g_gave_up_frame.load(),
                 fp = g_gave_up_fp.load();
  if (poisoned + outside + frame + fp == 0) return "";
  std::string s = "fast walks given up: " + std::to_string(poisoned) + " at a pc without a fixed rule";
  if (poisoned != 0)
    s += " (first " + where(g_first_poisoned_pc.load()) + ", frame " + std::to_string(g_first_poisoned_depth.load()) + ")";
  s += ", " + std::to_string(fp) + " at a frame pointer not kept";
  if (fp != 0) s += " (first " + where(g_first_fp_pc.load()) + ", whose frame needs it)";
  s += ", " + std::to_string(outside) + " on a stack of unknown bounds, " + std::to_string(frame) + " at a frame outside the stack";
  if (const uint64_t pc = g_poison_pc.load(); pc != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " (old rule 0x%llx, CFA - sp 0x%llx, CFA - fp 0x%llx)",
                  static_cast<unsigned long long>(g_poison_old.load()), static_cast<unsigned long long>(g_poison_sp_off.load()),
                  static_cast<unsigned long long>(g_poison_fp_off.load()));
    s += "; last pc given no rule: " + where(pc) + ": " + poison_text(unsigned(g_poison_why.load())) + buf;
  }
  return s;
}

}  // namespace streamrace::tracer
