// CPU-side replay of ZeRO variants: analyzer + simulator verdicts per variant.
#include "replay/zero_replay.h"

#include <filesystem>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "analyzer/finding.h"
#include "replay/stream_simulator.h"

namespace streamrace::replay {

namespace fs = std::filesystem;

namespace {

void simulate(const std::vector<Schedule>& ranks, const ZeroReplayOptions& o, VariantReport& r) {
  r.simulated = true;
  std::vector<std::unique_ptr<StreamSimulator>> sims;
  for (const auto& s : ranks) {
    try {
      sims.push_back(std::make_unique<StreamSimulator>(s));
    } catch (const std::invalid_argument& e) {
      r.exhaustive = std::string("not simulated: ") + e.what();
      return;
    }
  }
  const SimPolicy policies[] = {SimPolicy::kRandom, SimPolicy::kAdversarial, SimPolicy::kTimed};
  for (size_t rank = 0; rank < sims.size(); ++rank) {
    for (uint32_t i = 0; i < o.steps; ++i) {
      SimOptions so;
      so.policy = policies[i % 3];
      so.seed = o.seed * 7919 + i * 31 + rank;
      so.step = i;
      auto out = sims[rank]->run(so);
      ++r.sim_steps;
      if (!out.corrupted) continue;
      ++r.sim_corrupt_steps;
      r.sim_corrupt_cells += out.corrupted_cells;
      if (r.first_corruption.empty() && !out.cells.empty())
        r.first_corruption = fmt::format("rank {} step {} ({}): {} expected {} got {}", rank, i, to_string(so.policy),
                                         out.cells[0].where, out.cells[0].expected, out.cells[0].got);
    }
  }
  // Exhaustive search per rank when small enough.
  uint64_t cells = 0;
  for (const auto& s : sims) cells = std::max(cells, s->cells());
  if (cells > o.exhaustive_max_cells) {
    r.exhaustive = fmt::format("skipped ({} cells)", cells);
  } else {
    bool inconclusive = false;
    for (size_t rank = 0; rank < sims.size() && !r.exhaustive_found; ++rank) {
      auto res = sims[rank]->search(0, SearchLimits{o.exhaustive_max_states, true});
      r.exhaustive_states += res.states;
      if (res.verdict == SearchResult::Verdict::kCorruptionFound) {
        r.exhaustive_found = true;
        r.exhaustive = fmt::format("corrupting interleaving (rank {})", rank);
      } else if (res.verdict == SearchResult::Verdict::kInconclusive) {
        inconclusive = true;
      }
    }
    if (!r.exhaustive_found) r.exhaustive = inconclusive ? "inconclusive (state limit)" : "proven: none exists";
  }
  SimOptions timed;
  timed.policy = SimPolicy::kTimed;
  timed.jitter = 0;
  auto t = sims[0]->run(timed);
  r.model_step_us = double(t.step_ns) / 1000.0;
  r.model_collective_us = double(t.collective_ns) / 1000.0;
  r.model_overlap_pct = t.collective_ns ? 100.0 * double(t.overlapped_ns) / double(t.collective_ns) : 0.0;
}

}  // namespace

std::vector<VariantReport> run_zero_replay(const ZeroReplayOptions& o) {
  std::vector<std::string> variants = o.variants.empty() ? zero_variant_names(o.base.stage) : o.variants;
  std::vector<VariantReport> out;
  const bool temp = o.trace_dir.empty();
  const std::string root =
      temp ? (fs::temp_directory_path() / fmt::format("streamrace-replay-{}", ::getpid())).string() : o.trace_dir;
  for (const auto& v : variants) {
    if (o.progress) o.progress(out.size(), variants.size(), v);
    ZeroConfig c = o.base;
    if (!set_zero_variant(c, v))
      throw std::invalid_argument(fmt::format("unknown variant '{}' for stage {}", v, c.stage));
    std::vector<Schedule> ranks;
    for (int r = 0; r < c.world; ++r) {
      c.rank = r;
      ranks.push_back(make_zero_schedule(c));
    }
    VariantReport rep;
    rep.variant = v;
    rep.stage = c.stage;
    auto verdict = analyze_schedules(ranks, (fs::path(root) / fmt::format("stage{}-{}", c.stage, v)).string());
    rep.certain = verdict.certain;
    rep.possible = verdict.possible;
    for (const auto& f : verdict.findings) rep.fingerprints.push_back(f.fingerprint);
    if (!verdict.findings.empty()) rep.first_finding = summarize_finding(verdict.findings[0]);
    if (o.simulate) simulate(ranks, o, rep);
    out.push_back(std::move(rep));
  }
  if (temp) {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  return out;
}

void to_json(nlohmann::json& j, const VariantReport& r) {
  j = {{"variant", r.variant},
       {"stage", r.stage},
       {"races", r.races()},
       {"analyzer", {{"certain", r.certain}, {"possible", r.possible}, {"fingerprints", r.fingerprints},
                     {"first_finding", r.first_finding}}}};
  if (r.simulated)
    j["simulator"] = {{"steps", r.sim_steps},
                      {"corrupt_steps", r.sim_corrupt_steps},
                      {"corrupt_cells", r.sim_corrupt_cells},
                      {"first_corruption", r.first_corruption},
                      {"exhaustive", r.exhaustive},
                      {"exhaustive_found", r.exhaustive_found},
                      {"exhaustive_states", r.exhaustive_states},
                      {"model_step_us", r.model_step_us},
                      {"model_collective_us", r.model_collective_us},
                      {"model_overlap_pct", r.model_overlap_pct}};
}

}  // namespace streamrace::replay
