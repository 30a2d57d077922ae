// The TSan-style text report: one block per finding, then a summary line.
#pragma once

#include <ostream>

#include "analyzer/finding.h"

namespace streamrace::report {

struct TextOptions {
  bool color = false;          // ANSI colour (the CLI turns it on for terminals only)
  size_t max_frames = 8;       // frames shown per stack
};

void write_text(std::ostream& out, const analysis::AnalysisResult& result, const TextOptions& opts = {});
// "streamrace: 1 race (1 certain, 0 possible) in 2 traces, 1 occurrence" and the like.
std::string summary_line(const analysis::AnalysisResult& result);

}  // namespace streamrace::report
