// Analyzer: runs TraceAnalysis on each file and merges findings by fingerprint.
#include "analyzer/analyzer.h"

#include <algorithm>
#include <filesystem>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "analyzer/trace_analysis.h"
#include "traceformat/input_file.h"
#include "traceformat/trace_file.h"

namespace streamrace::analysis {

namespace fs = std::filesystem;

struct Analyzer::Impl {
  AnalyzerOptions opts;
  AnalysisResult result;
  std::map<std::string, size_t> by_fingerprint;
  SignatureBook learned;
};

Analyzer::Analyzer(AnalyzerOptions opts) : impl_(std::make_unique<Impl>()) { impl_->opts = std::move(opts); }
Analyzer::~Analyzer() = default;

void Analyzer::add_trace(const std::string& path) { merge(analyze_one(path, impl_->opts, 1)); }

TraceOutcome Analyzer::analyse(const std::string& path, const AnalyzerOptions& opts) {
  return analyze_one(path, opts, 1);
}

void Analyzer::add_outcome(TraceOutcome&& o) { merge(std::move(o)); }

void Analyzer::add_traces(const std::vector<std::string>& paths, unsigned jobs,
                          const std::function<void(size_t)>& done) {
  if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
  // Threads left over when there are fewer traces than jobs go to splitting the traces.
  const unsigned per_trace = paths.empty() ? 1u : unsigned(std::max<size_t>(1, jobs / paths.size()));
  jobs = unsigned(std::min<size_t>(jobs, paths.size()));
  if (jobs <= 1) {
    for (size_t i = 0; i < paths.size(); ++i) {
      merge(analyze_one(paths[i], impl_->opts, per_trace));
      if (done) done(i);
    }
    return;
  }
  AnalyzerOptions opts = impl_->opts;
  opts.progress = nullptr;  // per-chunk progress from several threads would interleave
  std::vector<std::optional<TraceOutcome>> outcomes(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());
  std::atomic<size_t> next{0};
  std::mutex done_mu;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
      try {
        outcomes[i] = analyze_one(paths[i], opts, per_trace);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      if (done) {
        std::lock_guard lock(done_mu);
        done(i);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < jobs; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < paths.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    merge(std::move(*outcomes[i]));
  }
}

TraceOutcome Analyzer::analyze_one(const std::string& path, const AnalyzerOptions& opts, unsigned workers) {
  if (workers > 1) {
    std::error_code ec;
    const uint64_t bytes = fs::file_size(path, ec);
    if (!ec && bytes >= opts.split_min_bytes) return analyze_split(path, opts, workers);
  }
  TraceAnalysis ta(path, opts);
  ta.run();
  return TraceOutcome{ta.summary(), ta.graph_launches(), ta.notices(), ta.take_findings(), ta.learned_signatures()};
}

TraceOutcome Analyzer::analyze_split(const std::string& path, const AnalyzerOptions& opts, unsigned workers) {
  // Every worker reads the whole trace and replays its happens-before state; each checks
  // the accesses of its own allocations. Worker 0 reports progress, notices and the summary
  // (the same in all), and gathers the findings.
  AnalyzerOptions quiet = opts;
  quiet.progress = nullptr;
  std::vector<std::unique_ptr<TraceAnalysis>> parts;
  for (unsigned w = 0; w < workers; ++w)
    parts.push_back(
        std::make_unique<TraceAnalysis>(path, w == 0 ? opts : quiet, ShadowShard{w, workers, opts.split_region_shift}));
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      try {
        parts[w]->run();
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  for (auto& t : pool) t.join();
  // Every worker meets the same records, so all fail alike; worker 0's error stands for all.
  if (errors[0]) {
    try {
      std::rethrow_exception(errors[0]);
    } catch (const ShardSplitUnsupported&) {
      parts.clear();
      return analyze_one(path, opts, 1);
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<const TraceAnalysis*> all;
  for (const auto& p : parts) all.push_back(p.get());
  parts[0]->merge_workers(all);
  return TraceOutcome{parts[0]->summary(), parts[0]->graph_launches(), parts[0]->notices(), parts[0]->take_findings(),
                 parts[0]->learned_signatures()};
}

void Analyzer::merge(TraceOutcome&& o) {
  auto& r = impl_->result;
  r.records += o.summary.records;
  r.accesses += o.summary.accesses;
  r.traces.push_back(std::move(o.summary));
  r.unanalysed_graph_launches += o.graph_launches;
  r.notices.insert(r.notices.end(), std::make_move_iterator(o.notices.begin()), std::make_move_iterator(o.notices.end()));
  merge_findings(std::move(o.findings));
  impl_->learned.merge(o.learned);
}

const SignatureBook& Analyzer::learned_signatures() const { return impl_->learned; }

void Analyzer::add_result(AnalysisResult&& more) {
  auto& r = impl_->result;
  r.records += more.records;
  r.accesses += more.accesses;
  r.traces.insert(r.traces.end(), std::make_move_iterator(more.traces.begin()), std::make_move_iterator(more.traces.end()));
  r.unanalysed_graph_launches += more.unanalysed_graph_launches;
  r.notices.insert(r.notices.end(), std::make_move_iterator(more.notices.begin()), std::make_move_iterator(more.notices.end()));
  merge_findings(std::move(more.findings));
}

void Analyzer::merge_findings(std::vector<Finding>&& findings) {
  auto& r = impl_->result;
  for (Finding& f : findings) {
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
      // The directory and its subdirectories (a job's run directory holds one per launch or
      // node), links to directories included; each directory is read once, so a link loop
      // ends.
      std::vector<std::string> found;
      std::set<fs::path> seen;
      std::vector<fs::path> todo = {fs::path(in)};
      while (!todo.empty()) {
        fs::path d = todo.back();
        todo.pop_back();
        std::error_code canon_ec;
        fs::path key = fs::canonical(d, canon_ec);
        if (canon_ec || !seen.insert(key).second) continue;
        fs::directory_iterator it(d, ec), end;
        if (ec) throw trace::TraceError(d.string() + ": cannot read directory: " + trace::open_error_reason(ec.value()));
        for (; it != end; it.increment(ec)) {
          if (ec) throw trace::TraceError(d.string() + ": cannot read directory: " + trace::open_error_reason(ec.value()));
          std::error_code type_ec;
          const bool is_dir = it->is_directory(type_ec);
          // Every *.srace entry that is not a directory is a trace: the reader refuses a
          // dangling or looping link, a FIFO or a device with its own message.
          if (is_dir)
            todo.push_back(it->path());
          else if (it->path().extension() == ".srace")
            found.push_back(it->path().string());
        }
      }
      if (found.empty())
        throw trace::TraceError(in + ": directory holds no *.srace trace files (its subdirectories included)");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(in);
    }
  }
  return out;
}

std::vector<std::string> shard_of(const std::vector<std::string>& paths, uint32_t index, uint32_t count) {
  if (count == 0 || index >= count) return {};
  const size_t n = paths.size();
  const size_t lo = size_t(uint64_t(index) * n / count), hi = size_t(uint64_t(index + 1) * n / count);
  return std::vector<std::string>(paths.begin() + lo, paths.begin() + hi);
}

}  // namespace streamrace::analysis
