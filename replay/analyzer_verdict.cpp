// The analyzer's verdict on replay traces (see analyzer_verdict.h).
#include "replay/analyzer_verdict.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "analyzer/analyzer.h"

namespace streamrace::replay {

namespace fs = std::filesystem;

namespace {

AnalyzerVerdict to_verdict(const std::vector<std::string>& paths, analysis::AnalysisResult&& r) {
  AnalyzerVerdict v;
  v.traces = paths;
  for (const auto& t : r.traces) v.records.push_back(t.records);
  for (auto& f : r.findings) {
    (f.confidence == analysis::Confidence::kCertain ? v.certain : v.possible)++;
    v.findings.push_back(std::move(f));
  }
  return v;
}

}  // namespace

analysis::AnalyzerOptions verdict_options() {
  analysis::AnalyzerOptions opts;
  opts.racing_pairs_kept = SIZE_MAX;  // every occurrence, for the fix edits (bounded by the accesses)
  return opts;
}

AnalyzerVerdict analyze_traces(const std::vector<std::string>& paths,
                               const std::function<trace::RecordObserver*(const std::string&)>& observe) {
  analysis::AnalyzerOptions opts = verdict_options();
  opts.observe_records = observe;
  analysis::Analyzer an(opts);
  an.add_traces(paths, 0);  // one thread per core, the same result as one after another
  return to_verdict(paths, an.finish());
}

AnalyzerVerdict verdict_of(const std::vector<std::string>& paths,
                           std::vector<std::optional<analysis::TraceOutcome>>&& analysed) {
  const analysis::AnalyzerOptions opts = verdict_options();
  analysed.resize(paths.size());
  std::vector<size_t> unread;
  for (size_t i = 0; i < paths.size(); ++i)
    if (!analysed[i]) unread.push_back(i);
  std::vector<std::exception_ptr> errors(paths.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < unread.size();) {
      const size_t i = unread[k];
      try {
        analysed[i] = analysis::Analyzer::analyse(paths[i], opts);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(unread.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  // The first unreadable trace in list order, as Analyzer::add_traces reports it.
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  analysis::Analyzer an(opts);
  for (auto& o : analysed) an.add_outcome(std::move(*o));
  return to_verdict(paths, an.finish());
}

AnalyzerVerdict analyze_schedules(const std::vector<Schedule>& ranks, const std::string& dir, const EmitOptions& opts) {
  fs::create_directories(dir);
  std::vector<std::string> paths;
  for (const auto& s : ranks) {
    std::string p = (fs::path(dir) / fmt::format("rank{}.srace", s.rank)).string();
    fs::remove(p);
    emit_trace(s, p, opts);
    paths.push_back(p);
  }
  return analyze_traces(paths);
}

std::set<std::string> fingerprints(const AnalyzerVerdict& v) {
  std::set<std::string> out;
  for (const auto& f : v.findings) out.insert(f.fingerprint);
  return out;
}

std::set<std::string> select_fix_targets(const AnalyzerVerdict& before, const std::vector<std::string>& requested) {
  const auto before_fps = fingerprints(before);
  if (requested.empty()) return before_fps;
  std::set<std::string> targets;
  for (const auto& fp : requested) {
    if (!before_fps.count(fp))
      throw std::invalid_argument(
          fmt::format("fingerprint {} is not among the {} finding(s) of the input", fp, before_fps.size()));
    targets.insert(fp);
  }
  return targets;
}

FixVerdict judge_fix(const AnalyzerVerdict& before, const AnalyzerVerdict& after, const std::set<std::string>& targets) {
  FixVerdict v;
  const auto before_fps = fingerprints(before), after_fps = fingerprints(after);
  v.targeted.assign(targets.begin(), targets.end());
  for (const auto& fp : targets) (after_fps.count(fp) ? v.remaining : v.removed).push_back(fp);
  for (const auto& fp : after_fps)
    if (!before_fps.count(fp)) v.introduced.push_back(fp);
  return v;
}

std::string summarize_finding(const analysis::Finding& f) {
  auto site = [](const analysis::Access& a) {
    if (a.stack.empty()) return a.op;
    return fmt::format("{}:{} ({})", fs::path(a.stack[0].file).filename().string(), a.stack[0].line, a.op);
  };
  return fmt::format("{} {} vs {}", analysis::short_name(f.kind), site(f.later), site(f.earlier));
}

}  // namespace streamrace::replay
