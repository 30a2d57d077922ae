// Reading check/explain inputs of every kind and merging their findings.
#include "report/finding_inputs.h"

#include <filesystem>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <nlohmann/json.hpp>

#include "report/csan_log.h"
#include "report/finding_merge.h"
#include "report/progress_meter.h"

namespace streamrace::report {

namespace fs = std::filesystem;

namespace {

std::string read_head(const std::string& path, size_t n) {
  uint64_t size = 0;
  int fd = -1;
  try {
    fd = analysis::open_input_file(path, size);
  } catch (const analysis::InputFileError& e) {
    throw InputError(e.what());
  }
  std::string head(std::min<uint64_t>(n, size), '\0');
  size_t got = 0;
  while (got < head.size()) {
    ssize_t r = ::read(fd, head.data() + got, head.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  ::close(fd);
  head.resize(got);
  return head;
}

std::string read_text(const std::string& path) {
  try {
    return analysis::read_input_file(path);
  } catch (const analysis::InputFileError& e) {
    throw InputError(e.what());
  }
}

void add_result(analysis::AnalysisResult& into, analysis::AnalysisResult&& more) {
  merge_findings(into.findings, more.findings);
  into.notices.insert(into.notices.end(), more.notices.begin(), more.notices.end());
  into.traces.insert(into.traces.end(), more.traces.begin(), more.traces.end());
  into.records += more.records;
  into.accesses += more.accesses;
  into.unanalysed_graph_launches += more.unanalysed_graph_launches;
}

}  // namespace

analysis::AnalysisResult read_findings_document(const std::string& path) {
  std::string text = read_text(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON: " + e.what());
  }
  try {
    auto r = analysis::result_from_json(j);
    for (auto& f : r.findings)
      if (f.fingerprint.empty()) throw std::runtime_error("a finding has no fingerprint");
    return r;
  } catch (const std::exception& e) {
    throw InputError(path + ": " + e.what());
  }
}

namespace {

bool mentions_sanitizer(const std::string& text) {
  for (const char* mark : {"CSAN detected", "TORCH_CUDA_SANITIZER", "CUDA sanitizer", "torch/cuda/_sanitizer.py"})
    if (text.find(mark) != std::string::npos) return true;
  return false;
}

analysis::AnalysisResult read_csan(const std::string& path) {
  std::string text = read_text(path);
  std::istringstream in(text);
  CsanLog log;
  try {
    log = read_csan_log(in, path);
  } catch (const CsanLogError& e) {
    throw InputError(e.what());
  }
  analysis::AnalysisResult r;
  merge_findings(r.findings, log.findings);
  r.notices = std::move(log.notices);
  // A log without a report is a clean run only if it shows the sanitizer ran; any other text
  // is an input of unknown kind, never a pass.
  if (log.reports == 0 && !mentions_sanitizer(text))
    throw InputError(path + ": not a streamrace trace, findings JSON or CUDA-sanitizer log (no CSAN report, and no "
                            "line showing the CUDA sanitizer ran: TORCH_CUDA_SANITIZER, \"CUDA sanitizer\" or "
                            "torch/cuda/_sanitizer.py)");
  if (log.reports == 0)
    r.notices.push_back(analysis::Notice{"info", path, "no CUDA-sanitizer race report in this log (a clean run)"});
  return r;
}

}  // namespace

InputKind classify_input(const std::string& path) {
  std::string head = read_head(path, 64 * 1024);
  if (analysis::is_trace_head(head)) return InputKind::kTrace;
  auto first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') return InputKind::kFindingsJson;
  if (head.find('\0') != std::string::npos)
    throw InputError(path + ": not a streamrace trace, findings JSON or CUDA-sanitizer log (binary data)");
  if (head.empty()) throw InputError(path + ": empty file (expected a trace, findings JSON or CUDA-sanitizer log)");
  return InputKind::kCsanLog;
}

LoadedFindings load_findings(const std::vector<std::string>& inputs, const LoadOptions& opts) {
  LoadedFindings out;
  std::vector<std::string> json_docs, csan_logs;
  for (const auto& in : inputs) {
    std::error_code ec;
    auto st = fs::status(in, ec);
    if (ec || !fs::exists(st)) throw InputError(in + ": " + analysis::open_error_reason(ec ? ec.value() : ENOENT));
    if (fs::is_directory(st)) {
      try {
        for (auto& p : analysis::expand_trace_inputs({in})) out.trace_paths.push_back(p);
      } catch (const analysis::TraceInputError& e) {
        throw InputError(e.what());
      }
      continue;
    }
    switch (classify_input(in)) {
      case InputKind::kTrace: out.trace_paths.push_back(in); break;
      case InputKind::kFindingsJson: json_docs.push_back(in); break;
      case InputKind::kCsanLog: csan_logs.push_back(in); break;
    }
  }

  if (!out.trace_paths.empty()) {
    uint64_t total = 0;
    for (const auto& p : out.trace_paths) {
      std::error_code ec;
      auto size = fs::file_size(p, ec);
      total += ec ? 0 : size;
    }
    ProgressMeter meter("analysing traces", total);
    if (opts.force_progress) meter.request();
    uint64_t base = 0;
    auto aopts = opts.analyzer;
    // The analyzer reports bytes of the trace it is reading; add the traces already done.
    aopts.progress = [&](uint64_t done, uint64_t) {
      if (opts.progress) meter.update(base + done);
    };
    try {
      analysis::Analyzer analyzer(aopts);
      analyzer.add_traces(out.trace_paths, opts.jobs, [&](size_t i) {
        std::error_code ec;
        auto size = fs::file_size(out.trace_paths[i], ec);
        base += ec ? 0 : size;
        if (opts.progress) meter.update(base);
      });
      meter.finish();
      add_result(out.result, analyzer.finish());
    } catch (const analysis::TraceInputError& e) {
      meter.finish();
      throw InputError(e.what());
    }
  }
  for (const auto& p : json_docs) add_result(out.result, read_findings_document(p));
  for (const auto& p : csan_logs) add_result(out.result, read_csan(p));
  sort_findings(out.result.findings);
  return out;
}

}  // namespace streamrace::report
