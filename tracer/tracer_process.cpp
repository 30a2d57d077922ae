// TracerProcess: see tracer_process.h.
#include "tracer/tracer_process.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
#include "tracer/precise/kernel_selection.h"
#include "tracer/precise/sanitizer_session.h"
#endif
#include "tracer/host_clock.h"
#include "tracer/self_time.h"
#include "tracer/launch_corpus.h"
#include "tracer/tracer_settings.h"
#include "tracer/native_unwind.h"

namespace streamrace::tracer {

namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT};
struct sigaction g_previous[65];
// STREAMRACE_CRASH_BACKTRACE=1: a process that dies of a fault writes its native stack to
// stderr first (for a report of a crash inside the tracer or a library it calls into).
bool g_crash_backtrace = false;

void write_crash_backtrace(int sig) {
  if (!g_crash_backtrace || sig == SIGTERM || sig == SIGINT) return;
  char head[96];
  const int n = std::snprintf(head, sizeof head, "streamrace: pid %d dies of signal %d; its stack:\n", int(getpid()), sig);
  if (n > 0) (void)!write(STDERR_FILENO, head, size_t(n));
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);  // no allocation (preloaded below)
}

void signal_handler(int sig, siginfo_t* info, void* uctx) {
  int saved = errno;
  const struct sigaction& prev = g_previous[sig];
  bool prev_is_function = (prev.sa_flags & SA_SIGINFO) ? prev.sa_sigaction != nullptr
                                                        : (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN);
  if (prev_is_function) {
    // The program handles this signal itself and may well go on running: only flush.
    if (sig != SIGINT && sig != SIGTERM) TracerProcess::get().on_fatal_signal(sig, false);
    if (prev.sa_flags & SA_SIGINFO) {
      prev.sa_sigaction(sig, info, uctx);
    } else {
      prev.sa_handler(sig);
    }
    errno = saved;
    return;
  }
  if (prev.sa_handler == SIG_IGN) return;
  // Default action (the process dies): save what we can, then die the default way.
  write_crash_backtrace(sig);
  TracerProcess::get().on_fatal_signal(sig);
  sigaction(sig, &prev, nullptr);
  raise(sig);
  errno = saved;
}

void exit_hook() {
  try {
    TracerProcess::get().at_exit();
  } catch (...) {
    // Never let the tracer's trouble change how the program ends.
  }
}

StackMode stack_mode() {
  auto v = tracer_setting("stacks");
  return parse_stack_mode(v ? v->c_str() : nullptr);
}

std::string read_cmdline() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (auto& ch : raw)
    if (ch == '\0') ch = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

int env_rank() {
  for (const char* name : {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::atoi(v);
  }
  return -1;
}

std::string runtime_version() {
  using Fn = int (*)(int*);
  Fn fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion"));
  for (const char* lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
    if (fn) break;
    if (void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) fn = reinterpret_cast<Fn>(dlsym(h, "cudaRuntimeGetVersion"));
  }
  int v = 0;
  if (fn && fn(&v) == 0) return std::to_string(v);
  return "";
}

std::string nccl_version() {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return "";
  using Fn = int (*)(int*);
  Fn fn = reinterpret_cast<Fn>(dlsym(h, "pncclGetVersion"));
  if (!fn) fn = reinterpret_cast<Fn>(dlsym(h, "ncclGetVersion"));
  int v = 0;
  if (fn && fn(&v) == 0) return std::to_string(v);
  return "";
}

// Whether any device's primary context is active (retained by the runtime or the program).
[[maybe_unused]] bool primary_context_active() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) return false;
  using CountFn = int (*)(int*);
  using StateFn = int (*)(int, unsigned int*, int*);
  auto count = reinterpret_cast<CountFn>(dlsym(cuda, "cuDeviceGetCount"));
  auto state = reinterpret_cast<StateFn>(dlsym(cuda, "cuDevicePrimaryCtxGetState"));
  bool active_any = false;
  int n = 0;
  if (count && state && count(&n) == 0) {
    for (int d = 0; d < n && !active_any; ++d) {
      unsigned int flags = 0;
      int active = 0;
      if (state(d, &flags, &active) == 0 && active) active_any = true;
    }
  }
  dlclose(cuda);
  return active_any;
}

// Setting chunk_kib: a thread's record chunk in bytes (RecorderOptions::handoff_bytes), or the
// default with `why` set: 256 KiB, or 4 MiB under a capture window or ring (`windowed`), whose
// writer flushes at every handoff (a chunk of its own each time) as it did with 4 MiB chunks.
size_t chunk_bytes(std::string* why, bool windowed) {
  const size_t fallback = windowed ? size_t(4) << 20 : RecorderOptions{}.handoff_bytes;
  auto kib = tracer_setting("chunk_kib");
  if (!kib) return fallback;
  char* end = nullptr;
  const unsigned long v = std::strtoul(kib->c_str(), &end, 10);
  if (end != kib->c_str() && *end == '\0' && v >= 64 && v <= 65536) return size_t(v) << 10;
  if (why) *why = "setting chunk_kib=" + *kib + " ignored (takes 64 to 65536): buffers of " + std::to_string(fallback >> 10) + " KiB";
  return fallback;
}

// The capture settings; the whole run (and one line on stderr, and a notice) when they do not
// parse: the tracer cannot stop the program, and a trace of everything loses nothing.
CaptureOptions capture_options(std::string* why) {
  std::string error;
  auto o = capture_settings(&error);
  if (o) return *o;
  if (why) *why = error;
  return CaptureOptions{};
}

}  // namespace

bool TracerProcess::capture_wants_nvtx() { return capture_options(nullptr).wants_nvtx(); }

TracerProcess& TracerProcess::get() {
  static TracerProcess* p = new TracerProcess();  // never destroyed
  return *p;
}

bool TracerProcess::enabled() {
  // Read once: NCCL entry points ask on every call, and STREAMRACE_OPTIONS would be parsed each time.
  static const bool on = !tracer_flag("disable");
  return on;
}

std::string TracerProcess::next_trace_path() const {
  const std::optional<std::string> out = tracer_setting("out");
  const std::string d = out && !out->empty() ? *out : std::string(".");
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string base = d + "/" + host + "-" + std::to_string(getpid());
  std::string path = base + ".srace";
  struct stat st;
  for (int i = 1; lstat(path.c_str(), &st) == 0 && i < 1000; ++i) path = base + "-" + std::to_string(i) + ".srace";
  return path;
}

trace::TraceHeader TracerProcess::make_header() {
  InternalCallGuard guard;
  trace::TraceHeader h;
  h.producer = "libstreamrace 0.1.0";
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  h.host = host;
  h.pid = getpid();
  h.rank = env_rank();
  if (driver_.loaded()) {
    h.devices = driver_.devices();
    h.driver_version = driver_.driver_version();
  }
  h.cuda_version = runtime_version();
  // Which clock times the records (setting host_clock): both are CLOCK_MONOTONIC's time.
  h.extra["host_clock"] = host_clock::tsc_started() ? "tsc" : "clock_gettime";
  h.cupti_version = precise_started_ ? "" : cupti_.version();
  if (precise_started_) {
    h.mode = "precise";
    h.extra["precise"] = precise_spec_;
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
    h.extra["sanitizer_library"] = static_cast<precise::SanitizerSession*>(sanitizer_)->library_path();
#endif
  }
  h.nccl_version = nccl_version();
  h.command = read_cmdline();
  if (!cupti_.library_path().empty()) h.extra["cupti_library"] = cupti_.library_path();
  h.extra["stacks"] = tracer_setting("stacks").value_or("auto");
  return h;
}

void TracerProcess::create_core_locked() {
  if (handler_.load()) return;
  driver_.load();
  RecorderOptions opts;
  opts.path = next_trace_path();
  opts.header_provider = [this] { return make_header(); };
  std::string capture_error;
  opts.capture = capture_options(&capture_error);
  std::string chunk_error;
  opts.handoff_bytes = chunk_bytes(&chunk_error, opts.capture.active());
  recorder_ = new TraceRecorder(opts);
  owner_pid_.store(int(::syscall(SYS_getpid)));
  if (!chunk_error.empty()) {
    std::fprintf(stderr, "streamrace: %s in pid %d\n", chunk_error.c_str(), int(getpid()));
    recorder_->add_notice(trace::NoticeLevel::kWarning, chunk_error);
  }
  if (!capture_error.empty()) {
    std::fprintf(stderr, "streamrace: capture settings ignored in pid %d: %s; the whole run is traced\n", int(getpid()),
                 capture_error.c_str());
    recorder_->add_notice(trace::NoticeLevel::kWarning,
                          "capture settings ignored (" + capture_error + "): the whole run is traced");
  }
  stacks_ = new StackCapture(recorder_->stacks(), recorder_->strings(), stack_mode());
  stacks_->set_python_sites(tracer_setting("python_sites").value_or("1") != "0");
  stacks_->set_native_cached(tracer_setting("native_unwind").value_or("cached") != "dwarf");
  auto* handler = new CudaCallHandler(*recorder_, allocs_, driver_, stacks_);
  if (TorchAllocatorHook::enabled_by_env()) handler->set_torch_allocator_hook(new TorchAllocatorHook(*handler));
  handler->set_kernel_signatures(tracer_setting("kernel_signatures").value_or("1") != "0");
  handler->set_launch_memo(tracer_setting("launch_memo").value_or("1") != "0");
  handler->set_deferred_scan(tracer_setting("defer_scan").value_or("1") != "0");
  // The records' clock: by default (auto) the scaled time-stamp counter wherever the kernel
  // keeps CLOCK_MONOTONIC with it (a record then reads the counter: no call, no LFENCE; ~0.06 µs
  // less per launch-loop launch on an H100 host, bench/results/realistic_overhead.md), silently
  // clock_gettime elsewhere; the header's host_clock says which (make_header).
  const std::optional<std::string> clock = tracer_setting("host_clock");
  if (!clock || *clock == "auto") {
    if (host_clock::tsc_usable(nullptr)) host_clock::start_tsc();
  } else if (*clock != "monotonic") {
    std::string why = "takes auto, monotonic or tsc";
    if (*clock == "tsc" && host_clock::tsc_usable(&why)) {
      host_clock::start_tsc();
      recorder_->add_notice(trace::NoticeLevel::kInfo,
                            "setting host_clock=tsc: host times from the time-stamp counter, scaled to CLOCK_MONOTONIC");
    } else {
      std::fprintf(stderr, "streamrace: setting host_clock=%s ignored in pid %d (%s): host times from clock_gettime\n",
                   clock->c_str(), int(getpid()), why.c_str());
      recorder_->add_notice(trace::NoticeLevel::kWarning,
                            "setting host_clock=" + *clock + " ignored (" + why + "): host times from clock_gettime");
    }
  }
  if (auto cut = tracer_setting("bench_cut"); cut && *cut != "0") {  // a benchmark's
    const int c = std::atoi(cut->c_str());
    handler->set_bench_cut(c >= 1 && c <= 5 ? c : 0);
    if (c == 6) recorder_->set_bench_unlocked_seq(true);
    if (c >= 1 && c <= 5)
      recorder_->add_notice(trace::NoticeLevel::kWarning,
                            "setting bench_cut " + *cut + ": kernel launches stop early and are missing from this trace "
                            "(a benchmark's setting, not for tracing)");
    if (c == 6)
      recorder_->add_notice(trace::NoticeLevel::kWarning,
                            "setting bench_cut 6: records take their sequence numbers without a locked add, so records of "
                            "threads that call at once may share one (a benchmark's setting, not for tracing)");
  }
  if (auto spec = tracer_setting("launch_corpus")) {  // a benchmark's (tracer/launch_corpus.h)
    std::string why;
    if (auto corpus = LaunchCorpus::open(*spec, &why)) {
      handler->set_launch_corpus(corpus.release());  // lives as long as the handler
    } else {
      std::fprintf(stderr, "streamrace: %s\n", why.c_str());
    }
  }
  handler_.store(handler);
  install_exit_hooks();
  // After the exit hooks: the guard's SIGSEGV handler must sit on top of the tracer's own
  // fatal-signal handler, which it passes every fault that is not its own.
  if (tracer_flag("host_accesses")) {
    host_ = new HostAccessTracker(PageGuard::process(), *recorder_, stack_mode() != StackMode::kNone);
    if (host_->active()) {
      handler->set_host_access_tracker(host_);
    } else {
      recorder_->add_notice(trace::NoticeLevel::kError,
                            "host accesses were requested but the SIGSEGV handler could not be installed: none are "
                            "recorded");
    }
  }
}

CudaCallHandler& TracerProcess::handler() {
  if (CudaCallHandler* h = handler_.load(std::memory_order_acquire)) return *h;
  std::lock_guard lock(mu_);
  create_core_locked();
  return *handler_.load();
}

void TracerProcess::install_exit_hooks() {
  if (hooks_installed_) return;
  hooks_installed_ = true;
  std::atexit(exit_hook);
  if (const char* v = std::getenv("STREAMRACE_CRASH_BACKTRACE"); v && std::strcmp(v, "1") == 0) {
    void* frame[1];
    backtrace(frame, 1);  // loads the unwinder now: in a signal handler it could not allocate
    g_crash_backtrace = true;
  }
  for (int sig : kFatalSignals) {
    struct sigaction sa {};
    sa.sa_sigaction = signal_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    struct sigaction prev {};
    if (sigaction(sig, nullptr, &prev) != 0) continue;
    // A program that ignores SIGINT/SIGTERM (nohup) keeps doing so.
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) continue;
    g_previous[sig] = prev;
    sigaction(sig, &sa, nullptr);
  }
}

namespace {

#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
std::string own_directory() {
  Dl_info info{};
  static const int anchor = 0;
  if (!dladdr(&anchor, &info) || info.dli_fname == nullptr) return ".";
  std::string p = info.dli_fname;
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

#endif

}  // namespace

bool TracerProcess::precise_wanted() {
  return tracer_flag("precise");
}

bool TracerProcess::precise_starts_at_load() {
  return tracer_setting("precise_start").value_or("load") != "init";
}

bool TracerProcess::start_precise() {
  std::lock_guard lock(mu_);
  if (precise_requested_) return precise_started_;
  precise_requested_ = true;
  precise_spec_ = tracer_setting("precise").value_or("all");
  create_core_locked();
  CudaCallHandler& h = *handler_.load();
  std::string why;
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
  precise::SanitizerOptions options;
  if (auto sel = precise::selector_from_setting(precise_spec_, &why)) options.selector = std::move(*sel);
  if (why.empty()) {
    options.patches_path = tracer_setting("precise_patches").value_or("");
    if (options.patches_path.empty()) options.patches_path = own_directory() + "/streamrace_precise_patches.fatbin";
    if (tracer_setting("precise_module_filter").value_or("1") == "0") options.filter_modules = false;
    if (auto n = tracer_setting("precise_sample")) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(n->c_str(), &end, 10);
      if (n->empty() || *end != '\0' || v > 1000000)
        why = "STREAMRACE_PRECISE_SAMPLE=" + *n + " is not a count of launches (0 to 1000000)";
      else
        options.sample = uint32_t(v);
    }
    if (tracer_setting("precise_unpatch").value_or("1") == "0") options.unpatch = false;
    if (tracer_setting("precise_graph_nodes").value_or("1") == "0") options.graph_nodes = false;
    if (access(options.patches_path.c_str(), R_OK) != 0)
      why = "the device callbacks " + options.patches_path + " are missing";
  }
  if (why.empty()) {
    auto* session = new precise::SanitizerSession();  // lives as long as the process
    InternalCallGuard guard;
    why = session->start(h, std::move(options));
    if (why.empty()) {
      sanitizer_ = session;
      precise_started_ = true;
    }
  }
#else
  why = "precise mode is not built into this libstreamrace.so";
#endif
  // Said when the process initialises CUDA (on_cuda_init): a process that never uses CUDA
  // (the shell of a job script) has nothing to say and writes no trace.
  precise_failure_ = why;
  (void)h;
  return precise_started_;
}

void TracerProcess::on_cuda_init() {
  CudaCallHandler& h = handler();
  std::string why;
  // Precise mode started from here (STREAMRACE_PRECISE_START=init) instead of at load time.
  if (precise_wanted() && !precise_starts_at_load() && start_precise()) return;
  {
    std::lock_guard lock(mu_);
    if (cupti_started_ || precise_started_) return;
    if (const char* all = std::getenv("STREAMRACE_OPTIONS"))
      if (auto parsed = parse_tracer_options(all); !parsed.error.empty())
        std::fprintf(stderr, "streamrace: STREAMRACE_OPTIONS ignored in pid %d: %s\n", int(getpid()),
                     parsed.error.c_str());
    if (!precise_failure_.empty()) {
      std::fprintf(stderr, "streamrace: precise mode unavailable in pid %d: %s; tracing with CUPTI (default mode)\n",
                   int(getpid()), precise_failure_.c_str());
      h.recorder().add_notice(trace::NoticeLevel::kError,
                              "precise mode was requested but is unavailable: " + precise_failure_ +
                                  ". This trace was recorded in the default mode (pointer arguments only).");
    }
    if (h.recorder().capture().wants_nvtx()) {
      const char* nvtx = std::getenv("NVTX_INJECTION64_PATH");
      Dl_info self{};
      static const int anchor = 0;
      const bool ours = nvtx && dladdr(&anchor, &self) && self.dli_fname && std::strcmp(nvtx, self.dli_fname) == 0;
      if (!ours) {
        std::string why = std::string("NVTX_INJECTION64_PATH names ") + (nvtx && *nvtx ? nvtx : "nothing") +
                          ", so NVTX ranges (the step marker '" + h.recorder().capture().step_range +
                          "', an NVTX window) may not reach the tracer";
        std::fprintf(stderr, "streamrace: pid %d: %s\n", int(getpid()), why.c_str());
        h.recorder().add_notice(trace::NoticeLevel::kWarning, why);
      }
    }
    cupti_started_ = true;
    // Device timestamps (CUPTI activity records) feed `streamrace overlap` and the report
    // timelines, not race detection, and cost about half of the tracer's overhead on a real
    // training step (bench/results/realistic_overhead.md): opt-in.
    bool want_timing = tracer_flag("timing");
    why = cupti_.start(h, want_timing, tracer_flag("runtime_launches"));
    if (!why.empty()) status_ = why;
  }
  if (!why.empty()) {
    std::fprintf(stderr,
                 "streamrace: cannot trace CUDA calls in pid %d: %s; its trace records no CUDA activity "
                 "(run without Nsight, the PyTorch profiler or compute-sanitizer)\n",
                 int(getpid()), why.c_str());
    recorder().set_capture_status(why);
    recorder().add_notice(trace::NoticeLevel::kError,
                          "CUDA calls were not captured in this process: " + why +
                              ". Findings from this trace are incomplete; an empty report means nothing.");
  }
}

std::string TracerProcess::capture_status() const { return status_; }

int TracerProcess::bench_pause(bool paused) {
  std::lock_guard lock(mu_);
  if (!cupti_started_ || status_ != "ok") return -1;
  if (paused && !cupti_paused_once_) {
    cupti_paused_once_ = true;
    recorder().add_notice(trace::NoticeLevel::kWarning,
                          "the program paused the tracer's CUDA callbacks (streamrace_bench_pause, for an overhead "
                          "benchmark): CUDA calls and PyTorch allocator events made while paused are not in this trace, so its findings may be "
                          "wrong or missing");
  }
  if (!cupti_.set_paused(paused)) return -1;
  // PyTorch's allocator events too: a paused block measures the program without the tracer.
  if (CudaCallHandler* h = handler_.load())
    if (TorchAllocatorHook* hook = h->torch_allocator_hook()) hook->set_paused(paused);
  return 0;
}

void TracerProcess::at_exit() {
  if (!owns_this_process()) return;  // a vfork() child that called exit(): its parent's trace goes on
  if (exited_.exchange(true)) return;
  CudaCallHandler* h = handler_.load();
  // The process used CUDA but the driver never called InitializeInjection (another tool
  // claimed CUDA_INJECTION64_PATH): say so rather than leave no trace, which would read as
  // "nothing to report".
  // Loaded is not used: `import torch` loads libcuda without initialising it. The driver
  // answers CUDA_ERROR_NOT_INITIALIZED (3) until cuInit ran, and only cuInit injects.
  bool cuda_used = false;
  if (void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    using CtxGetCurrent = int (*)(void**);
    auto get_current = reinterpret_cast<CtxGetCurrent>(dlsym(cuda, "cuCtxGetCurrent"));
    void* ctx = nullptr;
    cuda_used = get_current == nullptr || get_current(&ctx) != 3;
    dlclose(cuda);
  }
  if (!cupti_started_ && !precise_started_ && cuda_used) {
    const char* inj = std::getenv("CUDA_INJECTION64_PATH");
    std::string why = std::string("not-injected: CUDA_INJECTION64_PATH names ") + (inj && *inj ? inj : "nothing") +
                      ", so the CUDA driver never started the tracer";
    std::fprintf(stderr, "streamrace: cannot trace CUDA calls in pid %d: %s\n", int(getpid()), why.c_str());
    recorder().set_capture_status(why);
    recorder().add_notice(trace::NoticeLevel::kError, "CUDA calls were not captured in this process: " + why);
    h = handler_.load();
  }
  if (!h) return;
  {
    InternalCallGuard guard;
    if (cupti_started_) cupti_.flush_activity(true);
    // Every guarded page gets its protection back before exit handlers of other libraries run.
    if (host_) host_->finish();
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
    // Launches since the last synchronisation still hold their intervals on the device.
    if (precise_started_ && cuda_used) {
      auto* session = static_cast<precise::SanitizerSession*>(sanitizer_);
      session->collect_all();
      precise::SessionCounts n = session->counts();
      // A launcher (torchrun) imports torch, and the Sanitizer library initialises the
      // driver, without any CUDA work: only a process holding a context went uncaptured.
      if (n.api_callbacks == 0 && primary_context_active()) {
        std::string why = "precise-no-callbacks: the Compute Sanitizer session received no CUDA API callback";
        std::fprintf(stderr, "streamrace: cannot trace CUDA calls in pid %d: %s\n", int(getpid()), why.c_str());
        recorder().set_capture_status(why);
        recorder().add_notice(trace::NoticeLevel::kError, "CUDA calls were not captured in this process: " + why);
      } else if (n.api_callbacks > 0) {
        char msg[400];
        int len = std::snprintf(msg, sizeof msg,
                                "precise mode: %llu modules patched, %llu left unpatched (no selected kernel), %llu "
                                "launches measured",
                                (unsigned long long)n.patched_modules, (unsigned long long)n.skipped_modules,
                                (unsigned long long)n.patched_launches);
        if (n.measured_graph_nodes > 0 && len > 0 && size_t(len) < sizeof msg)
          len += std::snprintf(msg + len, sizeof msg - size_t(len), ", %llu kernel nodes of graph launches measured",
                               (unsigned long long)n.measured_graph_nodes);
        if (n.graph_kernel_nodes > 0 && len > 0 && size_t(len) < sizeof msg)
          len += std::snprintf(msg + len, sizeof msg - size_t(len), ", %llu kernel nodes of graph launches not measured",
                               (unsigned long long)n.graph_kernel_nodes);
        if (n.sampled_out > 0 && len > 0 && size_t(len) < sizeof msg)
          len += std::snprintf(msg + len, sizeof msg - size_t(len), ", %llu launches left unmeasured by the sample limit",
                               (unsigned long long)n.sampled_out);
        if ((n.unpatched_modules > 0 || n.repatched_modules > 0) && len > 0 && size_t(len) < sizeof msg)
          len += std::snprintf(msg + len, sizeof msg - size_t(len),
                               ", %llu modules unpatched once fully sampled (%llu patched again for a new shape)",
                               (unsigned long long)n.unpatched_modules, (unsigned long long)n.repatched_modules);
        if (n.unmeasured_unpatched > 0 && len > 0 && size_t(len) < sizeof msg)
          std::snprintf(msg + len, sizeof msg - size_t(len), ", %llu selected launches of unpatched modules not measured",
                        (unsigned long long)n.unmeasured_unpatched);
        recorder().add_notice(trace::NoticeLevel::kInfo, msg);
        if (tracer_flag("precise_debug"))
          std::fprintf(stderr, "streamrace (pid %d): %s, %llu API callbacks\n", int(getpid()), msg,
                       (unsigned long long)n.api_callbacks);
      }
    }
#endif
  }
  if (self_time::enabled()) {
    const std::string t = self_time::summary();
    std::fprintf(stderr, "streamrace (pid %d): %s\n", int(getpid()), t.c_str());
    recorder().add_notice(trace::NoticeLevel::kInfo, t);
  }
  if (stacks_ != nullptr) {
    if (const std::string slow = NativeUnwinder::slow_notice(NativeUnwinder::counts(), NativeUnwinder::why_slow()); !slow.empty())
      recorder().add_notice(trace::NoticeLevel::kWarning, slow);
  }
  if (stacks_ != nullptr && tracer_setting("python_sites").value_or("1") == "2")
    std::fprintf(stderr, "streamrace (pid %d): %s\n", int(getpid()), stacks_->python_sites_summary().c_str());
  recorder_->close();
}

bool TracerProcess::owns_this_process() const {
  // The system call, not a cached value: a vfork() child has its own pid and the parent's memory.
  // No recorder yet (0): nothing of another process's to protect.
  const int owner = owner_pid_.load(std::memory_order_relaxed);
  return owner == 0 || owner == int(::syscall(SYS_getpid));
}

bool TracerProcess::before_exec() {
  if (!handler_.load() || !recorder_ || exited_.load() || !owns_this_process()) return false;
  try {
    const bool forked = forked_child_;
    // What at_exit collects first, run by the recorder's flusher thread with the seal: CUDA's
    // only in the process that ran it (a forked child must not call into the parent's CUPTI or
    // Sanitizer API: their locks may be held there), and the host accesses caught since the
    // last CUDA call.
    auto before = [this, forked] {
      InternalCallGuard guard;
      if (!forked) {
        if (cupti_started_) cupti_.flush_activity(true);
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
        if (precise_started_) static_cast<precise::SanitizerSession*>(sanitizer_)->collect_all();
#endif
      }
      if (host_ && host_->has_pending()) host_->drain();
    };
    // No allocation on this thread's side (an exec may come from a signal handler that
    // interrupted malloc): the lambda fits std::function's own storage.
    switch (recorder_->seal_for_exec(before, kExecWaitMs)) {
      case TraceRecorder::ExecSeal::kSealed: return true;
      case TraceRecorder::ExecSeal::kClosed:
        closed_for_exec_ = recorder_;
        return true;
      case TraceRecorder::ExecSeal::kNone: return false;
    }
  } catch (...) {
  }
  return false;
}

void TracerProcess::after_failed_exec() {
  if (!recorder_ || !owns_this_process()) return;
  try {
    if (closed_for_exec_ == nullptr) {
      recorder_->unseal_after_exec();
      return;
    }
    // A windowed trace closed for the exec: a new one (this part allocates: a failed exec of a
    // windowed trace from a signal handler is not safe).
    const std::string earlier = closed_for_exec_->path();
    closed_for_exec_ = nullptr;
    if (CudaCallHandler* h = handler_.load()) {
      start_new_recorder(*h);
      if (host_) host_->set_recorder(*recorder_);
      recorder_->add_notice(trace::NoticeLevel::kWarning,
                            "an exec failed after this process's trace " + earlier +
                                " was finished for it (a trace with capture windows or a ring is finished at an exec): "
                                "this trace goes on from there, without the state that trace recorded");
    }
  } catch (...) {
  }
}

void TracerProcess::at_quick_exit() {
  // A vfork() child leaving with _exit (an exec that failed, as in Python's subprocess): the
  // recorder in memory is its parent's, which goes on.
  if (!owns_this_process()) return;
  if (exited_.exchange(true)) return;
  if (!handler_.load() || !recorder_) return;
  try {
    if (host_) host_->finish();
    recorder_->close();
  } catch (...) {
  }
}

void TracerProcess::on_fatal_signal(int, bool fatal) {
  if (handler_.load() && recorder_ && owns_this_process()) recorder_->emergency_flush(fatal);
}

void TracerProcess::after_fork_in_child() {
  // The parent's recorder, its flusher thread and its locks stay behind in the parent; the
  // child starts a trace of its own. The parent's objects are leaked here on purpose.
  CudaCallHandler* h = handler_.load();
  new (&mu_) std::mutex();
  if (!h) return;
  forked_child_ = true;
  start_new_recorder(*h);
  if (host_) {
    // The child's pages keep the parent's protections: give them back; the parent's windows
    // and pinned memory mean nothing to the child (CUDA does not work across fork).
    host_->reset_after_fork();
    host_->set_recorder(*recorder_);
  }
  exited_.store(false);
}

void TracerProcess::start_new_recorder(CudaCallHandler& h) {
  RecorderOptions opts;
  opts.path = next_trace_path();
  opts.header_provider = [this] { return make_header(); };
  opts.capture = capture_options(nullptr);
  opts.handoff_bytes = chunk_bytes(nullptr, opts.capture.active());
  recorder_ = new TraceRecorder(opts);
  owner_pid_.store(int(::syscall(SYS_getpid)));
  stacks_ = new StackCapture(recorder_->stacks(), recorder_->strings(), stack_mode());
  stacks_->set_python_sites(tracer_setting("python_sites").value_or("1") != "0");
  stacks_->set_native_cached(tracer_setting("native_unwind").value_or("cached") != "dwarf");
  h.set_recorder(*recorder_);
  h.set_stacks(stacks_);
}

}  // namespace streamrace::tracer
