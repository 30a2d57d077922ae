// A one-line progress meter on stderr for long work (analysis, fix rounds, overlap): drawn on
// a terminal once the work has taken longer than a second, so scripts and CI logs never see
// it, unless asked for (--progress): then it starts at once, and where stderr is no terminal
// it writes plain lines, at most one a second, instead of redrawing one line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace streamrace::report {

class ProgressMeter {
 public:
  // `total` in bytes (update(done)) or in any unit (update(done, detail)); `fd` is where to
  // draw (stderr by default).
  ProgressMeter(std::string what, uint64_t total, int fd = 2,
                std::chrono::milliseconds delay = std::chrono::milliseconds(1000));
  ~ProgressMeter();
  // "streamrace: WHAT  50% (1.0 of 2.0 MB)".
  void update(uint64_t done);
  // "streamrace: WHAT  50% (DETAIL)".
  void update(uint64_t done, const std::string& detail);
  // Clears the line if anything was drawn in place.
  void finish();
  bool drawn() const { return drawn_; }
  // Forces drawing in place even when `fd` is not a terminal (tests).
  void force_terminal() { terminal_ = true; }
  // --progress: draw from the first update, on a terminal in place, elsewhere as plain lines.
  void request();
  void set_total(uint64_t total) { total_ = total; }

 private:
  std::string what_;
  uint64_t total_;
  int fd_;
  bool terminal_;
  bool requested_ = false;
  bool drawn_ = false;
  bool any_ = false;  // something was written
  std::chrono::steady_clock::time_point start_, last_;
  std::chrono::milliseconds delay_;
};

}  // namespace streamrace::report
