// Launches from 4 host threads, each on its own stream.
// racy: every thread writes the whole shared buffer (the writes of different streams overlap).
// clean: each thread writes its own quarter of the buffer.
#include <thread>
#include <vector>

#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void* buf;
  CHECK(cudaMalloc(&buf, n));
  CHECK(cudaDeviceSynchronize());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([=] {
      cudaStream_t s;
      CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      spin<<<1, 1, 0, s>>>(kSpinCycles / 4);
      char* base = static_cast<char*>(buf) + (racy ? 0 : t * (n / 4));
      CHECK(cudaMemsetAsync(base, t, racy ? n : n / 4, s));
      CHECK(cudaStreamSynchronize(s));
    });
  }
  for (auto& th : threads) th.join();
  std::printf("four_threads %s done\n", racy ? "racy" : "clean");
  return 0;
}
