// The analyzer's verdict on replay traces, in one place: running the analyzer on traces or on
// emitted schedules, counting findings, choosing the findings a fix targets, deciding whether
// a fix removed them, and the one-line summary of a finding the replay tables print.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/finding.h"
#include "replay/schedule.h"
#include "replay/trace_emitter.h"
#include "traceformat/call_stream.h"

namespace streamrace::replay {

struct AnalyzerVerdict {
  uint64_t certain = 0;
  uint64_t possible = 0;
  std::vector<analysis::Finding> findings;
  std::vector<std::string> traces;
  std::vector<uint64_t> records;  // per trace, in `traces` order: the records read
  bool clean() const { return findings.empty(); }
};

// Analyzes the traces together (in parallel, one thread per core: the result does not depend
// on it). `observe` (AnalyzerOptions::observe_records), if set, is handed each trace's records.
AnalyzerVerdict analyze_traces(const std::vector<std::string>& paths,
                               const std::function<trace::RecordObserver*(const std::string&)>& observe = {});
// The options analyze_traces analyses with: every racing pair kept, for the fix edits.
analysis::AnalyzerOptions verdict_options();
// analyze_traces(paths) where analysed[i], when set, is already trace i's outcome under
// verdict_options() (analysed from its chunks as it was written, analysis::FedTrace): only
// the others are read (in parallel). The same verdict as analyze_traces(paths).
AnalyzerVerdict verdict_of(const std::vector<std::string>& paths,
                           std::vector<std::optional<analysis::TraceOutcome>>&& analysed);
// Writes schedule r as dir/rank<r>.srace (dir is created) and analyzes them together.
AnalyzerVerdict analyze_schedules(const std::vector<Schedule>& ranks, const std::string& dir,
                                  const EmitOptions& opts = {});

std::set<std::string> fingerprints(const AnalyzerVerdict& v);
// The fingerprints a fix run targets: every finding of `before` when `requested` is empty,
// else `requested`, each of which must be one of them (std::invalid_argument otherwise).
std::set<std::string> select_fix_targets(const AnalyzerVerdict& before, const std::vector<std::string>& requested);

// What a fix did to the targeted findings; fixed when none remains and none is new.
struct FixVerdict {
  std::vector<std::string> targeted;    // fingerprints the fix was asked to remove
  std::vector<std::string> removed;     // targeted and gone
  std::vector<std::string> remaining;   // targeted and still there
  std::vector<std::string> introduced;  // after the fix but not before
  bool fixed() const { return remaining.empty() && introduced.empty(); }
};
FixVerdict judge_fix(const AnalyzerVerdict& before, const AnalyzerVerdict& after, const std::set<std::string>& targets);

// "WAR stage_1_and_2.py:950 (cudaMemcpyAsync) vs stage_1_and_2.py:1343 (cudaMemcpyAsync)".
std::string summarize_finding(const analysis::Finding& f);

}  // namespace streamrace::replay
