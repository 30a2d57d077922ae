// `streamrace overlap`: how much collective time overlapped compute, and what made compute wait.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>

#include "analyzer/analyzer.h"
#include "analyzer/overlap_analysis.h"
#include "cli/command_registry.h"
#include "traceformat/trace_file.h"

namespace streamrace::cli {
namespace {

struct OverlapArgs {
  std::vector<std::string> inputs;
  std::string format = "text";
  analysis::OverlapOptions opts;
  double min_wait_us = 20;
};

int run_overlap(OverlapArgs& a) {
  if (a.format != "text" && a.format != "json") {
    std::cerr << "streamrace overlap: unknown format '" << a.format << "' (text or json)\n";
    return kExitBadInput;
  }
  a.opts.min_wait_ns = uint64_t(a.min_wait_us * 1000);
  std::vector<analysis::RankOverlap> ranks;
  try {
    for (const auto& path : analysis::expand_trace_inputs(a.inputs)) ranks.push_back(analysis::analyze_overlap(path, a.opts));
  } catch (const trace::TraceError& e) {
    std::cerr << "streamrace overlap: error: " << e.what() << "\n";
    return kExitBadInput;
  }
  std::sort(ranks.begin(), ranks.end(), [](const auto& x, const auto& y) { return x.rank < y.rank; });
  if (a.format == "json")
    std::cout << analysis::overlap_to_json(ranks, a.opts).dump(2) << "\n";
  else
    analysis::write_overlap_text(std::cout, ranks, a.opts);
  return kExitClean;
}

RegisterCommand reg("overlap", 45, [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<OverlapArgs>();
  auto* sub = app.add_subcommand(
      "overlap", "From device timestamps: collective/compute overlap per rank, exposed collective time, and what "
                 "made compute wait");
  sub->add_option("traces", args->inputs, "Trace files or directories")->required();
  sub->add_option("--steps", args->opts.steps, "Training steps in the run (for per-step figures)");
  sub->add_option("--min-wait-us", args->min_wait_us, "Ignore idle stretches shorter than this")->capture_default_str();
  sub->add_option("--max-waits", args->opts.max_waits, "Longest idle stretches listed per rank")->capture_default_str();
  sub->add_option("--format", args->format, "text or json")->capture_default_str();
  return [args]() { return run_overlap(*args); };
});

}  // namespace
}  // namespace streamrace::cli
