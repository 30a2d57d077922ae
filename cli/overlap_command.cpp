// `streamrace overlap`: how much collective time overlapped compute, and what made compute wait.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "analyzer/analyzer.h"
#include "analyzer/overlap_analysis.h"
#include "cli/command_registry.h"
#include "report/progress_meter.h"
#include "traceformat/trace_file.h"

namespace streamrace::cli {
namespace {

struct OverlapArgs {
  std::vector<std::string> inputs;
  std::string format = "text";
  analysis::OverlapOptions opts;
  double min_wait_us = 20;
  bool progress = false;  // --progress
};

int run_overlap(OverlapArgs& a) {
  if (a.format != "text" && a.format != "json") {
    std::cerr << "streamrace overlap: unknown format '" << a.format << "' (text or json)\n";
    return kExitBadInput;
  }
  a.opts.min_wait_ns = uint64_t(a.min_wait_us * 1000);
  std::vector<analysis::RankOverlap> ranks;
  try {
    const auto paths = analysis::expand_trace_inputs(a.inputs);
    uint64_t total = 0, done = 0;
    for (const auto& p : paths) {
      std::error_code ec;
      auto size = std::filesystem::file_size(p, ec);
      total += ec ? 0 : size;
    }
    // Per trace: analyze_overlap reads one file in one go.
    report::ProgressMeter meter("reading device timestamps", total);
    if (a.progress) meter.request();
    for (size_t i = 0; i < paths.size(); ++i) {
      meter.update(done, fmt::format("trace {} of {}", i + 1, paths.size()));
      ranks.push_back(analysis::analyze_overlap(paths[i], a.opts));
      std::error_code ec;
      auto size = std::filesystem::file_size(paths[i], ec);
      done += ec ? 0 : size;
    }
    meter.finish();
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
  sub->add_option("-f,--format", args->format, "text or json")->capture_default_str();
  sub->add_flag("--progress", args->progress, "Show progress on stderr even when it is no terminal (on a terminal it shows after a second anyway)");
  return [args]() { return run_overlap(*args); };
});

}  // namespace
}  // namespace streamrace::cli
