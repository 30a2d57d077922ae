// Analyzer-backed checks of schedules and fix application to recorded traces.
#include "replay/schedule_check.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "analyzer/analyzer.h"
#include "replay/trace_lifter.h"

namespace streamrace::replay {

namespace fs = std::filesystem;

AnalyzerVerdict analyze_traces(const std::vector<std::string>& paths) {
  analysis::Analyzer an;
  for (const auto& p : paths) an.add_trace(p);
  auto r = an.finish();
  AnalyzerVerdict v;
  v.traces = paths;
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

namespace {

std::set<std::string> fingerprints(const AnalyzerVerdict& v) {
  std::set<std::string> out;
  for (const auto& f : v.findings) out.insert(f.fingerprint);
  return out;
}

}  // namespace

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

namespace {

EmitOptions emit_options_for(const Schedule& s) {
  EmitOptions o;
  auto it = s.meta.find("source_mode");
  o.precise_kernels = it != s.meta.end() && it->second == "precise";
  return o;
}

}  // namespace

TraceFixResult apply_fixes_to_traces(const std::vector<std::string>& traces, const TraceFixOptions& opts) {
  TraceFixResult res;
  res.before = analyze_traces(traces);
  const auto before_fps = fingerprints(res.before);
  const std::set<std::string> targets = select_fix_targets(res.before, opts.fingerprints);
  res.targeted.assign(targets.begin(), targets.end());
  fs::create_directories(opts.out_dir);
  std::vector<std::string> edited_paths;
  for (size_t t = 0; t < traces.size(); ++t) {
    TraceFixResult::PerTrace pt;
    pt.source = traces[t];
    auto lifted = lift_trace(traces[t]);
    pt.warnings = lifted.warnings;
    pt.original = lifted.schedule;
    Schedule cur = lifted.schedule;
    const std::string stem = fs::path(traces[t]).stem().string();
    const std::string work = (fs::path(opts.out_dir) / (stem + ".work.srace")).string();
    const EmitOptions eo = emit_options_for(cur);
    // The analyzer suggests an edit for the first occurrence of each finding; apply it, write
    // the schedule back, and look again until no targeted finding is left in this trace.
    for (uint32_t round = 0;; ++round) {
      fs::remove(work);
      auto emitted = emit_trace(cur, work, eo);
      auto v = analyze_traces({work});
      std::vector<const analysis::Finding*> todo;
      for (const auto& f : v.findings)
        if (targets.count(f.fingerprint)) todo.push_back(&f);
      if (todo.empty()) break;
      if (round >= opts.max_rounds)
        throw std::runtime_error(fmt::format("{}: targeted findings remain after {} edits", traces[t], pt.edits));
      // Apply the edits from the last position backwards so earlier indices stay valid;
      // one edit per finding per round.
      struct Edit {
        size_t after, before;
        uint32_t rs, ws;
      };
      std::vector<Edit> edits;
      auto stream_of = [&](uint64_t handle) -> uint32_t {
        for (uint32_t i = 0; i < emitted.stream_handle.size(); ++i)
          if (emitted.stream_handle[i] == handle) return i;
        throw std::runtime_error(fmt::format("the analyzer named stream 0x{:x}, which the schedule does not have", handle));
      };
      for (const auto* f : todo) {
        auto a = emitted.action_of_seq.find(f->fix_edit.after_seq);
        auto b = emitted.action_of_seq.find(f->fix_edit.before_seq);
        if (a == emitted.action_of_seq.end() || b == emitted.action_of_seq.end())
          throw std::runtime_error(fmt::format("finding {}: its fix names calls {} and {} that are not operations",
                                               f->fingerprint, f->fix_edit.after_seq, f->fix_edit.before_seq));
        edits.push_back(Edit{a->second, b->second, stream_of(f->fix_edit.record_stream), stream_of(f->fix_edit.wait_stream)});
      }
      std::sort(edits.begin(), edits.end(), [](const Edit& x, const Edit& y) { return x.before > y.before; });
      // Keep only edits whose positions do not interleave with an already chosen one.
      size_t low = cur.actions.size();
      for (const auto& e : edits) {
        if (e.before > low) continue;
        insert_fix(cur, e.after, e.rs, e.before, e.ws, fmt::format("streamrace_fix[{}]", pt.edits++));
        low = e.after;
      }
    }
    fs::remove(work);
    pt.edited = (fs::path(opts.out_dir) / (stem + ".fixed.srace")).string();
    fs::remove(pt.edited);
    emit_trace(cur, pt.edited, eo);
    pt.fixed = std::move(cur);
    edited_paths.push_back(pt.edited);
    res.traces.push_back(std::move(pt));
  }
  res.after = analyze_traces(edited_paths);
  const auto after_fps = fingerprints(res.after);
  for (const auto& fp : targets) (after_fps.count(fp) ? res.remaining : res.removed).push_back(fp);
  for (const auto& fp : after_fps)
    if (!before_fps.count(fp)) res.introduced.push_back(fp);
  return res;
}

}  // namespace streamrace::replay
