// `streamrace check`: the CI gate. Reads traces, findings documents and CUDA-sanitizer
// logs, merges their findings by fingerprint, drops suppressed ones, and fails (exit 1) only
// on findings that the baseline does not accept. Bad input of any kind exits 2.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <sstream>

#include "cli/command_registry.h"
#include "report/baseline.h"
#include "report/finding_class.h"
#include "report/closing_summary.h"
#include "report/finding_inputs.h"
#include "report/formats.h"
#include "report/output_file.h"
#include "report/suppressions.h"
#include "report/text_report.h"

namespace streamrace::cli {
namespace {

struct CheckArgs {
  std::vector<std::string> inputs;
  unsigned jobs = 0;  // -j: 0 = one thread per core
  size_t max_frames = 8;  // --max-frames: frames per stack in the text report
  size_t print_limit = 100;  // --print-limit: findings printed in the text report and the verdict (0 = all)
  int error_exitcode = kExitRaces;  // exit status when the check fails
  std::vector<std::string> formats;
  std::string output;
  std::string baseline;
  bool update_baseline = false;
  std::vector<std::string> suppressions;
  std::string source_root;
  size_t perfetto_findings = 20;  // --perfetto-findings: findings whose occurrences Perfetto marks
  bool no_color = false;
  bool force_output = false;
  bool separate_threads = false;
  bool unknown_blocking = false;
  bool progress = false;  // --progress
};

struct Output {
  std::string format;
  std::string file;  // empty: stdout
};

int bad_input(const std::string& what) {
  std::cerr << "streamrace check: error: " << what << "\n";
  return kExitBadInput;
}

std::string plural(size_t n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

std::string ranks_of(const analysis::Finding& f) {
  if (f.ranks.empty()) return {};
  std::string s = f.ranks.size() == 1 ? " (rank " : " (ranks ";
  for (size_t i = 0; i < f.ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(f.ranks[i]);
  return s + ")";
}

int run_check(const CheckArgs& a) {
  // Outputs: --format NAME or NAME=FILE (repeatable), -o FILE for a single format.
  std::vector<Output> outs;
  for (const auto& spec : a.formats.empty() ? std::vector<std::string>{"text"} : a.formats) {
    auto eq = spec.find('=');
    Output o{spec.substr(0, eq), eq == std::string::npos ? "" : spec.substr(eq + 1)};
    if (!report::is_format(o.format)) {
      std::string names;
      for (const auto& n : report::format_names()) names += " " + n;
      return bad_input("unknown format '" + o.format + "' (choose from:" + names + ")");
    }
    if (o.file == "-") o.file.clear();
    outs.push_back(o);
  }
  if (!a.output.empty()) {
    if (outs.size() != 1 || !outs[0].file.empty())
      return bad_input("-o goes with a single --format; use --format NAME=FILE for several");
    outs[0].file = a.output == "-" ? "" : a.output;
  }
  if (a.update_baseline && a.baseline.empty()) return bad_input("--update-baseline needs --baseline FILE");

  report::OutputOptions output_options;
  output_options.follow_symlink = a.force_output;
  report::ReportOptions ro;
  ro.max_frames = a.max_frames;
  ro.print_limit = a.print_limit;
  ro.source_root = a.source_root;
  ro.perfetto_findings = a.perfetto_findings;
  std::vector<report::SuppressionList> suppressions;
  try {
    if (!a.baseline.empty() && !a.update_baseline) {
      ro.baselined = report::read_baseline(a.baseline);
      ro.have_baseline = true;
      ro.baseline_path = a.baseline;
    }
    for (const auto& path : a.suppressions) suppressions.push_back(report::SuppressionList::load(path));
  } catch (const std::runtime_error& e) {
    return bad_input(e.what());
  }

  report::LoadedFindings loaded;
  try {
    report::LoadOptions lo;
    lo.analyzer.separate_host_threads = a.separate_threads;
    lo.analyzer.unknown_streams_blocking = a.unknown_blocking;
    lo.jobs = a.jobs;
    lo.force_progress = a.progress;
    loaded = report::load_findings(a.inputs, lo);
  } catch (const report::InputError& e) {
    return bad_input(e.what());
  }

  // Suppress: the first matching line of the first file that has one takes the finding.
  auto& result = loaded.result;
  std::vector<analysis::Finding> kept;
  size_t suppressed = 0;
  for (auto& f : result.findings) {
    const report::Suppression* by = nullptr;
    for (auto& list : suppressions)
      if ((by = list.apply(f))) break;
    if (by) {
      ++suppressed;
      ro.suppressed.push_back({std::move(f), by->source + " " + by->text()});  // SARIF lists them as suppressed
    } else
      kept.push_back(std::move(f));
  }
  result.findings = std::move(kept);

  std::vector<const analysis::Finding*> fresh, known;
  for (const auto& f : result.findings) (report::is_new(f, ro) ? fresh : known).push_back(&f);
  size_t gone = 0;
  for (const auto& fp : ro.baselined) {
    bool seen = false;
    for (const auto* f : known) seen |= f->fingerprint == fp;
    gone += !seen;
  }

  ro.trace_paths = loaded.trace_paths;
  std::optional<analysis::Timeline> timeline;
  bool summary_to_stderr = false;
  std::string closing;  // the text report's SUMMARY line, when it goes to stdout: the last line there
  for (const auto& o : outs) {
    // The text report shows the findings that fail the check; the other formats carry all
    // unsuppressed findings and mark which ones the baseline accepts.
    analysis::AnalysisResult shown_text;
    const analysis::AnalysisResult* shown = &result;
    if (o.format == "text" && ro.have_baseline) {
      shown_text = result;
      shown_text.findings.clear();
      for (const auto* f : fresh) shown_text.findings.push_back(*f);
      shown = &shown_text;
    }
    ro.left_out_baselined = shown == &shown_text ? known.size() : 0;
    report::SummaryCounts counts;
    counts.baselined = ro.have_baseline ? known.size() : 0;
    counts.suppressed = suppressed;
    if ((o.format == "perfetto" || o.format == "html" || o.format == "junit") && !timeline) {
      try {
        timeline = loaded.trace_paths.empty() ? analysis::Timeline{} : analysis::build_timeline(loaded.trace_paths);
      } catch (const std::exception& e) {
        return bad_input(e.what());
      }
      ro.timeline = &*timeline;
    }
    if (o.file.empty()) {
      summary_to_stderr |= o.format != "text";
      ro.color = o.format == "text" && !a.no_color && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
      report::write_format(o.format, std::cout, *shown, ro);
      if (o.format == "text") closing = report::closing_summary(*shown, counts) + "\n";
      std::cout.flush();
    } else {
      ro.color = false;
      std::ostringstream text;
      report::write_format(o.format, text, *shown, ro);
      if (o.format == "text") text << report::closing_summary(*shown, counts) << "\n";
      try {
        report::write_output_file(o.file, text.str(), output_options);
      } catch (const report::OutputError& e) {
        return bad_input(e.what());
      }
    }
  }

  if (a.update_baseline) {
    try {
      report::write_baseline(a.baseline, result.findings, output_options);
    } catch (const std::runtime_error& e) {
      return bad_input(e.what());
    }
  }

  // The verdict, with every suppression's count and every unused suppression.
  std::ostringstream s;
  bool failed = !a.update_baseline && !fresh.empty();
  // Input that was not (wholly) analysed cannot pass: a trace whose CUDA calls were not
  // captured, or CUDA graph launches run without their nodes (as analyze and run: exit 2).
  const bool no_verdict = !a.update_baseline && !failed && (result.blind_traces() || result.partial());
  if (a.update_baseline) {
    s << fmt::format("streamrace check: wrote {} with {}", a.baseline, plural(result.findings.size(), "finding"));
  } else {
    s << fmt::format("streamrace check: {} new finding{}", fresh.size(), fresh.size() == 1 ? "" : "s");
    if (ro.have_baseline) s << fmt::format(", {} baselined", known.size());
  }
  s << fmt::format(", {} suppressed", suppressed);
  s << (failed ? " - FAILED\n" : no_verdict ? " - NO VERDICT (input not wholly analysed)\n" : " - passed\n");
  if (!a.update_baseline) {
    size_t listed = 0;
    for (const auto* f : fresh) {
      if (a.print_limit && listed == a.print_limit) break;
      ++listed;
      s << fmt::format("  new: {} {} {}{}\n", report::finding_class(*f).rule_id, f->fingerprint, report::headline(*f),
                       ranks_of(*f));
    }
    if (listed < fresh.size())
      s << fmt::format("  {} more new finding{} not listed (--print-limit {}; 0 lists all)\n", fresh.size() - listed,
                       fresh.size() - listed == 1 ? "" : "s", a.print_limit);
  }
  if (gone > 0)
    s << fmt::format("  {} in the baseline no longer seen (--update-baseline drops them)\n", plural(gone, "finding"));
  for (const auto& list : suppressions)
    for (const auto& sup : list.entries()) {
      if (sup.findings > 0)
        s << fmt::format("  suppressed by {} {}: {} ({})\n", sup.source, sup.text(), plural(sup.findings, "finding"),
                         plural(sup.occurrences, "occurrence"));
      else
        s << fmt::format("  unused suppression: {} {}\n", sup.source, sup.text());
    }
  for (const auto& n : result.notices)
    if (n.level != "info") s << "  " << n.level << ": " << (n.trace.empty() ? "" : n.trace + ": ") << n.text << "\n";
  (summary_to_stderr ? std::cerr : std::cout) << s.str();
  std::cout << closing;
  return failed ? a.error_exitcode : no_verdict ? kExitBadInput : kExitClean;
}

RegisterCommand reg("check", 30, [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<CheckArgs>();
  auto* sub = app.add_subcommand(
      "check", "CI gate: fail (exit 1) on findings not in the baseline; inputs are traces, findings JSON and "
               "PyTorch CUDA-sanitizer logs; exit 2 on bad input");
  sub->add_option("inputs", args->inputs, "Trace files or directories, findings JSON documents, CUDA-sanitizer logs")
      ->required();
  sub->add_option("--baseline", args->baseline, "Accepted findings (JSON); only findings not in it fail the check");
  sub->add_flag("--update-baseline", args->update_baseline, "Write the current findings to the --baseline file and pass");
  sub->add_option("--suppressions", args->suppressions,
                  "Suppression file (lines race:GLOB, kernel:GLOB, stream:GLOB, file:GLOB, fingerprint:GLOB); repeatable")
      ->allow_extra_args(false);  // one value per occurrence: never swallows the positionals after it
  sub->add_option("-f,--format", args->formats,
                  "Report format: text (default), json, sarif, junit, perfetto, html; NAME=FILE writes to FILE; repeatable")
      ->allow_extra_args(false);  // one value per occurrence: never swallows the positionals after it
  sub->add_option("-o,--output", args->output, "Write the (single) report format to FILE instead of stdout");
  sub->add_option("--source-root", args->source_root, "Make file paths in SARIF/HTML relative to this directory");
  sub->add_option("--perfetto-findings", args->perfetto_findings,
                  "Perfetto report: mark every occurrence of the first N findings")
      ->capture_default_str();
  sub->add_flag("--no-color", args->no_color, "Never colour the text report");
  sub->add_option("--max-frames", args->max_frames, "Frames shown per stack in the text report")
      ->capture_default_str();
  sub->add_option("--print-limit", args->print_limit, "Findings printed at most in the text report (0 = all); the rest are counted in one line")
      ->capture_default_str();
  sub->add_option("-j,--jobs", args->jobs, "Traces analysed in parallel (0 = one per core); the verdict is the same for any value")
      ->capture_default_str();
  sub->add_option("--error-exitcode", args->error_exitcode, "Exit status when the check fails (new findings)")
      ->capture_default_str();
  sub->add_flag("--force-output", args->force_output,
                "Write reports or the baseline through output paths that are symbolic links (refused by default)");
  sub->add_flag("--separate-host-threads", args->separate_threads, "As for analyze");
  sub->add_flag("--unknown-streams-blocking", args->unknown_blocking, "As for analyze");
  sub->add_flag("--progress", args->progress, "Show progress on stderr even when it is no terminal (on a terminal it shows after a second anyway)");
  group_advanced(*sub, {"--separate-host-threads", "--unknown-streams-blocking", "--force-output"});
  return [args]() { return run_check(*args); };
});

}  // namespace
}  // namespace streamrace::cli
