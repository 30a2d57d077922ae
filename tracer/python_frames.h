// PythonFrames: reads the calling thread's Python stack (file, function, line), innermost
// first, through the CPython C API found at run time with dlsym(RTLD_DEFAULT): the tracer
// never links Python. It reads when this thread holds the GIL, or (see GilScope) takes it
// back for the walk when this thread runs Python code that released it. Code objects are cached
// by pointer and kept alive (one reference each), so a cached pointer is never reused by a
// different code object. Each thread also keeps its own copy of those names and of the line
// of each (code object, instruction offset) it saw: computing a line walks the code's line
// table, and a training step makes the same calls from the same lines thousands of times.
//
// Call sites (site_words, key_of): on CPython versions whose frame layout is known (3.11 and 3.12), the
// calling thread's interpreter frames are read directly, without the C API and without the
// GIL, and hashed into a key of the call site; StackCapture then reuses the stack it interned
// the first time it saw that key, so a repeated call costs a pointer walk, not a C-API walk
// and a GIL hand-over. Reading one's own frames without the GIL is safe: only the thread
// itself pushes or pops its frames, and it is inside this call; the code objects are owned
// by those frames. The layout is trusted only after run-time checks: the first walks read
// memory with a copying system call that cannot fault, and their frames must match the C
// API's walk (codes in order) several times; StackCapture keeps comparing a sample of later
// hits with the C API's answer. Any disagreement turns the fast path off for the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"
#include "tracer/string_table.h"
#include "tracer/thread_state.h"
#include "tracer/wide_words.h"

namespace streamrace::tracer {

// Set (through GilScope) around the calls whose Python stack matters most for findings:
// kernel launches, copies, memsets and NCCL calls. PyTorch releases the GIL inside its ops,
// so without it those calls would have no Python frames; with it the tracer takes the GIL
// back for the walk, as PyTorch's own allocator history does. Never set around allocation,
// free, event or synchronisation calls, which PyTorch may make while holding its own locks.
// The flag is the thread state's (tracer/thread_state.h): a caller that has the thread state
// passes it, and finding it costs nothing more.
struct GilScope {
  bool& flag;
  bool saved;
  GilScope() : GilScope(thread_state()) {}
  explicit GilScope(TracerThreadState& ts) : flag(ts.may_take_gil), saved(ts.may_take_gil) { flag = true; }
  ~GilScope() { flag = saved; }
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;
};

class PythonFrames {
 public:
  explicit PythonFrames(StringTable& strings) : strings_(strings) {}
  // True once the interpreter's entry points were found (looked up on first use).
  bool available() { return tried_.load(std::memory_order_acquire) ? ok_ : resolve_once(); }
  // Whether the calling thread has a Python thread state (it runs, or ran, Python code).
  bool thread_runs_python();
  // Appends up to `max_frames` frames; returns how many. 0 without Python or the GIL.
  size_t capture(std::vector<trace::StackFrame>& out, size_t max_frames);

  // The calling thread's Python call site, read without the GIL (see above).
  struct SiteKey {
    uint64_t a = 0, b = 0;
    bool operator==(const SiteKey&) const = default;
  };
  // The call site in two steps: its words (each raw frame's code object, and its instruction
  // pointer with its owner in the top byte; innermost first, `n` frames, at most
  // kSiteFramesMax; `words` holds kSiteWordsMax), then their key. A caller that compares words
  // first (StackCapture, with the site of the thread's last call) hashes only when they
  // differ. site_words is false when no site can be read: the fast path is not (yet) trusted or
  // not known for this Python, or capture() would give no frames (no thread state, the GIL
  // neither held nor allowed to be taken back).
  static constexpr size_t kSiteFramesMax = 256;
  static constexpr size_t kSiteWordsMax = 2 * kSiteFramesMax;
  bool site_words(uint64_t* words, size_t& n, TracerThreadState& ts);
  static SiteKey key_of(const uint64_t* words, size_t n) {
    // The key: XXH3-64 of every word (its AVX2 build where the CPU has it: 30 frames are 480
    // bytes, and the 128-bit hash's SSE2 loop cost more than the walk), beside the frame count
    // and the innermost frame's words, mixed. Two stacks share a key only if the 64-bit hashes
    // collide and the innermost frame and depth agree; a sample of cache hits is checked
    // against the C API's walk all the same (stack_capture.cpp).
    const uint64_t a = wide::xxh3_64(words, n * 2 * sizeof(uint64_t));
    const uint64_t w0 = n != 0 ? words[0] : 0, w1 = n != 0 ? words[1] : 0;
    const uint64_t b = (uint64_t(n) << 48) ^ (w0 * 0x9E3779B97F4A7C15ull) ^ (w1 * 0xC2B2AE3D27D4EB4Full);
    return SiteKey{a, b};
  }
  // A cached stack disagreed with the C API's walk: the fast path goes off for good.
  void site_key_mismatch() { raw_state_.store(kRawOff, std::memory_order_relaxed); }
  // For tests and diagnostics: "off" (unknown Python or turned off), "checking", "on".
  const char* site_key_state() const;

 private:
  struct CodeNames {
    uint32_t file_id;
    uint32_t function_id;
  };
  using PyObj = void*;
  bool resolve();
  bool resolve_once();
  CodeNames names_of(PyObj code);
  // Whether this thread may read its Python frames now (the checks capture() makes first).
  bool frames_readable(PyObj ts, bool& held, const TracerThreadState& tracer_ts);
  // Whether a thread that does not hold the GIL may read its frames (taking the GIL back for the
  // C API's walk: not while the interpreter finalizes, nor on threads that must not take it).
  bool readable_released(const TracerThreadState& tracer_ts);
  // Walks the raw frame chain from thread state `ts` (Safe: reads through a system call that
  // reports a bad address instead of faulting). Fills `words` (2 a frame, up to `max` frames,
  // `n` of them) and, when Safe, `codes` (innermost first); false if a read failed.
  template <bool Safe>
  bool raw_walk_as(PyObj ts, uint64_t* words, size_t& n, const void** codes, size_t& ncodes, size_t max);
  // Compares the API walk's code objects with the raw walk's (called in capture()).
  void check_raw_layout(PyObj ts, const void* const* api_codes, size_t napi, bool truncated);

  // Offsets into CPython's PyThreadState, _PyCFrame and _PyInterpreterFrame, by version.
  struct RawLayout {
    int ts_cframe = -1;    // PyThreadState::cframe
    int cframe_frame = 0;  // _PyCFrame::current_frame
    int f_code = 0, f_previous = 0, f_instr = 0, f_owner = 0;
  };
  static constexpr int kRawOff = -1, kRawChecking = 0, kRawOn = 1;
  static constexpr int kRawChecksNeeded = 8;
  RawLayout layout_;
  std::atomic<int> raw_state_{kRawOff};
  std::atomic<int> raw_checks_{0};

  StringTable& strings_;
  std::atomic<bool> tried_{false};
  bool ok_ = false;
  int (*is_initialized_)() = nullptr;
  int (*gil_check_)() = nullptr;
  PyObj (*this_thread_state_)() = nullptr;
  PyObj (*unchecked_get_)() = nullptr;  // _PyThreadState_UncheckedGet / PyThreadState_GetUnchecked
  // Whether unchecked_get_ answers the calling thread's own state, attached (GIL held) or null
  // (3.12+); in 3.11 it answers the GIL holder's, of whichever thread.
  bool attached_is_own_ = false;
  PyObj (*get_frame_)(PyObj) = nullptr;
  PyObj (*frame_back_)(PyObj) = nullptr;
  PyObj (*frame_code_)(PyObj) = nullptr;
  int (*frame_line_)(PyObj) = nullptr;
  int (*frame_lasti_)(PyObj) = nullptr;  // PyFrame_GetLasti (3.11+): the line cache's key
  void (*incref_)(PyObj) = nullptr;
  void (*decref_)(PyObj) = nullptr;
  PyObj (*getattr_)(PyObj, const char*) = nullptr;
  const char* (*as_utf8_)(PyObj) = nullptr;
  void (*err_clear_)() = nullptr;
  int (*gil_ensure_)() = nullptr;      // PyGILState_Ensure
  void (*gil_release_)(int) = nullptr;  // PyGILState_Release
  int (*is_finalizing_)() = nullptr;   // Py_IsFinalizing / _Py_IsFinalizing

  std::mutex mu_;
  std::unordered_map<PyObj, CodeNames> codes_;
};

}  // namespace streamrace::tracer
