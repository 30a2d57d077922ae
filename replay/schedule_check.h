// Judging schedules with the real analyzer: emit a schedule (one trace per rank) and analyze
// it; lift recorded traces, apply the analyzer's suggested fixes (FixEdit) to them, write the
// edited schedules back as traces and analyze again.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "replay/schedule.h"
#include "replay/trace_emitter.h"

namespace streamrace::replay {

struct AnalyzerVerdict {
  uint64_t certain = 0;
  uint64_t possible = 0;
  std::vector<analysis::Finding> findings;
  std::vector<std::string> traces;
  bool clean() const { return findings.empty(); }
};

AnalyzerVerdict analyze_traces(const std::vector<std::string>& paths);
// The fingerprints a fix run targets: every finding of `before` when `requested` is empty,
// else `requested`, each of which must be one of them (std::invalid_argument otherwise).
std::set<std::string> select_fix_targets(const AnalyzerVerdict& before, const std::vector<std::string>& requested);
// Writes schedule r as dir/rank<r>.srace (dir is created) and analyzes them together.
AnalyzerVerdict analyze_schedules(const std::vector<Schedule>& ranks, const std::string& dir,
                                  const EmitOptions& opts = {});

struct TraceFixOptions {
  std::vector<std::string> fingerprints;  // empty: every finding of the input
  std::string out_dir;                    // where the edited traces go (created)
  uint32_t max_rounds = 256;              // edits per trace (one occurrence per round)
};

struct TraceFixResult {
  struct PerTrace {
    std::string source;
    std::string edited;
    size_t edits = 0;
    std::vector<std::string> warnings;
    Schedule original;  // lifted
    Schedule fixed;     // lifted + edits
  };
  std::vector<PerTrace> traces;
  AnalyzerVerdict before;  // the input traces
  AnalyzerVerdict after;   // the edited traces
  std::vector<std::string> targeted;    // fingerprints the fix was asked to remove
  std::vector<std::string> removed;     // targeted and gone
  std::vector<std::string> remaining;   // targeted and still there
  std::vector<std::string> introduced;  // in `after` but not in `before`
};

// Throws std::invalid_argument when a requested fingerprint is not among the input's
// findings, trace::TraceError for unreadable traces.
TraceFixResult apply_fixes_to_traces(const std::vector<std::string>& traces, const TraceFixOptions& opts);

}  // namespace streamrace::replay
