// `streamrace run [-o DIR] [--error-exitcode N] [--keep-going] -- cmd args...`: runs a
// command with libstreamrace.so preloaded into it and every process it starts, waits for
// it, then analyses the traces the run wrote and prints the report.
#include <CLI/CLI.hpp>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "cli/command_registry.h"
#include "report/text_report.h"
#include "traceformat/trace_file.h"

namespace streamrace::cli {
namespace {

struct RunArgs {
  std::string out_dir = "streamrace-traces";
  int error_exitcode = kExitRaces;
  bool keep_going = false;
  bool no_color = false;
  bool precise_requested = false;  // --precise[=all|auto|REGEX] was given
  std::string precise;
  std::vector<std::string> command;
};

volatile sig_atomic_t g_child = 0;

// SIGINT/SIGTERM sent to streamrace by another process go on to the traced command. A
// terminal's Ctrl-C (si_code SI_KERNEL) already reaches the command, which shares our
// process group, so it is not sent twice.
void forward_signal(int sig, siginfo_t* info, void*) {
  if (g_child > 0 && (info == nullptr || info->si_code <= 0)) kill(pid_t(g_child), sig);
}

bool is_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string find_tracer_library() {
  if (const char* env = std::getenv("STREAMRACE_LIB"); env && *env) return is_file(env) ? env : "";
  char exe[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  std::string dir(exe, size_t(n));
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* rel : {"/../lib/libstreamrace.so", "/libstreamrace.so", "/../lib64/libstreamrace.so"}) {
    std::string p = dir + rel;
    char real[PATH_MAX];
    if (is_file(p) && realpath(p.c_str(), real)) return real;
  }
  return "";
}

std::set<std::string> list_traces(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 6 && name.compare(name.size() - 6, 6, ".srace") == 0) out.insert(name);
    }
    closedir(d);
  }
  return out;
}

bool make_dirs(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), 0777) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Precise mode needs the Compute Sanitizer event source (tracer/precise/, built only with
// -DSTREAMRACE_BUILD_PRECISE=ON); without it, say so before anything runs.
int precise_unavailable() {
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
  std::cerr << "streamrace: precise mode's Sanitizer sources are built, but libstreamrace.so does not start them "
               "in traced processes in this version (see docs/precise-mode.md); run without --precise\n";
#else
  std::cerr << "streamrace: precise mode is not built into this streamrace; build it with cmake "
               "-DSTREAMRACE_BUILD_PRECISE=ON -DSTREAMRACE_SANITIZER_ROOT=<dir with include/sanitizer.h> "
               "(see docs/precise-mode.md)\n";
#endif
  return kExitBadInput;
}

int run_traced(const RunArgs& a) {
  if (a.precise_requested) return precise_unavailable();
  if (a.command.empty()) {
    std::cerr << "streamrace run: no command given (streamrace run [options] -- cmd args...)\n";
    return kExitBadInput;
  }
  std::string lib = find_tracer_library();
  if (lib.empty()) {
    std::cerr << "streamrace run: libstreamrace.so not found next to the streamrace binary (../lib); "
                 "set STREAMRACE_LIB\n";
    return kExitBadInput;
  }
  if (!make_dirs(a.out_dir)) {
    std::cerr << "streamrace run: cannot create output directory " << a.out_dir << ": " << std::strerror(errno) << "\n";
    return kExitBadInput;
  }
  char abs_dir[PATH_MAX];
  if (!realpath(a.out_dir.c_str(), abs_dir)) {
    std::cerr << "streamrace run: cannot resolve " << a.out_dir << "\n";
    return kExitBadInput;
  }
  const std::string dir = abs_dir;
  const std::set<std::string> before = list_traces(dir);

  std::string preload = lib;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  if (const char* inj = std::getenv("CUDA_INJECTION64_PATH"); inj && *inj && lib != inj)
    std::cerr << "streamrace run: replacing CUDA_INJECTION64_PATH=" << inj << " for the traced command\n";

  std::vector<char*> argv;
  for (const auto& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);

  struct sigaction fwd {}, old_int {}, old_term {};
  fwd.sa_sigaction = forward_signal;
  fwd.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&fwd.sa_mask);
  sigaction(SIGINT, &fwd, &old_int);
  sigaction(SIGTERM, &fwd, &old_term);

  pid_t pid = fork();
  if (pid < 0) {
    std::cerr << "streamrace run: fork failed: " << std::strerror(errno) << "\n";
    return kExitBadInput;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv("CUDA_INJECTION64_PATH", lib.c_str(), 1);
    setenv("STREAMRACE_OUT", dir.c_str(), 1);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "streamrace run: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);

  int cmd_status = 0;
  if (WIFEXITED(status)) {
    cmd_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    cmd_status = 128 + WTERMSIG(status);
    std::cerr << "streamrace run: " << a.command[0] << " was killed by signal " << WTERMSIG(status) << "\n";
  }
  if (cmd_status == 127 && WIFEXITED(status) && list_traces(dir) == before) return cmd_status;

  std::vector<std::string> traces;
  for (const auto& name : list_traces(dir))
    if (!before.count(name)) traces.push_back(dir + "/" + name);
  if (traces.empty()) {
    std::cerr << "streamrace run: no process of the command used CUDA: no trace was written in " << dir << "\n";
    return cmd_status;
  }

  analysis::AnalysisResult result;
  try {
    analysis::Analyzer analyzer;
    for (const auto& t : traces) {
      try {
        analyzer.add_trace(t);
      } catch (const trace::TraceError& e) {
        if (!a.keep_going) throw;
        std::cerr << "streamrace run: skipping unreadable trace: " << e.what() << "\n";
      }
    }
    result = analyzer.finish();
  } catch (const std::exception& e) {
    std::cerr << "streamrace run: error: " << e.what() << " (use --keep-going to skip unreadable traces)\n";
    return cmd_status != 0 ? cmd_status : kExitBadInput;
  }
  report::TextOptions to;
  to.color = !a.no_color && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
  report::write_text(std::cout, result, to);
  std::cout.flush();
  std::cerr << "streamrace run: " << traces.size() << " trace" << (traces.size() == 1 ? "" : "s") << " in " << dir
            << "\n";
  if (cmd_status != 0) return cmd_status;
  if (!result.findings.empty()) return a.error_exitcode;
  // A process whose CUDA calls were not captured cannot be called clean.
  if (result.blind_traces()) return kExitBadInput;
  return kExitClean;
}

RegisterCommand reg("run", 10, [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Run a command with the tracer in every process it starts, then report races");
  sub->add_option("-o,--output-dir", args->out_dir, "Directory for the trace files (one per traced process)")
      ->capture_default_str();
  sub->add_option("--error-exitcode", args->error_exitcode,
                  "Exit status when races are found and the command itself succeeded")
      ->capture_default_str();
  sub->add_flag("--keep-going", args->keep_going, "Skip traces that cannot be read instead of failing");
  sub->add_flag("--no-color", args->no_color, "Never colour the text report");
  auto* precise = sub->add_option("--precise", args->precise,
                                  "Exact kernel byte ranges through the Compute Sanitizer API: all, auto, or a "
                                  "kernel-name regex (needs a streamrace built with STREAMRACE_BUILD_PRECISE)")
                      ->expected(0, 1);
  sub->add_option("command", args->command, "The command to trace, after --")->required();
  return [args, precise]() {
    args->precise_requested = precise->count() > 0;
    return run_traced(*args);
  };
});

}  // namespace
}  // namespace streamrace::cli
