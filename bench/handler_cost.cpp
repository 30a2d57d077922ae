// The tracer's per-call cost on its hot path, on the CPU: CudaCallHandler driven by the
// callbacks CUPTI makes for a kernel launch (runtime enter, driver enter and exit, runtime
// exit), as in tests/tracer/cuda_call_handler_test.cpp, with stacks off (StackCapture has its
// own benchmark: bench/native_stack_cost.cpp). The kernel takes POINTERS pointer arguments into
// ALLOCATIONS live allocations and a struct of SCALARS 8-byte words of sizes and strides, round
// robin over FUNCTIONS kernels; a copy (cudaMemcpyAsync,
// device to device) every 4th launch. Prints ns per launch (4 callbacks) and per callback, in
// wall time and in the calling thread's CPU time (the latter does not count the time the thread
// waited for a core: on a loaded machine it is the steadier of the two); run it under
// `perf record` to see where the time goes.
//
//   streamrace-handler-cost [LAUNCHES] [POINTERS] [ALLOCATIONS] [FUNCTIONS] [SCALARS] [CALLBACKS]
//
// CALLBACKS: `driver` (default) drives a launch as the tracer sees it by default, the driver
// launch's exit alone (its enter returns in the CUPTI callback before the handler); `runtime`
// as with STREAMRACE_RUNTIME_LAUNCHES=1, all four.
//
// COLD_KIB (the 7th argument, default 0): between launches the loop reads and writes COLD_KIB
// KiB of other memory, as PyTorch's few microseconds of dispatch between two launches do, so
// the handler's data is no longer all in the nearest caches; the loop is then timed in blocks
// with and without the handler's callbacks, alternating, and the figure printed is the median
// of the blocks' differences (what the callbacks add to a loop that has other work).
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_meta.h>
#include <generated_cuda_runtime_api_meta.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "tracer/allocation_table.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/cuda_queries.h"
#include "tracer/thread_state.h"
#include "tracer/trace_recorder.h"

using namespace streamrace;
using namespace streamrace::tracer;

namespace {

using bench::BenchQueries;
using bench::now_ns;

}  // namespace

int main(int argc, char** argv) {
  const long launches = argc > 1 ? std::atol(argv[1]) : 2000000;
  const size_t pointers = argc > 2 ? size_t(std::atol(argv[2])) : 4;
  const size_t allocations = argc > 3 ? size_t(std::atol(argv[3])) : 2000;
  const size_t functions = argc > 4 ? size_t(std::atol(argv[4])) : 200;
  const size_t scalars = argc > 5 ? std::max<size_t>(1, size_t(std::atol(argv[5]))) : 1;
  const bool runtime_launches = argc > 6 && std::string(argv[6]) == "runtime";
  const size_t cold_kib = argc > 7 ? size_t(std::atol(argv[7])) : 0;
  const bench::BenchTrace bt = bench::bench_trace("handler_cost", "handler cost");
  const auto& dir = bt.dir;
  const RecorderOptions& o = bt.options;
  TraceRecorder rec(o);
  AllocationTable allocs;
  BenchQueries queries;
  queries.pointers = pointers;
  queries.scalar_words = scalars;
  CudaCallHandler handler(rec, allocs, queries, nullptr);
  thread_state() = TracerThreadState{};
  auto call = [&](ApiDomain d, bool enter, uint32_t cbid, const char* sym, const void* p, uint32_t corr) {
    handler.on_call(ApiCall{d, enter, cbid, sym, p, 0, corr, 0x100});
  };
  // Live allocations of 2 MiB (the caching allocator's small segment), back to back.
  std::vector<uint64_t> bases;
  for (size_t i = 0; i < allocations; ++i) {
    uint64_t ptr = 0x7000'0000'0000ull + i * (2ull << 20);
    void* p = reinterpret_cast<void*>(ptr);
    cudaMalloc_v3020_params m{&p, 2u << 20};
    call(ApiDomain::kRuntime, true, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, nullptr, &m, 1);
    call(ApiDomain::kRuntime, false, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, nullptr, &m, 1);
    bases.push_back(ptr);
  }
  std::vector<uint64_t> slots(pointers + scalars);
  std::vector<void*> args(pointers + 1);
  for (size_t i = 0; i < args.size(); ++i) args[i] = &slots[i];
  for (size_t s = 1; s < scalars; ++s) slots[pointers + s] = s % 2 ? 1u << (s % 12) : s;  // sizes, strides
  std::vector<std::string> names;
  for (size_t f = 0; f < functions; ++f) names.push_back("_Z7kernel" + std::to_string(f) + "PfS_");
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(0x5000);
  std::vector<uint64_t> other(cold_kib * 1024 / sizeof(uint64_t) + 1);
  auto other_work = [&] {  // one write per cache line of `other`
    for (size_t k = 0; k < other.size(); k += 8) other[k] += k;
  };
  bool traced = true;
  auto launch = [&](long i) {
    for (size_t s = 0; s < pointers; ++s) slots[s] = bases[(size_t(i) * 7 + s * 13) % bases.size()] + 256;
    slots[pointers] = 1024;
    const size_t f = size_t(i) % functions;
    const uint64_t func = 0xF000 + f;
    const uint32_t corr = uint32_t(2 * i + 2);
    cudaLaunchKernel_v7000_params rp{reinterpret_cast<void*>(0xA000 + f), dim3(8), dim3(256), args.data(), 0, stream};
    cuLaunchKernel_params dp{reinterpret_cast<CUfunc_st*>(func), 8, 1, 1, 256, 1, 1, 0,
                             reinterpret_cast<CUstream_st*>(stream), args.data(), nullptr};
    if (runtime_launches) {
      call(ApiDomain::kRuntime, true, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, nullptr, &rp, corr);
      call(ApiDomain::kDriver, true, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, names[f].c_str(), &dp, corr + 1);
    }
    call(ApiDomain::kDriver, false, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, names[f].c_str(), &dp, corr + 1);
    if (runtime_launches)
      call(ApiDomain::kRuntime, false, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, names[f].c_str(), &rp, corr);
    if (i % 4 == 3) {
      cudaMemcpyAsync_v3020_params cp{reinterpret_cast<void*>(bases[i % bases.size()]),
                                      reinterpret_cast<const void*>(bases[(i + 1) % bases.size()]), 4096,
                                      cudaMemcpyDeviceToDevice, stream};
      call(ApiDomain::kRuntime, true, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, nullptr, &cp, corr);
      call(ApiDomain::kRuntime, false, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, nullptr, &cp, corr);
    }
  };
  if (cold_kib > 0) {
    // Blocks of 2000 iterations, with and without the callbacks, the order swapped every pair.
    const bench::BlockTimes t = bench::alternate_blocks(launches, 2000, [&](long i, bool on) {
      traced = on;
      other_work();
      if (traced) launch(i);
    });
    rec.close();
    std::filesystem::remove_all(dir);
    std::printf("launches=%ld pointers=%zu allocations=%zu functions=%zu scalars=%zu callbacks=%s cold_kib=%zu: "
                "%.1f ns added per launch (median of %zu pairs of blocks; thread CPU time; loop alone %.1f ns)\n",
                launches, pointers, allocations, functions, scalars, runtime_launches ? "runtime" : "driver", cold_kib,
                t.added, t.pairs, t.off);
    return 0;
  }
  const double t0 = now_ns(), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < launches; ++i) launch(i);
  const double dt = now_ns() - t0, cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  rec.close();
  std::filesystem::remove_all(dir);
  const double calls = double(launches) * (runtime_launches ? 4 : 1) + double(launches / 4) * 2;
  std::printf("launches=%ld pointers=%zu allocations=%zu functions=%zu scalars=%zu callbacks=%s: %.1f ns per launch "
              "(with its share of copies), %.1f ns per callback; thread CPU time %.1f ns per launch\n",
              launches, pointers, allocations, functions, scalars, runtime_launches ? "runtime" : "driver",
              dt / double(launches), dt / calls,
              cpu / double(launches));
  return 0;
}
