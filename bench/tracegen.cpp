// streamrace-tracegen: writes the synthetic traces of the benchmarks, the demo and the golden
// tests. Both shapes are schedules of the replay's ZeRO generator (replay/zero_schedule.h)
// written by its trace emitter (replay/trace_emitter.h): `training`, the analyzer benchmark's
// trace, and `zero12`, the ZeRO-1 bucket pattern with a fix variant.
#include <CLI/CLI.hpp>

#include <iostream>

#include "replay/trace_emitter.h"
#include "replay/zero_schedule.h"

int main(int argc, char** argv) {
  using namespace streamrace::replay;
  CLI::App app{"streamrace-tracegen: write synthetic streamrace traces"};
  std::string shape = "training", out, fix = "none";
  uint64_t events = 10'000'000, seed = 1;
  int rank = 0, steps = 2, allocations = 100'000;
  bool no_compress = false;
  app.add_option("--shape", shape, "training | zero12")->capture_default_str();
  app.add_option("-o,--output", out, "Trace file to create")->required();
  app.add_option("--events", events, "training: approximate number of records")->capture_default_str();
  app.add_option("--allocations", allocations, "training: live allocations")->capture_default_str();
  app.add_option("--seed", seed, "training: side-traffic seed")->capture_default_str();
  app.add_option("--fix", fix, "zero12: none | event | wait-stream | sync")->capture_default_str();
  app.add_option("--rank", rank, "zero12: rank (of 2)")->capture_default_str();
  app.add_option("--steps", steps, "zero12: training steps")->capture_default_str();
  app.add_flag("--no-compress", no_compress, "Write chunks uncompressed");
  CLI11_PARSE(app, argc, argv);
  try {
    EmitOptions eo;
    eo.precise_kernels = false;  // like a default-tier recording
    eo.compress = !no_compress;
    if (shape == "training") {
      Schedule s = make_zero_schedule(synthetic_training_config(allocations, seed));
      // Steps are written until the trace holds about `events` calls. Each step draws its side
      // traffic and churn afresh (seed + step), as one long program would: repeating the first
      // step's draws would set and churn the same ~12 % of the buffers again and again and leave
      // the others untouched (the removed generator's trace touched nearly all of them).
      eo.steps = uint32_t(std::max<uint64_t>(1, (events + s.actions.size() / 2) / s.actions.size()));
      eo.step_schedule = [&](uint32_t step) {
        return make_zero_schedule(synthetic_training_config(allocations, seed + step));
      };
      eo.producer = "streamrace-tracegen training (synthetic ZeRO-1 training shape)";
      auto r = emit_trace(s, out, eo);
      std::cout << "records=" << r.calls << "\n";
    } else if (shape == "zero12") {
      auto f = parse_zero_fix(fix);
      if (!f) {
        std::cerr << "streamrace-tracegen: unknown --fix '" << fix << "'\n";
        return 2;
      }
      eo.steps = uint32_t(std::max(1, steps));
      eo.producer = "streamrace-tracegen zero12 (synthetic DeepSpeed 0.14.2 ZeRO-1 bucket schedule)";
      emit_trace(make_zero_schedule(synthetic_bucket_config(*f, rank)), out, eo);
    } else {
      std::cerr << "streamrace-tracegen: unknown --shape '" << shape << "'\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "streamrace-tracegen: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
