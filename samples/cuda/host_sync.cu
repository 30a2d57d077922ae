// Host synchronisation orders later launches after a stream's work.
// racy: s2 copies the buffer while s1 may still be writing it.
// clean: the host waits for s1 (cudaStreamSynchronize) before launching the copy on s2.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void *buf, *dst;
  CHECK(cudaMalloc(&buf, n));
  CHECK(cudaMalloc(&dst, n));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  spin<<<1, 1, 0, s1>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(buf, 4, n, s1));
  if (!racy) CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaMemcpyAsync(dst, buf, n, cudaMemcpyDeviceToDevice, s2));
  CHECK(cudaDeviceSynchronize());
  std::printf("host_sync %s done\n", racy ? "racy" : "clean");
  return 0;
}
