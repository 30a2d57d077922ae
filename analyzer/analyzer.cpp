// Analyzer: runs TraceAnalysis on each file and merges findings by fingerprint.
#include "analyzer/analyzer.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "analyzer/trace_analysis.h"
#include "traceformat/input_file.h"
#include "traceformat/trace_file.h"

namespace streamrace::analysis {

namespace fs = std::filesystem;

struct Analyzer::Impl {
  AnalyzerOptions opts;
  AnalysisResult result;
  std::map<std::string, size_t> by_fingerprint;
};

Analyzer::Analyzer(AnalyzerOptions opts) : impl_(std::make_unique<Impl>()) { impl_->opts = std::move(opts); }
Analyzer::~Analyzer() = default;

void Analyzer::add_trace(const std::string& path) {
  TraceAnalysis ta(path, impl_->opts);
  ta.run();
  auto& r = impl_->result;
  r.traces.push_back(ta.summary());
  r.records += ta.summary().records;
  r.accesses += ta.summary().accesses;
  r.unanalysed_graph_launches += ta.graph_launches();
  r.notices.insert(r.notices.end(), ta.notices().begin(), ta.notices().end());
  for (Finding& f : ta.findings()) {
    auto [it, inserted] = impl_->by_fingerprint.emplace(f.fingerprint, r.findings.size());
    if (inserted) {
      r.findings.push_back(std::move(f));
      continue;
    }
    Finding& m = r.findings[it->second];
    m.occurrences += f.occurrences;
    m.where.insert(m.where.end(), f.where.begin(), f.where.end());
    for (int rank : f.ranks)
      if (std::find(m.ranks.begin(), m.ranks.end(), rank) == m.ranks.end()) m.ranks.push_back(rank);
    std::sort(m.ranks.begin(), m.ranks.end());
  }
}

AnalysisResult Analyzer::finish() {
  AnalysisResult r = std::move(impl_->result);
  std::stable_sort(r.findings.begin(), r.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.confidence != b.confidence) return a.confidence == Confidence::kCertain;
    if (a.occurrences != b.occurrences) return a.occurrences > b.occurrences;
    return a.fingerprint < b.fingerprint;
  });
  impl_->result = AnalysisResult{};
  impl_->by_fingerprint.clear();
  return r;
}

bool is_trace_head(std::string_view head) {
  return head.size() >= sizeof trace::kFileMagic && head.compare(0, sizeof trace::kFileMagic, std::string_view(trace::kFileMagic, sizeof trace::kFileMagic)) == 0;
}

std::vector<std::string> expand_trace_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    std::error_code ec;
    auto st = fs::status(in, ec);
    if (ec || !fs::exists(st))
      throw trace::TraceError(in + ": " + trace::open_error_reason(ec ? ec.value() : ENOENT));
    if (fs::is_directory(st)) {
      std::vector<std::string> found;
      fs::directory_iterator it(in, ec), end;
      if (ec) throw trace::TraceError(in + ": cannot read directory: " + trace::open_error_reason(ec.value()));
      for (; it != end; it.increment(ec)) {
        if (ec) throw trace::TraceError(in + ": cannot read directory: " + trace::open_error_reason(ec.value()));
        // Every *.srace entry that is not a directory is a trace: the reader refuses a
        // dangling or looping link, a FIFO or a device with its own message.
        std::error_code type_ec;
        if (it->path().extension() == ".srace" && !it->is_directory(type_ec)) found.push_back(it->path().string());
      }
      if (found.empty()) throw trace::TraceError(in + ": directory holds no *.srace trace files");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(in);
    }
  }
  return out;
}

}  // namespace streamrace::analysis
