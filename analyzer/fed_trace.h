// FedTrace: one trace analysed from its chunks as they are written, not read back from the
// file. `replay trace --apply-fix` checks its edited traces this way: the editor hands each
// chunk it writes (the uncompressed payload the writer compresses) to the analysis, so the
// edited files are not decompressed, checksummed and decoded again, and the analysis still
// sees exactly the records the file holds, through the same CallStream checks and order.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "analyzer/analyzer.h"
#include "traceformat/call_stream.h"
#include "traceformat/trace_file.h"

namespace streamrace::analysis {

class TraceAnalysis;

class FedTrace {
 public:
  // Whether a trace with this header can be analysed from its chunks: a precise-mode trace
  // cannot (its pre-pass reads every chunk before the main pass does).
  static bool supports(const trace::TraceHeader& header) { return header.mode != "precise"; }

  // The analysis of the trace file `path` being written with `header` (std::invalid_argument
  // unless supports(header)). `opts` as for Analyzer; observe_records and progress are not used.
  FedTrace(const std::string& path, const trace::TraceHeader& header, const AnalyzerOptions& opts);
  ~FedTrace();
  FedTrace(FedTrace&&) noexcept;
  FedTrace& operator=(FedTrace&&) noexcept;

  // The next chunk written: its offset in the file, payload and record count, as
  // TraceWriter::write_chunk writes them. Throws trace::TraceError as reading the file would.
  void chunk(uint64_t offset, std::span<const uint8_t> payload, uint32_t records);
  // The same for a payload in pieces (consecutive runs of whole records).
  void chunk(uint64_t offset, std::span<const std::span<const uint8_t>> payload, uint32_t records);
  // Once the file is closed (its end-of-trace marker written) and `file_bytes` long: the
  // outcome Analyzer::analyse(path) gives for that file.
  TraceOutcome finish(uint64_t file_bytes);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace streamrace::analysis
