// An async copy from pageable host memory synchronises with its stream before it starts
// (NVIDIA's "API synchronization behavior"); one from pinned memory does not.
// clean: after s1's write, an H2D cudaMemcpyAsync from pageable memory on s1 makes the host
//        wait for s1, so the read on s2 launched afterwards is ordered.
// racy: the same copy from pinned memory returns at once: s2's read races with s1's write.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void *buf, *dst, *other, *host;
  CHECK(cudaMalloc(&buf, n));
  CHECK(cudaMalloc(&dst, n));
  CHECK(cudaMalloc(&other, n));
  if (racy) {
    CHECK(cudaMallocHost(&host, n));
  } else {
    host = std::malloc(n);
  }
  std::memset(host, 7, n);
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  spin<<<1, 1, 0, s1>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(buf, 6, n, s1));
  CHECK(cudaMemcpyAsync(other, host, n, cudaMemcpyHostToDevice, s1));
  CHECK(cudaMemcpyAsync(dst, buf, n, cudaMemcpyDeviceToDevice, s2));
  CHECK(cudaDeviceSynchronize());
  std::printf("pageable_copy %s done\n", racy ? "racy" : "clean");
  return 0;
}
