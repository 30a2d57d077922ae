// The launches launch_probe.cpp looks at: each default-stream spelling, created streams, the
// Ex and cooperative launch calls; probe_ptsz.cu (compiled with --default-stream per-thread)
// adds the per-thread default stream's own spelling.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void k(int* p) {
  if (p) *p = 1;
}
void ptsz_launches();  // probe_ptsz.cu

int main() {
  int* d = nullptr;
  cudaMalloc(&d, 4);
  cudaStream_t blocking, nonblocking;
  cudaStreamCreate(&blocking);
  cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking);
  unsigned long long id = 0;
  std::printf("app: blocking=%p nonblocking=%p\n", (void*)blocking, (void*)nonblocking);
  for (cudaStream_t s : {(cudaStream_t)0, cudaStreamLegacy, cudaStreamPerThread, blocking, nonblocking}) {
    cudaStreamGetId(s, &id);
    std::printf("app: stream %p has id %llu\n", (void*)s, id);
  }
  std::printf("app: <<<>>> on 0, cudaStreamLegacy, cudaStreamPerThread, blocking, nonblocking\n");
  std::fflush(stdout);
  k<<<1, 1>>>(d);
  k<<<1, 1, 0, cudaStreamLegacy>>>(d);
  k<<<1, 1, 0, cudaStreamPerThread>>>(d);
  k<<<1, 1, 0, blocking>>>(d);
  k<<<1, 1, 0, nonblocking>>>(d);
  cudaDeviceSynchronize();
  std::printf("app: cudaLaunchKernel on 0 and nonblocking\n");
  std::fflush(stdout);
  void* args[] = {&d};
  cudaLaunchKernel((const void*)k, dim3(1), dim3(1), args, 0, 0);
  cudaLaunchKernel((const void*)k, dim3(1), dim3(1), args, 0, nonblocking);
  std::printf("app: cudaLaunchKernelExC on 0 and nonblocking, cooperative on 0\n");
  std::fflush(stdout);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(1);
  cfg.stream = 0;
  cudaLaunchKernelExC(&cfg, (const void*)k, args);
  cfg.stream = nonblocking;
  cudaLaunchKernelExC(&cfg, (const void*)k, args);
  cudaLaunchCooperativeKernel((const void*)k, dim3(1), dim3(1), args, 0, 0);
  cudaDeviceSynchronize();
  std::printf("app: per-thread default stream compile\n");
  std::fflush(stdout);
  ptsz_launches();
  cudaDeviceSynchronize();
  std::printf("app: capture on nonblocking\n");
  std::fflush(stdout);
  cudaGraph_t g;
  cudaStreamBeginCapture(nonblocking, cudaStreamCaptureModeGlobal);
  k<<<1, 1, 0, nonblocking>>>(d);
  cudaStreamEndCapture(nonblocking, &g);
  cudaDeviceSynchronize();
  std::printf("app: done %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
