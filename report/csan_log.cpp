// Parser for the report text of torch/cuda/_sanitizer.py (UnsynchronizedAccessError).
#include "report/csan_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <regex>

namespace streamrace::report {

namespace {

using analysis::Access;
using analysis::Finding;
using analysis::Frame;

constexpr std::string_view kRaceHeader = "CSAN detected a possible data race on tensor with data pointer ";
constexpr std::string_view kAnyHeader = "CSAN detected ";
constexpr std::string_view kSanitizerFile = "torch/cuda/_sanitizer.py";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string stream_label_of(uint64_t stream) {
  return stream == 0 ? std::string("default stream") : fmt::format("stream {:#x}", stream);
}

int rank_from_prefix(const std::string& prefix) {
  static const std::regex rank_re(R"((?:rank|default)\s*(\d+))", std::regex::icase);
  std::smatch m;
  if (std::regex_search(prefix, m, rank_re)) return std::stoi(m[1].str());
  return -1;
}

// Lines of one report: those that carry the header's prefix (other ranks' lines interleave).
class ReportReader {
 public:
  ReportReader(const std::vector<std::string>& lines, size_t start, std::string prefix, const std::string& name)
      : lines_(lines), i_(start), prefix_(std::move(prefix)), name_(name) {}

  // The next line of this report with the prefix removed, or nullopt at the end of the log.
  std::optional<std::string_view> peek() {
    while (i_ < lines_.size()) {
      std::string_view l = lines_[i_];
      if (starts_with(l, prefix_)) {
        l.remove_prefix(prefix_.size());
        while (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        return l;
      }
      ++i_;
    }
    return std::nullopt;
  }
  void advance() { ++i_; }
  size_t line_number() const { return std::min(i_, lines_.size()) + 1; }

  // Skips blank lines, then requires a line starting with `what` (after leading spaces).
  std::string_view expect(std::string_view what, std::string_view context) {
    while (auto l = peek()) {
      if (!trim(*l).empty()) break;
      advance();
    }
    auto l = peek();
    if (!l) fail(fmt::format("log ends inside a CUDA-sanitizer report: expected \"{}\" {}", what, context));
    std::string_view t = trim(*l);
    if (!starts_with(t, what))
      fail(fmt::format("expected \"{}\" {}, found \"{}\"", what, context, std::string(t.substr(0, 80))));
    advance();
    return t;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw CsanLogError(fmt::format("{}:{}: {}", name_, line_number(), what));
  }

 private:
  const std::vector<std::string>& lines_;
  size_t i_;
  std::string prefix_;
  const std::string& name_;
};

uint64_t parse_stream(ReportReader& r, std::string_view line, std::string_view lead) {
  // "Access by stream 152815408 during kernel:"
  std::string_view rest = line.substr(lead.size());
  auto end = rest.find(' ');
  auto v = parse_u64(rest.substr(0, end));
  if (!v) r.fail(fmt::format("stream id is not a number in \"{}\"", std::string(line)));
  return *v;
}

// Reads "OPERATOR-SCHEMA / writing to ... / With stack trace: / frames" into `a`.
void read_access(ReportReader& r, Access& a) {
  auto op_line = r.peek();
  if (!op_line) r.fail("log ends inside a CUDA-sanitizer report: expected the operator after \"during kernel:\"");
  if (trim(*op_line).empty()) r.fail("expected the operator after \"during kernel:\", found an empty line");
  std::string_view schema = trim(*op_line);
  r.advance();
  a.op = std::string(schema.substr(0, schema.find('(')));
  a.op_kind = "aten";
  a.exact = false;
  auto type = r.peek();
  if (!type) r.fail("log ends inside a CUDA-sanitizer report: expected \"writing to ...\" or \"reading from ...\"");
  std::string_view t = trim(*type);
  if (starts_with(t, "writing to"))
    a.direction = "write";
  else if (starts_with(t, "reading from"))
    a.direction = "read";
  else
    r.fail(fmt::format("expected \"writing to ...\" or \"reading from ...\" after the operator, found \"{}\"",
                       std::string(t.substr(0, 80))));
  r.advance();
  r.expect("With stack trace:", "after the access type");
  static const std::regex frame_re(R"re(^\s*File "(.*)", line (\d+), in (.*)$)re");
  std::vector<Frame> outermost_first;
  while (auto l = r.peek()) {
    std::string line(*l);
    std::smatch m;
    if (std::regex_match(line, m, frame_re)) {
      Frame f;
      f.file = m[1].str();
      f.line = static_cast<uint32_t>(std::stoul(m[2].str()));
      f.function = std::string(trim(m[3].str()));
      f.python = true;
      outermost_first.push_back(std::move(f));
      r.advance();
    } else if (!outermost_first.empty() && starts_with(line, "    ") && !trim(line).empty()) {
      r.advance();  // the source line under a frame
    } else {
      break;
    }
  }
  for (auto it = outermost_first.rbegin(); it != outermost_first.rend(); ++it) {
    const auto& file = it->file;
    if (file.size() >= kSanitizerFile.size() && file.compare(file.size() - kSanitizerFile.size(), kSanitizerFile.size(), kSanitizerFile) == 0)
      continue;
    a.stack.push_back(*it);
  }
}

std::string site(const Access& a) {
  if (a.stack.empty()) return "no stack";
  const auto& f = a.stack.front();
  auto slash = f.file.find_last_of('/');
  return fmt::format("{}:{} in {}", slash == std::string::npos ? f.file : f.file.substr(slash + 1), f.line, f.function);
}

void describe(Finding& f, uint64_t data_ptr, const std::string& sync_note) {
  const Access& e = f.earlier;
  const Access& l = f.later;
  f.missing_edge = fmt::format(
      "PyTorch's CUDA sanitizer saw {} run {} on {} while {} ({}) on {} was not known to have finished: nothing "
      "synchronised the two streams in between (tensor at data pointer {:#x}).",
      l.op, l.direction == "write" ? "a write" : "a read", l.stream_label, e.op, e.direction, e.stream_label, data_ptr);
  if (!sync_note.empty()) f.missing_edge += " CSAN: " + sync_note;
  f.fix = fmt::format(
      "Order the two accesses: after {} ({}) record an event on {} (ev = torch.cuda.Event(); ev.record(stream)) and "
      "make {} wait on it (stream.wait_event(ev)) before {} ({}); if the tensor's memory is freed and reused, call "
      "tensor.record_stream(stream) for the stream that still uses it. This report was imported from the CUDA "
      "sanitizer, which infers reads and writes from operator schemas (view operators count as writes) and keys "
      "tensors by their start pointer: trace the job with `streamrace run` to see the exact accesses.",
      e.op, site(e), e.stream_label, l.stream_label, l.op, site(l));
}

}  // namespace

bool mentions_csan_report(std::string_view text) { return text.find(kRaceHeader) != std::string_view::npos; }

CsanLog read_csan_log(std::istream& in, const std::string& name) {
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(std::move(l));
  CsanLog out;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto at = lines[i].find(kAnyHeader);
    if (at == std::string::npos) continue;
    std::string prefix = lines[i].substr(0, at);
    if (trim(prefix).empty()) prefix.clear();  // indentation only: strip nothing, trim instead
    std::string_view header = std::string_view(lines[i]).substr(at);
    if (!starts_with(header, kRaceHeader)) {
      out.notices.push_back(analysis::Notice{"warning", name,
                                             fmt::format("line {}: CUDA-sanitizer report of a kind not imported: {}",
                                                         i + 1, std::string(trim(header)))});
      continue;
    }
    ReportReader r(lines, i + 1, prefix, name);
    auto ptr = parse_u64(trim(header.substr(kRaceHeader.size())));
    if (!ptr) {
      ReportReader at_header(lines, i, prefix, name);
      at_header.fail("data pointer is not a number");
    }
    Finding f;
    f.mode = "csan";
    f.confidence = analysis::Confidence::kPossible;
    constexpr std::string_view kAccess = "Access by stream ";
    constexpr std::string_view kPrevious = "Previous access by stream ";
    auto cur = r.expect(kAccess, "after the report header");
    f.later.stream = parse_stream(r, cur, kAccess);
    read_access(r, f.later);
    auto prev = r.expect(kPrevious, "after the first access's stack");
    f.earlier.stream = parse_stream(r, prev, kPrevious);
    read_access(r, f.earlier);
    // Optional tail: allocation stack and, in newer PyTorch, the last synchronisation.
    std::string sync_note;
    while (auto l = r.peek()) {
      std::string_view t = trim(*l);
      if (t.find(kAnyHeader) != std::string_view::npos) break;
      if (starts_with(t, "Streams ") || starts_with(t, "Last sync:")) {
        sync_note = std::string(t);
      } else if (!(t.empty() || starts_with(t, "Tensor was allocated") || starts_with(t, "Trace for tensor allocation") ||
                   starts_with(t, "File \"") || starts_with(*l, "    "))) {
        break;
      }
      r.advance();
    }
    if (f.later.direction == "read" && f.earlier.direction == "read") {
      ReportReader at_header(lines, i, prefix, name);
      at_header.fail("report names two reads, which cannot race");
    }
    f.kind = f.later.direction == "read"     ? analysis::RaceKind::kReadAfterWrite
             : f.earlier.direction == "read" ? analysis::RaceKind::kWriteAfterRead
                                             : analysis::RaceKind::kWriteAfterWrite;
    int rank = rank_from_prefix(prefix);
    for (Access* a : {&f.earlier, &f.later}) {
      a->stream_label = stream_label_of(a->stream);
      a->addr = a->alloc_base = *ptr;
    }
    f.earlier.seq = out.reports * 2;
    f.later.seq = out.reports * 2 + 1;
    f.overlap_addr = *ptr;
    describe(f, *ptr, sync_note);
    f.fingerprint = analysis::fingerprint_of(f);
    f.occurrences = 1;
    if (rank >= 0) f.ranks = {rank};
    f.where.push_back(analysis::Occurrence{name, rank, 1, f.later.seq, f.later.seq, {}});
    out.findings.push_back(std::move(f));
    ++out.reports;
    // Scanning goes on from the next line: other ranks' reports may interleave with this one.
  }
  return out;
}

}  // namespace streamrace::report
