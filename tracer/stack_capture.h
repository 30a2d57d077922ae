// StackCapture: the host stack of the calling thread as an interned stack id. Python frames
// when the thread runs Python code (and holds the GIL), otherwise native return addresses
// from LLVM libunwind, with the frames of the tracer, CUPTI and the driver stripped from the
// top so the first frame is the caller's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tracer/native_unwind.h"
#include "tracer/python_frames.h"
#include "tracer/stack_table.h"
#include "tracer/string_table.h"
#include "tracer/thread_state.h"

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
  // Interned id of the caller's stack; 0 when none could be taken. A caller that has the
  // thread's state passes it (one thread_local fewer to look up).
  uint32_t capture();
  uint32_t capture(TracerThreadState& ts);
  StackMode mode() const { return mode_; }
  // Whether a repeated Python call site reuses its first stack (PythonFrames::site_words); on
  // by default (setting python_sites).
  void set_python_sites(bool on) { python_sites_ = on; }
  // Whether native stacks use the learned unwind rules (NativeUnwinder); on by default
  // (setting native_unwind=cached), off: every stack through DWARF CFI.
  void set_native_cached(bool on) { native_cached_ = on; }
  // "python call sites: on, H hits, M misses (...), C checked, X mismatches", for diagnostics and
  // tests (C: hits compared with the C API's walk).
  std::string python_sites_summary() const;

 private:
  uint32_t capture_python(TracerThreadState& ts);
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
  // Relaxed counters (diagnostics only). Hits are counted by each thread and added here in
  // batches and when the thread exits (a lock-prefixed add per call cost more than the hit):
  // shared with the threads' caches, which may outlive this object.
  struct SiteCounts {
    std::atomic<uint64_t> hits{0}, misses{0}, mismatches{0}, rekeys{0}, checks{0};
  };
  std::shared_ptr<SiteCounts> counts_ = std::make_shared<SiteCounts>();
  std::vector<std::pair<uint64_t, uint64_t>> internal_;  // [begin, end) of tracer/CUPTI/driver code
};

}  // namespace streamrace::tracer
