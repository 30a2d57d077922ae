// StackCapture: the host stack of the calling thread as an interned stack id. Python frames
// when the thread runs Python code (and holds the GIL), otherwise native return addresses
// from LLVM libunwind, with the frames of the tracer, CUPTI and the driver stripped from the
// top so the first frame is the caller's.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tracer/native_unwind.h"
#include "tracer/python_frames.h"
#include "tracer/stack_table.h"
#include "tracer/string_table.h"

namespace streamrace::tracer {

// kAuto: Python frames in threads that run Python, native frames in threads that do not.
enum class StackMode { kNone, kNative, kPython, kAuto };

StackMode parse_stack_mode(const char* text);  // "none", "native", "python", "auto" (default)

class StackCapture {
 public:
  // `strip_own_module`: drop the leading frames of the module holding the tracer (off in
  // unit tests, where that module is the test program itself).
  StackCapture(StackTable& stacks, StringTable& strings, StackMode mode, size_t max_frames = 32,
               bool strip_own_module = true);
  // Interned id of the caller's stack; 0 when none could be taken.
  uint32_t capture();
  StackMode mode() const { return mode_; }
  // Whether a repeated Python call site reuses its first stack (PythonFrames::site_key); on
  // by default (setting python_sites).
  void set_python_sites(bool on) { python_sites_ = on; }
  // Whether native stacks use the learned unwind rules (NativeUnwinder); on by default
  // (setting native_unwind=cached), off: every stack through DWARF CFI.
  void set_native_cached(bool on) { native_cached_ = on; }
  // "python call sites: on, H hits, M misses, X mismatches", for diagnostics and tests.
  std::string python_sites_summary() const;

 private:
  uint32_t capture_python();
  uint32_t capture_python_walk();
  uint32_t capture_native();
  void find_internal_modules();
  bool internal_pc(uint64_t pc) const;

  StackTable& stacks_;
  PythonFrames python_;
  StackMode mode_;
  size_t max_frames_;
  bool strip_own_;
  bool modules_known_ = false;
  bool python_sites_ = true;
  bool native_cached_ = true;
  NativeUnwinder unwinder_;
  // Relaxed counters (approximate under threads: diagnostics only).
  std::atomic<uint64_t> site_hits_{0}, site_misses_{0}, site_mismatches_{0}, site_rekeys_{0};
  std::vector<std::pair<uint64_t, uint64_t>> internal_;  // [begin, end) of tracer/CUPTI/driver code
};

}  // namespace streamrace::tracer
