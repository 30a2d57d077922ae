// Device kernels of the replay GPU executor.
#include "replay/gpu/replay_kernels.h"

#include "replay/gradient_values.h"

namespace streamrace::replay::gpu {

namespace {

__global__ void produce_kernel(float* out, uint64_t n, uint32_t param, uint64_t first, uint32_t rank, uint32_t step,
                               uint32_t world) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    out[i] = float(gradient_value(param, first + i, rank, step, world));
}

__global__ void divide_kernel(float* x, uint64_t n, float d) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    x[i] = x[i] / d;
}

__global__ void fill_kernel(float* x, uint64_t n, float v) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t ns) {
  uint64_t start = global_ns();
  while (global_ns() - start < ns) {
  }
}

unsigned grid_for(uint64_t n) {
  uint64_t blocks = (n + 255) / 256;
  return unsigned(blocks > 4096 ? 4096 : (blocks ? blocks : 1));
}

}  // namespace

void launch_produce(float* out, uint64_t n, uint32_t param, uint64_t first, uint32_t rank, uint32_t step, uint32_t world,
                    cudaStream_t s) {
  produce_kernel<<<grid_for(n), 256, 0, s>>>(out, n, param, first, rank, step, world);
}

void launch_divide(float* x, uint64_t n, float d, cudaStream_t s) { divide_kernel<<<grid_for(n), 256, 0, s>>>(x, n, d); }

void launch_fill(float* x, uint64_t n, float v, cudaStream_t s) { fill_kernel<<<grid_for(n), 256, 0, s>>>(x, n, v); }

void launch_spin(uint64_t ns, cudaStream_t s) { spin_kernel<<<1, 1, 0, s>>>(ns); }

}  // namespace streamrace::replay::gpu
