// Merging findings from several sources (traces, findings documents, sanitizer logs):
// the same fingerprint is the same finding, whichever rank, step or log it came from.
#pragma once

#include <vector>

#include "analyzer/finding.h"

namespace streamrace::report {

// Adds `more` to `into`: a finding whose fingerprint is already there adds its occurrences,
// ranks and places (`where`) to that one; others are appended.
void merge_findings(std::vector<analysis::Finding>& into, const std::vector<analysis::Finding>& more);

// The report order: certain before possible, then more occurrences first, then fingerprint.
void sort_findings(std::vector<analysis::Finding>& findings);

}  // namespace streamrace::report
