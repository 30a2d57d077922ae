// PythonFrames: reads the calling thread's Python stack (file, function, line), innermost
// first, through the CPython C API found at run time with dlsym(RTLD_DEFAULT): the tracer
// never links Python. It reads only when this thread holds the GIL. Code objects are cached
// by pointer and kept alive (one reference each), so a cached pointer is never reused by a
// different code object.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "traceformat/records.h"
#include "tracer/string_table.h"

namespace streamrace::tracer {

class PythonFrames {
 public:
  explicit PythonFrames(StringTable& strings) : strings_(strings) {}
  // True once the interpreter's entry points were found (looked up on first use).
  bool available();
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
  void (*incref_)(PyObj) = nullptr;
  void (*decref_)(PyObj) = nullptr;
  PyObj (*getattr_)(PyObj, const char*) = nullptr;
  const char* (*as_utf8_)(PyObj) = nullptr;
  void (*err_clear_)() = nullptr;

  std::mutex mu_;
  std::unordered_map<PyObj, CodeNames> codes_;
};

}  // namespace streamrace::tracer
