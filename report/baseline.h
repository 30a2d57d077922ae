// Baseline files for `check --baseline`: the findings a project has accepted for now, by
// fingerprint. JSON, sorted by fingerprint so that updates diff well in review:
//   {"schema": "streamrace-baseline", "version": 1,
//    "findings": [{"fingerprint": "...", "rule": "SR1001", "summary": "..."}]}
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "report/output_file.h"

namespace streamrace::report {

// The file cannot be read or is not a baseline; the message names the file.
class BaselineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::set<std::string> read_baseline(const std::string& path);
// Replaces `path` with the given findings (fixed ones drop out of the baseline), through
// write_output_file (a symlinked path is refused unless `opts` follow it; OutputError).
void write_baseline(const std::string& path, const std::vector<analysis::Finding>& findings,
                    const OutputOptions& opts = {});

}  // namespace streamrace::report
