// `streamrace analyze`: trace files or directories in, report out.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "analyzer/analyzer.h"
#include "cli/command_registry.h"
#include "report/closing_summary.h"
#include "report/formats.h"
#include "report/output_file.h"
#include "report/progress_meter.h"
#include "report/text_report.h"
#include "traceformat/trace_file.h"

namespace streamrace::cli {
namespace {

struct AnalyzeArgs {
  std::vector<std::string> inputs;
  std::vector<std::string> formats;
  std::string output;
  int error_exitcode = kExitRaces;
  unsigned jobs = 0;  // -j: 0 = one thread per core
  size_t max_frames = 8;  // --max-frames: frames per stack in the text report
  size_t print_limit = 100;  // --print-limit: findings printed in the text report (0 = all)
  bool separate_threads = false;
  bool unknown_blocking = false;
  bool kernel_extent_allocation = false;
  bool ignore_precise = false;
  bool no_const_reads = false;
  bool no_color = false;
  bool force_output = false;
  bool progress = false;  // --progress
  std::string source_root;
  size_t perfetto_findings = 20;  // --perfetto-findings: findings whose occurrences Perfetto marks
};

// "json=out.json" -> ("json", "out.json"); "text" -> ("text", "").
std::pair<std::string, std::string> split_format(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos) return {spec, ""};
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

int run_analyze(const AnalyzeArgs& a) {
  std::vector<std::pair<std::string, std::string>> outs;
  for (const auto& spec : a.formats.empty() ? std::vector<std::string>{"text"} : a.formats) {
    auto [name, file] = split_format(spec);
    if (!report::is_format(name)) {
      std::cerr << "streamrace analyze: unknown format '" << name << "' (choose from:";
      for (const auto& n : report::format_names()) std::cerr << " " << n;
      std::cerr << ")\n";
      return kExitBadInput;
    }
    outs.emplace_back(name, file);
  }
  if (!a.output.empty()) {
    if (outs.size() != 1 || !outs[0].second.empty()) {
      std::cerr << "streamrace analyze: -o goes with a single --format; use --format NAME=FILE for several\n";
      return kExitBadInput;
    }
    outs[0].second = a.output;
  }
  analysis::AnalysisResult result;
  std::vector<std::string> paths;
  try {
    paths = analysis::expand_trace_inputs(a.inputs);
    uint64_t total = 0, done = 0;
    for (const auto& p : paths) {
      std::error_code ec;
      total += std::filesystem::file_size(p, ec);
    }
    report::ProgressMeter meter("analysing", total);
    if (a.progress) meter.request();
    analysis::AnalyzerOptions opts;
    opts.separate_host_threads = a.separate_threads;
    opts.unknown_streams_blocking = a.unknown_blocking;
    opts.kernel_extent_to_allocation_end = a.kernel_extent_allocation;
    opts.ignore_precise = a.ignore_precise;
    opts.kernel_pointers_unknown_direction = a.no_const_reads;
    opts.progress = [&](uint64_t bytes, uint64_t) { meter.update(done + bytes); };
    analysis::Analyzer analyzer(opts);
    analyzer.add_traces(paths, a.jobs, [&](size_t i) {
      std::error_code ec;
      done += std::filesystem::file_size(paths[i], ec);
      meter.update(done);
    });
    meter.finish();
    result = analyzer.finish();
  } catch (const trace::TraceError& e) {
    std::cerr << "streamrace analyze: error: " << e.what() << "\n";
    return kExitBadInput;
  }
  for (const auto& [name, file] : outs) {
    report::ReportOptions ro;
    ro.max_frames = a.max_frames;
    ro.print_limit = a.print_limit;
    ro.source_root = a.source_root;
    ro.perfetto_findings = a.perfetto_findings;
    ro.trace_paths = paths;
    if (file.empty() || file == "-") {
      ro.color = name == "text" && !a.no_color && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
      report::write_format(name, std::cout, result, ro);
      if (name == "text") std::cout << report::closing_summary(result) << "\n";
    } else {
      std::ostringstream text;
      report::write_format(name, text, result, ro);
      if (name == "text") text << report::closing_summary(result) << "\n";
      try {
        report::OutputOptions oo;
        oo.follow_symlink = a.force_output;
        report::write_output_file(file, text.str(), oo);
      } catch (const report::OutputError& e) {
        std::cerr << "streamrace analyze: error: " << e.what() << "\n";
        return kExitBadInput;
      }
    }
  }
  // When the report went to files only, still say the verdict on the terminal.
  bool any_stdout = false;
  for (const auto& o : outs) any_stdout |= o.second.empty() || o.second == "-";
  if (!any_stdout) std::cerr << report::summary_line(result) << "\n";
  if (!result.findings.empty()) return a.error_exitcode;
  // A trace that captured no CUDA calls cannot be called clean. Nor can one whose CUDA graph
  // launches could not be analysed: the verdict is partial.
  if (result.blind_traces() || result.partial()) return kExitBadInput;
  return kExitClean;
}

RegisterCommand reg("analyze", 20, [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<AnalyzeArgs>();
  auto* sub = app.add_subcommand("analyze", "Analyse trace files (or directories of *.srace files) and report races");
  sub->add_option("traces", args->inputs, "Trace files or directories")->required();
  sub->add_option("-f,--format", args->formats,
                  "Report format: text (default), json, ... ; NAME=FILE writes that format to FILE; repeatable")
      ->allow_extra_args(false);  // one value per occurrence: never swallows the positionals after it
  sub->add_option("-o,--output", args->output, "Write the (single) report format to FILE instead of stdout");
  sub->add_option("--error-exitcode", args->error_exitcode, "Exit status when races are found")
      ->capture_default_str();
  sub->add_flag("--separate-host-threads", args->separate_threads,
                "Keep one host clock per thread (default: one host clock in real call order)");
  sub->add_flag("--unknown-streams-blocking", args->unknown_blocking,
                "Treat streams whose creation was not traced as blocking (default: non-blocking)");
  sub->add_flag("--kernel-extent-to-allocation-end", args->kernel_extent_allocation,
                "Take every kernel pointer argument to reach the end of its allocation (default: the longest exact "
                "range copies or collectives used from that address, where there is one)");
  sub->add_flag("--no-const-pointer-reads", args->no_const_reads,
                "Do not take a C++ kernel's `T const*` parameters as reads (default: they are, when its signature "
                "maps onto the recorded pointers)");
  sub->add_flag("--ignore-precise", args->ignore_precise,
                "Analyse precise-mode traces as the default tier (ignore the measured kernel ranges)");
  sub->add_flag("--no-color", args->no_color, "Never colour the text report");
  sub->add_option("--max-frames", args->max_frames, "Frames shown per stack in the text report")
      ->capture_default_str();
  sub->add_option("--print-limit", args->print_limit, "Findings printed at most in the text report (0 = all); the rest are counted in one line")
      ->capture_default_str();
  sub->add_option("-j,--jobs", args->jobs, "Traces analysed in parallel (0 = one per core); the report is the same for any value")
      ->capture_default_str();
  sub->add_flag("--force-output", args->force_output,
                "Write a report through an output path that is a symbolic link (refused by default)");
  sub->add_option("--source-root", args->source_root, "Make file paths in SARIF/HTML relative to this directory");
  sub->add_option("--perfetto-findings", args->perfetto_findings,
                  "Perfetto report: mark every occurrence of the first N findings")
      ->capture_default_str();
  sub->add_flag("--progress", args->progress, "Show progress on stderr even when it is no terminal (on a terminal it shows after a second anyway)");
  group_advanced(*sub, {"--separate-host-threads", "--unknown-streams-blocking", "--kernel-extent-to-allocation-end",
                        "--no-const-pointer-reads", "--ignore-precise", "--force-output"});
  return [args]() { return run_analyze(*args); };
});

}  // namespace
}  // namespace streamrace::cli
