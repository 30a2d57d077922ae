// TracerProcess: the tracer's state in one process, created on first use and never
// destroyed (it must outlive every other library's exit handlers). Owns the recorder, the
// allocation table, the driver entry points, the call handler and the CUPTI session, and
// does the process-level chores: trace file naming, header, exit/signal/fork handling.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "tracer/allocation_table.h"
#include "tracer/thread_state.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/cupti_session.h"
#include "tracer/driver_api.h"
#include "tracer/stack_capture.h"
#include "tracer/trace_recorder.h"

namespace streamrace::tracer {

class TracerProcess {
 public:
  static TracerProcess& get();
  // True unless STREAMRACE_DISABLE is set.
  static bool enabled();

  // CUDA is being initialised (InitializeInjection): subscribe to CUPTI. Idempotent. In
  // precise mode (STREAMRACE_PRECISE set, precise mode built in) the Sanitizer session has
  // been started at load time instead and CUPTI is left alone.
  void on_cuda_init();
  // Precise mode: STREAMRACE_PRECISE (all | regex:PATTERN | names:FILE) asks for the
  // Compute Sanitizer session instead of CUPTI. It starts at load time (the LD_PRELOAD
  // constructor, before CUDA initialises) or, with STREAMRACE_PRECISE_START=init, inside
  // InitializeInjection. start_precise() returns whether the session runs; a failure is
  // recorded in the trace and said on stderr, and CUDA calls are then taken from CUPTI.
  static bool precise_wanted();
  // The capture settings (steps, window, ring, step_range) need NVTX callbacks.
  static bool capture_wants_nvtx();
  static bool precise_starts_at_load();
  bool start_precise();
  bool precise_requested() const { return precise_requested_; }
  // The recorder, handler and stack capture (created on first use, without touching CUDA).
  CudaCallHandler& handler();
  TraceRecorder& recorder() { return handler().recorder(); }

  void at_exit();
  // _exit/_Exit (no atexit handlers run): finish the trace with the recorder's own locks only.
  void at_quick_exit();
  void after_fork_in_child();
  // exec (tracer/injection.cpp interposes the exec family): the trace is finished before the
  // image goes, its records written and the end-of-trace marker after them, the file kept
  // open; if the exec fails, after_failed_exec() takes the marker back and tracing goes on in
  // the same file. Returns whether there is anything to take back.
  bool before_exec();
  // How long an exec waits for its trace to be finished (then it goes on without).
  static constexpr int kExecWaitMs = 2000;
  void after_failed_exec();
  // Whether the calling process is the one whose trace this state holds: not so in a vfork()
  // child, which shares the parent's memory (the parent's recorder included) until it execs or
  // _exits, and must not finish the parent's trace.
  bool owns_this_process() const;
  // `fatal`: the default action follows (the trace is finished); otherwise the program's own
  // handler runs next and the process may go on (the trace is only flushed).
  void on_fatal_signal(int sig, bool fatal = true);

  std::string capture_status() const;
  // streamrace_bench_pause (injection.cpp): CUDA callbacks off (paused) or on again, for
  // overhead benchmarks that compare traced and untraced blocks inside one process. The first
  // pause leaves a warning in the trace: calls made while paused are missing. 0 on success,
  // -1 when CUPTI is not tracing this process (precise mode, no CUDA yet, CUPTI unavailable).
  int bench_pause(bool paused);

 private:
  TracerProcess() = default;
  void create_core_locked();
  std::string next_trace_path() const;
  trace::TraceHeader make_header();
  void install_exit_hooks();
  // A recorder of its own for a forked child, or after a failed exec closed the trace.
  void start_new_recorder(CudaCallHandler& h);

  std::mutex mu_;
  std::atomic<CudaCallHandler*> handler_{nullptr};
  DriverApi driver_;
  AllocationTable allocs_;
  TraceRecorder* recorder_ = nullptr;  // leaked on purpose (see class comment)
  StackCapture* stacks_ = nullptr;
  HostAccessTracker* host_ = nullptr;  // --host-accesses; leaked on purpose, as the recorder
  CuptiSession cupti_;
  bool cupti_started_ = false;
  bool cupti_paused_once_ = false;
  bool precise_requested_ = false;
  bool precise_started_ = false;
  std::string precise_spec_;
  std::string precise_failure_;  // why the requested Sanitizer session did not start
  void* sanitizer_ = nullptr;  // precise::SanitizerSession*, only in builds with precise mode
  bool hooks_installed_ = false;
  std::atomic<int> owner_pid_{0};  // the process the recorder belongs to (owns_this_process)
  TraceRecorder* closed_for_exec_ = nullptr;  // a windowed trace's recorder closed by before_exec
  bool forked_child_ = false;      // after_fork_in_child ran: CUDA, CUPTI and the Sanitizer API are the parent's
  std::atomic<bool> exited_{false};
  std::string status_ = "ok";
};

}  // namespace streamrace::tracer
