// Overhead microbenchmark: the host cost of 100k empty kernel launches (a launch-bound
// loop), run with and without the tracer; the difference per launch is the tracer's cost
// per traced API call with stacks.
//
//   launch_bench [N]            N launches (default 100000): launch_ns_per_call
//   launch_bench N ab PAIRS     in one process, PAIRS pairs of N-launch blocks with the tracer's
//                               CUDA callbacks on and off (streamrace_bench_pause of
//                               libstreamrace.so or bench/cupti_floor), alternating: ab_on_ns,
//                               ab_off_ns, ab_added_ns (the median of the pairs' differences)
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sample_common.h"

__global__ void empty() {}

using PauseFn = int (*)(int);

PauseFn find_pause() {
  if (void* f = dlsym(RTLD_DEFAULT, "streamrace_bench_pause")) return reinterpret_cast<PauseFn>(f);
  if (const char* inj = std::getenv("CUDA_INJECTION64_PATH"); inj && *inj)
    if (void* lib = dlopen(inj, RTLD_NOW | RTLD_NOLOAD))
      if (void* f = dlsym(lib, "streamrace_bench_pause")) return reinterpret_cast<PauseFn>(f);
  return nullptr;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  if (argc > 3 && std::strcmp(argv[2], "ab") == 0) {
    const int pairs = std::atoi(argv[3]);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));  // CUDA (and an injection library) is up now
    PauseFn pause = find_pause();
    if (pause == nullptr) {
      std::fprintf(stderr, "launch_bench: ab needs streamrace_bench_pause (run under streamrace or cupti_floor)\n");
      return 2;
    }
    auto block = [&](bool paused) {
      if (pause(paused ? 1 : 0) != 0) {
        std::fprintf(stderr, "launch_bench: streamrace_bench_pause failed\n");
        std::exit(2);
      }
      CHECK(cudaStreamSynchronize(s));
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) empty<<<1, 1, 0, s>>>();
      auto t1 = std::chrono::steady_clock::now();
      CHECK(cudaStreamSynchronize(s));
      return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
    };
    block(false);
    block(true);
    std::vector<double> on, off, diff;
    for (int i = 0; i < pairs; ++i) {
      double a, b;
      if (i % 2 == 0) {
        a = block(false);
        b = block(true);
      } else {
        b = block(true);
        a = block(false);
      }
      on.push_back(a);
      off.push_back(b);
      diff.push_back(a - b);
    }
    pause(0);
    int won = 0;
    for (double d : diff) won += d > 0;
    std::printf("launch_bench: pairs %d of %d launches, off won %d\n", pairs, n, won);
    std::printf("ab_on_ns %.1f\nab_off_ns %.1f\nab_added_ns %.1f\n", median(on), median(off), median(diff));
    return 0;
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 1000; ++i) empty<<<1, 1, 0, s>>>();
  CHECK(cudaStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) empty<<<1, 1, 0, s>>>();
  auto t1 = std::chrono::steady_clock::now();
  CHECK(cudaStreamSynchronize(s));
  double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
  std::printf("launch_ns_per_call %.1f\n", ns);
  return 0;
}
