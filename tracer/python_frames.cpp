// PythonFrames: see python_frames.h.
#include "tracer/python_frames.h"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tracer/wide_words.h"

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

// Reads n bytes at addr without faulting: process_vm_readv on this process reports a bad
// address as an error. Used only while a frame layout is still being checked.
__attribute__((noinline)) bool safe_read(const void* addr, void* out, size_t n) {
  iovec local{out, n};
  iovec remote{const_cast<void*>(addr), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == ssize_t(n);
}

// Safe: while the layout is being checked (a system call per read); otherwise a plain load,
// inlined into the walk.
template <bool Safe, typename T>
inline __attribute__((always_inline)) bool load(const char* base, int offset, T& out) {
  if (base == nullptr) return false;
  const char* at = base + offset;
  if constexpr (Safe) return safe_read(at, &out, sizeof out);
  std::memcpy(&out, at, sizeof out);
  return true;
}

// Raw frames walked for a key: the C API skips frames that have not started (3.11, 3.12)
// and C-stack entry frames (3.12), so a key covers more raw frames than the stack keeps.
constexpr size_t kRawFramesPerFrame = 4;
constexpr size_t kRawCodesChecked = 256;
static_assert(PythonFrames::kSiteFramesMax == 256);  // what one walk reads at most (the site's and the check's)
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
  // Frame layouts of the versions known here (CPython's Include/cpython/pystate.h and
  // Include/internal/pycore_frame.h of each version; checked at run time before use).
  const auto* version = reinterpret_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  if (ok && version != nullptr && unchecked_get_ != nullptr) {
    const unsigned major = (*version >> 24) & 0xFF, minor = (*version >> 16) & 0xFF;
    if (major == 3 && minor == 11) {
      layout_ = RawLayout{56, 8, 32, 48, 56, 69};  // cframe; use_tracing first; f_func first
      raw_state_ = kRawChecking;
    } else if (major == 3 && minor == 12) {
      layout_ = RawLayout{56, 0, 0, 8, 56, 70};  // cframe; f_code first
      raw_state_ = kRawChecking;
    }
    // From 3.12 the running thread state is a thread-local of the interpreter (Python/pystate.c,
    // `_Py_tss_tstate`), set while the thread holds the GIL and null while it has released it;
    // in 3.11 it is one global, the GIL holder's, whichever thread that is.
    attached_is_own_ = major == 3 && minor >= 12;
  }
  return ok;
}

const char* PythonFrames::site_key_state() const {
  switch (raw_state_.load(std::memory_order_relaxed)) {
    case kRawOn: return "on";
    case kRawChecking: return "checking";
    default: return "off";
  }
}

template <bool Safe>
bool PythonFrames::raw_walk_as(PyObj ts, uint64_t* words, size_t& n, const void** codes, size_t& ncodes, size_t max) {
  const char* cframe = nullptr;
  const char* frame = nullptr;
  n = 0;
  ncodes = 0;
  if (!load<Safe>(static_cast<const char*>(ts), layout_.ts_cframe, cframe) ||
      !load<Safe>(cframe, layout_.cframe_frame, frame))
    return false;
  size_t k = 0;  // not `n`, which the stores into `words` might alias: kept in a register
  // The walk only stores each frame's code and instruction pointer (and its owner, in the
  // top byte); key_of then hashes them at once. A multiply-xor chain per frame made every frame
  // wait ~15 cycles for the last one's multiply: ~4 ns a frame, 30-60 frames a call in a
  // DeepSpeed step. Here a frame costs its loads (the chain of `previous` pointers).
  // A chain cut at `max` differs from a longer one that shares its first `max` frames only in
  // what was not walked: the same words, as before (both are cut at the same frame count).
  if (max > kSiteFramesMax) max = kSiteFramesMax;
  for (; frame != nullptr && k < max; ++k) {
    const char* code = nullptr;
    const char* instr = nullptr;
    const char* previous = nullptr;
    char owner = 0;
    if (!load<Safe>(frame, layout_.f_code, code) || !load<Safe>(frame, layout_.f_instr, instr) ||
        !load<Safe>(frame, layout_.f_owner, owner) || !load<Safe>(frame, layout_.f_previous, previous))
      return false;
    words[2 * k] = reinterpret_cast<uint64_t>(code);
    words[2 * k + 1] = reinterpret_cast<uint64_t>(instr) ^ (uint64_t(uint8_t(owner)) << 56);
    // Only the checking walk (Safe) lists the codes: the key's walk has no list, and no check of
    // one per frame.
    if constexpr (Safe) {
      if (codes != nullptr && ncodes < kRawCodesChecked) codes[ncodes++] = code;
    }
    frame = previous;
  }
  n = k;
  return true;
}

bool PythonFrames::frames_readable(PyObj ts, bool& held, const TracerThreadState& tracer_ts) {
  // Whether this thread holds the GIL now. PyGILState_Check answers 1 when GIL checking is
  // off, so where the running thread state can be read, that decides.
  held = unchecked_get_ != nullptr ? unchecked_get_() == ts : gil_check_() != 0;
  return held || readable_released(tracer_ts);
}

bool PythonFrames::readable_released(const TracerThreadState& tracer_ts) {
  return tracer_ts.may_take_gil && gil_ensure_ != nullptr && gil_release_ != nullptr &&
         !(is_finalizing_ != nullptr && is_finalizing_());
}

bool PythonFrames::site_words(uint64_t* words, size_t& n, TracerThreadState& tracer_ts) {
  n = 0;
  if (raw_state_.load(std::memory_order_relaxed) != kRawOn || !available()) return false;
  PyObj ts = nullptr;
  if (attached_is_own_) {
    // 3.12+: one call tells whether this thread holds the GIL (its own state, attached: no
    // PyGILState lookup, no Py_IsInitialized) or not (null: then its state, if it has one).
    ts = unchecked_get_();
    if (ts == nullptr && (!is_initialized_() || (ts = this_thread_state_()) == nullptr || !readable_released(tracer_ts)))
      return false;
  } else {
    if (!is_initialized_()) return false;
    ts = this_thread_state_();
    bool held = false;
    if (ts == nullptr || !frames_readable(ts, held, tracer_ts)) return false;
  }
  size_t ncodes = 0;
  return raw_walk_as<false>(ts, words, n, nullptr, ncodes, kRawFramesPerFrame * 64);
}

void PythonFrames::check_raw_layout(PyObj ts, const void* const* api_codes, size_t napi, bool truncated) {
  if (raw_state_.load(std::memory_order_relaxed) != kRawChecking || napi == 0) return;
  const void* raw[kRawCodesChecked];
  size_t nraw = 0;
  uint64_t words[kSiteWordsMax];
  size_t nwords = 0;
  bool ok = raw_walk_as<true>(ts, words, nwords, raw, nraw, kRawCodesChecked);
  // The API's code objects must be the raw chain's, in order (the raw chain may hold more:
  // frames not yet started, entry frames); the innermost complete frame comes first in both.
  size_t j = 0;
  for (size_t i = 0; ok && i < napi; ++i) {
    while (j < nraw && raw[j] != api_codes[i]) ++j;
    if (j == nraw) ok = truncated && nraw == kRawCodesChecked && i > 0;  // raw list ran out: fine only if cut
    if (j == nraw) break;
    ++j;
  }
  if (!ok) {
    raw_state_.store(kRawOff, std::memory_order_relaxed);
    return;
  }
  if (raw_checks_.fetch_add(1, std::memory_order_relaxed) + 1 >= kRawChecksNeeded) {
    int expected = kRawChecking;
    raw_state_.compare_exchange_strong(expected, kRawOn, std::memory_order_relaxed);
  }
}

bool PythonFrames::resolve_once() {
  std::lock_guard lock(mu_);
  if (!tried_.load(std::memory_order_relaxed)) {
    ok_ = resolve();
    tried_.store(true, std::memory_order_release);
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
  bool held = false;
  if (!frames_readable(ts, held, thread_state())) return 0;
  int gil_state = held ? -1 : gil_ensure_();
  struct Release {
    PythonFrames* self;
    int state;
    ~Release() {
      if (state != -1) self->gil_release_(state);
    }
  } release{this, gil_state};
  size_t n = 0;
  ThreadFrameCache& cache = thread_cache(this);
  const bool checking = raw_state_.load(std::memory_order_relaxed) == kRawChecking;
  thread_local std::vector<const void*> api_codes;
  api_codes.clear();
  PyObj frame = get_frame_(ts);  // new reference or NULL
  while (frame != nullptr && n < max_frames) {
    PyObj code = frame_code_(frame);  // new reference
    if (checking) api_codes.push_back(code);
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
  const bool truncated = frame != nullptr;
  if (frame != nullptr) decref_(frame);
  if (checking) check_raw_layout(ts, api_codes.data(), api_codes.size(), truncated);
  return n;
}

}  // namespace streamrace::tracer
