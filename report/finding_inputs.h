// The inputs `check` and `explain` accept, read into one merged AnalysisResult: trace files
// and directories (analysed), streamrace findings documents (JSON), and PyTorch
// CUDA-sanitizer logs. Each file's kind is told from its content, not its name.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/finding.h"

namespace streamrace::report {

// Bad input; the message names the file and says what is wrong with it.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class InputKind { kTrace, kFindingsJson, kCsanLog };

struct LoadedFindings {
  analysis::AnalysisResult result;       // findings merged by fingerprint and sorted
  std::vector<std::string> trace_paths;  // the traces analysed (for timelines)
};

struct LoadOptions {
  analysis::AnalyzerOptions analyzer;  // its progress callback is set by load_findings
  bool progress = true;                // a meter on stderr when it is a terminal
  bool force_progress = false;         // --progress: the meter from the start, terminal or not
  unsigned jobs = 0;                   // traces analysed in parallel (0 = one per core)
};

// Which kind of input `path` (a regular file) holds. Throws InputError for anything else.
InputKind classify_input(const std::string& path);

// Reads one streamrace findings document (the JSON report, "streamrace-findings" schema).
// Throws InputError naming the file: unreadable, not JSON, another schema, a finding without
// a fingerprint.
analysis::AnalysisResult read_findings_document(const std::string& path);

LoadedFindings load_findings(const std::vector<std::string>& inputs, const LoadOptions& opts = {});

}  // namespace streamrace::report
