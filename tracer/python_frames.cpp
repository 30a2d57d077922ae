// PythonFrames: see python_frames.h.
#include "tracer/python_frames.h"

#include <dlfcn.h>

#include <string>

namespace streamrace::tracer {

namespace {

// The calling thread's caches, for one PythonFrames (a forked child's tracer has its own).
// Keys are code objects the shared cache holds a reference to, so never reused.
struct ThreadFrameCache {
  const void* owner = nullptr;
  std::unordered_map<const void*, std::pair<uint32_t, uint32_t>> names;  // code -> file, function
  struct Line {
    const void* code;  // the key itself, to rule out hash collisions
    int lasti;
    uint32_t line;
  };
  std::unordered_map<uint64_t, Line> lines;  // by hash of (code, lasti)
};
constexpr size_t kThreadCacheLimit = 1 << 16;

ThreadFrameCache& thread_cache(const void* owner) {
  thread_local ThreadFrameCache c;
  if (c.owner != owner || c.names.size() > kThreadCacheLimit || c.lines.size() > kThreadCacheLimit) {
    c = ThreadFrameCache{};
    c.owner = owner;
  }
  return c;
}

template <typename F>
bool find(F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  return fn != nullptr;
}
}  // namespace

bool PythonFrames::resolve() {
  bool ok = find(is_initialized_, "Py_IsInitialized") && find(gil_check_, "PyGILState_Check") &&
            find(this_thread_state_, "PyGILState_GetThisThreadState") &&
            find(get_frame_, "PyThreadState_GetFrame") && find(frame_back_, "PyFrame_GetBack") &&
            find(frame_code_, "PyFrame_GetCode") && find(frame_line_, "PyFrame_GetLineNumber") &&
            find(incref_, "Py_IncRef") && find(decref_, "Py_DecRef") && find(getattr_, "PyObject_GetAttrString") &&
            find(as_utf8_, "PyUnicode_AsUTF8") && find(err_clear_, "PyErr_Clear");
  if (!find(unchecked_get_, "PyThreadState_GetUnchecked")) find(unchecked_get_, "_PyThreadState_UncheckedGet");
  find(frame_lasti_, "PyFrame_GetLasti");
  find(gil_ensure_, "PyGILState_Ensure");
  find(gil_release_, "PyGILState_Release");
  if (!find(is_finalizing_, "Py_IsFinalizing")) find(is_finalizing_, "_Py_IsFinalizing");
  return ok;
}

bool PythonFrames::available() {
  if (!tried_) {
    std::lock_guard lock(mu_);
    if (!tried_) {
      ok_ = resolve();
      tried_ = true;
    }
  }
  return ok_;
}

PythonFrames::CodeNames PythonFrames::names_of(PyObj code) {
  {
    std::lock_guard lock(mu_);
    auto it = codes_.find(code);
    if (it != codes_.end()) return it->second;
  }
  auto text = [&](const char* attr) -> std::string {
    std::string s = "?";
    PyObj o = getattr_(code, attr);
    if (o == nullptr) {
      err_clear_();
      return s;
    }
    const char* u = as_utf8_(o);
    if (u != nullptr) s = u; else err_clear_();
    decref_(o);
    return s;
  };
  // co_qualname (3.11+) names methods as Class.method; fall back to co_name.
  std::string fn = text("co_qualname");
  if (fn == "?") fn = text("co_name");
  CodeNames names{strings_.intern(text("co_filename")), strings_.intern(fn)};
  std::lock_guard lock(mu_);
  auto [it, inserted] = codes_.emplace(code, names);
  if (inserted) incref_(code);  // keeps the pointer unique for the cache's lifetime
  return it->second;
}

bool PythonFrames::thread_runs_python() {
  return available() && is_initialized_() && this_thread_state_() != nullptr;
}

size_t PythonFrames::capture(std::vector<trace::StackFrame>& out, size_t max_frames) {
  if (!available() || !is_initialized_()) return 0;
  // This thread's Python state: null for threads that never ran Python.
  PyObj ts = this_thread_state_();
  if (ts == nullptr) return 0;
  // Whether this thread holds the GIL now. PyGILState_Check answers 1 when GIL checking is
  // off, so where the running thread state can be read, that decides.
  bool held = unchecked_get_ != nullptr ? unchecked_get_() == ts : gil_check_() != 0;
  int gil_state = -1;
  if (!held) {
    if (!t_may_take_gil || gil_ensure_ == nullptr || gil_release_ == nullptr ||
        (is_finalizing_ != nullptr && is_finalizing_()))
      return 0;
    gil_state = gil_ensure_();
  }
  struct Release {
    PythonFrames* self;
    int state;
    ~Release() {
      if (state != -1) self->gil_release_(state);
    }
  } release{this, gil_state};
  size_t n = 0;
  ThreadFrameCache& cache = thread_cache(this);
  PyObj frame = get_frame_(ts);  // new reference or NULL
  while (frame != nullptr && n < max_frames) {
    PyObj code = frame_code_(frame);  // new reference
    CodeNames names;
    if (auto it = cache.names.find(code); it != cache.names.end()) {
      names = CodeNames{it->second.first, it->second.second};
    } else {
      names = names_of(code);  // the shared cache now holds `code` for good
      cache.names.emplace(code, std::pair{names.file_id, names.function_id});
    }
    trace::StackFrame f{};
    f.kind = trace::FrameKind::kPython;
    f.file_id = names.file_id;
    f.function_id = names.function_id;
    int line = -1;
    if (frame_lasti_ != nullptr) {
      const int lasti = frame_lasti_(frame);
      const uint64_t key = (reinterpret_cast<uint64_t>(code) * 0x9E3779B97F4A7C15ull) ^ uint64_t(uint32_t(lasti));
      auto it = cache.lines.find(key);
      if (it != cache.lines.end() && it->second.code == code && it->second.lasti == lasti) {
        line = int(it->second.line);
      } else {
        line = frame_line_(frame);
        cache.lines[key] = ThreadFrameCache::Line{code, lasti, uint32_t(line > 0 ? line : 0)};
      }
    } else {
      line = frame_line_(frame);
    }
    decref_(code);
    f.line = line > 0 ? uint32_t(line) : 0;
    out.push_back(f);
    ++n;
    PyObj back = frame_back_(frame);  // new reference or NULL
    decref_(frame);
    frame = back;
  }
  if (frame != nullptr) decref_(frame);
  return n;
}

}  // namespace streamrace::tracer
