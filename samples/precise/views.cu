// Precise mode's CUDA sample (issue 7): two kernels on two non-blocking streams touch one
// 4 MiB buffer of N floats through pointers to different offsets, as narrow() views do.
//
//   racy      s1 writes [0, N/2); s2 reads [N/4, 3N/4) with nothing ordering them:
//             read-after-write on [N/4, N/2).
//   clean     the same, s2 waits on an event s1 recorded after the write.
//   readread  s1 and s2 both read [0, N): clean (read-read is not a race).
//   disjoint  s1 writes [0, N/2), s2 writes [N/2, N): clean (no byte in common).
//
// Default mode sees only pointer arguments (start addresses, no extent, no direction);
// precise mode measures each launch's byte ranges and directions on the GPU.
#include <cstring>

#include "../cuda/sample_common.h"

__global__ void write_range(float* p, int n, float v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

__global__ void read_range(const float* p, int n, float* out) {
  float acc = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += p[i];
  atomicAdd(out, acc);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "racy";
  const bool racy = std::strcmp(mode, "racy") == 0, clean = std::strcmp(mode, "clean") == 0;
  const bool readread = std::strcmp(mode, "readread") == 0, disjoint = std::strcmp(mode, "disjoint") == 0;
  if (!racy && !clean && !readread && !disjoint) {
    std::fprintf(stderr, "usage: %s racy|clean|readread|disjoint\n", argv[0]);
    return 2;
  }
  const int n = 1 << 20;
  float *buf, *out;
  CHECK(cudaMalloc(&buf, n * sizeof(float)));
  CHECK(cudaMalloc(&out, 2 * sizeof(float)));
  CHECK(cudaMemset(buf, 0, n * sizeof(float)));
  CHECK(cudaMemset(out, 0, 2 * sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  if (readread) {
    read_range<<<256, 256, 0, s1>>>(buf, n, out);
    read_range<<<256, 256, 0, s2>>>(buf, n, out + 1);
  } else if (disjoint) {
    write_range<<<256, 256, 0, s1>>>(buf, n / 2, 1.f);
    write_range<<<256, 256, 0, s2>>>(buf + n / 2, n / 2, 2.f);
  } else {
    write_range<<<256, 256, 0, s1>>>(buf, n / 2, 1.f);
    if (clean) {
      CHECK(cudaEventRecord(done, s1));
      CHECK(cudaStreamWaitEvent(s2, done, 0));
    }
    read_range<<<256, 256, 0, s2>>>(buf + n / 4, n / 2, out);
  }
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaStreamSynchronize(s2));
  float host[2];
  CHECK(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost));
  std::printf("views %s done (%g %g)\n", mode, host[0], host[1]);
  return 0;
}
