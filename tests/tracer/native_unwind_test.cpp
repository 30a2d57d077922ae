// NativeUnwinder: the learned walk must give exactly the reference (DWARF) walk's return
// addresses, for frames with and without frame pointers, variable-size (alloca) and large
// frames, at many depths and on several threads, and it must actually be used once learned.
#include "tracer/native_unwind.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace shapes_fp {
int plain(int, void (*)(void*), void*);
int with_alloca(int, size_t, void (*)(void*), void*);
int big_frame(int, void (*)(void*), void*);
int mixed(int, void (*)(void*), void*);
}  // namespace shapes_fp
namespace shapes_nofp {
int plain(int, void (*)(void*), void*);
int with_alloca(int, size_t, void (*)(void*), void*);
int big_frame(int, void (*)(void*), void*);
int mixed(int, void (*)(void*), void*);
}  // namespace shapes_nofp

#if defined(__x86_64__)
// A frame that saves its caller's frame pointer below another saved register and then uses the
// register for something else: sr_shape_saved_rbp(fn, arg, rbx, rbp) sets rbx and rbp to the
// values given and calls an inner function that pushes rbx (CFA - 16), then rbp (CFA - 24),
// points rbp 16 bytes above its own CFA (an address inside the caller's frame, as a register
// used for data might) and calls fn(arg). When the first walk through it sees rbx == rbp, the caller's
// frame pointer seems to sit at CFA - 16; later walks (rbx != rbp) do not find it there.
asm(R"(
  .text
  .p2align 4
  .type sr_shape_saved_rbp_inner, @function
sr_shape_saved_rbp_inner:
  .cfi_startproc
  pushq %rbx
  .cfi_def_cfa_offset 16
  .cfi_offset %rbx, -16
  pushq %rbp
  .cfi_def_cfa_offset 24
  .cfi_offset %rbp, -24
  subq $8, %rsp
  .cfi_def_cfa_offset 32
  leaq 48(%rsp), %rbp
  movq %rdi, %rax
  movq %rsi, %rdi
  call *%rax
  addq $8, %rsp
  .cfi_def_cfa_offset 24
  popq %rbp
  .cfi_def_cfa_offset 16
  popq %rbx
  .cfi_def_cfa_offset 8
  ret
  .cfi_endproc
  .size sr_shape_saved_rbp_inner, .-sr_shape_saved_rbp_inner

  .p2align 4
  .globl sr_shape_saved_rbp
  .type sr_shape_saved_rbp, @function
sr_shape_saved_rbp:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  pushq %rbx
  .cfi_def_cfa_offset 24
  .cfi_offset %rbx, -24
  subq $8, %rsp
  .cfi_def_cfa_offset 32
  movq %rdx, %rbx
  movq %rcx, %rbp
  call sr_shape_saved_rbp_inner
  addq $8, %rsp
  .cfi_def_cfa_offset 24
  popq %rbx
  .cfi_def_cfa_offset 16
  popq %rbp
  .cfi_def_cfa_offset 8
  ret
  .cfi_endproc
  .size sr_shape_saved_rbp, .-sr_shape_saved_rbp

  .p2align 4
  .globl sr_shape_saved_rbp_fp
  .type sr_shape_saved_rbp_fp, @function
sr_shape_saved_rbp_fp:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  pushq %rbx
  .cfi_offset %rbx, -24
  subq %rcx, %rsp
  movq %rdx, %rbx
  testq %rdx, %rdx
  jnz 1f
  movq %rbp, %rbx
1:
  call sr_shape_saved_rbp_inner
  leaq -8(%rbp), %rsp
  popq %rbx
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size sr_shape_saved_rbp_fp, .-sr_shape_saved_rbp_fp
)");
extern "C" void sr_shape_saved_rbp(void (*fn)(void*), void* arg, uint64_t rbx, uint64_t rbp);
// The same inner frame under a caller whose frame size varies (pad: 8 + 16 k bytes), so that
// only its frame pointer gives its CFA; rbx 0 makes rbx that frame pointer.
extern "C" void sr_shape_saved_rbp_fp(void (*fn)(void*), void* arg, uint64_t rbx, uint64_t pad);
#endif

namespace streamrace::tracer {
namespace {

struct Probe {
  size_t compared = 0;
  size_t differences = 0;
  size_t max = 32;
};

// Both walks from the same call instruction, so the return addresses can be compared whole.
__attribute__((noinline)) void both_walks(void* arg) {
  auto* p = static_cast<Probe*>(arg);
  uint64_t pcs[2][64];
  size_t n[2];
  volatile int i = 0;
  for (int k = i; k < 2; k = i) {  // one call instruction for both (no unrolling)
    i = k + 1;
    NativeUnwinder u;
    n[k] = u.capture(pcs[k], p->max, nullptr, nullptr, /*fast=*/k == 1);
  }
  ++p->compared;
  if (n[0] != n[1] || std::vector<uint64_t>(pcs[0], pcs[0] + n[0]) != std::vector<uint64_t>(pcs[1], pcs[1] + n[1]))
  {
    if (p->differences++ < 2) {
      fprintf(stderr, "n %zu vs %zu\n", n[0], n[1]);
      for (size_t k = 0; k < 8 && (k < n[0] || k < n[1]); ++k)
        fprintf(stderr, "  %zx %zx\n", k < n[0] ? size_t(pcs[0][k]) : 0, k < n[1] ? size_t(pcs[1][k]) : 0);
    }
  }
}

void run_shapes(Probe& p, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (int depth : {0, 1, 3, 7, 12, 20, 31, 40}) {
      shapes_fp::plain(depth, both_walks, &p);
      shapes_nofp::plain(depth, both_walks, &p);
      shapes_fp::with_alloca(depth % 10, 16 + 8 * r, both_walks, &p);
      shapes_nofp::with_alloca(depth % 10, 24 + 8 * r, both_walks, &p);
      shapes_fp::big_frame(depth % 6, both_walks, &p);
      shapes_nofp::big_frame(depth % 6, both_walks, &p);
      shapes_fp::mixed(depth, both_walks, &p);
      shapes_nofp::mixed(depth, both_walks, &p);
    }
  }
}

TEST(NativeUnwinder, LearnedWalkEqualsTheReferenceWalk) {
  const auto before = NativeUnwinder::counts();
  Probe p;
  run_shapes(p, 40);
  EXPECT_EQ(p.compared, 40u * 8 * 8);
  EXPECT_EQ(p.differences, 0u);
  const auto after = NativeUnwinder::counts();
  EXPECT_EQ(after.mismatches, before.mismatches);
  EXPECT_TRUE(NativeUnwinder::fast_path_on());
#if defined(__x86_64__)
  // Each call site is learned after two reference walks; the rest are fast.
  EXPECT_GT(after.fast - before.fast, p.compared / 2);
#endif
}

#if defined(__x86_64__)
// Found on an H100 (2026-12-07): the tracer's own first frame was learned that way, its rule
// was then thrown away, and every native stack of a C++ launch loop took the DWARF walk
// (14.5 µs a launch). The frame's rule must still be used (its CFA is the stack pointer plus a
// constant); only the caller's frame pointer is unknown after it, which no outer frame here needs.
TEST(NativeUnwinder, AFramePointerSavedOutOfSightStillWalksFast) {
  const auto before = NativeUnwinder::counts();
  Probe p;
  sr_shape_saved_rbp(both_walks, &p, 0x1234, 0x1234);  // first walk: rbx == rbp
  volatile int n = 200;  // one call site (no unrolling)
  for (int i = 0; i < n; ++i) sr_shape_saved_rbp(both_walks, &p, 0x5678 + i, 0x1234);
  const auto after = NativeUnwinder::counts();
  EXPECT_EQ(p.compared, 201u);
  EXPECT_EQ(p.differences, 0u);
  EXPECT_EQ(after.mismatches, before.mismatches);
  EXPECT_GT(after.fast - before.fast, 190u) << NativeUnwinder::why_slow();
}

// The same inner frame under a caller whose CFA only its frame pointer gives: the fast walk
// must not take the inner frame's register for it (it points into the caller's frame, so the
// "CFA" it gives lies inside the stack, above the stack pointer, and the word below it is not a
// return address). It gives up there, the reference walk answers, and the counts say why. The
// walk is cut right after that frame (max 4: both_walks, the inner frame, the caller, its caller)
// so that a wrong frame would be the last one stored, not followed off the stack.
TEST(NativeUnwinder, AnOuterFrameNeedingTheLostFramePointerFallsBack) {
  const auto before = NativeUnwinder::counts();
  Probe p;
  p.max = 4;
  sr_shape_saved_rbp_fp(both_walks, &p, 0, 8);
  // The caller's frame size differs from the second walk on (a rule is trusted after two).
  volatile int n = 100;
  for (int i = 0; i < n; ++i) sr_shape_saved_rbp_fp(both_walks, &p, 0x9000 + i, 8 + 16 * ((i + 1) % 4));
  const auto after = NativeUnwinder::counts();
  EXPECT_EQ(p.compared, 101u);
  EXPECT_EQ(p.differences, 0u);
  EXPECT_EQ(after.mismatches, before.mismatches);
  EXPECT_TRUE(NativeUnwinder::fast_path_on());
  EXPECT_GE(after.gave_up_fp - before.gave_up_fp, 90u) << NativeUnwinder::why_slow();
}

// A frame that saved its caller's frame pointer where the walk finds it makes the pointer known
// again: above the inner frame, sr_shape_saved_rbp (CFA from its stack pointer) reloads it from
// its slot, and a frame-pointer-based frame further out (shapes_fp::with_alloca, whose frame
// size differs between calls) then walks fast.
void through_saved_rbp(void* arg) {
  auto* p = static_cast<Probe*>(arg);
  sr_shape_saved_rbp(both_walks, p, p->compared == 0 ? 0x77 : 0x88 + p->compared, 0x77);
}
TEST(NativeUnwinder, AFrameThatSavedTheFramePointerMakesItKnownAgain) {
  const auto before = NativeUnwinder::counts();
  Probe p;
  volatile int n = 120;
  for (int i = 0; i < n; ++i) shapes_fp::with_alloca(1, 16 + 16 * (i % 3), through_saved_rbp, &p);
  const auto after = NativeUnwinder::counts();
  EXPECT_EQ(p.compared, 120u);
  EXPECT_EQ(p.differences, 0u);
  EXPECT_EQ(after.mismatches, before.mismatches);
  EXPECT_EQ(after.gave_up_fp, before.gave_up_fp) << NativeUnwinder::why_slow();
  EXPECT_GE(after.fast - before.fast, 100u) << NativeUnwinder::why_slow();
}
#endif

// The trace's warning at exit: only when most native stacks took the slow walk, and a
// thousand of them at least (a few give-ups while rules are learned say nothing).
TEST(NativeUnwinder, SlowWalksGetAWarningOnlyWhenMostWereSlow) {
  NativeUnwinder::Counts c;
  c.gave_up = 620061;
  c.fast = 0;
  EXPECT_EQ(NativeUnwinder::slow_notice(c, "fast walks given up: 620061 at a pc without a fixed rule"),
            "native stacks were slow: 620061 of 620061 walks could not follow learned unwind rules and took the DWARF "
            "walk (microseconds each; the stacks are right, the job ran slower): fast walks given up: 620061 at a pc "
            "without a fixed rule");
  c.fast = 617630;
  c.gave_up = 3000;
  EXPECT_EQ(NativeUnwinder::slow_notice(c, "x"), "");
  c.fast = 10;
  c.gave_up = 999;
  EXPECT_EQ(NativeUnwinder::slow_notice(c, "x"), "");
  c.gave_up = 1000;
  EXPECT_EQ(NativeUnwinder::slow_notice(c, ""),
            "native stacks were slow: 1000 of 1010 walks could not follow learned unwind rules and took the DWARF "
            "walk (microseconds each; the stacks are right, the job ran slower)");
}

TEST(NativeUnwinder, ShortLimitsAndThreadsAgreeToo) {
  Probe shallow;
  shallow.max = 3;
  run_shapes(shallow, 5);
  EXPECT_EQ(shallow.differences, 0u);
  std::vector<Probe> probes(4);
  std::vector<std::thread> threads;
  for (auto& p : probes) threads.emplace_back([&p] { run_shapes(p, 10); });
  for (auto& t : threads) t.join();
  for (auto& p : probes) {
    EXPECT_EQ(p.compared, 10u * 8 * 8);
    EXPECT_EQ(p.differences, 0u);
  }
  EXPECT_EQ(NativeUnwinder::counts().mismatches, 0u);
}

}  // namespace
}  // namespace streamrace::tracer
