// The CPU executor: runs a schedule on host memory with a stream simulator.
//
// Model. The host program issues items onto per-stream FIFO queues; issuing never depends on
// device progress, so the queues, the event snapshots captured by waits and the legacy default
// stream's implicit edges are fixed by a static pass. A stream runs one item at a time. An
// item may start when its stream predecessor finished and its dependencies (waited-on event
// records, legacy-stream edges) have finished. Host syncs block the host until what they wait
// for has finished. Operations are not atomic: an op reads its inputs when it starts and
// writes its outputs when it finishes, and other streams may run in between, so a copy-back
// that starts after the next bucket's copy-in finished reads the new data (WAR), and an
// all-reduce that finishes after it overwrites it (WAW).
//
// Data. Memory is an array of 64-bit cells (one cell = Schedule::cell_bytes()). Gradients get
// the known values of gradient_values.h; copies copy, divides divide, collectives sum the
// simulated rank's send data with the other ranks' contribution, which is taken from a
// program-order run of every rank in lockstep (the other ranks behave correctly). Opaque
// kernels write a hash of what they read. After a step, every expectation (bucket slice or
// partition of a generated schedule) is compared with the exact averaged gradient; a schedule
// without expectations is compared cell by cell with the program-order result.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replay/schedule.h"

namespace streamrace::replay {

enum class SimPolicy {
  kProgramOrder,  // every op runs to completion when it is issued (the intended result)
  kRandom,        // uniformly random among the enabled transitions (seeded)
  kAdversarial,   // a random stream priority per run: starves low-priority streams (seeded)
  kTimed,         // discrete-event timing with op costs, launch overhead and seeded jitter
};
const char* to_string(SimPolicy p);

struct SimOptions {
  SimPolicy policy = SimPolicy::kRandom;
  uint64_t seed = 1;
  uint32_t step = 0;           // selects the gradient values
  uint64_t launch_ns = 2000;   // timed: host time per issued call
  double jitter = 0.25;        // timed: op cost varies by up to this fraction
  bool record_order = false;   // keep the interleaving in the outcome
};

// One event of the interleaving: an op started (read its inputs) or finished (wrote outputs).
struct SimTransition {
  uint32_t stream = 0;
  uint32_t action = 0;
  bool finish = false;
};

struct CorruptCell {
  std::string where;     // "averaged_gradients[12, 14)"
  std::string expectation;  // the expectation's label, or "program-order result"
  uint64_t expected = 0;
  uint64_t got = 0;
};

struct StepOutcome {
  bool corrupted = false;
  bool deadlock = false;
  uint64_t corrupted_cells = 0;
  std::vector<CorruptCell> cells;  // the first few
  std::vector<SimTransition> order;
  // kTimed only (model nanoseconds).
  uint64_t step_ns = 0;
  uint64_t collective_ns = 0;   // union of collective intervals
  uint64_t overlapped_ns = 0;   // collective time during which another stream computed or copied
};

struct SearchLimits {
  uint64_t max_states = 2'000'000;
  // Take a transition alone when nothing another stream can still do conflicts with it. Sound
  // for final-state properties; off only to cross-check it.
  bool partial_order_reduction = true;
};

struct SearchResult {
  enum class Verdict { kCorruptionFound, kNoCorruption, kInconclusive };
  Verdict verdict = Verdict::kInconclusive;
  uint64_t states = 0;       // distinct states visited
  uint64_t transitions = 0;  // transitions explored
  std::vector<SimTransition> witness;  // a corrupting interleaving (kCorruptionFound)
  StepOutcome outcome;                 // what that interleaving produced
};
const char* to_string(SearchResult::Verdict v);

class StreamSimulator {
 public:
  // Throws std::invalid_argument when the schedule is malformed or too large to simulate.
  explicit StreamSimulator(const Schedule& s, uint64_t max_cells = 16ull << 20);
  ~StreamSimulator();
  StreamSimulator(const StreamSimulator&) = delete;
  StreamSimulator& operator=(const StreamSimulator&) = delete;

  StepOutcome run(const SimOptions& opts);
  // Explores every interleaving the happens-before edges allow (with state memoization and a
  // sound partial-order reduction); returns a corrupting one or proves none exists.
  SearchResult search(uint32_t step = 0, const SearchLimits& limits = {});
  // Human-readable interleaving ("reduction   start  all_reduce flat[0]").
  std::string describe(const std::vector<SimTransition>& order) const;
  uint64_t cells() const;
  // The memory cells `s` needs (what cells() would say), without building anything.
  static uint64_t cells_needed(const Schedule& s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamrace::replay
