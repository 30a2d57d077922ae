// The analyzer's verdict on replay traces (see analyzer_verdict.h).
#include "replay/analyzer_verdict.h"

#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "analyzer/analyzer.h"

namespace streamrace::replay {

namespace fs = std::filesystem;

AnalyzerVerdict analyze_traces(const std::vector<std::string>& paths,
                               const std::function<trace::RecordObserver*(const std::string&)>& observe) {
  analysis::AnalyzerOptions opts;
  opts.racing_pairs_kept = SIZE_MAX;  // every occurrence, for the fix edits (bounded by the accesses)
  opts.observe_records = observe;
  analysis::Analyzer an(opts);
  an.add_traces(paths, 0);  // one thread per core, the same result as one after another
  auto r = an.finish();
  AnalyzerVerdict v;
  v.traces = paths;
  for (const auto& t : r.traces) v.records.push_back(t.records);
  for (auto& f : r.findings) {
    (f.confidence == analysis::Confidence::kCertain ? v.certain : v.possible)++;
    v.findings.push_back(std::move(f));
  }
  return v;
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
