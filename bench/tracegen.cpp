// streamrace-tracegen: writes synthetic traces (the benchmark's training-shaped trace and
// the ZeRO-1/2 bucket pattern used by the demo and golden tests).
#include <CLI/CLI.hpp>

#include <iostream>

#include "bench/synthetic_workloads.h"

int main(int argc, char** argv) {
  using namespace streamrace;
  CLI::App app{"streamrace-tracegen: write synthetic streamrace traces"};
  std::string shape = "training", out, fix = "none";
  uint64_t events = 10'000'000;
  int rank = 0, steps = 2, allocations = 100'000;
  bool no_compress = false;
  app.add_option("--shape", shape, "training | zero12")->capture_default_str();
  app.add_option("-o,--output", out, "Trace file to create")->required();
  app.add_option("--events", events, "training: approximate number of records")->capture_default_str();
  app.add_option("--allocations", allocations, "training: live allocations")->capture_default_str();
  app.add_option("--fix", fix, "zero12: none | event | wait-stream | sync")->capture_default_str();
  app.add_option("--rank", rank, "zero12: rank")->capture_default_str();
  app.add_option("--steps", steps, "zero12: training steps")->capture_default_str();
  app.add_flag("--no-compress", no_compress, "Write chunks uncompressed");
  CLI11_PARSE(app, argc, argv);
  try {
    trace::WriterOptions wo;
    wo.compress = !no_compress;
    if (shape == "training") {
      trace::TraceBuilder t(out, trace::TraceBuilder::default_header(0), wo);
      synthetic::TrainingShape s;
      s.events = events;
      s.allocations = allocations;
      uint64_t n = synthetic::write_training_trace(t, s);
      t.finish();
      std::cout << "records=" << n << "\n";
    } else if (shape == "zero12") {
      synthetic::ZeroConfig cfg;
      if (!synthetic::parse_zero_fix(fix, cfg.fix)) {
        std::cerr << "streamrace-tracegen: unknown --fix '" << fix << "'\n";
        return 2;
      }
      cfg.rank = rank;
      cfg.steps = steps;
      auto header = trace::TraceBuilder::default_header(rank);
      header.producer = "streamrace-tracegen zero12 (synthetic DeepSpeed 0.14.2 ZeRO-1 bucket schedule)";
      trace::TraceBuilder t(out, header, wo);
      synthetic::write_zero_stage12(t, cfg);
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
