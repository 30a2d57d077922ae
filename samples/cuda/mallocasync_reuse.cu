// Stream-ordered allocation reused while another stream still uses it.
// racy: p is allocated and freed on s1, but written on s2 in between with no ordering back
//       to s1; the pool hands the same bytes to q on s1, whose write races with s2's.
// clean: s1 waits for s2's write (event) before freeing p.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t used;
  CHECK(cudaEventCreateWithFlags(&used, cudaEventDisableTiming));
  void *p, *q;
  CHECK(cudaMallocAsync(&p, n, s1));
  CHECK(cudaStreamSynchronize(s1));
  spin<<<1, 1, 0, s2>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(p, 8, n, s2));
  if (!racy) {
    CHECK(cudaEventRecord(used, s2));
    CHECK(cudaStreamWaitEvent(s1, used, 0));
  }
  CHECK(cudaFreeAsync(p, s1));
  CHECK(cudaMallocAsync(&q, n, s1));
  CHECK(cudaMemsetAsync(q, 9, n, s1));
  CHECK(cudaDeviceSynchronize());
  std::printf("mallocasync_reuse %s done (%s)\n", racy ? "racy" : "clean", p == q ? "same address" : "new address");
  return 0;
}
