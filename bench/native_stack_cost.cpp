// The cost of one native stack (tracer/native_unwind.h) on the CPU machine: a call chain of
// DEPTH frames (default 20) from a library built without frame pointers, the stack taken at
// its leaf CALLS times (default 20000) per configuration, configurations interleaved over
// ROUNDS rounds (default 5): `dwarf` (the reference walk: LLVM libunwind every time) and
// `cached` (rules learned per return address; the first walks are reference walks). Prints
// the median and spread of µs per stack for each. With THRASH_KB, each call first writes that
// many KiB of other memory (as a CUDA launch's driver work leaves the caches cold), and a third
// configuration `thrash` (no stack) gives that cost alone, to subtract.
//
//   build/bin/streamrace-native-stack-cost [DEPTH] [CALLS] [ROUNDS] [THRASH_KB]
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
  int config;  // 0 dwarf, 1 cached, 2 thrash only
  std::vector<char>* thrash;
  size_t frames = 0;
};
__attribute__((noinline)) void take(void* arg) {
  auto* r = static_cast<Run*>(arg);
  if (!r->thrash->empty()) {
    for (size_t i = 0; i < r->thrash->size(); i += 64) (*r->thrash)[i] = char(i);
  }
  if (r->config == 2) return;
  uint64_t pcs[64];
  streamrace::tracer::NativeUnwinder u;
  r->frames = u.capture(pcs, 32, nullptr, nullptr, r->config == 1);
}
}  // namespace

int main(int argc, char** argv) {
  const int depth = argc > 1 ? std::atoi(argv[1]) : 20;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  const size_t thrash_kb = argc > 4 ? size_t(std::atoi(argv[4])) : 0;
  std::vector<char> thrash(thrash_kb * 1024);
  const int nconfigs = thrash_kb > 0 ? 3 : 2;
  std::vector<double> us[3];
  size_t frames = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int c = 0; c < nconfigs; ++c) {
      const int config = (c + r) % nconfigs;
      Run run{config, &thrash};
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) shapes_nofp::plain(depth, take, &run);
      auto t1 = std::chrono::steady_clock::now();
      us[config].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
      if (config != 2) frames = run.frames;
    }
  }
  const auto c = streamrace::tracer::NativeUnwinder::counts();
  std::printf("µs per native stack, depth %d (%zu frames kept of at most 32), %d calls x %d interleaved rounds, "
              "%zu KiB written before each:\n",
              depth, frames, calls, rounds, thrash_kb);
  const char* names[3] = {"dwarf", "cached", "thrash"};
  for (int k = 0; k < nconfigs; ++k) {
    auto v = us[k];
    std::sort(v.begin(), v.end());
    std::printf("  %-7s median %.3f  min %.3f  max %.3f\n", names[k], v[v.size() / 2], v.front(), v.back());
  }
  std::printf("  walks: %llu cached, %llu reference, %llu checked, %llu mismatches\n", (unsigned long long)c.fast,
              (unsigned long long)c.reference, (unsigned long long)c.checked, (unsigned long long)c.mismatches);
  return c.mismatches == 0 ? 0 : 1;
}
