// `streamrace explain FINGERPRINT INPUTS...`: the whole story of one finding: both accesses
// with full stacks, the missing edge, the fix, every occurrence (trace, rank, how often, at
// which calls) and, from traces, the ops of the racing region with their event edges.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "report/finding_class.h"
#include "report/finding_inputs.h"
#include "analyzer/timeline.h"
#include "traceformat/call_stream.h"

namespace streamrace::cli {
namespace {

struct ExplainArgs {
  std::string fingerprint;
  std::vector<std::string> inputs;
  std::string format = "text";
  bool json = false;  // --json: the older spelling of --format json
};

void print_access(std::ostream& out, const char* which, const analysis::Access& a) {
  out << fmt::format("{} access: {} ({}) on {}\n", which, a.op, a.op_kind, a.stream_label);
  out << fmt::format("  {}{} {} bytes at {:#x}", a.direction, a.exact ? "" : " (approximate)", a.bytes, a.addr);
  if (a.alloc_bytes) out << fmt::format(", in {} allocation {:#x} + {}", a.alloc_kind, a.alloc_base, a.alloc_bytes);
  out << fmt::format("; call #{} on host thread {}\n", a.seq, a.thread);
  if (a.stack.empty()) out << "  (no stack recorded)\n";
  for (size_t i = 0; i < a.stack.size(); ++i) {
    const auto& f = a.stack[i];
    out << fmt::format("  #{:<2} {} {}", i, f.function.empty() ? "??" : f.function, f.file);
    if (f.line) out << ":" << f.line;
    if (!f.python && f.pc) out << fmt::format(" +{:#x}", f.pc);
    out << "\n";
  }
}

// The ops of the racing region in the finding's first trace: both streams, from a few ops
// before the earlier access to a few after the later one.
void print_region(std::ostream& out, const analysis::Finding& f, const analysis::Timeline& tl) {
  if (f.where.empty()) return;
  const auto* a = tl.find(f.where.front().trace, f.earlier.seq);
  const auto* b = tl.find(f.where.front().trace, f.later.seq);
  if (!a || !b) return;
  std::vector<const analysis::TimelineOp*> ops;
  for (const auto& op : tl.ops)
    if (op.trace == a->trace && (op.stream == a->stream || op.stream == b->stream)) ops.push_back(&op);
  size_t first = 0, last = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i] == a) first = i;
    if (ops[i] == b) last = i;
  }
  first = first >= 3 ? first - 3 : 0;
  last = std::min(ops.size() - 1, last + 3);
  out << fmt::format("\nRacing region in {} ({} ops on the two streams):\n", a->trace, last - first + 1);
  constexpr size_t kShown = 40;  // long regions: the first and last 20 ops
  for (size_t i = first; i <= last; ++i) {
    if (last - first + 1 > kShown && i == first + kShown / 2) {
      size_t skip = last - first + 1 - kShown;
      out << fmt::format("  ... {} ops not shown ...\n", skip);
      i += skip - 1;
      continue;
    }
    const auto* op = ops[i];
    const char* mark = op == a ? "  <- earlier access" : op == b ? "  <- later access" : "";
    out << fmt::format("  #{:<8} {:<40} {}{}\n", op->seq, op->stream_label, op->name, mark);
    for (const auto& fl : tl.flows)
      if (fl.trace == op->trace && fl.to_seq == op->seq)
        out << fmt::format("  {:9} (waits for {} after call #{})\n", "", fl.label, fl.from_seq);
  }
}

int run_explain(const ExplainArgs& a) {
  if (a.format != "text" && a.format != "json") {
    std::cerr << "streamrace explain: unknown format '" << a.format << "' (text or json)\n";
    return kExitBadInput;
  }
  report::LoadedFindings loaded;
  try {
    loaded = report::load_findings(a.inputs);
  } catch (const report::InputError& e) {
    std::cerr << "streamrace explain: error: " << e.what() << "\n";
    return kExitBadInput;
  }
  std::vector<const analysis::Finding*> hits;
  for (const auto& f : loaded.result.findings)
    if (f.fingerprint.compare(0, a.fingerprint.size(), a.fingerprint) == 0) hits.push_back(&f);
  if (hits.empty()) {
    std::cerr << fmt::format("streamrace explain: error: no finding with fingerprint {} in these inputs ({} found",
                             a.fingerprint, loaded.result.findings.size());
    for (size_t i = 0; i < loaded.result.findings.size() && i < 10; ++i)
      std::cerr << (i ? ", " : ": ") << loaded.result.findings[i].fingerprint;
    std::cerr << ")\n";
    return kExitBadInput;
  }
  if (hits.size() > 1) {
    std::cerr << "streamrace explain: error: fingerprint prefix " << a.fingerprint << " is ambiguous:";
    for (const auto* f : hits) std::cerr << " " << f->fingerprint;
    std::cerr << "\n";
    return kExitBadInput;
  }
  const auto& f = *hits.front();
  if (a.json || a.format == "json") {
    nlohmann::json j = f;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kExitClean;
  }
  auto& out = std::cout;
  const auto& cls = report::finding_class(f);
  out << fmt::format("Finding {}: {} {} ({}, {} mode)\n", f.fingerprint, cls.rule_id, cls.title,
                     analysis::to_string(f.confidence), f.mode);
  out << report::headline(f) << "\n\n";
  print_access(out, "Later", f.later);
  out << "\n";
  print_access(out, "Earlier", f.earlier);
  out << fmt::format("\nOverlap: {} bytes at {:#x}\n", f.overlap_bytes, f.overlap_addr);
  if (!f.missing_edge.empty()) out << "Missing edge: " << f.missing_edge << "\n";
  if (!f.fix.empty()) out << "Fix: " << f.fix << "\n";
  if (f.fix_edit.record_stream || f.fix_edit.wait_stream) {
    // Streams by the name the accesses give them (never the raw legacy-stream handle).
    auto name = [&](uint64_t s) {
      for (const analysis::Access* a : {&f.earlier, &f.later})
        if (a->stream == s && !a->stream_label.empty()) return a->stream_label;
      return trace::stream_label(s, {});
    };
    out << fmt::format("Fix edit: record an event on {} after call #{}; make {} wait on it before call #{}\n",
                       name(f.fix_edit.record_stream), f.fix_edit.after_seq, name(f.fix_edit.wait_stream),
                       f.fix_edit.before_seq);
  }
  std::string ranks;
  for (int r : f.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  out << fmt::format("\nOccurrences: {} in all{}\n", f.occurrences, ranks.empty() ? "" : "; ranks " + ranks);
  for (const auto& w : f.where)
    out << fmt::format("  {}  rank {}: {} time{}, calls #{}..#{}\n", w.trace, w.rank, w.count, w.count == 1 ? "" : "s",
                       w.first_seq, w.last_seq);
  if (!loaded.trace_paths.empty()) {
    try {
      print_region(out, f, analysis::build_timeline(loaded.trace_paths));
    } catch (const std::exception& e) {
      std::cerr << "streamrace explain: error: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  return kExitClean;
}

RegisterCommand reg("explain", 40, [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<ExplainArgs>();
  auto* sub = app.add_subcommand("explain", "Tell the whole story of one finding, by fingerprint (a unique prefix will do)");
  sub->add_option("fingerprint", args->fingerprint, "The finding's fingerprint (16 hex digits) or a unique prefix")->required();
  sub->add_option("inputs", args->inputs, "Trace files or directories, findings JSON documents, CUDA-sanitizer logs")
      ->required();
  sub->add_option("-f,--format", args->format, "text or json")->capture_default_str();
  sub->add_flag("--json", args->json, "Print the finding as JSON (same as --format json)");
  return [args]() { return run_explain(*args); };
});

}  // namespace
}  // namespace streamrace::cli
