// A one-line progress meter on stderr for long analyses: drawn only on a terminal and only
// once the work has taken longer than a second, so scripts and CI logs never see it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace streamrace::report {

class ProgressMeter {
 public:
  // `total` in bytes; `fd` is where to draw (stderr by default).
  ProgressMeter(std::string what, uint64_t total, int fd = 2,
                std::chrono::milliseconds delay = std::chrono::milliseconds(1000));
  ~ProgressMeter();
  void update(uint64_t done);
  // Clears the line if anything was drawn.
  void finish();
  bool drawn() const { return drawn_; }
  // Forces drawing even when `fd` is not a terminal (tests).
  void force_terminal() { terminal_ = true; }

 private:
  std::string what_;
  uint64_t total_;
  int fd_;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
  std::chrono::milliseconds delay_;
};

}  // namespace streamrace::report
