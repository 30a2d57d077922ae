// Host accesses to pinned memory while an async copy still uses it (streamrace run
// --host-accesses, docs/host-accesses.md). cudaMemcpyAsync from or to pinned memory returns
// at once; the copy runs later, in stream order, here behind a spin kernel.
// racy: the host refills the H2D copy's pinned source right after the cudaMemcpyAsync (the
//       device copies the new data), and reads the D2H copy's pinned destination right after
//       its cudaMemcpyAsync (it sees the old data).
// clean: cudaStreamSynchronize before each host access.
// The program prints what the device got and what the host read, which differ between the
// modes, never between a traced and an untraced run (the spin makes them deterministic).
// A third, untraced-only mode `bench N` times N pinned H2D copies of 1 MiB with a host
// refill after each synchronisation (the overhead loop of scripts/gpu/hostpin_batch.sh).
#include <chrono>
#include <cstdint>

#include "sample_common.h"

namespace {

int bench(int iters) {
  const size_t n = 1 << 20;
  void *host, *dev;
  CHECK(cudaHostAlloc(&host, n, cudaHostAllocDefault));
  CHECK(cudaMalloc(&dev, n));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::memset(host, 1, n);
  CHECK(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, s));  // warm up
  CHECK(cudaStreamSynchronize(s));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    CHECK(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, s));
    CHECK(cudaStreamSynchronize(s));
    static_cast<volatile char*>(host)[i % n] = char(i);  // the host reuses the buffer: clean
  }
  auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::printf("pinned_host_reuse bench iters=%d us_per_iter=%.2f\n", iters, us / iters);
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(host));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "bench") == 0) return bench(std::atoi(argv[2]));
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  unsigned char *src, *dst, *check;
  void *dev_in, *dev_out;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&src), n, cudaHostAllocDefault));
  CHECK(cudaMallocHost(reinterpret_cast<void**>(&dst), n));
  check = static_cast<unsigned char*>(std::malloc(n));
  CHECK(cudaMalloc(&dev_in, n));
  CHECK(cudaMalloc(&dev_out, n));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaMemset(dev_out, 3, n));
  CHECK(cudaDeviceSynchronize());

  // 1. H2D: the pinned source is refilled for the "next batch".
  std::memset(src, 1, n);
  spin<<<1, 1, 0, s>>>(kSpinCycles);
  CHECK(cudaMemcpyAsync(dev_in, src, n, cudaMemcpyHostToDevice, s));
  if (!racy) CHECK(cudaStreamSynchronize(s));
  std::memset(src, 2, n);  // racy: the copy, still queued behind the spin, reads these bytes
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(check, dev_in, n, cudaMemcpyDeviceToHost));
  std::printf("h2d: the device got %d (1 = the data at the copy's call)\n", int(check[0]));

  // 2. D2H: the pinned destination is read before the copy is known complete.
  std::memset(dst, 0, n);
  spin<<<1, 1, 0, s>>>(kSpinCycles);
  CHECK(cudaMemcpyAsync(dst, dev_out, n, cudaMemcpyDeviceToHost, s));
  if (!racy) CHECK(cudaStreamSynchronize(s));
  int seen = static_cast<volatile unsigned char*>(dst)[0];  // racy: before the copy ran
  CHECK(cudaStreamSynchronize(s));
  std::printf("d2h: the host read %d (3 = the copied data)\n", seen);

  CHECK(cudaFree(dev_in));
  CHECK(cudaFree(dev_out));
  CHECK(cudaFreeHost(src));
  CHECK(cudaFreeHost(dst));
  std::free(check);
  std::printf("pinned_host_reuse %s done\n", racy ? "racy" : "clean");
  return 0;
}
