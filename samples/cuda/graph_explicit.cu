// CUDA graphs built with the explicit graph API (cudaGraphCreate, cudaGraphAdd*Node), not by
// stream capture.
// Part 1, one graph, two pairs of nodes:
//   - a kernel node (`slow_fill`, pointer argument x) and a memcpy node copying x out;
//   - a memset node writing y and a memcpy node copying y out.
//   racy: neither copy depends on its producer: at launch each pair may run concurrently.
//   clean: each copy node is added after its producer (the producer is in its dependencies;
//   the second edge is added with cudaGraphAddDependencies).
// Part 2, a second graph (one memset node writing `out`) replayed on a non-blocking side stream
// while an eager kernel on the legacy default stream reads `out`.
//   racy: the legacy stream does not wait for the side stream.
//   clean: an event recorded on the side stream after the launch is waited on first.
#include "sample_common.h"

__global__ void slow_fill(float* x, size_t n, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) x[i] = 1.0f;
}

__global__ void read_sum(const float* x, size_t n, float* out) {
  float s = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) s += x[i];
  atomicAdd(out, s);
}

int main(int argc, char** argv) {
  bool racy = racy_mode(argc, argv);
  const size_t n = 1 << 18;  // floats
  const size_t bytes = n * sizeof(float);
  float *x, *y, *dst, *dst2, *out, *sum;
  CHECK(cudaMalloc(&x, bytes));
  CHECK(cudaMalloc(&y, bytes));
  CHECK(cudaMalloc(&dst, bytes));
  CHECK(cudaMalloc(&dst2, bytes));
  CHECK(cudaMalloc(&out, bytes));
  CHECK(cudaMalloc(&sum, sizeof(float)));
  cudaStream_t s, side;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));

  // ---- part 1: an explicit graph whose copy nodes race their producers (racy)
  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t fill_node, copy_x, set_y, copy_y;
  size_t n_arg = n;
  long long cycles = kSpinCycles;
  void* fill_args[] = {&x, &n_arg, &cycles};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(slow_fill);
  kp.gridDim = dim3(64);
  kp.blockDim = dim3(256);
  kp.kernelParams = fill_args;
  CHECK(cudaGraphAddKernelNode(&fill_node, g, nullptr, 0, &kp));
  CHECK(cudaGraphAddMemcpyNode1D(&copy_x, g, racy ? nullptr : &fill_node, racy ? 0 : 1, dst, x, bytes,
                                 cudaMemcpyDeviceToDevice));
  cudaMemsetParams mp = {};
  mp.dst = y;
  mp.value = 7;
  mp.elementSize = 1;
  mp.width = bytes;
  mp.height = 1;
  CHECK(cudaGraphAddMemsetNode(&set_y, g, nullptr, 0, &mp));
  CHECK(cudaGraphAddMemcpyNode1D(&copy_y, g, nullptr, 0, dst2, y, bytes, cudaMemcpyDeviceToDevice));
  if (!racy) CHECK(cudaGraphAddDependencies(g, &set_y, &copy_y, nullptr, 1));
  cudaGraphExec_t gx;
  CHECK(cudaGraphInstantiateWithFlags(&gx, g, 0));
  CHECK(cudaGraphLaunch(gx, s));
  CHECK(cudaStreamSynchronize(s));

  // ---- part 2: a graph replayed on a side stream, read by an eager kernel
  cudaGraph_t h;
  CHECK(cudaGraphCreate(&h, 0));
  cudaGraphNode_t spin_node, set_out;
  void* spin_args[] = {&cycles};
  cudaKernelNodeParams sp = {};
  sp.func = reinterpret_cast<void*>(spin);
  sp.gridDim = dim3(1);
  sp.blockDim = dim3(1);
  sp.kernelParams = spin_args;
  CHECK(cudaGraphAddKernelNode(&spin_node, h, nullptr, 0, &sp));
  cudaMemsetParams op = mp;
  op.dst = out;
  CHECK(cudaGraphAddMemsetNode(&set_out, h, &spin_node, 1, &op));
  cudaGraphExec_t hx;
  CHECK(cudaGraphInstantiateWithFlags(&hx, h, 0));
  cudaEvent_t done;
  CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CHECK(cudaGraphLaunch(hx, side));
  if (!racy) {
    CHECK(cudaEventRecord(done, side));
    CHECK(cudaStreamWaitEvent(0, done, 0));
  }
  read_sum<<<64, 256>>>(out, n, sum);
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaGraphExecDestroy(gx));
  CHECK(cudaGraphExecDestroy(hx));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaGraphDestroy(h));
  std::printf("graph_explicit %s done\n", racy ? "racy" : "clean");
  return 0;
}
