// One replay of DeepSpeed ZeRO bucket-schedule variants on the CPU side: for each variant,
// the analyzer's verdict on the emitted traces (one per rank) and, on request, the CPU
// simulator's (seeded random / adversarial / timed runs, and an exhaustive search when the
// configuration is small enough), plus model step time and collective overlap.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "replay/analyzer_verdict.h"
#include "replay/zero_schedule.h"

namespace streamrace::replay {

struct ZeroReplayOptions {
  ZeroConfig base;                    // stage, sizes, world, dtype, reduce_scatter, delay_ns
  std::vector<std::string> variants;  // empty: every variant of the stage
  bool simulate = false;
  uint32_t steps = 100;               // simulated steps per rank
  uint64_t seed = 1;
  std::string trace_dir;              // where traces go; empty: a temporary directory, removed
  uint64_t exhaustive_max_cells = 4096;
  uint64_t exhaustive_max_states = 500'000;
  // Called before each variant is judged: how many are done, of how many, and its name.
  std::function<void(size_t done, size_t total, const std::string& variant)> progress;
};

struct VariantReport {
  std::string variant;
  int stage = 1;
  // Analyzer on the emitted traces.
  uint64_t certain = 0;
  uint64_t possible = 0;
  std::string first_finding;  // "write-after-read at stage_1_and_2.py:950 ..." or empty
  std::vector<std::string> fingerprints;
  // CPU simulator (simulated == false: not asked for).
  bool simulated = false;
  uint64_t sim_steps = 0;
  uint64_t sim_corrupt_steps = 0;
  uint64_t sim_corrupt_cells = 0;
  std::string first_corruption;  // "rank 0: averaged_gradients[4, 6) expected 9231 got 7181"
  std::string exhaustive;        // verdict text, or why it was skipped
  bool exhaustive_found = false;
  uint64_t exhaustive_states = 0;
  // Timed model, rank 0, no jitter.
  double model_step_us = 0;
  double model_collective_us = 0;
  double model_overlap_pct = 0;

  bool races() const { return certain + possible > 0 || sim_corrupt_steps > 0 || exhaustive_found; }
};

// Throws std::invalid_argument for a bad configuration or variant name.
std::vector<VariantReport> run_zero_replay(const ZeroReplayOptions& opts);

void to_json(nlohmann::json& j, const VariantReport& r);

}  // namespace streamrace::replay
