// Device kernels of the replay GPU executor (replay_kernels.cu), callable from host C++.
// Element storage is float32: every gradient value of gradient_values.h is exact in it.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace streamrace::replay::gpu {

// out[i] = world * gradient_base(param, first_elem + i, rank, step)
void launch_produce(float* out, uint64_t n, uint32_t param, uint64_t first_elem, uint32_t rank, uint32_t step,
                    uint32_t world, cudaStream_t s);
// x[i] = x[i] / divisor
void launch_divide(float* x, uint64_t n, float divisor, cudaStream_t s);
// x[i] = value
void launch_fill(float* x, uint64_t n, float value, cudaStream_t s);
// Occupies the stream for about `ns` nanoseconds (globaltimer spin on one thread).
void launch_spin(uint64_t ns, cudaStream_t s);

}  // namespace streamrace::replay::gpu
