// Confirmation: what became of a default-tier run's `possible` findings when the same
// program ran again with precise mode on the kernels behind them (`streamrace run
// --confirm`). A possible finding is matched to the confirming run's findings by its two
// sites (each access's op and the user's line, site_of), in either order: the kind and the
// fingerprint may change (a kernel's "read or write" becomes the read or write it measured).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analyzer/finding.h"

namespace streamrace::analysis {

enum class ConfirmOutcome {
  kConfirmed,      // the confirming run reports it `certain`
  kGone,           // the confirming run does not report it and measured every kernel behind it:
                   // the measured ranges do not overlap
  kStillPossible,  // reported again but still `possible` (a kernel not patched, an interval
                   // budget overflowed, a copy or collective against an unpatched kernel), or
                   // not reported but not decided either: a kernel behind it was not measured
                   // (a CUDA graph's kernel node; no launch of it measured in the confirming run)
};
const char* to_string(ConfirmOutcome o);  // "confirmed", "gone", "still possible"

struct Confirmation {
  Finding before;                // the default run's possible finding
  ConfirmOutcome outcome = ConfirmOutcome::kGone;
  std::optional<Finding> after;  // the confirming run's finding (confirmed, still possible)
  std::string reason;            // still possible: why precise mode could not decide
};

// One entry per `possible` finding of `first`, in its order. `patched`: the kernels the
// confirming run was told to measure (names as in findings), for the reason of a
// still-possible one. `measured`: the kernels with at least one measured launch in the
// confirming run (TraceSummary::measured_kernels), `measured_nodes` those with a measured
// kernel node of a graph launch (measured_graph_kernels); a finding the confirming run does not
// report is `gone` only when each kernel behind it was measured there as what it ran as (a
// launch, or a graph's kernel node).
std::vector<Confirmation> confirm_findings(const std::vector<Finding>& first, const std::vector<Finding>& second,
                                           const std::set<std::string>& patched, const std::set<std::string>& measured,
                                           const std::set<std::string>& measured_nodes = {});

// "3 possible findings confirmed in precise mode: 1 certain, 2 gone, 0 still possible".
std::string confirmation_summary(const std::vector<Confirmation>& c);

}  // namespace streamrace::analysis
