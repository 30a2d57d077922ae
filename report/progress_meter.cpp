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

void ProgressMeter::update(uint64_t done) {
  if (!terminal_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - start_ < delay_) return;
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  double pct = total_ ? 100.0 * static_cast<double>(std::min(done, total_)) / static_cast<double>(total_) : 0.0;
  auto line = fmt::format("\rstreamrace: {} {:3.0f}% ({:.1f} of {:.1f} MB)\x1b[K", what_, pct, done / 1e6, total_ / 1e6);
  drawn_ = write(fd_, line.data(), line.size()) > 0 || drawn_;
}

void ProgressMeter::finish() {
  if (!drawn_) return;
  const char clear[] = "\r\x1b[K";
  (void)!write(fd_, clear, sizeof clear - 1);
  drawn_ = false;
}

}  // namespace streamrace::report
