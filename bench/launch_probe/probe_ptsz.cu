// Compiled with --default-stream per-thread (see run.sh).
#include <cuda_runtime.h>

__global__ void kp(int* p) {
  if (p) *p = 2;
}
void ptsz_launches() {
  kp<<<1, 1>>>(nullptr);
  kp<<<1, 1, 0, cudaStreamLegacy>>>(nullptr);
  kp<<<1, 1, 0, cudaStreamPerThread>>>(nullptr);
  int* d = nullptr;
  void* args[] = {&d};
  cudaLaunchKernel((const void*)kp, dim3(1), dim3(1), args, 0, 0);
}
