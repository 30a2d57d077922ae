// Suppression files for `check`, in the spirit of TSan's: one `type:glob` per line, `#`
// starts a comment. Types:
//   race:GLOB         a frame of either stack whose function, file or file name matches
//   kernel:GLOB       either access's operation (kernel, API, collective or ATen operator)
//   stream:GLOB       either access's stream label ("stream 0x1000 (non-blocking)") or handle
//                     ("0x1000" or decimal)
//   file:GLOB         a frame of either stack whose file or file name matches
//   fingerprint:GLOB  the finding's fingerprint
// Globs are fnmatch(3) patterns over the whole string (`*` also crosses `/`). The first
// matching line suppresses a finding and is credited with it.
#pragma once

#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyzer/finding.h"

namespace streamrace::report {

// A line that cannot be read; the message is "FILE:LINE: what is wrong".
class SuppressionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Suppression {
  std::string type;     // "race", "kernel", "stream", "file", "fingerprint"
  std::string pattern;
  std::string source;   // "FILE:LINE"
  uint64_t findings = 0;     // findings it suppressed
  uint64_t occurrences = 0;  // their occurrences
  std::string text() const { return type + ":" + pattern; }
};

class SuppressionList {
 public:
  static SuppressionList parse(std::istream& in, const std::string& name);
  // Throws SuppressionError naming the file when it cannot be read.
  static SuppressionList load(const std::string& path);

  // The first suppression matching `f`, credited with it; null when none matches.
  const Suppression* apply(const analysis::Finding& f);
  const std::vector<Suppression>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<Suppression> entries_;
};

}  // namespace streamrace::report
