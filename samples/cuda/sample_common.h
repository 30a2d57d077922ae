// Shared by the samples: error checking, a spin kernel that holds a stream busy for a
// chosen number of GPU cycles (it widens every race window), and the racy/clean switch.
// Each sample is one program with two modes: `racy` (the bug) and `clean` (its fix).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

// About 50 ms on an H200 (1.98 GHz).
constexpr long long kSpinCycles = 100'000'000;

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// True for "racy" (the default), false for "clean".
inline bool racy_mode(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "clean") == 0) return false;
  if (argc > 1 && std::strcmp(argv[1], "racy") != 0) {
    std::fprintf(stderr, "usage: %s racy|clean\n", argv[0]);
    std::exit(2);
  }
  return true;
}
