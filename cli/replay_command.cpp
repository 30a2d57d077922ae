// `streamrace replay`: rebuild a bucket schedule and judge it (analyzer + CPU simulator), or
// apply the analyzer's suggested fixes to recorded traces and judge the result.
//   streamrace replay zero --stage 1|2|3 --fix none|event|wait-stream|sync|all [--gpus N]
//                          [--simulate] [--delay-us N] [--steps N] [--seed N] [--format text|json]
//   streamrace replay trace DIR --apply-fix FINGERPRINT|all [-o DIR] [--format text|json]
//                           [--max-rounds N (0 = automatic)] [--one-occurrence-per-round] [--no-simulate]
// Exit status: 0 all variants clean / every targeted finding gone and none new, 1 otherwise,
// 2 bad input. `replay trace` edits the recorded traces record by record (trace_editor.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyzer/analyzer.h"
#include "cli/command_registry.h"
#include "report/progress_meter.h"
#include "replay/analyzer_verdict.h"
#include "replay/stream_simulator.h"
#include "replay/timeline.h"
#include "replay/trace_editor.h"
#include "replay/trace_lifter.h"
#include "replay/zero_replay.h"
#include "traceformat/trace_file.h"

namespace streamrace::cli {
namespace {

namespace fs = std::filesystem;
using namespace streamrace::replay;

struct ZeroArgs {
  int stage = 1;
  std::string fix = "all";
  std::string preset;
  std::string params;  // "4096,4096,..."
  uint64_t bucket = 0;
  int gpus = 2;
  std::string dtype = "fp16";
  bool no_reduce_scatter = false;
  bool simulate = false;
  uint64_t delay_us = 0;
  uint32_t steps = 100;
  uint64_t seed = 1;
  std::string format = "text";
  std::string trace_dir;
  std::string emit_ir;
  bool timeline = false;
  int error_exitcode = kExitRaces;
  bool progress = false;  // --progress
};

struct TraceArgs {
  std::vector<std::string> inputs;
  std::string apply_fix;
  std::string out;
  std::string format = "text";
  uint32_t steps = 100;
  uint64_t seed = 1;
  uint32_t max_rounds = 0;
  bool one_per_round = false;  // --one-occurrence-per-round: the former method
  bool no_simulate = false;
  int error_exitcode = kExitRaces;
  bool progress = false;  // --progress
};

int bad(const std::string& what) {
  std::cerr << "streamrace replay: error: " << what << "\n";
  return kExitBadInput;
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

int run_zero(const ZeroArgs& a) {
  if (a.stage < 1 || a.stage > 3) return bad(fmt::format("--stage {} is not 1, 2 or 3", a.stage));
  if (a.format != "text" && a.format != "json") return bad("--format must be text or json, not '" + a.format + "'");
  if (a.gpus < 1 || a.gpus > 16) return bad(fmt::format("--gpus {} is outside 1..16", a.gpus));
  ZeroReplayOptions o;
  o.base.stage = a.stage;
  o.base.world = a.gpus;
  o.base.dtype = a.dtype;
  o.base.reduce_scatter = !a.no_reduce_scatter;
  o.base.delay_ns = a.delay_us * 1000;
  const std::string preset = a.preset.empty() ? (a.params.empty() ? "small" : "") : a.preset;
  if (!preset.empty() && !apply_zero_preset(preset, o.base)) {
    std::string names;
    for (const auto& n : zero_preset_names()) names += " " + n;
    return bad("unknown --preset '" + preset + "' (choose from:" + names + ")");
  }
  if (!a.params.empty()) {
    o.base.param_elements.clear();
    std::stringstream ss(a.params);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        size_t used = 0;
        unsigned long long v = std::stoull(item, &used);
        if (used != item.size() || v == 0) throw std::invalid_argument(item);
        o.base.param_elements.push_back(v);
      } catch (const std::exception&) {
        return bad("--params wants positive element counts separated by commas, got '" + item + "'");
      }
    }
  }
  if (a.bucket) o.base.bucket_elements = a.bucket;
  if (a.fix != "all") {
    ZeroConfig probe = o.base;
    if (!set_zero_variant(probe, a.fix)) {
      std::string names;
      for (const auto& n : zero_variant_names(a.stage)) names += " " + n;
      return bad(fmt::format("--fix '{}' is not a stage-{} variant (choose from:{} all)", a.fix, a.stage, names));
    }
    o.variants = {a.fix};
  }
  o.simulate = a.simulate;
  o.steps = a.steps;
  o.seed = a.seed;
  o.trace_dir = a.trace_dir;
  std::vector<VariantReport> reports;
  try {
    // Generate once up front so configuration errors surface before any work.
    for (const auto& v : o.variants.empty() ? zero_variant_names(a.stage) : o.variants) {
      ZeroConfig c = o.base;
      set_zero_variant(c, v);
      for (int r = 0; r < c.world; ++r) {
        c.rank = r;
        Schedule s = make_zero_schedule(c);
        if (!a.emit_ir.empty()) {
          fs::create_directories(a.emit_ir);
          std::ofstream f(fs::path(a.emit_ir) / fmt::format("stage{}-{}-rank{}.json", a.stage, v, r));
          f << schedule_to_json_text(s) << "\n";
          if (!f.good()) return bad("cannot write IR into " + a.emit_ir);
        }
        if (a.timeline && r == 0) print_timeline(std::cout, s, TimelineOptions{34, false});
      }
    }
    report::ProgressMeter meter("judging variants", 0);
    if (a.progress) meter.request();
    o.progress = [&](size_t done, size_t total, const std::string& variant) {
      meter.set_total(total);
      meter.update(done, fmt::format("variant {} of {}: {}", done + 1, total, variant));
    };
    reports = run_zero_replay(o);
    meter.finish();
  } catch (const std::invalid_argument& e) {
    return bad(e.what());
  } catch (const trace::TraceError& e) {
    return bad(e.what());
  }
  bool any = false;
  for (const auto& r : reports) any |= r.races();
  if (a.format == "json") {
    nlohmann::json j = {{"schema", "streamrace-replay"},
                        {"version", 1},
                        {"mode", "zero"},
                        {"stage", a.stage},
                        {"world", o.base.world},
                        {"bucket_elements", o.base.bucket_elements},
                        {"param_elements", o.base.param_elements},
                        {"delay_us", a.delay_us},
                        {"variants", reports},
                        {"races", any}};
    std::cout << j.dump(2) << "\n";
    return any ? a.error_exitcode : kExitClean;
  }
  std::cout << fmt::format("streamrace replay: ZeRO stage {}, {} ranks, {} parameters, bucket {} elements{}\n", a.stage,
                           o.base.world, o.base.param_elements.size(), o.base.bucket_elements,
                           a.delay_us ? fmt::format(", {} us delay on the reduce stream", a.delay_us) : "");
  std::string head = pad("variant", 20) + pad("verdict", 9) + pad("analyzer", 22);
  if (a.simulate) head += pad("simulated steps", 20) + pad("exhaustive", 32) + "model overlap";
  std::cout << head << "\n" << std::string(head.size() + 4, '-') << "\n";
  for (const auto& r : reports) {
    std::string line = pad(r.variant, 20) + pad(r.races() ? "RACE" : "clean", 9) +
                       pad(fmt::format("{} certain, {} possible", r.certain, r.possible), 22);
    if (r.simulated)
      line += pad(fmt::format("{}/{} corrupt", r.sim_corrupt_steps, r.sim_steps), 20) + pad(r.exhaustive, 32) +
              fmt::format("{:.0f}% of {:.0f} us", r.model_overlap_pct, r.model_collective_us);
    std::cout << line << "\n";
  }
  for (const auto& r : reports) {
    if (!r.first_finding.empty()) std::cout << fmt::format("  {}: analyzer: {}\n", r.variant, r.first_finding);
    if (!r.first_corruption.empty()) std::cout << fmt::format("  {}: simulator: {}\n", r.variant, r.first_corruption);
  }
  if (!a.simulate) std::cout << "(add --simulate for the CPU simulator's verdict)\n";
  return any ? a.error_exitcode : kExitClean;
}

// Simulator verdict on a trace, lifted into a schedule: exhaustive when small, else seeded
// runs; traces whose schedule is larger than kSimulateCells are not simulated. The lifted
// schedule leaves out what the IR does not model, so this is a second opinion, not the verdict.
constexpr uint64_t kSimulateCells = 1u << 16;
// A lift holds the whole trace as a schedule (hundreds of bytes per record: 3 GB for two
// 2 M-record traces), so a trace of more records than this is refused before it is lifted.
constexpr uint64_t kSimulateRecords = 250'000;

// `records`: the trace's record count, as the analysis read it.
std::string simulate_trace(const std::string& path, uint64_t records, const TraceArgs& a, bool& corrupt) {
  corrupt = false;
  if (records > kSimulateRecords)
    return fmt::format("not simulated ({} records, more than the {} a lift may hold)", records, kSimulateRecords);
  try {
    // Sized from the schedule's shape alone before the whole schedule is lifted (a recording's
    // lift takes a while, most of it labels and stacks, and the simulator refuses most).
    if (uint64_t cells = StreamSimulator::cells_needed(lift_trace_shape(path).schedule); cells > kSimulateCells)
      return fmt::format("not simulated ({} cells)", cells);
    auto lifted = lift_trace(path);
    StreamSimulator sim(lifted.schedule);
    if (sim.cells() <= 4096) {
      auto r = sim.search(0, SearchLimits{500'000, true});
      corrupt = r.verdict == SearchResult::Verdict::kCorruptionFound;
      return to_string(r.verdict);
    }
    uint64_t bad_runs = 0;
    for (uint32_t i = 0; i < a.steps; ++i) {
      SimOptions o;
      o.policy = i % 2 ? SimPolicy::kAdversarial : SimPolicy::kRandom;
      o.seed = a.seed * 7919 + i;
      bad_runs += sim.run(o).corrupted;
    }
    corrupt = bad_runs > 0;
    return fmt::format("{}/{} seeded runs corrupt", bad_runs, a.steps);
  } catch (const std::invalid_argument& e) {
    // "schedule needs N memory cells ...": too large; say how large, nothing more.
    std::string why = e.what();
    if (auto at = why.find("needs "); at != std::string::npos) {
      unsigned long long cells = std::strtoull(why.c_str() + at + 6, nullptr, 10);
      if (cells) return fmt::format("not simulated ({} cells)", cells);
    }
    if (auto nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
    return "not simulated (" + why + ")";
  }
}

int run_trace(const TraceArgs& a) {
  if (a.format != "text" && a.format != "json") return bad("--format must be text or json, not '" + a.format + "'");
  if (a.apply_fix.empty()) return bad("--apply-fix FINGERPRINT|all is required");
  std::vector<std::string> traces;
  try {
    traces = analysis::expand_trace_inputs(a.inputs);
  } catch (const trace::TraceError& e) {
    return bad(e.what());
  }
  if (traces.empty()) return bad("no trace files in the input");
  RecordFixOptions o;
  if (a.apply_fix != "all") {
    std::stringstream ss(a.apply_fix);
    std::string fp;
    while (std::getline(ss, fp, ',')) o.fingerprints.push_back(fp);
  }
  o.max_rounds = a.max_rounds;
  o.one_occurrence_per_round = a.one_per_round;
  o.out_dir = a.out.empty() ? (fs::path(a.inputs[0]).lexically_normal().string() + ".fixed") : a.out;
  if (fs::path(o.out_dir).has_filename() && fs::path(o.out_dir).filename() == ".fixed")
    o.out_dir = "streamrace-fixed";
  // Usually one round (with --one-occurrence-per-round up to one per occurrence, each
  // analysing every trace again), so the meter shows the rounds (on a terminal, or with --progress).
  report::ProgressMeter meter("applying fixes", 0);
  if (a.progress) meter.request();
  o.progress = [&](uint32_t rounds, uint64_t left, uint64_t total) {
    meter.set_total(total);
    meter.update(total - std::min(left, total),
                 fmt::format("round {}, {} of {} occurrences left", rounds, left, total));
  };
  RecordFixResult res;
  try {
    res = apply_record_fixes(traces, o);
    meter.finish();
  } catch (const std::invalid_argument& e) {
    return bad(e.what());
  } catch (const trace::TraceError& e) {
    return bad(e.what());
  } catch (const fs::filesystem_error& e) {
    return bad(e.what());
  }
  std::vector<std::pair<std::string, std::string>> sims;  // before, after per trace
  if (!a.no_simulate) {
    report::ProgressMeter sim_meter("simulating", res.traces.size());
    if (a.progress) sim_meter.request();
    for (size_t i = 0; i < res.traces.size(); ++i) {
      const auto& t = res.traces[i];
      sim_meter.update(sims.size(), fmt::format("trace {} of {}", sims.size() + 1, res.traces.size()));
      bool b = false, f = false;
      auto before = simulate_trace(t.source, res.before.records.at(i), a, b);
      auto after = simulate_trace(t.edited, res.after.records.at(i), a, f);
      sims.emplace_back(before, after);
    }
  }
  // No finding to fix is its own verdict, never "fixed".
  const bool nothing = res.verdict.targeted.empty() && res.verdict.introduced.empty();
  const bool fixed = !nothing && res.fixed();
  const char* verdict = nothing ? "nothing to fix" : fixed ? "fixed" : "not fixed";
  if (a.format == "json") {
    nlohmann::json traces_j = nlohmann::json::array();
    for (size_t i = 0; i < res.traces.size(); ++i) {
      const auto& t = res.traces[i];
      nlohmann::json w = t.warnings;
      nlohmann::json tj = {{"source", t.source}, {"edited", t.edited}, {"edits", t.edits}, {"events", t.events},
                           {"records", t.records}, {"waits", t.waits}, {"warnings", w}};
      if (!sims.empty()) {
        tj["simulator_before"] = sims[i].first;
        tj["simulator_after"] = sims[i].second;
      }
      traces_j.push_back(std::move(tj));
    }
    nlohmann::json j = {{"schema", "streamrace-replay"}, {"version", 1}, {"mode", "trace"},
                        {"edit_level", "record"},
                        {"findings_before", res.before.findings.size()}, {"findings_after", res.after.findings.size()},
                        {"rounds", res.rounds}, {"round_cap_hit", res.hit_round_cap},
                        {"targeted", res.verdict.targeted}, {"removed", res.verdict.removed}, {"remaining", res.verdict.remaining},
                        {"introduced", res.verdict.introduced}, {"traces", traces_j}, {"fixed", fixed},
                        {"verdict", verdict}};
    std::cout << j.dump(2) << "\n";
    return fixed || nothing ? kExitClean : a.error_exitcode;
  }
  std::cout << fmt::format("streamrace replay: {} trace(s), {} finding(s) before, {} targeted\n", res.traces.size(),
                           res.before.findings.size(), res.verdict.targeted.size());
  // Columns are as wide as their widest cell plus two spaces.
  std::vector<std::vector<std::string>> rows = {{"trace", "edits"}};
  if (!sims.empty()) rows[0].insert(rows[0].end(), {"simulator before", "simulator after"});
  for (size_t i = 0; i < res.traces.size(); ++i) {
    std::vector<std::string> row = {fs::path(res.traces[i].source).filename().string(),
                                    std::to_string(res.traces[i].edits)};
    if (!sims.empty()) row.insert(row.end(), {sims[i].first, sims[i].second});
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  size_t total = 0;
  for (size_t c = 0; c < width.size(); ++c) total += width[c] + (c + 1 < width.size() ? 2 : 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < rows[r].size(); ++c)
      line += c + 1 < rows[r].size() ? pad(rows[r][c], width[c] + 2) : rows[r][c];
    std::cout << line << "\n";
    if (r == 0) std::cout << std::string(total, '-') << "\n";
    if (r > 0)
      for (const auto& w : res.traces[r - 1].warnings) std::cout << "  warning: " << w << "\n";
  }
  size_t records = 0, waits = 0;
  for (const auto& t : res.traces) records += t.records, waits += t.waits;
  std::cout << fmt::format("record-level edits: {} in {} round(s){}{}\n", res.total_edits(), res.rounds,
                           res.total_edits() ? fmt::format(" ({} records and {} waits of {} fix events)", records,
                                                           waits, res.total_events())
                                             : "",
                           res.hit_round_cap ? fmt::format(" (stopped at the cap of {} rounds)", res.round_cap) : "");
  std::cout << fmt::format("analyzer after the edits: {} finding(s); removed {}, remaining {}, new {}\n",
                           res.after.findings.size(), res.verdict.removed.size(), res.verdict.remaining.size(), res.verdict.introduced.size());
  for (const auto& fp : res.verdict.remaining) std::cout << "  still racing: " << fp << "\n";
  for (const auto& fp : res.verdict.introduced) std::cout << "  new finding: " << fp << "\n";
  std::cout << "edited traces in " << o.out_dir << "\n"
            << (nothing ? "verdict: nothing to fix (the input has no findings)\n"
                        : fixed ? "verdict: fixed\n" : "verdict: NOT fixed\n");
  return fixed || nothing ? kExitClean : a.error_exitcode;
}

const RegisterCommand kRegister("replay", 60, [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("replay", "Rebuild a bucket schedule or a recorded trace and confirm a race and its fix");
  cmd->require_subcommand(1);
  auto za = std::make_shared<ZeroArgs>();
  auto ta = std::make_shared<TraceArgs>();
  auto* zero = cmd->add_subcommand("zero", "DeepSpeed ZeRO bucket schedules: analyzer and CPU simulator verdict per variant");
  zero->add_option("--stage", za->stage, "ZeRO stage: 1, 2 or 3")->required();
  zero->add_option("--fix", za->fix,
                   "variant: stage 1/2 none|event|wait-stream|sync; stage 3 default-stream (=none)|"
                   "default-stream-same|current-stream; or all")
      ->default_val("all");
  zero->add_option("--preset", za->preset, "model sizes: tiny, small (default), seed");
  zero->add_option("--params", za->params, "parameter sizes in elements, comma separated (forward order)");
  zero->add_option("--bucket", za->bucket, "reduce_bucket_size in elements");
  zero->add_option("--gpus", za->gpus, "world size (ranks)")->default_val(2);
  zero->add_option("--dtype", za->dtype, "fp16, bf16 or fp32")->default_val("fp16");
  zero->add_flag("--no-reduce-scatter", za->no_reduce_scatter, "reduce_scatter=false: one in-place all_reduce");
  zero->add_flag("--simulate", za->simulate, "also run the CPU stream simulator (seeded runs + exhaustive search)");
  zero->add_option("--delay-us", za->delay_us, "spin this long on the reduce stream before every flush");
  zero->add_option("--steps", za->steps, "simulated steps per rank")->default_val(100);
  zero->add_option("--seed", za->seed, "simulator seed")->default_val(1);
  zero->add_option("-f,--format", za->format, "text or json")->default_val("text");
  zero->add_option("--error-exitcode", za->error_exitcode, "Exit status when a variant races")->capture_default_str();
  zero->add_option("--trace-dir", za->trace_dir, "keep the emitted traces here");
  zero->add_option("--emit-ir", za->emit_ir, "write each variant's schedule IR (per rank) as JSON into this directory");
  zero->add_flag("--timeline", za->timeline, "print each variant's per-stream timeline (rank 0)");
  zero->add_flag("--progress", za->progress, "Show progress on stderr even when it is no terminal (on a terminal it shows after a second anyway)");
  auto* tr = cmd->add_subcommand("trace", "Apply the analyzer's suggested fixes to recorded traces and re-judge them");
  tr->add_option("inputs", ta->inputs, "trace files or directories")->required();
  tr->add_option("--apply-fix", ta->apply_fix, "FINGERPRINT[,FINGERPRINT...] or all")->required();
  // -o names the main output, as everywhere; --out is the older spelling.
  tr->add_option("-o,--output-dir,--out", ta->out, "directory for the edited traces (default: <input>.fixed)");
  tr->add_option("-f,--format", ta->format, "text or json")->default_val("text");
  tr->add_option("--error-exitcode", ta->error_exitcode, "Exit status when the fix leaves a targeted finding or adds one")
      ->capture_default_str();
  tr->add_option("--steps", ta->steps, "seeded simulator runs when a trace is too large to search")->default_val(100);
  tr->add_option("--seed", ta->seed, "simulator seed")->default_val(1);
  tr->add_option("--max-rounds", ta->max_rounds,
                 "stop editing after this many rounds (each edits every listed occurrence of the targeted findings and "
                 "analyses again); 0 = as many as the targeted findings have occurrences")
      ->default_val(0);
  tr->add_flag("--one-occurrence-per-round", ta->one_per_round,
               "edit only the first occurrence of each finding per round (the former method: one analysis per "
               "occurrence, slow; for comparison)");
  tr->add_flag("--no-simulate", ta->no_simulate, "leave out the CPU simulator's second opinion");
  tr->add_flag("--progress", ta->progress, "Show progress on stderr even when it is no terminal (on a terminal it shows after a second anyway)");
  return [zero, tr, za, ta]() {
    if (zero->parsed()) return run_zero(*za);
    if (tr->parsed()) return run_trace(*ta);
    return kExitBadInput;
  };
});

}  // namespace
}  // namespace streamrace::cli
