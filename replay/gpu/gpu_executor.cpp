// streamrace-replay-gpu: runs one rank of a replay schedule (IR JSON) on a real GPU with real
// CUDA streams, events and NCCL collectives, one process per GPU. Gradients get the known
// values of gradient_values.h; after every step each expectation (partition slice) is
// checked exactly and corruption is counted and located. Delay injection: the schedule's spin
// ops (generated with --delay-us) run as a globaltimer spin kernel; --delay-mode random draws
// each spin's length from [0, delay] per step (seeded) to sweep the race window.
// Reports per rank (JSON): corrupt steps and elements, step time, collective time, overlap.
//
//   streamrace-replay-gpu --ir rank0.json --rank 0 --world 2 --id-file /tmp/x/nccl.id
//                         --steps 1000 [--delay-us N] [--delay-mode fixed|random] [--seed N]
//                         [--warmup N] [--out result.json]
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/gpu/replay_kernels.h"
#include "replay/gradient_values.h"
#include "replay/schedule.h"

using namespace streamrace::replay;

namespace {

#define CUDA_OK(x)                                                                                    \
  do {                                                                                                \
    cudaError_t err_ = (x);                                                                           \
    if (err_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "replay-gpu: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(err_), __FILE__, \
                   __LINE__);                                                                         \
      std::exit(3);                                                                                   \
    }                                                                                                 \
  } while (0)

#define NCCL_OK(x)                                                                                    \
  do {                                                                                                \
    ncclResult_t r_ = (x);                                                                            \
    if (r_ != ncclSuccess) {                                                                          \
      std::fprintf(stderr, "replay-gpu: %s failed: %s (%s:%d)\n", #x, ncclGetErrorString(r_), __FILE__,  \
                   __LINE__);                                                                         \
      std::exit(3);                                                                                   \
    }                                                                                                 \
  } while (0)

struct Args {
  std::string ir, id_file, out;
  int rank = -1, world = 0, device = -1;
  uint32_t steps = 1000, warmup = 5;
  int64_t delay_us = -1;  // -1: as in the schedule
  std::string delay_mode = "fixed";
  uint64_t seed = 1;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "replay-gpu: %s\nusage: streamrace-replay-gpu --ir FILE --rank R --world W --id-file PATH "
               "[--steps N] [--warmup N] [--delay-us N] [--delay-mode fixed|random] [--seed N] [--device D] "
               "[--out FILE]\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value for " + k);
      return argv[++i];
    };
    if (k == "--ir") a.ir = val();
    else if (k == "--id-file") a.id_file = val();
    else if (k == "--out") a.out = val();
    else if (k == "--rank") a.rank = std::stoi(val());
    else if (k == "--world") a.world = std::stoi(val());
    else if (k == "--device") a.device = std::stoi(val());
    else if (k == "--steps") a.steps = uint32_t(std::stoul(val()));
    else if (k == "--warmup") a.warmup = uint32_t(std::stoul(val()));
    else if (k == "--delay-us") a.delay_us = std::stoll(val());
    else if (k == "--delay-mode") a.delay_mode = val();
    else if (k == "--seed") a.seed = std::stoull(val());
    else usage("unknown option " + k);
  }
  if (a.ir.empty() || a.id_file.empty() || a.rank < 0 || a.world < 1 || a.rank >= a.world)
    usage("--ir, --id-file, --rank and --world are required (0 <= rank < world)");
  if (a.delay_mode != "fixed" && a.delay_mode != "random") usage("--delay-mode is fixed or random");
  return a;
}

// Rank 0 writes the NCCL unique id; the others wait for the file to appear.
ncclUniqueId exchange_id(const Args& a) {
  ncclUniqueId id;
  if (a.rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    std::string tmp = a.id_file + ".tmp";
    std::ofstream f(tmp, std::ios::binary);
    f.write(reinterpret_cast<const char*>(&id), sizeof id);
    f.close();
    if (std::rename(tmp.c_str(), a.id_file.c_str()) != 0) usage("cannot write " + a.id_file);
    return id;
  }
  for (int i = 0; i < 6000; ++i) {
    std::ifstream f(a.id_file, std::ios::binary);
    if (f && f.read(reinterpret_cast<char*>(&id), sizeof id)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  usage("timed out waiting for " + a.id_file);
}

double measure(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, a = 0, b = 0;
  bool open = false;
  for (auto [x, y] : v) {
    if (!open || x > b) {
      if (open) total += b - a;
      a = x;
      b = y;
      open = true;
    } else {
      b = std::max(b, y);
    }
  }
  if (open) total += b - a;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  Schedule s;
  try {
    std::ifstream f(a.ir);
    if (!f) usage("cannot read " + a.ir);
    std::stringstream ss;
    ss << f.rdbuf();
    s = schedule_from_json_text(ss.str());
  } catch (const std::exception& e) {
    usage(e.what());
  }
  if (s.world != a.world || s.rank != a.rank)
    usage("the schedule is for rank " + std::to_string(s.rank) + " of " + std::to_string(s.world) + ", not rank " +
          std::to_string(a.rank) + " of " + std::to_string(a.world));
  const uint64_t es = s.elem_bytes;
  for (const auto& b : s.buffers)
    if (b.bytes % es) usage("buffer " + b.name + " is not a whole number of elements");

  int ndev = 0;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  const int dev = a.device >= 0 ? a.device : a.rank % std::max(1, ndev);
  CUDA_OK(cudaSetDevice(dev));
  ncclUniqueId id = exchange_id(a);
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, a.world, id, a.rank));

  if (a.warmup + a.steps > 1 && !s.lifetimes_balanced())
    usage("the schedule cannot be repeated: some buffer is not allocated at its end as at its start");

  // Memory: float32 per element. A buffer the program allocates itself (a kAlloc action before
  // any free) is allocated at that action; the others now, for every step.
  const std::vector<uint8_t> live_at_start = s.live_at_start();
  auto alloc_bytes = [&](size_t i) { return std::max<uint64_t>(1, s.buffers[i].bytes / es) * sizeof(float); };
  std::vector<float*> buf(s.buffers.size(), nullptr);
  for (size_t i = 0; i < s.buffers.size(); ++i)
    if (live_at_start[i]) CUDA_OK(cudaMalloc(&buf[i], alloc_bytes(i)));
  auto at = [&](const ByteRange& r) { return buf[r.buffer] + r.offset / es; };
  auto count = [&](const ByteRange& r) { return r.bytes / es; };

  std::vector<cudaStream_t> streams;
  for (const auto& st : s.streams) {
    cudaStream_t h = cudaStreamLegacy;
    if (st.kind == StreamKind::kNonBlocking) CUDA_OK(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
    if (st.kind == StreamKind::kBlocking) CUDA_OK(cudaStreamCreate(&h));
    streams.push_back(h);
  }
  std::vector<cudaEvent_t> events(s.events.size());
  for (auto& e : events) CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  // Poisons a fresh allocation: a private non-blocking stream and a host wait for just that
  // memset, so that it orders nothing between the program's streams.
  cudaStream_t poison_stream;
  CUDA_OK(cudaStreamCreateWithFlags(&poison_stream, cudaStreamNonBlocking));

  // Timing events around every device op (they order nothing: records never make a stream wait).
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timing(s.actions.size(), {nullptr, nullptr});
  for (size_t i = 0; i < s.actions.size(); ++i) {
    const auto k = s.actions[i].kind;
    if (!is_device_op(k) || k == ActionKind::kSpin) continue;
    CUDA_OK(cudaEventCreate(&timing[i].first));
    CUDA_OK(cudaEventCreate(&timing[i].second));
  }
  cudaEvent_t step_start;
  CUDA_OK(cudaEventCreate(&step_start));
  // A one-float all-reduce before each step lines the ranks up, so that one rank's host-side
  // checking of the previous step is not timed as the other rank's wait inside a collective.
  float* barrier_buf = nullptr;
  CUDA_OK(cudaMalloc(&barrier_buf, sizeof(float)));
  CUDA_OK(cudaMemset(barrier_buf, 0, sizeof(float)));
  std::mt19937_64 rng(a.seed * 1000003 + uint64_t(a.rank));

  uint64_t corrupt_steps = 0, corrupt_elems = 0;
  nlohmann::json first = nlohmann::json::array();
  std::vector<double> step_ms, coll_ms, overlap_pct;
  std::vector<float> host;
  const uint32_t total = a.warmup + a.steps;
  for (uint32_t it = 0; it < total; ++it) {
    const uint32_t step = it;
    // Poison every buffer so that a read of stale or unwritten data shows up.
    for (size_t i = 0; i < buf.size(); ++i)
      if (buf[i]) CUDA_OK(cudaMemset(buf[i], 0xFF, alloc_bytes(i)));
    CUDA_OK(cudaDeviceSynchronize());
    if (a.world > 1) {
      NCCL_OK(ncclAllReduce(barrier_buf, barrier_buf, 1, ncclFloat, ncclSum, comm, cudaStreamLegacy));
      CUDA_OK(cudaDeviceSynchronize());
    }
    auto t0 = std::chrono::steady_clock::now();
    CUDA_OK(cudaEventRecord(step_start, cudaStreamLegacy));
    for (size_t i = 0; i < s.actions.size(); ++i) {
      const Action& x = s.actions[i];
      cudaStream_t st = x.stream < streams.size() ? streams[x.stream] : cudaStreamLegacy;
      if (timing[i].first) CUDA_OK(cudaEventRecord(timing[i].first, st));
      switch (x.kind) {
        case ActionKind::kProduce:
          gpu::launch_produce(at(x.writes[0]), count(x.writes[0]), x.param, x.param_offset, uint32_t(a.rank), step,
                              uint32_t(a.world), st);
          break;
        case ActionKind::kCompute:
          for (const auto& w : x.writes) gpu::launch_fill(at(w), count(w), float(i % 1000 + 1), st);
          break;
        case ActionKind::kCopy:
        case ActionKind::kCopyBack:
          CUDA_OK(cudaMemcpyAsync(at(x.writes[0]), at(x.reads[0]), count(x.writes[0]) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, st));
          break;
        case ActionKind::kDivide:
          gpu::launch_divide(at(x.writes[0]), count(x.writes[0]), float(x.divisor), st);
          break;
        case ActionKind::kMemset:
          gpu::launch_fill(at(x.writes[0]), count(x.writes[0]), float(x.fill), st);
          break;
        case ActionKind::kCollective: {
          const auto& send = x.reads[0];
          const auto& recv = x.writes[0];
          if (x.collective == CollectiveKind::kAllReduce)
            NCCL_OK(ncclAllReduce(at(send), at(recv), count(recv), ncclFloat, ncclSum, comm, st));
          else if (x.collective == CollectiveKind::kReduceScatter)
            NCCL_OK(ncclReduceScatter(at(send), at(recv), count(recv), ncclFloat, ncclSum, comm, st));
          else
            NCCL_OK(ncclAllGather(at(send), at(recv), count(send), ncclFloat, comm, st));
          break;
        }
        case ActionKind::kSpin: {
          uint64_t ns = a.delay_us >= 0 ? uint64_t(a.delay_us) * 1000 : x.spin_ns;
          if (a.delay_mode == "random" && ns) ns = rng() % (ns + 1);
          if (ns) gpu::launch_spin(ns, st);
          break;
        }
        case ActionKind::kEventRecord:
          CUDA_OK(cudaEventRecord(events[x.event], st));
          break;
        case ActionKind::kStreamWait:
          CUDA_OK(cudaStreamWaitEvent(st, events[x.event], 0));
          break;
        case ActionKind::kStreamSync:
          CUDA_OK(cudaStreamSynchronize(st));
          break;
        case ActionKind::kEventSync:
          CUDA_OK(cudaEventSynchronize(events[x.event]));
          break;
        case ActionKind::kDeviceSync:
          CUDA_OK(cudaDeviceSynchronize());
          break;
        case ActionKind::kAlloc:
          CUDA_OK(cudaMalloc(&buf[x.buffer], alloc_bytes(x.buffer)));
          CUDA_OK(cudaMemsetAsync(buf[x.buffer], 0xFF, alloc_bytes(x.buffer), poison_stream));
          CUDA_OK(cudaStreamSynchronize(poison_stream));
          break;
        case ActionKind::kFree:  // cudaFree synchronises the device first, as the program's would
          CUDA_OK(cudaFree(buf[x.buffer]));
          buf[x.buffer] = nullptr;
          break;
      }
      if (timing[i].second) CUDA_OK(cudaEventRecord(timing[i].second, st));
    }
    CUDA_OK(cudaDeviceSynchronize());
    auto t1 = std::chrono::steady_clock::now();
    CUDA_OK(cudaGetLastError());
    if (it < a.warmup) continue;

    // Check every expectation exactly.
    uint64_t bad = 0;
    for (const auto& e : s.expectations) {
      const uint64_t n = count(e.range);
      host.resize(n);
      CUDA_OK(cudaMemcpy(host.data(), at(e.range), n * sizeof(float), cudaMemcpyDeviceToHost));
      for (uint64_t k = 0; k < n; ++k) {
        const float want = float(reduced_gradient(e.param, e.param_offset + k, step, uint64_t(a.world)));
        if (host[k] == want) continue;
        ++bad;
        if (first.size() < 8)
          first.push_back({{"step", step}, {"where", s.buffers[e.range.buffer].name},
                           {"element", e.range.offset / es + k}, {"expectation", e.label},
                           {"expected", want}, {"got", std::isnan(host[k]) ? -1.0 : double(host[k])}});
      }
    }
    corrupt_elems += bad;
    corrupt_steps += bad > 0;

    // Step time, collective time and overlap (collective time during which another stream ran
    // a non-collective op).
    step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    std::vector<std::pair<double, double>> coll, both;
    struct Iv {
      double a, b;
      uint32_t stream;
      bool coll;
    };
    std::vector<Iv> ivs;
    for (size_t i = 0; i < s.actions.size(); ++i) {
      if (!timing[i].first) continue;
      float x0 = 0, x1 = 0;
      CUDA_OK(cudaEventElapsedTime(&x0, step_start, timing[i].first));
      CUDA_OK(cudaEventElapsedTime(&x1, step_start, timing[i].second));
      ivs.push_back(Iv{x0, x1, s.actions[i].stream, s.actions[i].kind == ActionKind::kCollective});
    }
    for (const auto& c : ivs) {
      if (!c.coll) continue;
      coll.push_back({c.a, c.b});
      for (const auto& d : ivs) {
        if (d.coll || d.stream == c.stream) continue;
        double lo = std::max(c.a, d.a), hi = std::min(c.b, d.b);
        if (lo < hi) both.push_back({lo, hi});
      }
    }
    double cm = measure(coll), om = measure(both);
    coll_ms.push_back(cm);
    overlap_pct.push_back(cm > 0 ? 100.0 * om / cm : 0.0);
  }

  auto mean = [](const std::vector<double>& v) {
    double t = 0;
    for (double x : v) t += x;
    return v.empty() ? 0.0 : t / double(v.size());
  };
  auto pct = [](std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[size_t(p * double(v.size() - 1))];
  };
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, dev);
  nlohmann::json out = {{"schema", "streamrace-replay-gpu"},
                        {"version", 1},
                        {"schedule", s.name},
                        {"variant", s.meta.count("variant") ? s.meta.at("variant") : ""},
                        {"stage", s.meta.count("stage") ? s.meta.at("stage") : ""},
                        {"rank", a.rank},
                        {"world", a.world},
                        {"device", prop.name},
                        {"nccl_version", nccl_version},
                        {"steps", a.steps},
                        {"delay_us", a.delay_us},
                        {"delay_mode", a.delay_mode},
                        {"corrupt_steps", corrupt_steps},
                        {"corrupt_elements", corrupt_elems},
                        {"first_corruptions", first},
                        {"step_ms_mean", mean(step_ms)},
                        {"step_ms_p50", pct(step_ms, 0.5)},
                        {"step_ms_p90", pct(step_ms, 0.9)},
                        {"collective_ms_mean", mean(coll_ms)},
                        {"overlap_pct_mean", mean(overlap_pct)}};
  std::string text = out.dump(2);
  if (a.out.empty()) {
    std::cout << text << "\n";
  } else {
    std::ofstream f(a.out);
    f << text << "\n";
  }
  cudaFree(barrier_buf);
  ncclCommDestroy(comm);
  return corrupt_steps ? 1 : 0;
}
