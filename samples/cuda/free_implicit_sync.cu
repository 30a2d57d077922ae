// cudaFree synchronises the whole device before it returns.
// clean: cudaFree(scratch) between s1's write and s2's read orders them.
// racy: cudaFreeAsync(scratch, s3) is stream-ordered and synchronises nothing.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void *buf, *dst, *scratch;
  CHECK(cudaMalloc(&buf, n));
  CHECK(cudaMalloc(&dst, n));
  cudaStream_t s1, s2, s3;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  if (racy) {
    CHECK(cudaMallocAsync(&scratch, n, s3));
  } else {
    CHECK(cudaMalloc(&scratch, n));
  }
  CHECK(cudaDeviceSynchronize());
  spin<<<1, 1, 0, s1>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(buf, 5, n, s1));
  if (racy) {
    CHECK(cudaFreeAsync(scratch, s3));
  } else {
    CHECK(cudaFree(scratch));
  }
  CHECK(cudaMemcpyAsync(dst, buf, n, cudaMemcpyDeviceToDevice, s2));
  CHECK(cudaDeviceSynchronize());
  std::printf("free_implicit_sync %s done\n", racy ? "racy" : "clean");
  return 0;
}
