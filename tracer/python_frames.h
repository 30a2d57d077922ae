// PythonFrames: reads the calling thread's Python stack (file, function, line), innermost
// first, through the CPython C API found at run time with dlsym(RTLD_DEFAULT): the tracer
// never links Python. It reads when this thread holds the GIL, or (see GilScope) takes it
// back for the walk when this thread runs Python code that released it. Code objects are cached
// by pointer and kept alive (one reference each), so a cached pointer is never reused by a
// different code object. Each thread also keeps its own copy of those names and of the line
// of each (code object, instruction offset) it saw: computing a line walks the code's line
// table, and a training step makes the same calls from the same lines thousands of times.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"
#include "tracer/string_table.h"

namespace streamrace::tracer {

// Set (through GilScope) around the calls whose Python stack matters most for findings:
// kernel launches, copies, memsets and NCCL calls. PyTorch releases the GIL inside its ops,
// so without it those calls would have no Python frames; with it the tracer takes the GIL
// back for the walk, as PyTorch's own allocator history does. Never set around allocation,
// free, event or synchronisation calls, which PyTorch may make while holding its own locks.
inline thread_local bool t_may_take_gil = false;
struct GilScope {
  bool saved = t_may_take_gil;
  GilScope() { t_may_take_gil = true; }
  ~GilScope() { t_may_take_gil = saved; }
};

class PythonFrames {
 public:
  explicit PythonFrames(StringTable& strings) : strings_(strings) {}
  // True once the interpreter's entry points were found (looked up on first use).
  bool available();
  // Whether the calling thread has a Python thread state (it runs, or ran, Python code).
  bool thread_runs_python();
  // Appends up to `max_frames` frames; returns how many. 0 without Python or the GIL.
  size_t capture(std::vector<trace::StackFrame>& out, size_t max_frames);

 private:
  struct CodeNames {
    uint32_t file_id;
    uint32_t function_id;
  };
  using PyObj = void*;
  bool resolve();
  CodeNames names_of(PyObj code);

  StringTable& strings_;
  std::atomic<bool> tried_{false};
  bool ok_ = false;
  int (*is_initialized_)() = nullptr;
  int (*gil_check_)() = nullptr;
  PyObj (*this_thread_state_)() = nullptr;
  PyObj (*unchecked_get_)() = nullptr;  // _PyThreadState_UncheckedGet / PyThreadState_GetUnchecked
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
