// Loads the fake framework with RTLD_LOCAL (as Python loads PyTorch) and runs it, then leaves
// the way argv[2] says (the tracer's exit paths, preload_test.cpp):
//   return (default)  main returns the framework's status
//   exit              std::exit(7) from a function called by main
//   child             fork: the child runs the framework and leaves with _exit(5); the parent
//                     runs it too, waits, and returns 10 + the child's status
//   signal            raise(SIGTERM) after the run (default action: killed)
//   thread            a second thread runs the framework in a loop while main calls exit(9),
//                     20 ms after the thread finished its first run
//   segv              after the run, writes a read-only page of its own (default action: killed)
//   kill              after the run, waits 600 ms (the tracer's flusher runs every 200 ms), then
//                     raise(SIGKILL): nothing of the tracer runs at the end
//   segv_handled      installs its own SIGSEGV handler first; after the run, writes a read-only
//                     page of its own, which the handler makes writable: prints what it saw
//   threads           four threads started after the framework was loaded run it once each, all
//                     four alive together; main returns the number of runs that failed
//   twice             runs it, waits 450 ms (the tracer's flusher runs every 200 ms), runs it again
//   exec              runs it, then execs itself in mode `return` (a new image, the same pid)
//   exec_failed       runs it, execs a file that is not executable (exec returns -1, errno EACCES),
//                     runs it again
//   vfork_failed      runs it; a vfork() child execs a program that does not exist and leaves
//                     with _exit(127), as Python's subprocess does; the parent runs it again
// With FRAMEWORK_APP_TRACER=PATH, the tracer is not preloaded but loaded here first, with
// dlopen(RTLD_NOW | RTLD_GLOBAL), after start-up, as the CUDA driver loads it from
// CUDA_INJECTION64_PATH: its thread_locals are then outside the static TLS block.
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {
using Run = int (*)();
[[noreturn]] void leave(int code) { std::exit(code); }

char* g_page = nullptr;
volatile int g_handled = 0;
void own_handler(int, siginfo_t* info, void*) {
  char* a = static_cast<char*>(info->si_addr);
  if (g_page == nullptr || a < g_page || a >= g_page + 4096) _exit(70);
  g_handled = g_handled + 1;
  mprotect(g_page, 4096, PROT_READ | PROT_WRITE);
}
char* read_only_page() {
  void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

// A vfork() child that cannot exec and leaves with _exit(127), as Python's subprocess does for
// a missing program: whether the parent saw exactly that. A function of its own, so that no
// local of main's lives across the vfork().
__attribute__((noinline)) bool vfork_a_missing_program() {
  pid_t pid = vfork();
  if (pid == 0) {
    execl("/nonexistent/streamrace-test-program", "x", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 127;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  if (const char* tracer = std::getenv("FRAMEWORK_APP_TRACER"); tracer != nullptr && tracer[0] != 0) {
    if (dlopen(tracer, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 68;
    }
  }
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 65;
  }
  auto run = reinterpret_cast<Run>(dlsym(h, "fake_framework_run"));
  if (!run) return 66;
  const char* mode = argc > 2 ? argv[2] : "return";
  if (std::strcmp(mode, "child") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      run();
      _exit(5);
    }
    int rc = run();
    int status = 0;
    waitpid(pid, &status, 0);
    return rc != 0 ? rc : 10 + (WIFEXITED(status) ? WEXITSTATUS(status) : 99);
  }
  if (std::strcmp(mode, "thread") == 0) {
    // Main waits for the thread's first run: a thread starved for the 20 ms on a loaded machine
    // would make its first call (which starts the tracer) while the process is already exiting,
    // not the case this mode is for (a process leaving while a thread is inside its calls).
    static std::atomic<bool> ran{false};
    std::thread([run] {
      run();
      ran.store(true);
      for (;;) run();
    }).detach();
    while (!ran.load()) usleep(1000);
    usleep(20000);
    leave(9);
  }
  if (std::strcmp(mode, "threads") == 0) {
    constexpr int kThreads = 4;
    std::atomic<int> started{0}, finished{0}, failed{0};
    std::thread threads[kThreads];
    for (auto& t : threads)
      t = std::thread([&] {
        for (started.fetch_add(1); started.load() < kThreads;) usleep(100);
        failed.fetch_add(run() != 0);
        // No thread exits before every thread has run: all four are alive together.
        for (finished.fetch_add(1); finished.load() < kThreads;) usleep(100);
      });
    for (auto& t : threads) t.join();
    return failed.load();
  }
  if (std::strcmp(mode, "segv_handled") == 0) {
    struct sigaction sa {};
    sa.sa_sigaction = own_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
  }
  if (std::strcmp(mode, "many") == 0) {  // 2,000 runs: more records than a small buffer holds
    int failed = 0;
    for (int i = 0; i < 2000; ++i) failed |= run();
    return failed;
  }
  int rc = run();
  if (std::strcmp(mode, "exec") == 0) {
    execl(argv[0], argv[0], argv[1], "return", static_cast<char*>(nullptr));
    return 69;
  }
  if (std::strcmp(mode, "exec_failed") == 0) {
    // A file that is not executable: EACCES, which no file lookup of the tracer's leaves behind.
    if (execl("/etc/passwd", "x", static_cast<char*>(nullptr)) != -1 || errno != EACCES) return 69;
    rc |= run();
  }
  if (std::strcmp(mode, "vfork_failed") == 0) {
    if (!vfork_a_missing_program()) return 69;
    rc |= run();
  }
  if (std::strcmp(mode, "twice") == 0) {
    usleep(450 * 1000);
    rc |= run();
  }
  if (std::strcmp(mode, "segv") == 0 || std::strcmp(mode, "segv_handled") == 0) {
    g_page = read_only_page();
    if (g_page == nullptr) return 67;
    static_cast<volatile char*>(g_page)[10] = 5;
    std::printf("handled %d value %d\n", int(g_handled), int(g_page[10]));
    std::fflush(stdout);
  }
  if (std::strcmp(mode, "exit") == 0) leave(7);
  if (std::strcmp(mode, "signal") == 0) std::raise(SIGTERM);
  if (std::strcmp(mode, "kill") == 0) {
    usleep(600 * 1000);
    std::raise(SIGKILL);
  }
  return rc;
}
