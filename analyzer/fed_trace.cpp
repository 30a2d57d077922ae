// FedTrace: a TraceAnalysis driven by a handed-in CallStream (see fed_trace.h).
#include "analyzer/fed_trace.h"

#include <stdexcept>

#include <fmt/format.h>

#include "analyzer/trace_analysis.h"

namespace streamrace::analysis {

struct FedTrace::State {
  State(const std::string& path, const trace::TraceHeader& header, const AnalyzerOptions& opts)
      : stream(path, header), analysis(path, opts) {}
  trace::CallStream stream;
  TraceAnalysis analysis;
  // Called by the stream for every record it hands out, in order.
  void deliver(const trace::RecordView& r) {
    try {
      analysis.record(r);
    } catch (const StreamLimitError& e) {
      // As TraceAnalysis::run words it.
      throw trace::TraceError(fmt::format("{}: chunk at offset {}: {}", stream.path(), stream.chunk_offset(), e.what()));
    }
  }
};

namespace {

AnalyzerOptions fed_options(AnalyzerOptions opts) {
  opts.observe_records = nullptr;
  opts.progress = nullptr;
  return opts;
}

}  // namespace

FedTrace::FedTrace(const std::string& path, const trace::TraceHeader& header, const AnalyzerOptions& opts) {
  if (!supports(header))
    throw std::invalid_argument(path + ": a precise-mode trace is analysed from its file, not from its chunks");
  state_ = std::make_unique<State>(path, header, fed_options(opts));
  state_->analysis.begin(state_->stream);
}

FedTrace::~FedTrace() = default;
FedTrace::FedTrace(FedTrace&&) noexcept = default;
FedTrace& FedTrace::operator=(FedTrace&&) noexcept = default;

void FedTrace::chunk(uint64_t offset, std::span<const uint8_t> payload, uint32_t records) {
  state_->stream.feed_chunk(offset, payload, records, [this](const trace::RecordView& r) { state_->deliver(r); });
}

void FedTrace::chunk(uint64_t offset, std::span<const std::span<const uint8_t>> payload, uint32_t records) {
  state_->stream.feed_chunk(offset, payload, records, [this](const trace::RecordView& r) { state_->deliver(r); });
}

TraceOutcome FedTrace::finish(uint64_t file_bytes) {
  State& s = *state_;
  s.stream.feed_end(file_bytes, [&s](const trace::RecordView& r) { s.deliver(r); });
  s.analysis.end(s.stream);
  TraceOutcome o{s.analysis.summary(), s.analysis.graph_launches(), s.analysis.notices(), s.analysis.take_findings(),
                 s.analysis.learned_signatures()};
  state_.reset();
  return o;
}

}  // namespace streamrace::analysis
