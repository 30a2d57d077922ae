// The recorder's cost per call with and without a capture policy (docs/long-runs.md): one
// thread records STEPS steps of CALLS memset records, marks each step, and flushes every third
// step itself (no background flusher), so the flusher's work (placement by seq, segments,
// read-back, checkpoints, compression) is on the timed thread too.
//   streamrace-capture-flush-cost [full|ring|steps] [STEPS] [CALLS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "tracer/trace_recorder.h"

using namespace streamrace;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ring";
  const int steps = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int calls = argc > 3 ? std::atoi(argv[3]) : 3300;
  const auto dir = std::filesystem::temp_directory_path() / ("sr_capture_cost_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  tracer::RecorderOptions o;
  o.path = (dir / "t.srace").string();
  o.background_flusher = false;
  std::string error;
  if (mode == "ring") o.capture = *tracer::parse_capture_options("", "", "8", "step", &error);
  if (mode == "steps")
    o.capture = *tracer::parse_capture_options(std::to_string(steps - 10) + ":" + std::to_string(steps), "", "", "step",
                                               &error);
  const auto t0 = std::chrono::steady_clock::now();
  {
    tracer::TraceRecorder rec(o);
    const uint32_t api = rec.strings().intern("cudaMemsetAsync"), push = rec.strings().intern("nvtxRangePushA");
    for (int s = 0; s < steps; ++s) {
      rec.mark_step(push);
      for (int i = 0; i < calls; ++i) {
        trace::Memset m{};
        m.stream = 0x1000 + (i & 3);
        m.dst = 0x7000000 + uint64_t(i) * 64;
        m.bytes = 64;
        m.call = rec.call(api, 0);
        rec.add(m);
      }
      if (s % 3 == 0) rec.flush();
    }
    rec.close();
  }
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double n = double(steps) * calls;
  std::printf("%s: %d steps x %d calls: %.3f s, %.0f ns per call, trace %ju bytes\n", mode.c_str(), steps, calls, dt,
              dt * 1e9 / n, uintmax_t(std::filesystem::file_size(o.path)));
  std::filesystem::remove_all(dir);
  return 0;
}
