// Two non-blocking streams: s1 writes a buffer, s2 copies it out.
// racy: nothing orders them (read-after-write race).
// clean: s1 records an event after the write and s2 waits on it.
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
  cudaEvent_t written;
  CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  spin<<<1, 1, 0, s1>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(buf, 1, n, s1));
  if (!racy) {
    CHECK(cudaEventRecord(written, s1));
    CHECK(cudaStreamWaitEvent(s2, written, 0));
  }
  CHECK(cudaMemcpyAsync(dst, buf, n, cudaMemcpyDeviceToDevice, s2));
  CHECK(cudaDeviceSynchronize());
  std::printf("two_streams %s done\n", racy ? "racy" : "clean");
  return 0;
}
