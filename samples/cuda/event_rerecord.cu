// An event re-recorded before the wait: a wait sees the latest record issued before it.
// racy: recorded on s1 after the write, then re-recorded on an idle stream s3; s2 waits
//       on the re-record, which does not cover the write.
// clean: the same two records in the other order: the latest is on s1 after the write.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void *buf, *dst;
  CHECK(cudaMalloc(&buf, n));
  CHECK(cudaMalloc(&dst, n));
  cudaStream_t s1, s2, s3;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  cudaEvent_t e;
  CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  spin<<<1, 1, 0, s1>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(buf, 2, n, s1));
  if (racy) {
    CHECK(cudaEventRecord(e, s1));
    CHECK(cudaEventRecord(e, s3));
  } else {
    CHECK(cudaEventRecord(e, s3));
    CHECK(cudaEventRecord(e, s1));
  }
  CHECK(cudaStreamWaitEvent(s2, e, 0));
  CHECK(cudaMemcpyAsync(dst, buf, n, cudaMemcpyDeviceToDevice, s2));
  CHECK(cudaDeviceSynchronize());
  std::printf("event_rerecord %s done\n", racy ? "racy" : "clean");
  return 0;
}
