// One captured graph with two branches: s2 is forked into s1's capture with an event and
// joined back before the capture ends. Branch 0 (s1) copies a buffer out; branch 1 (s2)
// overwrites it.
// racy: nothing inside the graph orders the two nodes (write-after-read race at launch).
// clean: branch 1 is joined into branch 0 (event record on s2, wait on s1) before the copy.
#include "sample_common.h"

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 20;
  void *x, *dst;
  CHECK(cudaMalloc(&x, n));
  CHECK(cudaMalloc(&dst, n));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(cudaEventRecord(fork, s1));
  CHECK(cudaStreamWaitEvent(s2, fork, 0));
  if (racy) {
    spin<<<1, 1, 0, s1>>>(kSpinCycles);
    CHECK(cudaMemcpyAsync(dst, x, n, cudaMemcpyDeviceToDevice, s1));
    CHECK(cudaMemsetAsync(x, 2, n, s2));
    CHECK(cudaEventRecord(join, s2));
    CHECK(cudaStreamWaitEvent(s1, join, 0));
  } else {
    CHECK(cudaMemsetAsync(x, 2, n, s2));
    CHECK(cudaEventRecord(join, s2));
    CHECK(cudaStreamWaitEvent(s1, join, 0));
    spin<<<1, 1, 0, s1>>>(kSpinCycles);
    CHECK(cudaMemcpyAsync(dst, x, n, cudaMemcpyDeviceToDevice, s1));
  }
  CHECK(cudaStreamEndCapture(s1, &graph));
  CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  std::printf("graph_two_branches %s done\n", racy ? "racy" : "clean");
  return 0;
}
