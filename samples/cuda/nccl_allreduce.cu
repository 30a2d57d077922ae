// An async NCCL all-reduce on 2 GPUs (one process, ncclCommInitAll) whose buffer the
// compute stream writes before the collective has been waited on.
// racy: the compute stream overwrites the buffer while the all-reduce may still read it.
// clean: the compute stream waits on an event recorded on the NCCL stream after the call.
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

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  int ndev = 0;
  CHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) {
    std::fprintf(stderr, "needs 2 GPUs\n");
    return 3;
  }
  const int nranks = 2;
  const size_t count = 1 << 20;
  ncclComm_t comms[nranks];
  int devs[nranks] = {0, 1};
  NCCLCHECK(ncclCommInitAll(comms, nranks, devs));
  float* buf[nranks];
  cudaStream_t comm_stream[nranks], compute[nranks];
  cudaEvent_t reduced[nranks];
  for (int i = 0; i < nranks; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaMalloc(&buf[i], count * sizeof(float)));
    CHECK(cudaMemset(buf[i], 0, count * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&comm_stream[i], cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&compute[i], cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&reduced[i], cudaEventDisableTiming));
    CHECK(cudaDeviceSynchronize());
  }
  for (int i = 0; i < nranks; ++i) {
    CHECK(cudaSetDevice(i));
    spin<<<1, 1, 0, comm_stream[i]>>>(kSpinCycles);
  }
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < nranks; ++i)
    NCCLCHECK(ncclAllReduce(buf[i], buf[i], count, ncclFloat, ncclSum, comms[i], comm_stream[i]));
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < nranks; ++i) {
    CHECK(cudaSetDevice(i));
    if (!racy) {
      CHECK(cudaEventRecord(reduced[i], comm_stream[i]));
      CHECK(cudaStreamWaitEvent(compute[i], reduced[i], 0));
    }
    // The next step's gradients land in the same buffer.
    CHECK(cudaMemsetAsync(buf[i], 1, count * sizeof(float), compute[i]));
  }
  for (int i = 0; i < nranks; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaDeviceSynchronize());
  }
  for (int i = 0; i < nranks; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));
  std::printf("nccl_allreduce %s done\n", racy ? "racy" : "clean");
  return 0;
}
