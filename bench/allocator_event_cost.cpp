// The tracer's cost per PyTorch caching-allocator event, on the CPU: TorchAllocatorHook
// attached to a stand-in libc10_cuda.so laid out as torch 2.11's (tests/tracer/fake/
// fake_c10_cuda.cpp, built again here), which calls the hook's trace tracker the way PyTorch
// does. Each of BLOCKS blocks inside SEGMENTS traced 2 MiB segments is allocated, freed and its
// free completed in turn (three events, on the default stream or a side stream), as a training
// step does per tensor; no stacks (a free's Python stack is priced by
// bench/python_stack_cost.sh). Prints ns per event, in wall time and in the thread's CPU time,
// less the stand-in's own cost of building and dispatching an entry (measured with no tracker).
//
//   streamrace-allocator-event-cost [EVENTS] [SEGMENTS] [BLOCKS]
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <generated_cuda_runtime_api_meta.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "bench/bench_support.h"
#include "tracer/allocation_table.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/cuda_queries.h"
#include "tracer/thread_state.h"
#include "tracer/torch_allocator_hook.h"
#include "tracer/trace_recorder.h"

using namespace streamrace;
using namespace streamrace::tracer;

namespace {

using bench::BenchQueries;
using bench::now_ns;

}  // namespace

int main(int argc, char** argv) {
  const long events = argc > 1 ? std::atol(argv[1]) : 3000000;
  const size_t segments = argc > 2 ? size_t(std::atol(argv[2])) : 200;
  const size_t blocks = argc > 3 ? size_t(std::atol(argv[3])) : 4000;
  void* lib = dlopen(SR_FAKE_C10_CUDA, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  auto reset = reinterpret_cast<void (*)(int, int, const char*)>(dlsym(lib, "fake_torch_reset"));
  auto emit = reinterpret_cast<void (*)(int, int, uint64_t, uint64_t, void*)>(dlsym(lib, "fake_torch_emit"));
  const bench::BenchTrace bt = bench::bench_trace("allocator_cost", "allocator event cost");
  const auto& dir = bt.dir;
  const RecorderOptions& o = bt.options;
  TraceRecorder rec(o);
  AllocationTable allocs;
  BenchQueries queries;
  CudaCallHandler handler(rec, allocs, queries, nullptr);
  TorchAllocatorHook hook(handler);
  handler.set_torch_allocator_hook(&hook);
  thread_state() = TracerThreadState{};
  reset(1, 1, "native");
  constexpr uint64_t kSegment = 2u << 20;
  for (size_t i = 0; i < segments; ++i) {
    void* p = reinterpret_cast<void*>(0x7000'0000'0000ull + i * kSegment);
    cudaMalloc_v3020_params m{&p, kSegment};
    handler.on_call(ApiCall{ApiDomain::kRuntime, true, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, nullptr, &m, 0, 1, 0x100});
    handler.on_call(ApiCall{ApiDomain::kRuntime, false, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, nullptr, &m, 0, 1, 0x100});
  }
  if (!hook.attached()) {
    std::fprintf(stderr, "the hook did not attach to %s\n", SR_FAKE_C10_CUDA);
    return 1;
  }
  const uint64_t block_bytes = segments * kSegment / blocks;
  auto run = [&](long n) {
    for (long i = 0; i < n; ++i) {
      const uint64_t b = uint64_t(i / 3) * 7919 % blocks;
      void* stream = b % 4 == 0 ? reinterpret_cast<void*>(0x5550) : nullptr;
      emit(int(i % 3), 0, 0x7000'0000'0000ull + b * block_bytes, block_bytes - 512, stream);  // ALLOC, FREE_REQUESTED, FREE_COMPLETED
    }
  };
  auto timed = [&](long n, double& wall, double& cpu) {
    const double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    run(n);
    wall = now_ns(CLOCK_MONOTONIC) - w0;
    cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  };
  double wall = 0, cpu = 0, base_wall = 0, base_cpu = 0;
  timed(events, wall, cpu);
  reset(1, 1, "native");  // no tracker: what the stand-in itself costs per event
  timed(events, base_wall, base_cpu);
  rec.close();
  std::filesystem::remove_all(dir);
  const double n = double(events);
  std::printf("events=%ld segments=%zu blocks=%zu: %.1f ns per event (the stand-in's own %.1f ns taken off); "
              "thread CPU time %.1f ns per event\n",
              events, segments, blocks, (wall - base_wall) / n, base_wall / n, (cpu - base_cpu) / n);
  return 0;
}
