// The progress meter.
#include "report/progress_meter.h"

#include <fmt/format.h>
#include <unistd.h>

namespace streamrace::report {

ProgressMeter::ProgressMeter(std::string what, uint64_t total, int fd, std::chrono::milliseconds delay)
    : what_(std::move(what)), total_(total), fd_(fd), terminal_(isatty(fd) == 1), delay_(delay) {
  start_ = last_ = std::chrono::steady_clock::now();
}

ProgressMeter::~ProgressMeter() { finish(); }

void ProgressMeter::request() {
  requested_ = true;
  delay_ = std::chrono::milliseconds(0);
}

void ProgressMeter::update(uint64_t done) {
  if (!terminal_ && !requested_) return;
  update(done, fmt::format("{:.1f} of {:.1f} MB", done / 1e6, total_ / 1e6));
}

void ProgressMeter::update(uint64_t done, const std::string& detail) {
  if (!terminal_ && !requested_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - start_ < delay_) return;
  // In place: ten redraws a second at most; plain lines: one a second (the first at once).
  const auto gap = terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
  if (any_ && now - last_ < gap) return;
  last_ = now;
  double pct = total_ ? 100.0 * static_cast<double>(std::min(done, total_)) / static_cast<double>(total_) : 0.0;
  std::string line = fmt::format("streamrace: {} {:3.0f}% ({})", what_, pct, detail);
  line = terminal_ ? "\r" + line + "\x1b[K" : line + "\n";
  bool wrote = write(fd_, line.data(), line.size()) > 0;
  any_ |= wrote;
  if (terminal_) drawn_ = wrote || drawn_;
}

void ProgressMeter::finish() {
  if (!drawn_) return;
  const char clear[] = "\r\x1b[K";
  (void)!write(fd_, clear, sizeof clear - 1);
  drawn_ = false;
}

}  // namespace streamrace::report
