// Per-stream timeline printer.
#include "replay/timeline.h"

#include <fmt/format.h>

namespace streamrace::replay {

std::string describe_range(const Schedule& s, const ByteRange& r) {
  if (r.buffer >= s.buffers.size()) return fmt::format("?{}[{}, {})", r.buffer, r.offset, r.end());
  return fmt::format("{}[{}, {})", s.buffers[r.buffer].name, r.offset, r.end());
}

static std::string fit(std::string text, size_t width) {
  if (text.size() > width) {
    text.resize(width > 1 ? width - 1 : width);
    text += "~";
  }
  return text;
}

void print_timeline(std::ostream& out, const Schedule& s, const TimelineOptions& opts) {
  const size_t w = opts.column_width;
  out << s.name << "\n";
  std::string head = fmt::format("{:>4}  {:<{}}", "#", "host", w);
  for (const auto& st : s.streams) head += fmt::format(" | {:<{}}", fit(st.name + " (" + to_string(st.kind) + ")", w), w);
  out << head << "\n" << std::string(head.size(), '-') << "\n";
  int last_flush = -1;
  for (size_t i = 0; i < s.actions.size(); ++i) {
    const auto& a = s.actions[i];
    if (a.flush >= 0 && a.flush != last_flush) out << fmt::format("      -- flush {} --\n", a.flush);
    last_flush = a.flush;
    std::vector<std::string> cols(s.streams.size() + 1);
    std::string text = a.label.empty() ? to_string(a.kind) : a.label;
    if (is_host_sync(a.kind) || a.stream >= s.streams.size())
      cols[0] = text;
    else
      cols[a.stream + 1] = text;
    std::string line = fmt::format("{:>4}  {:<{}}", i, fit(cols[0], w), w);
    for (size_t c = 1; c < cols.size(); ++c) line += fmt::format(" | {:<{}}", fit(cols[c], w), w);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
    if (opts.show_ranges && touches_memory(a.kind)) {
      for (const auto& r : a.reads) out << fmt::format("{:>6}reads  {}\n", "", describe_range(s, r));
      for (const auto& r : a.writes) out << fmt::format("{:>6}writes {}\n", "", describe_range(s, r));
    }
  }
}

}  // namespace streamrace::replay
