// The cost of one native stack (tracer/native_unwind.h) on the CPU machine: a call chain of
// DEPTH frames (default 20) from a library built without frame pointers, the stack taken at
// its leaf CALLS times (default 20000) per configuration, configurations interleaved over
// ROUNDS rounds (default 5): `dwarf` (the reference walk: LLVM libunwind every time) and
// `cached` (rules learned per return address; the first walks are reference walks). Prints
// the median and spread of µs per stack for each.
//
//   build/bin/streamrace-native-stack-cost [DEPTH] [CALLS] [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tracer/native_unwind.h"

namespace shapes_nofp {
int plain(int, void (*)(void*), void*);
}

namespace {
struct Run {
  bool fast;
  size_t frames = 0;
};
__attribute__((noinline)) void take(void* arg) {
  auto* r = static_cast<Run*>(arg);
  uint64_t pcs[64];
  streamrace::tracer::NativeUnwinder u;
  r->frames = u.capture(pcs, 32, nullptr, nullptr, r->fast);
}
}  // namespace

int main(int argc, char** argv) {
  const int depth = argc > 1 ? std::atoi(argv[1]) : 20;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  std::vector<double> us[2];
  size_t frames = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int c = 0; c < 2; ++c) {
      const int config = (c + r) % 2;
      Run run{config == 1};
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) shapes_nofp::plain(depth, take, &run);
      auto t1 = std::chrono::steady_clock::now();
      us[config].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
      frames = run.frames;
    }
  }
  const auto c = streamrace::tracer::NativeUnwinder::counts();
  std::printf("µs per native stack, depth %d (%zu frames kept of at most 32), %d calls x %d interleaved rounds:\n",
              depth, frames, calls, rounds);
  const char* names[2] = {"dwarf", "cached"};
  for (int k = 0; k < 2; ++k) {
    auto v = us[k];
    std::sort(v.begin(), v.end());
    std::printf("  %-7s median %.3f  min %.3f  max %.3f\n", names[k], v[v.size() / 2], v.front(), v.back());
  }
  std::printf("  walks: %llu cached, %llu reference, %llu checked, %llu mismatches\n", (unsigned long long)c.fast,
              (unsigned long long)c.reference, (unsigned long long)c.checked, (unsigned long long)c.mismatches);
  return c.mismatches == 0 ? 0 : 1;
}
