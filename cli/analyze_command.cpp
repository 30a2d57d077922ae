// `streamrace analyze`: trace files or directories in, report out.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "analyzer/analyzer.h"
#include "cli/command_registry.h"
#include "cli/report_outputs.h"
#include "report/formats.h"
#include "report/progress_meter.h"
#include "traceformat/trace_file.h"

namespace streamrace::cli {
namespace {

struct AnalyzeArgs {
  std::vector<std::string> inputs;
  ReportOutputArgs out;
  std::string shard;  // --shard I/N
  int error_exitcode = kExitRaces;
  unsigned jobs = 0;  // -j: 0 = one thread per core
  bool split = false;  // --split
  uint64_t split_min_bytes = analysis::AnalyzerOptions::kNoSplit;  // --split-min-bytes (hidden: tests)
  size_t max_frames = 8;  // --max-frames: frames per stack in the text report
  size_t print_limit = 100;  // --print-limit: findings printed in the text report (0 = all)
  bool separate_threads = false;
  bool unknown_blocking = false;
  bool kernel_extent_allocation = false;
  bool ignore_precise = false;
  bool no_const_reads = false;
  bool progress = false;  // --progress
  std::string source_root;
  std::string signatures;        // --signatures FILE: learned access signatures to apply
  std::string learn_signatures;  // --learn-signatures FILE: write what the traces taught (and FILE held)
  size_t perfetto_findings = 20;  // --perfetto-findings: findings whose occurrences Perfetto marks
};

// "3/8" -> index 3 of 8 shards; false (with the reason) unless 0 <= I < N.
bool parse_shard(const std::string& spec, analysis::ShardInfo& shard, std::string& why) {
  const auto slash = spec.find('/');
  auto number = [](const std::string& t, uint32_t& v) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) return false;
    v = uint32_t(std::stoul(t));
    return true;
  };
  if (slash == std::string::npos || !number(spec.substr(0, slash), shard.index) ||
      !number(spec.substr(slash + 1), shard.count)) {
    why = "--shard takes I/N (shard I of N, counted from 0), not '" + spec + "'";
    return false;
  }
  if (shard.count == 0 || shard.index >= shard.count) {
    why = "--shard " + spec + ": the shard index must be at least 0 and below the count " + std::to_string(shard.count);
    return false;
  }
  return true;
}

int run_analyze(const AnalyzeArgs& a) {
  std::vector<ReportOutput> outs;
  if (!parse_report_outputs("analyze", a.out, outs)) return kExitBadInput;
  analysis::ShardInfo shard;
  if (!a.shard.empty()) {
    std::string why;
    if (!parse_shard(a.shard, shard, why)) {
      std::cerr << "streamrace analyze: error: " << why << "\n";
      return kExitBadInput;
    }
  }
  analysis::AnalysisResult result;
  std::vector<std::string> paths;
  try {
    paths = analysis::expand_trace_inputs(a.inputs);
    if (shard.count) {
      shard.of_traces = paths.size();
      paths = analysis::shard_of(paths, shard.index, shard.count);
    }
    uint64_t total = 0, done = 0;
    for (const auto& p : paths) {
      std::error_code ec;
      total += std::filesystem::file_size(p, ec);
    }
    report::ProgressMeter meter("analysing", total);
    if (a.progress) meter.request();
    analysis::AnalyzerOptions opts;
    if (!a.signatures.empty())
      opts.signatures = std::make_shared<const analysis::SignatureBook>(analysis::SignatureBook::load(a.signatures));
    opts.separate_host_threads = a.separate_threads;
    opts.unknown_streams_blocking = a.unknown_blocking;
    opts.kernel_extent_to_allocation_end = a.kernel_extent_allocation;
    opts.ignore_precise = a.ignore_precise;
    opts.kernel_pointers_unknown_direction = a.no_const_reads;
    opts.split_min_bytes = a.split && a.split_min_bytes == analysis::AnalyzerOptions::kNoSplit
                               ? analysis::AnalyzerOptions::kSplitMinBytes
                               : a.split_min_bytes;
    opts.progress = [&](uint64_t bytes, uint64_t) { meter.update(done + bytes); };
    analysis::Analyzer analyzer(opts);
    analyzer.add_traces(paths, a.jobs, [&](size_t i) {
      std::error_code ec;
      done += std::filesystem::file_size(paths[i], ec);
      meter.update(done);
    });
    meter.finish();
    result = analyzer.finish();
    result.shard = shard;
    if (!a.learn_signatures.empty()) {
      // The file's own signatures first (when it is also the one read), then the traces'.
      analysis::SignatureBook book;
      std::error_code ec;
      if (a.learn_signatures == a.signatures && opts.signatures) book = *opts.signatures;
      else if (std::filesystem::exists(a.learn_signatures, ec)) book = analysis::SignatureBook::load(a.learn_signatures);
      book.merge(analyzer.learned_signatures());
      book.save(a.learn_signatures);
      std::cerr << "streamrace analyze: " << book.size() << " access signature" << (book.size() == 1 ? "" : "s") << " ("
                << book.trusted_count() << " trusted) in " << a.learn_signatures << "\n";
    }
  } catch (const trace::TraceError& e) {
    std::cerr << "streamrace analyze: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const trace::InputFileError& e) {
    std::cerr << "streamrace analyze: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::runtime_error& e) {  // the signature file could not be written
    std::cerr << "streamrace analyze: error: " << e.what() << "\n";
    return kExitBadInput;
  }
  report::ReportOptions ro;
  ro.max_frames = a.max_frames;
  ro.print_limit = a.print_limit;
  ro.source_root = a.source_root;
  ro.perfetto_findings = a.perfetto_findings;
  ro.trace_paths = paths;
  if (!write_report_outputs("analyze", outs, a.out, result, ro)) return kExitBadInput;
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
  sub->add_option("-f,--format", args->out.formats,
                  "Report format: text (default), json, ... ; NAME=FILE writes that format to FILE; repeatable")
      ->allow_extra_args(false);  // one value per occurrence: never swallows the positionals after it
  sub->add_option("-o,--output", args->out.output, "Write the (single) report format to FILE instead of stdout");
  sub->add_option("--shard", args->shard,
                  "Analyse only shard I of N (I/N, I from 0) of the expanded trace list: a consecutive slice, so "
                  "`streamrace merge` of the N findings documents equals analysing them all");
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
  sub->add_flag("--no-color", args->out.no_color, "Never colour the text report");
  sub->add_option("--max-frames", args->max_frames, "Frames shown per stack in the text report")
      ->capture_default_str();
  sub->add_option("--print-limit", args->print_limit, "Findings printed at most in the text report (0 = all); the rest are counted in one line")
      ->capture_default_str();
  sub->add_option("-j,--jobs", args->jobs,
                  "Threads (0 = one per core): traces are analysed in parallel. The report is the same for any value")
      ->capture_default_str();
  sub->add_flag("--split", args->split,
                "With fewer traces than threads, split each trace of 16 MiB or more by allocation over threads / "
                "traces of them (each costs ~0.8 of a whole analysis: a gain only on idle cores; docs/at-scale.md). "
                "The report is the same");
  // For tests: split traces from this size on (0: every trace), so small traces exercise it.
  sub->add_option("--split-min-bytes", args->split_min_bytes)->group("");
  sub->add_flag("--force-output", args->out.force_output,
                "Write a report through an output path that is a symbolic link (refused by default)");
  sub->add_option("--signatures", args->signatures,
                  "Apply the learned kernel access signatures in FILE (docs/signatures.md): a launch whose kernel, "
                  "shape and scalar arguments one of them knows gets exact accesses");
  sub->add_option("--learn-signatures", args->learn_signatures,
                  "Write the access signatures the traces' precise-mode launches teach to FILE (added to what FILE "
                  "holds)");
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
