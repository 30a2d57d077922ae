// The legacy default stream synchronises with blocking streams only.
// clean: s1 is a blocking stream (cudaStreamCreate): the copy on stream 0 waits for it.
// racy: s1 is non-blocking: the copy on stream 0 does not wait for s1's write.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void *buf, *dst;
  CHECK(cudaMalloc(&buf, n));
  CHECK(cudaMalloc(&dst, n));
  cudaStream_t s1;
  if (racy) {
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  } else {
    CHECK(cudaStreamCreate(&s1));
  }
  spin<<<1, 1, 0, s1>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(buf, 3, n, s1));
  CHECK(cudaMemcpyAsync(dst, buf, n, cudaMemcpyDeviceToDevice, 0));
  CHECK(cudaDeviceSynchronize());
  std::printf("legacy_stream %s done\n", racy ? "racy" : "clean");
  return 0;
}
