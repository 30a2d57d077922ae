// A CUDA graph, captured on a non-blocking side stream, writes a buffer; it is replayed on the
// side stream while the legacy default stream copies the buffer out.
// racy: the default stream does not wait for the replay (read-after-write race against the
// graph's memset node).
// clean: an event recorded on the side stream after the launch is waited on first.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void *out, *dst;
  CHECK(cudaMalloc(&out, n));
  CHECK(cudaMalloc(&dst, n));
  cudaStream_t side;
  CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  // Captured once: a spin (widens the window at replay) and the write.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeThreadLocal));
  spin<<<1, 1, 0, side>>>(kSpinCycles);
  CHECK(cudaMemsetAsync(out, 1, n, side));
  CHECK(cudaStreamEndCapture(side, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, side));
  if (!racy) {
    CHECK(cudaEventRecord(done, side));
    CHECK(cudaStreamWaitEvent(cudaStreamLegacy, done, 0));
  }
  CHECK(cudaMemcpyAsync(dst, out, n, cudaMemcpyDeviceToDevice, cudaStreamLegacy));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  std::printf("graph_side_stream %s done\n", racy ? "racy" : "clean");
  return 0;
}
