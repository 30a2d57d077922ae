// The SUMMARY line: see closing_summary.h.
#include "report/closing_summary.h"

#include <fmt/format.h>

namespace streamrace::report {

std::string closing_summary(const analysis::AnalysisResult& r, const SummaryCounts& counts) {
  size_t certain = 0;
  for (const auto& f : r.findings) certain += f.confidence == analysis::Confidence::kCertain;
  const size_t n = r.findings.size(), traces = r.traces.size();
  std::string s = fmt::format("SUMMARY: streamrace: {} race{} ({} certain, {} possible) in {} trace{}", n,
                              n == 1 ? "" : "s", certain, n - certain, traces, traces == 1 ? "" : "s");
  if (counts.baselined) s += fmt::format("; {} baselined", counts.baselined);
  if (counts.suppressed) s += fmt::format("; {} suppressed", counts.suppressed);
  if (size_t blind = r.blind_traces())
    s += fmt::format("; no verdict: {} trace{} captured no CUDA calls", blind, blind == 1 ? "" : "s");
  if (size_t windowed = r.windowed_traces())
    s += fmt::format("; {} trace{} recorded in part (a capture window or ring): the verdict covers what was recorded",
                     windowed, windowed == 1 ? "" : "s");
  if (r.unanalysed_graph_launches != 0)
    s += fmt::format("; partial: {} CUDA graph launch{} not analysed", r.unanalysed_graph_launches,
                     r.unanalysed_graph_launches == 1 ? "" : "es");
  if (uint64_t dropped = r.dropped_records())
    s += fmt::format("; partial: the tracer dropped {} record{}", dropped, dropped == 1 ? "" : "s");
  if (size_t cut = r.cut_short_traces())
    s += fmt::format("; partial: {} trace{} cut short (no end-of-trace marker)", cut, cut == 1 ? "" : "s");
  if (uint64_t missing = r.missing_records())
    s += fmt::format("; partial: {} call record{} missing", missing, missing == 1 ? "" : "s");
  return s;
}

}  // namespace streamrace::report
