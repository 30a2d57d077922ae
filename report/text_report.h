// The TSan-style text report: one block per finding, then a summary line.
#pragma once

#include <ostream>

#include "analyzer/finding.h"

namespace streamrace::report {

struct TextOptions {
  bool color = false;          // ANSI colour (the CLI turns it on for terminals only)
  size_t max_frames = 8;       // frames shown per stack
  size_t left_out_baselined = 0;  // findings not shown because a baseline accepts them
  size_t print_limit = 0;      // findings printed at most (0: all); the rest are counted in one line
};

void write_text(std::ostream& out, const analysis::AnalysisResult& result, const TextOptions& opts = {});
// "streamrace: 1 race (1 certain, 0 possible) in 2 traces, 1 occurrence" and the like.
// With `left_out_baselined`: "streamrace: no new races in 2 traces (2 baselined findings not
// shown)", or the count added to the usual line.
std::string summary_line(const analysis::AnalysisResult& result, size_t left_out_baselined = 0);

}  // namespace streamrace::report
