// Loads the fake framework with RTLD_LOCAL (as Python loads PyTorch) and runs it, then leaves
// the way argv[2] says (the tracer's exit paths, preload_test.cpp):
//   return (default)  main returns the framework's status
//   exit              std::exit(7) from a function called by main
//   child             fork: the child runs the framework and leaves with _exit(5); the parent
//                     runs it too, waits, and returns 10 + the child's status
//   signal            raise(SIGTERM) after the run (default action: killed)
//   thread            a second thread runs the framework in a loop while main calls exit(9)
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {
using Run = int (*)();
[[noreturn]] void leave(int code) { std::exit(code); }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
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
    std::thread([run] {
      for (;;) run();
    }).detach();
    usleep(20000);
    leave(9);
  }
  int rc = run();
  if (std::strcmp(mode, "exit") == 0) leave(7);
  if (std::strcmp(mode, "signal") == 0) std::raise(SIGTERM);
  return rc;
}
