// Precise mode and async copies (issue #11): a kernel that reads global memory only through
// cp.async (LDGSTS, as pipelined GEMMs, flash attention and Triton kernels do) must have those
// reads measured, or at least not taken for "no access".
//
//   racy   s1 writes buf; s2's kernel copies buf into shared memory with cp.async and sums it,
//          with nothing ordering the two: read-after-write on the whole buffer.
//   clean  the same, s2 waits on an event s1 recorded after the write.
//
// Needs sm_80 or newer (cp.async).
#include <cuda_pipeline.h>

#include <cstring>

#include "../cuda/sample_common.h"

__global__ void write_all(float* p, int n, float v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

// Each block stages 256 x 4 floats at a time through shared memory with 16-byte cp.async.
__global__ void sum_async(const float* p, int n, float* out) {
  __shared__ float4 tile[256];
  float acc = 0.f;
  for (int base = blockIdx.x * 1024; base < n; base += gridDim.x * 1024) {
    __pipeline_memcpy_async(&tile[threadIdx.x], reinterpret_cast<const float4*>(p + base) + threadIdx.x, sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    const float4 v = tile[threadIdx.x];
    acc += v.x + v.y + v.z + v.w;
    __syncthreads();
  }
  atomicAdd(out, acc);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "racy";
  const bool racy = std::strcmp(mode, "racy") == 0, clean = std::strcmp(mode, "clean") == 0;
  if (!racy && !clean) {
    std::fprintf(stderr, "usage: %s racy|clean\n", argv[0]);
    return 2;
  }
  const int n = 1 << 20;  // a multiple of 1024
  float *buf, *out;
  CHECK(cudaMalloc(&buf, n * sizeof(float)));
  CHECK(cudaMalloc(&out, sizeof(float)));
  CHECK(cudaMemset(buf, 0, n * sizeof(float)));
  CHECK(cudaMemset(out, 0, sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  write_all<<<256, 256, 0, s1>>>(buf, n, 1.f);
  if (clean) {
    CHECK(cudaEventRecord(done, s1));
    CHECK(cudaStreamWaitEvent(s2, done, 0));
  }
  sum_async<<<128, 256, 0, s2>>>(buf, n, out);
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaStreamSynchronize(s2));
  float host = 0;
  CHECK(cudaMemcpy(&host, out, sizeof host, cudaMemcpyDeviceToHost));
  std::printf("async_copy %s done (%g)\n", mode, host);
  return 0;
}
