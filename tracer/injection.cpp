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

// _exit and _Exit skip atexit handlers and destructors: a process leaving that way (a forked
// worker's os._exit, a child's _exit after its work) would lose every record not yet flushed.
// The preloaded library interposes them: the trace is finished first (only the recorder's own
// locks, no loader call: a forked child of a threaded parent may not take others), then the
// real call runs.
namespace {
[[noreturn]] void real_exit(const char* name, int status) {
  using ExitFn = void (*)(int);
  auto fn = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, name));
  if (fn) fn(status);
  syscall(SYS_exit_group, status);  // no next definition (cannot happen with glibc)
  __builtin_unreachable();
}
}  // namespace

extern "C" __attribute__((visibility("default"), noreturn)) void _exit(int status) {
  if (TracerProcess::enabled()) TracerProcess::get().at_quick_exit();
  real_exit("_exit", status);
}

extern "C" __attribute__((visibility("default"), noreturn)) void _Exit(int status) {
  if (TracerProcess::enabled()) TracerProcess::get().at_quick_exit();
  real_exit("_Exit", status);
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
