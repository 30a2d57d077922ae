// `streamrace merge`: findings documents (the JSON reports of `analyze`, one per rank or per
// `--shard I/N`) in, one report out. Findings are merged by fingerprint exactly as `analyze`
// merges the traces it reads (Analyzer::add_result), so merging the N shards of a trace list
// gives the report of analysing the whole list.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "analyzer/analyzer.h"
#include "cli/command_registry.h"
#include "cli/report_outputs.h"
#include "report/finding_inputs.h"

namespace streamrace::cli {
namespace {

namespace fs = std::filesystem;

struct MergeArgs {
  std::vector<std::string> inputs;
  ReportOutputArgs out;
  int error_exitcode = kExitRaces;
  size_t max_frames = 8;
  size_t print_limit = 100;
  std::string source_root;
  size_t perfetto_findings = 20;
};

int bad_input(const std::string& what) {
  std::cerr << "streamrace merge: error: " << what << "\n";
  return kExitBadInput;
}

struct Document {
  std::string path;
  analysis::AnalysisResult result;
};

// Files as given; a directory: the *.json files directly in it, sorted.
std::vector<std::string> expand_documents(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    std::error_code ec;
    auto st = fs::status(in, ec);
    if (ec || !fs::exists(st)) throw report::InputError(in + ": " + analysis::open_error_reason(ec ? ec.value() : ENOENT));
    if (!fs::is_directory(st)) {
      out.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(in, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".json" && !it->is_directory()) found.push_back(it->path().string());
    if (ec) throw report::InputError(in + ": cannot read directory: " + analysis::open_error_reason(ec.value()));
    if (found.empty()) throw report::InputError(in + ": directory holds no *.json findings documents");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

// Shards go in index order whatever order they were named in (a shell glob puts 10 before 2);
// a set of shards must be whole: one count, each index once, none missing.
std::string order_shards(std::vector<Document>& docs) {
  std::vector<Document> shards, others;
  for (auto& d : docs) (d.result.shard.count ? shards : others).push_back(std::move(d));
  std::stable_sort(shards.begin(), shards.end(),
                   [](const Document& a, const Document& b) { return a.result.shard.index < b.result.shard.index; });
  if (!shards.empty()) {
    const auto& first = shards.front();
    const uint32_t count = first.result.shard.count;
    std::map<uint32_t, const Document*> seen;
    for (const auto& d : shards) {
      const auto& s = d.result.shard;
      if (s.count != count || s.of_traces != first.result.shard.of_traces)
        return d.path + ": shard " + std::to_string(s.index) + "/" + std::to_string(s.count) + " of " +
               std::to_string(s.of_traces) + " traces does not belong with " + first.path + ", shard " +
               std::to_string(first.result.shard.index) + "/" + std::to_string(count) + " of " +
               std::to_string(first.result.shard.of_traces) + " traces";
      auto [it, fresh] = seen.emplace(s.index, &d);
      if (!fresh)
        return d.path + ": shard " + std::to_string(s.index) + "/" + std::to_string(count) + " is also " +
               it->second->path;
    }
    std::string missing;
    for (uint32_t i = 0; i < count; ++i)
      if (!seen.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    if (!missing.empty())
      return "shard(s) " + missing + " of " + std::to_string(count) + " missing (" + std::to_string(seen.size()) +
             " given); the merged report would not cover every trace";
  }
  docs = std::move(shards);
  docs.insert(docs.end(), std::make_move_iterator(others.begin()), std::make_move_iterator(others.end()));
  return {};
}

int run_merge(const MergeArgs& a) {
  std::vector<ReportOutput> outs;
  if (!parse_report_outputs("merge", a.out, outs)) return kExitBadInput;
  std::vector<Document> docs;
  try {
    for (const auto& p : expand_documents(a.inputs)) docs.push_back(Document{p, report::read_findings_document(p)});
  } catch (const report::InputError& e) {
    return bad_input(e.what());
  }
  if (std::string why = order_shards(docs); !why.empty()) return bad_input(why);
  analysis::Analyzer merged;
  for (auto& d : docs) merged.add_result(std::move(d.result));
  analysis::AnalysisResult result = merged.finish();

  report::ReportOptions ro;
  ro.max_frames = a.max_frames;
  ro.print_limit = a.print_limit;
  ro.source_root = a.source_root;
  ro.perfetto_findings = a.perfetto_findings;
  // No trace is read: Perfetto and HTML draw the findings without the ops around them.
  if (!write_report_outputs("merge", outs, a.out, result, ro)) return kExitBadInput;
  if (!result.findings.empty()) return a.error_exitcode;
  if (result.blind_traces() || result.partial()) return kExitBadInput;
  return kExitClean;
}

RegisterCommand reg("merge", 25, [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<MergeArgs>();
  auto* sub = app.add_subcommand(
      "merge", "Merge findings documents (analyze -f json, one per rank or --shard) into one report, by fingerprint");
  sub->add_option("documents", args->inputs, "Findings JSON files, or directories of *.json files")->required();
  sub->add_option("-f,--format", args->out.formats,
                  "Report format: text (default), json, ... ; NAME=FILE writes that format to FILE; repeatable")
      ->allow_extra_args(false);
  sub->add_option("-o,--output", args->out.output, "Write the (single) report format to FILE instead of stdout");
  sub->add_option("--error-exitcode", args->error_exitcode, "Exit status when races are found")->capture_default_str();
  sub->add_flag("--no-color", args->out.no_color, "Never colour the text report");
  sub->add_option("--max-frames", args->max_frames, "Frames shown per stack in the text report")->capture_default_str();
  sub->add_option("--print-limit", args->print_limit,
                  "Findings printed at most in the text report (0 = all); the rest are counted in one line")
      ->capture_default_str();
  sub->add_flag("--force-output", args->out.force_output,
                "Write a report through an output path that is a symbolic link (refused by default)");
  sub->add_option("--source-root", args->source_root, "Make file paths in SARIF/HTML relative to this directory");
  sub->add_option("--perfetto-findings", args->perfetto_findings,
                  "Perfetto report: mark every occurrence of the first N findings")
      ->capture_default_str();
  return [args]() { return run_merge(*args); };
});

}  // namespace
}  // namespace streamrace::cli
