// Overhead microbenchmark: the host cost of 100k empty kernel launches (a launch-bound
// loop), run with and without the tracer; the difference per launch is the tracer's cost
// per traced API call with stacks.
#include <chrono>

#include "sample_common.h"

__global__ void empty() {}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
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
