// Kernels on two streams sharing a buffer, found through their pointer arguments.
// racy: the producer and the consumer kernels run on different streams unordered (a
//       "possible" race: the default tier does not know what a kernel reads or writes).
// clean: the consumer's stream waits on an event recorded after the producer.
#include "sample_common.h"

__global__ void produce(float* out, int n, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = float(i);
}

__global__ void consume(const float* in, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = 2 * in[i];
}

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const int n = 1 << 18;
  float *a, *b;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  produce<<<64, 256, 0, s1>>>(a, n, kSpinCycles);
  if (!racy) {
    CHECK(cudaEventRecord(done, s1));
    CHECK(cudaStreamWaitEvent(s2, done, 0));
  }
  consume<<<64, 256, 0, s2>>>(a, b, n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::printf("kernel_args %s done\n", racy ? "racy" : "clean");
  return 0;
}
