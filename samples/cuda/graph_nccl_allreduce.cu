// An NCCL all-reduce captured into a CUDA graph (as Megatron's CUDA-graph mode and
// torch.compile's reduce-overhead mode capture collectives), replayed on the communication
// stream, while an eager kernel on the compute stream overwrites its buffer: the fixed-address
// graph buffer reused while the replayed collective may still read it (Megatron-LM #6060).
// One GPU, one rank (ncclCommInitAll with one device): the collective is still a kernel that
// reads and writes the buffer.
// racy: the compute stream writes the buffer right after the replay, without waiting.
// clean: the compute stream waits on an event recorded on the communication stream after the
//        graph launch (a graph's nodes are ordered from outside only around its launch).
#include <nccl.h>

#include "sample_common.h"

#define NCCLCHECK(call)                                                               \
  do {                                                                                \
    ncclResult_t r_ = (call);                                                         \
    if (r_ != ncclSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

__global__ void fill(float* x, size_t n, float v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) x[i] = v;
}

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t count = 1 << 20;
  ncclComm_t comm;
  int dev = 0;
  NCCLCHECK(ncclCommInitAll(&comm, 1, &dev));
  float* buf;
  CHECK(cudaMalloc(&buf, count * sizeof(float)));
  CHECK(cudaMemset(buf, 0, count * sizeof(float)));
  cudaStream_t comm_stream, compute;
  CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  cudaEvent_t reduced;
  CHECK(cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming));
  CHECK(cudaDeviceSynchronize());

  // Capture: a spin (the gradient computation's stand-in, it widens the window) and the
  // all-reduce of the bucket, both on the communication stream.
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(comm_stream, cudaStreamCaptureModeGlobal));
  spin<<<1, 1, 0, comm_stream>>>(kSpinCycles);
  NCCLCHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, comm_stream));
  CHECK(cudaStreamEndCapture(comm_stream, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0));

  CHECK(cudaGraphLaunch(exec, comm_stream));
  if (!racy) {
    CHECK(cudaEventRecord(reduced, comm_stream));
    CHECK(cudaStreamWaitEvent(compute, reduced, 0));
  }
  // The next step's gradients land in the bucket the replayed all-reduce still reads.
  fill<<<64, 256, 0, compute>>>(buf, count, 1.0f);
  CHECK(cudaDeviceSynchronize());
  float first = 0;
  CHECK(cudaMemcpy(&first, buf, sizeof first, cudaMemcpyDeviceToHost));

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(buf));
  NCCLCHECK(ncclCommDestroy(comm));
  std::printf("graph_nccl_allreduce %s done, buf[0]=%.0f\n", racy ? "racy" : "clean", first);
  return 0;
}
