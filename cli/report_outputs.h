// The report outputs of `analyze` and `merge`: -f/--format NAME or NAME=FILE (repeatable) and
// -o FILE for a single format, parsed and written the same way for both commands.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "analyzer/finding.h"
#include "report/formats.h"

namespace streamrace::cli {

struct ReportOutput {
  std::string format;
  std::string file;  // empty or "-": stdout
};

struct ReportOutputArgs {
  std::vector<std::string> formats;  // --format specs; empty: text
  std::string output;                // -o
  bool no_color = false;
  bool force_output = false;         // write through a symbolic link
};

// Parses the specs; on a bad one prints "streamrace COMMAND: ..." to stderr and returns false.
bool parse_report_outputs(const std::string& command, const ReportOutputArgs& args, std::vector<ReportOutput>& outs);

// Writes every output (text ends with the closing summary line); when none went to stdout the
// summary line goes to stderr. Returns false, having said why, when a file cannot be written.
bool write_report_outputs(const std::string& command, const std::vector<ReportOutput>& outs,
                          const ReportOutputArgs& args, const analysis::AnalysisResult& result,
                          report::ReportOptions ro);

}  // namespace streamrace::cli
