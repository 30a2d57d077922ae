// How libstreamrace.so gets into a process: LD_PRELOAD runs the constructor below, which
// only points CUDA_INJECTION64_PATH at this library when nothing else claimed it; the CUDA
// driver then calls InitializeInjection when (and only if) the process initialises CUDA.
// A process that never uses CUDA therefore never loads CUPTI, writes nothing and prints
// nothing.
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "tracer/cupti_session.h"
#include "tracer/tracer_process.h"

using streamrace::tracer::TracerProcess;

namespace {

void fork_child() {
  if (TracerProcess::enabled()) TracerProcess::get().after_fork_in_child();
}

const char* own_path() {
  static const int anchor = 0;
  Dl_info info{};
  if (dladdr(&anchor, &info) && info.dli_fname && info.dli_fname[0] == '/') return info.dli_fname;
  return nullptr;
}

__attribute__((constructor)) void streamrace_on_load() {
  if (!TracerProcess::enabled()) return;
  static bool done = false;
  if (done) return;
  done = true;
  pthread_atfork(nullptr, nullptr, fork_child);
  // Precise mode: the Compute Sanitizer session subscribes now, before CUDA initialises,
  // and takes the place of CUPTI, so CUDA_INJECTION64_PATH is not claimed.
  if (TracerProcess::precise_wanted() && TracerProcess::precise_starts_at_load() && TracerProcess::get().start_precise())
    return;
  const char* current = getenv("CUDA_INJECTION64_PATH");
  if (current == nullptr || *current == '\0') {
    if (const char* self = own_path()) setenv("CUDA_INJECTION64_PATH", self, 0);
  }
  // Step markers and NVTX windows need NVTX's calls: the library is the NVTX injection, which
  // hands NVTX to CUPTI (InitializeInjectionNvtx2 below). Only then, and only if unclaimed
  // (Nsight Systems sets its own).
  if (TracerProcess::capture_wants_nvtx()) {
    const char* nvtx = getenv("NVTX_INJECTION64_PATH");
    if (nvtx == nullptr || *nvtx == '\0') {
      if (const char* self = own_path()) setenv("NVTX_INJECTION64_PATH", self, 0);
    }
  }
}

__attribute__((destructor)) void streamrace_on_unload() {
  try {
    if (TracerProcess::enabled()) TracerProcess::get().at_exit();
  } catch (...) {
  }
}

}  // namespace

namespace {
template <typename Fn>
Fn next_fn(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);
using ExecveatFn = int (*)(int, const char*, char* const[], char* const[], int);

// The interposed functions' next definitions (libc's), resolved at load, so that an exec or
// _exit in a vfork() child (where taking the loader's lock the parent's threads may hold is
// best avoided) finds them ready.
struct NextFns {
  using ExitFn = void (*)(int);
  ExitFn exit_lower = next_fn<ExitFn>("_exit");
  ExitFn exit_upper = next_fn<ExitFn>("_Exit");
  ExecveFn execve = next_fn<ExecveFn>("execve");
  ExecvFn execv = next_fn<ExecvFn>("execv");
  ExecvFn execvp = next_fn<ExecvFn>("execvp");
  ExecveFn execvpe = next_fn<ExecveFn>("execvpe");
  FexecveFn fexecve = next_fn<FexecveFn>("fexecve");
  ExecveatFn execveat = next_fn<ExecveatFn>("execveat");
};
const NextFns& next_fns() {
  static const NextFns fns;
  return fns;
}
__attribute__((constructor)) void resolve_next_fns() { (void)next_fns(); }
}  // namespace

// _exit and _Exit skip atexit handlers and destructors: a process leaving that way (a forked
// worker's os._exit, a child's _exit after its work) would lose every record not yet flushed.
// The preloaded library interposes them: the trace is finished first (only the recorder's own
// locks, no loader call: a forked child of a threaded parent may not take others), then the
// real call runs.
namespace {
[[noreturn]] void real_exit(void (*fn)(int), int status) {
  if (fn) fn(status);
  syscall(SYS_exit_group, status);  // no next definition (cannot happen with glibc)
  __builtin_unreachable();
}
}  // namespace

extern "C" __attribute__((visibility("default"), noreturn)) void _exit(int status) {
  if (TracerProcess::enabled()) TracerProcess::get().at_quick_exit();
  real_exit(next_fns().exit_lower, status);
}

extern "C" __attribute__((visibility("default"), noreturn)) void _Exit(int status) {
  if (TracerProcess::enabled()) TracerProcess::get().at_quick_exit();
  real_exit(next_fns().exit_upper, status);
}

// The exec family: a process that replaces its image (os.execv, a launcher that execs the
// real job, a shell's exec) runs no exit handler, so its records since the last flush would be
// lost and its trace would end without the end-of-trace marker. The preloaded library
// interposes every exec function a program can call: the trace is finished first (written,
// marked complete, left open), then the real call runs; if it returns, the exec failed and the
// marker is taken back (TracerProcess::before_exec). In a vfork() child (Python's subprocess)
// nothing is done: the memory, and the trace, are the parent's. The variadic execl* build
// their argument lists and go to execv, execvp and execve (as glibc's own do).
namespace {

class ExecScope {
 public:
  ExecScope() : taken_(TracerProcess::enabled() && TracerProcess::get().before_exec()) {}
  ~ExecScope() {
    if (!taken_) return;
    const int err = errno;  // why the exec failed: the caller reads it after the return
    TracerProcess::get().after_failed_exec();
    errno = err;
  }
  ExecScope(const ExecScope&) = delete;
  ExecScope& operator=(const ExecScope&) = delete;

 private:
  bool taken_;
};


int no_next() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

#define SR_EXEC_EXPORT extern "C" __attribute__((visibility("default")))

SR_EXEC_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  ExecScope scope;
  return next_fns().execve ? next_fns().execve(path, argv, envp) : no_next();
}

SR_EXEC_EXPORT int execv(const char* path, char* const argv[]) {
  ExecScope scope;
  return next_fns().execv ? next_fns().execv(path, argv) : no_next();
}

SR_EXEC_EXPORT int execvp(const char* file, char* const argv[]) {
  ExecScope scope;
  return next_fns().execvp ? next_fns().execvp(file, argv) : no_next();
}

SR_EXEC_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  ExecScope scope;
  return next_fns().execvpe ? next_fns().execvpe(file, argv, envp) : no_next();
}

SR_EXEC_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  ExecScope scope;
  return next_fns().fexecve ? next_fns().fexecve(fd, argv, envp) : no_next();
}

SR_EXEC_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
  ExecScope scope;
  return next_fns().execveat ? next_fns().execveat(dirfd, path, argv, envp, flags) : no_next();
}

// The execl* argument lists are gathered on the stack, as glibc's own do: no allocation, which
// in a vfork() child would change the parent's heap.
namespace {
// Slots for the arguments and the terminating null pointer (`first` null: that one only).
size_t count_args(const char* first, va_list ap) {
  if (first == nullptr) return 1;
  size_t n = 2;
  while (va_arg(ap, char*) != nullptr) ++n;
  return n;
}
// Reads up to and including the terminating null pointer: what follows (execle's envp) is next.
void fill_args(char** argv, size_t n, const char* first, va_list ap) {
  argv[0] = const_cast<char*>(first);
  for (size_t i = 1; i < n; ++i) argv[i] = va_arg(ap, char*);
}
}  // namespace

#define SR_EXECL_ARGS(first, last_named)          \
  va_list ap, count;                              \
  va_start(ap, last_named);                       \
  va_copy(count, ap);                             \
  const size_t n = count_args(first, count);      \
  va_end(count);                                  \
  char** argv = static_cast<char**>(__builtin_alloca(n * sizeof(char*))); \
  fill_args(argv, n, first, ap)

SR_EXEC_EXPORT int execl(const char* path, const char* arg, ...) {
  SR_EXECL_ARGS(arg, arg);
  va_end(ap);
  return execv(path, argv);
}

SR_EXEC_EXPORT int execlp(const char* file, const char* arg, ...) {
  SR_EXECL_ARGS(arg, arg);
  va_end(ap);
  return execvp(file, argv);
}

SR_EXEC_EXPORT int execle(const char* path, const char* arg, ...) {
  SR_EXECL_ARGS(arg, arg);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, argv, envp);
}

// Called by NVTX at a program's first NVTX call when NVTX_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(void* get_export_table) {
  if (!TracerProcess::enabled()) return 0;
  try {
    return streamrace::tracer::cupti_nvtx_injection(get_export_table);
  } catch (...) {
    return 0;
  }
}

// For overhead benchmarks: `paused` non-zero turns the tracer's CUDA callbacks off, zero turns
// them on again (TracerProcess::bench_pause). A program finds it with dlsym(RTLD_DEFAULT, ...)
// or ctypes.CDLL(None) when the library is preloaded; 0 on success, -1 when not tracing.
extern "C" __attribute__((visibility("default"))) int streamrace_bench_pause(int paused) {
  if (!TracerProcess::enabled()) return -1;
  try {
    return TracerProcess::get().bench_pause(paused != 0);
  } catch (...) {
    return -1;
  }
}

// Called by the CUDA driver during cuInit when CUDA_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  if (!TracerProcess::enabled()) return 1;
  try {
    TracerProcess::get().on_cuda_init();
  } catch (...) {
  }
  return 1;
}
