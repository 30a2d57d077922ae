// The TSan-style text report.
#include "report/text_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <string_view>
#include <vector>

namespace streamrace::report {

using namespace streamrace::analysis;

namespace {

struct Palette {
  const char* bold = "";
  const char* red = "";
  const char* yellow = "";
  const char* blue = "";
  const char* reset = "";
};

// Text from a trace (kernel names, paths, functions, notices) may hold control characters:
// a terminal would act on escape sequences in them. Every such byte is shown as \xNN.
std::string safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out;
}

std::string capitalize(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = char(s[0] - 'a' + 'A');
  return s;
}

void write_stack(std::ostream& out, const std::vector<Frame>& stack, size_t max_frames) {
  if (stack.empty()) {
    out << "    (no stack recorded)\n";
    return;
  }
  size_t n = 0;
  for (const Frame& f : stack) {
    if (n == max_frames) {
      out << fmt::format("    ... {} more frames\n", stack.size() - n);
      break;
    }
    if (f.python || f.line)
      out << fmt::format("    #{} {}:{} in {}\n", n, safe(f.file), f.line, f.function.empty() ? "?" : safe(f.function));
    else
      out << fmt::format("    #{} {} ({}+{:#x})\n", n, f.function.empty() ? "??" : safe(f.function), safe(f.file), f.pc);
    ++n;
  }
}

void write_access(std::ostream& out, const char* intro, const Access& a, const Palette& p, size_t max_frames) {
  out << fmt::format("  {}{} of {} bytes at {:#x} by {} ({}) on {}, call #{}, thread {}:{}\n", p.bold, intro, a.bytes, a.addr, safe(a.op), safe(a.op_kind), safe(a.stream_label), a.seq, a.thread, p.reset);
  if (a.by_signature)
    out << "    (its bytes: the kernel's learned access signature, measured in precise mode for the same kernel, "
           "shape and scalar arguments)\n";
  if (a.by_library_call) out << "    (its bytes: the matrices of the cuBLAS call that launched it, from the call's arguments)\n";
  write_stack(out, a.stack, max_frames);
  if (a.graph_launch) {
    // A CUDA graph node: the stack above is where it was captured; this is its launch.
    const GraphLaunchSite& g = *a.graph_launch;
    out << fmt::format("  as a node of CUDA graph exec {:#x}, launched by {} on stream {:#x}, call #{}, thread {}:\n",
                       g.graph_exec, safe(g.api), g.stream, g.seq, g.thread);
    write_stack(out, g.stack, max_frames);
  }
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ", ";
    s += r < 0 ? std::string("?") : std::to_string(r);
  }
  return s;
}

}  // namespace

std::string summary_line(const AnalysisResult& r, size_t left_out_baselined) {
  uint64_t certain = 0, possible = 0, occ = 0;
  for (const auto& f : r.findings) {
    (f.confidence == Confidence::kCertain ? certain : possible)++;
    occ += f.occurrences;
  }
  size_t traces = r.traces.size();
  size_t blind = r.blind_traces();
  const std::string baselined =
      left_out_baselined == 0
          ? std::string()
          : fmt::format(" ({} baselined finding{} not shown)", left_out_baselined, left_out_baselined == 1 ? "" : "s");
  if (r.findings.empty() && blind)
    return fmt::format("streamrace: no verdict: {} of {} trace{} captured no CUDA calls (see the errors above)", blind,
                       traces, traces == 1 ? "" : "s");
  if (r.findings.empty() && r.partial() && r.unanalysed_graph_launches != 0)
    return fmt::format(
        "streamrace: partial verdict: no races found in {} trace{}, but {} CUDA graph launch{} not analysed "
        "(see the warnings above)",
        traces, traces == 1 ? "" : "s", r.unanalysed_graph_launches, r.unanalysed_graph_launches == 1 ? " was" : "es were");
  if (r.findings.empty() && r.partial()) {
    std::vector<std::string> why;
    if (uint64_t n = r.dropped_records()) why.push_back(fmt::format("the tracer dropped {} record{}", n, n == 1 ? "" : "s"));
    if (size_t n = r.cut_short_traces())
      why.push_back(fmt::format("{} trace{} end{} without the tracer's end-of-trace marker (cut short)", n,
                                n == 1 ? "" : "s", n == 1 ? "s" : ""));
    if (uint64_t n = r.missing_records())
      why.push_back(fmt::format("{} call record{} {} missing", n, n == 1 ? "" : "s", n == 1 ? "is" : "are"));
    return fmt::format("streamrace: partial verdict: no races found in {} trace{}, but {} (see the warnings above)", traces,
                       traces == 1 ? "" : "s", fmt::join(why, "; "));
  }
  if (r.findings.empty() && left_out_baselined)
    return fmt::format("streamrace: no new races in {} trace{}{}", traces, traces == 1 ? "" : "s", baselined);
  if (r.findings.empty() && r.windowed_traces())
    return fmt::format("streamrace: no races found in what {} trace{} recorded ({} accesses checked; {} recorded only "
                       "part of the run: see the warnings above)",
                       traces, traces == 1 ? "" : "s", r.accesses, r.windowed_traces());
  if (r.findings.empty())
    return fmt::format("streamrace: no races found in {} trace{} ({} accesses checked)", traces, traces == 1 ? "" : "s",
                       r.accesses);
  return fmt::format("streamrace: {} {}race{} ({} certain, {} possible) in {} trace{}, {} occurrence{}{}",
                     r.findings.size(), left_out_baselined ? "new " : "", r.findings.size() == 1 ? "" : "s", certain,
                     possible, traces, traces == 1 ? "" : "s", occ, occ == 1 ? "" : "s", baselined);
}

void write_text(std::ostream& out, const AnalysisResult& r, const TextOptions& opts) {
  Palette p;
  if (opts.color) p = Palette{"\033[1m", "\033[1;31m", "\033[1;33m", "\033[34m", "\033[0m"};
  size_t shown = 0;
  for (const Finding& f : r.findings) {
    if (opts.print_limit && shown == opts.print_limit) break;
    ++shown;
    const char* sev = f.confidence == Confidence::kCertain ? p.red : p.yellow;
    out << "==================\n";
    out << fmt::format("{}WARNING: streamrace: {} race ({}){} on {} bytes at {:#x}  [{}]\n", sev, to_string(f.kind),
                       to_string(f.confidence), p.reset, f.overlap_bytes, f.overlap_addr, f.fingerprint);
    write_access(out, capitalize(f.later.direction).c_str(), f.later, p, opts.max_frames);
    out << "\n";
    std::string prev = "Previous " + f.earlier.direction;
    write_access(out, prev.c_str(), f.earlier, p, opts.max_frames);
    out << "\n";
    if (f.earlier.alloc_bytes)
      out << fmt::format("  Location: {} bytes inside a {}-byte {} allocation at {:#x}\n", f.overlap_bytes,
                         f.earlier.alloc_bytes, safe(f.earlier.alloc_kind), f.earlier.alloc_base);
    else
      out << fmt::format("  Location: memory the trace never saw allocated\n");
    out << fmt::format("  {}Missing edge:{} {}\n", p.bold, p.reset, safe(f.missing_edge));
    out << fmt::format("  {}Suggested fix:{} {}\n", p.bold, p.reset, safe(f.fix));
    out << fmt::format("  Occurrences: {} on rank{} {}", f.occurrences, f.ranks.size() == 1 ? "" : "s",
                       join_ranks(f.ranks));
    if (f.mode != "default") out << fmt::format(" ({} mode)", f.mode);
    out << "\n";
  }
  if (!r.findings.empty()) out << "==================\n";
  if (shown < r.findings.size())
    out << fmt::format("streamrace: {} more race{} not shown (--print-limit {}; 0 shows all)\n", r.findings.size() - shown,
                       r.findings.size() - shown == 1 ? "" : "s", opts.print_limit);
  for (const Notice& n : r.notices)
    out << fmt::format("streamrace: {}{}{}: {}\n", n.level == "info" ? p.blue : p.yellow, safe(n.level), p.reset, safe(n.text));
  out << fmt::format("{}{}{}\n", p.bold, summary_line(r, opts.left_out_baselined), p.reset);
}

}  // namespace streamrace::report
