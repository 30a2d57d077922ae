// NativeUnwinder: the calling thread's return addresses, innermost first, fast.
//
// The reference unwinder is LLVM libunwind (DWARF CFI): correct, and about 10-13 µs for a
// 25-frame stack, since every step looks up and interprets the frame's FDE. Most call sites
// of a training loop repeat, and at one return address (pc) the compiler's rule for finding
// the caller is fixed: the canonical frame address (CFA, the caller's stack pointer) is the
// stack pointer or the frame pointer plus a constant, the return address sits at CFA - 8, and
// the caller's frame pointer is untouched, saved at CFA - slot, or (in a frame that uses the
// register for something else and saved it where the walk did not find it every time) not
// known: then the fast walk goes on only while no outer frame needs it. So each reference
// walk also *learns* that rule for every pc it passes, from the registers libunwind reports
// before and after each step, and a pc's rule is trusted once two observations agree. A walk
// whose every pc has a trusted rule then costs a table lookup and two loads per frame.
//
// Safety: a learned walk reads only inside the thread's own stack bounds (every address is
// checked against them; the stack pointer must grow at each step); a pc without a trusted
// rule, a stack pointer outside the bounds (signal or fiber stacks), or any inconsistency
// falls back to the reference walk. One fast walk in 256 per thread is also compared with the
// reference walk; a difference turns the fast path off for the process. x86-64 only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace streamrace::tracer {

class NativeUnwinder {
 public:
  // Appends up to `max` return addresses (innermost first) of the caller's stack to `pcs`,
  // dropping leading ones for which `skip(pc)` holds (the tracer's own and CUPTI's frames);
  // returns how many. `fast` false: the reference walk only.
  size_t capture(uint64_t* pcs, size_t max, bool (*skip)(const void* ctx, uint64_t pc), const void* ctx,
                 bool fast = true);

  // Counters for diagnostics and tests (approximate under threads).
  struct Counts {
    uint64_t fast = 0, reference = 0, checked = 0, mismatches = 0;
    uint64_t gave_up = 0;     // learned walks that gave up (each then took the reference walk)
    uint64_t gave_up_fp = 0;  // of them, at a frame whose CFA needs a frame pointer not kept
  };
  static Counts counts();
  static bool fast_path_on();
  // Empty while every fast walk that was tried finished; else how many gave up and why, with the
  // first pc that stopped one and the last pc given no rule (module+offset): for the summary line.
  static std::string why_slow();
  // The trace's warning when most native stacks took the slow walk: at least kSlowNotice learned
  // walks gave up and fewer finished; else "". `why` is why_slow().
  static constexpr uint64_t kSlowNotice = 1000;
  static std::string slow_notice(const Counts& c, const std::string& why);
};

}  // namespace streamrace::tracer
