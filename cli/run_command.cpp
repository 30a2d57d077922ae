// `streamrace run [-o DIR] [tracer settings] [--error-exitcode N] [--keep-going] -- cmd args...`:
// runs a command with libstreamrace.so preloaded into it and every process it starts, waits
// for it, then analyses the traces the run wrote and prints the report. The tracer settings
// (tracer/tracer_settings.h) come from run's options, STREAMRACE_<NAME> and STREAMRACE_OPTIONS,
// and reach the traced processes resolved, one STREAMRACE_<NAME> each.
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
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/confirmation.h"
#include "cli/command_registry.h"
#include "report/closing_summary.h"
#include "report/output_file.h"
#include "report/text_report.h"
#include "traceformat/ring_trace.h"
#include "traceformat/trace_file.h"
#include "tracer/tracer_settings.h"
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
#include "cli/precise_kernels.h"
#include "tracer/precise/kernel_selection.h"
#endif

namespace streamrace::cli {
namespace {

using tracer::TracerSetting;

// The tracer settings the user gave as run options (key -> value); the rest come from the
// environment (resolve_settings).
struct RunArgs {
  std::string out_dir;  // resolved: -o, STREAMRACE_OUT, out= in STREAMRACE_OPTIONS, streamrace-traces
  std::map<std::string, std::string> settings;  // tracer settings given as run options
  int error_exitcode = kExitRaces;
  size_t max_frames = 8;     // --max-frames, as for analyze
  size_t print_limit = 100;  // --print-limit, as for analyze
  bool keep_going = false;
  bool no_color = false;
  bool force_output = false;  // -o may be a symbolic link to a directory
  bool timing = false;         // --timing
  bool host_accesses = false;  // --host-accesses
  bool precise_debug = false;  // --precise-debug
  bool confirm = false;  // --confirm: a second run in precise mode decides the possible findings
  bool precise_requested = false;  // --precise[=all|auto|REGEX], or a precise setting in the environment
  std::string precise;
  std::string precise_from;  // --precise=auto: the earlier run's traces (default: the -o directory)
  std::string signatures;    // --signatures FILE: learned access signatures the analysis applies
  std::shared_ptr<const analysis::SignatureBook> signature_book;  // loaded from it
  std::vector<std::string> command;
};

// Each setting's run option ("" = none: STREAMRACE_DISABLE only makes sense outside run).
const char* run_option_of(const TracerSetting& s) {
  static const std::map<std::string, const char*> options = {
      {"out", "-o DIR"},
      {"stacks", "--stacks MODE"},
      {"python_sites", "--python-sites 0|1|2"},
      {"native_unwind", "--native-unwind cached|dwarf"},
      {"kernel_signatures", "--kernel-signatures 0|1"},
      {"launch_memo", "--launch-memo 0|1"},
      {"defer_scan", "--defer-scan 0|1"},
      {"timing", "--timing"},
      {"host_accesses", "--host-accesses"},
      {"torch_allocator", "--torch-allocator 0|1"},
      {"step_range", "--step-range NAME"},
      {"steps", "--steps A:B"},
      {"window", "--window nvtx:NAME|profiler"},
      {"ring", "--ring N"},
      {"disable", ""},
      {"precise", "--precise[=all|auto|REGEX]"},
      {"precise_start", "--precise-start WHEN"},
      {"precise_patches", "--precise-patches FILE"},
      {"precise_module_filter", "--precise-module-filter 0|1"},
      {"precise_sample", "--precise-sample N"},
      {"precise_unpatch", "--precise-unpatch 0|1"},
      {"precise_debug", "--precise-debug"}};
  auto it = options.find(s.key);
  return it == options.end() ? "" : it->second;
}

// The footer of `run --help`: every tracer setting, its variable, values, default and option.
std::string settings_help() {
  std::string out =
      "Tracer settings. Each is a run option, a STREAMRACE_<NAME> variable or a KEY=VALUE word of\n"
      "STREAMRACE_OPTIONS (STREAMRACE_OPTIONS=\"stacks=none timing=1\"); a run option wins over the\n"
      "variable, the variable over STREAMRACE_OPTIONS. The traced processes get the resolved values.\n";
  for (const auto& s : tracer::kTracerSettings) {
    const std::string opt = run_option_of(s);
    out += std::string("  ") + s.key + "=" + s.values + "  (" + s.env + (opt.empty() ? "" : ", " + opt) +
           "; default " + s.fallback + ")\n      " + s.meaning + "\n";
  }
  out += "  STREAMRACE_LIB=FILE  (run itself, not the tracer) the library to preload instead of ../lib/libstreamrace.so\n";
  return out;
}

// Every tracer setting's value for the traced processes (absent: the default), by the
// precedence above; "" and an error when STREAMRACE_OPTIONS or a value is malformed.
std::map<const TracerSetting*, std::string> resolve_settings(const RunArgs& a, std::string& error) {
  std::map<const TracerSetting*, std::string> values;
  if (const char* all = std::getenv("STREAMRACE_OPTIONS")) {
    auto parsed = tracer::parse_tracer_options(all);
    if (!parsed.error.empty()) {
      error = "STREAMRACE_OPTIONS: " + parsed.error;
      return {};
    }
    for (auto& [s, v] : parsed.values) values[s] = v;
  }
  for (const auto& s : tracer::kTracerSettings)
    if (const char* v = std::getenv(s.env); v && *v) values[&s] = v;
  for (const auto& [key, v] : a.settings) values[tracer::find_tracer_setting(key)] = v;
  auto check = [&](const char* key, std::initializer_list<const char*> allowed) {
    auto it = values.find(tracer::find_tracer_setting(key));
    if (it == values.end() || error.size()) return;
    std::string names;
    for (const char* v : allowed) {
      if (it->second == v) return;
      names += std::string(names.empty() ? "" : ", ") + v;
    }
    error = std::string(key) + "=" + it->second + " is not one of " + names;
  };
  check("stacks", {"auto", "native", "python", "none"});
  check("precise_start", {"load", "init"});
  if (error.empty()) {
    auto get = [&](const char* key) {
      auto it = values.find(tracer::find_tracer_setting(key));
      return it == values.end() ? std::string() : it->second;
    };
    std::string why;
    if (!tracer::parse_capture_options(get("steps"), get("window"), get("ring"), get("step_range"), &why)) error = why;
  }
  return error.empty() ? values : std::map<const TracerSetting*, std::string>{};
}

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

#ifndef STREAMRACE_LIBDIR_FROM_BINDIR
#define STREAMRACE_LIBDIR_FROM_BINDIR "../lib"
#endif

// STREAMRACE_LIB, else the library relative to this binary (symbolic links resolved, so a
// link to an installed bin/streamrace still finds its lib/): the install layout
// (STREAMRACE_INSTALL_LIBDIR), then the build tree's bin/ and lib/.
std::string find_tracer_library() {
  if (const char* env = std::getenv("STREAMRACE_LIB"); env && *env) return is_file(env) ? env : "";
  char exe[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  std::string dir(exe, size_t(n));
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* rel : {"/" STREAMRACE_LIBDIR_FROM_BINDIR "/libstreamrace.so", "/../lib/libstreamrace.so",
                          "/libstreamrace.so", "/../lib64/libstreamrace.so"}) {
    std::string p = dir + rel;
    char real[PATH_MAX];
    if (is_file(p) && realpath(p.c_str(), real)) return real;
  }
  return "";
}

// The ring directories (`--ring`, `<trace>.srace.ring`) in `dir`: a process that died before it
// assembled its ring leaves one.
std::set<std::string> list_rings(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 11 && name.compare(name.size() - 11, 11, ".srace.ring") == 0) out.insert(name);
    }
    closedir(d);
  }
  return out;
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
[[maybe_unused]] int precise_unavailable() {
  std::cerr << "streamrace: precise mode is not built into this streamrace; build it with cmake "
               "-DSTREAMRACE_BUILD_PRECISE=ON -DSTREAMRACE_SANITIZER_ROOT=<dir with include/sanitizer.h> "
               "(see docs/precise-mode.md)\n";
  return kExitBadInput;
}

// The value of STREAMRACE_PRECISE for the traced processes ("" = default mode), or an exit
// status when the request cannot be honoured.
struct PreciseSetting {
  std::string env;
  int exit_status = -1;  // >= 0: stop with this status
};

#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
// Writes the kernels precise mode is to patch, one per line (STREAMRACE_PRECISE=names:FILE);
// false (said on stderr) when the file cannot be written.
bool write_kernel_list(const std::string& path, const std::set<std::string>& kernels) {
  std::string text;
  for (const auto& k : kernels) text += k + "\n";
  try {
    report::write_output_file(path, text);
  } catch (const report::OutputError& e) {
    std::cerr << "streamrace run: error: " << e.what() << "\n";
    return false;
  }
  return true;
}

PreciseSetting resolve_precise(const RunArgs& a, const std::set<std::string>& earlier_traces, const std::string& dir) {
  namespace pr = streamrace::tracer::precise;
  PreciseSetting out;
  // From STREAMRACE_PRECISE or STREAMRACE_OPTIONS the tracer's own forms pass too.
  if (a.precise.rfind("names:", 0) == 0) {
    out.env = a.precise;
    return out;
  }
  pr::PreciseSpec spec = pr::parse_precise_spec(a.precise.rfind("regex:", 0) == 0 ? a.precise.substr(6) : a.precise);
  if (spec.kind == pr::PreciseSpec::Kind::kAll) {
    out.env = "all";
    return out;
  }
  if (spec.kind == pr::PreciseSpec::Kind::kRegex) {
    std::string error;
    if (!pr::KernelSelector::regex(spec.pattern, &error)) {
      std::cerr << "streamrace run: --precise=" << spec.pattern << ": not a valid kernel-name regex: " << error << "\n";
      out.exit_status = kExitBadInput;
      return out;
    }
    out.env = "regex:" + spec.pattern;
    return out;
  }
  // auto: the kernels of the `possible` findings of the earlier run.
  const std::string from = a.precise_from.empty() ? dir : a.precise_from;
  std::vector<std::string> traces;
  if (a.precise_from.empty()) {
    for (const auto& name : earlier_traces) traces.push_back(dir + "/" + name);
  } else {
    for (const auto& name : list_traces(from)) traces.push_back(from + "/" + name);
  }
  if (traces.empty()) {
    std::cerr << "streamrace run: --precise=auto confirms the possible findings of an earlier run, but " << from
              << " holds no trace (*.srace); run once without --precise, or name that run's directory with "
                 "--precise-from DIR\n";
    out.exit_status = kExitBadInput;
    return out;
  }
  std::set<std::string> kernels;
  try {
    analysis::Analyzer analyzer;
    for (const auto& t : traces) analyzer.add_trace(t);
    analysis::AnalysisResult earlier = analyzer.finish();
    kernels = kernels_to_confirm(earlier.findings);
  } catch (const std::exception& e) {
    std::cerr << "streamrace run: --precise=auto: cannot read the earlier run: " << e.what() << "\n";
    out.exit_status = kExitBadInput;
    return out;
  }
  if (kernels.empty()) {
    std::cerr << "streamrace run: --precise=auto: the earlier run in " << from
              << " has no possible kernel finding to confirm; tracing in the default mode\n";
    return out;
  }
  const std::string list = dir + "/precise-kernels.txt";
  if (!write_kernel_list(list, kernels)) {
    out.exit_status = kExitBadInput;
    return out;
  }
  std::cerr << "streamrace run: --precise=auto: patching the " << kernels.size() << " kernel"
            << (kernels.size() == 1 ? "" : "s") << " named in possible findings of " << from << " (" << list << ")\n";
  out.env = "names:" + list;
  return out;
}
#endif

struct Launch {
  int exit_status = -1;  // >= 0: stop with this status (nothing to analyse)
  int cmd_status = 0;
  std::vector<std::string> traces;
};

// Runs the command once with the tracer preloaded, writing traces into `dir`; precise mode
// on when `precise_env` is not empty.
Launch launch_traced(const RunArgs& a, std::map<const TracerSetting*, std::string>& settings, const std::string& lib,
                     const std::string& dir, const std::string& precise_env, const TracerSetting* out_setting,
                     const TracerSetting* precise_setting) {
  Launch out;
  const std::set<std::string> before = list_traces(dir);
  const std::set<std::string> rings_before = list_rings(dir);
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
    out.exit_status = kExitBadInput;
    return out;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    setenv("LD_PRELOAD", preload.c_str(), 1);
    if (precise_env.empty()) {
      setenv("CUDA_INJECTION64_PATH", lib.c_str(), 1);
      unsetenv("STREAMRACE_PRECISE");
    } else {
      // The Sanitizer session starts when the library loads and replaces CUPTI.
      setenv("STREAMRACE_PRECISE", precise_env.c_str(), 1);
    }
    setenv("STREAMRACE_OUT", dir.c_str(), 1);
    // Every other setting as resolved; STREAMRACE_OPTIONS is not read a second time.
    for (const auto& s : tracer::kTracerSettings) {
      if (&s == out_setting || &s == precise_setting) continue;
      auto it = settings.find(&s);
      if (it == settings.end())
        unsetenv(s.env);
      else
        setenv(s.env, it->second.c_str(), 1);
    }
    unsetenv("STREAMRACE_OPTIONS");
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
  out.cmd_status = cmd_status;
  if (cmd_status == 127 && WIFEXITED(status) && list_traces(dir) == before) {
    out.exit_status = cmd_status;
    return out;
  }

  for (const auto& name : list_traces(dir))
    if (!before.count(name)) out.traces.push_back(dir + "/" + name);
  // A ring (--ring) is assembled into its trace when the process exits; a ring left behind
  // means the process died before it could (SIGKILL, the OOM killer): salvaged here, never
  // silently.
  for (const auto& name : list_rings(dir)) {
    if (rings_before.count(name)) continue;
    const std::string ring = dir + "/" + name;
    const std::string trace = ring.substr(0, ring.size() - 5);
    std::string why;
    struct stat st;
    if (lstat(trace.c_str(), &st) == 0) {
      why = trace + " exists";
    } else {
      try {
        trace::RingAssembly r = trace::assemble_ring(ring, trace, nullptr, true);
        trace::remove_ring(ring);
        std::cerr << "streamrace run: warning: " << ring
                  << " was left by a process that died before it wrote its trace (killed?): salvaged into " << trace
                  << " (" << r.steps_kept << " of " << r.steps_seen << " steps; the last may be cut short)\n";
        out.traces.push_back(trace);
        continue;
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    std::cerr << "streamrace run: warning: " << ring
              << " holds the ring of a process that died before it wrote its trace (killed?), and it could not be "
                 "salvaged ("
              << why << "): its last steps are not analysed\n";
  }
  if (out.traces.empty()) {
    std::cerr << "streamrace run: no process of the command used CUDA: no trace was written in " << dir << "\n";
    out.exit_status = cmd_status;
  }
  return out;
}


// Analyses one launch's traces into `result`; >= 0: stop with this status.
int analyze_run(const RunArgs& a, const Launch& run, analysis::AnalysisResult& result,
                analysis::SignatureBook* learned = nullptr) {
  try {
    analysis::AnalyzerOptions opts;
    opts.signatures = a.signature_book;
    analysis::Analyzer analyzer(opts);
    for (const auto& t : run.traces) {
      try {
        analyzer.add_trace(t);
      } catch (const trace::TraceError& e) {
        if (!a.keep_going) throw;
        std::cerr << "streamrace run: skipping unreadable trace: " << e.what() << "\n";
      }
    }
    result = analyzer.finish();
    if (learned) *learned = analyzer.learned_signatures();
  } catch (const std::exception& e) {
    std::cerr << "streamrace run: error: " << e.what() << " (use --keep-going to skip unreadable traces)\n";
    return run.cmd_status != 0 ? run.cmd_status : kExitBadInput;
  }
  return -1;
}

// The kernels with at least one measured launch in a precise run's traces (`graph_nodes`:
// with a measured kernel node of a graph launch).
std::set<std::string> measured_kernels(const analysis::AnalysisResult& r, bool graph_nodes = false) {
  std::set<std::string> out;
  for (const auto& t : r.traces) {
    const auto& names = graph_nodes ? t.measured_graph_kernels : t.measured_kernels;
    out.insert(names.begin(), names.end());
  }
  return out;
}

// The text report of a run (with what --confirm made of the possible findings) and its status.
int report_run(const RunArgs& a, const Launch& run, const std::string& dir, const analysis::AnalysisResult& result,
               const std::vector<analysis::Confirmation>& confirmed) {
  report::TextOptions to;
  to.color = !a.no_color && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
  to.max_frames = a.max_frames;
  to.print_limit = a.print_limit;
  report::write_text(std::cout, result, to);
  if (!confirmed.empty()) {
    std::cout << "streamrace: --confirm: " << analysis::confirmation_summary(confirmed) << "\n";
    for (const auto& c : confirmed) {
      std::cout << "  " << analysis::to_string(c.outcome) << ": [" << c.before.fingerprint << "] "
                << analysis::to_string(c.before.kind) << " " << c.before.earlier.op.substr(0, 60) << " ("
                << analysis::site_of(c.before.earlier) << ") vs " << c.before.later.op.substr(0, 60) << " ("
                << analysis::site_of(c.before.later) << ")";
      if (c.after) std::cout << " -> [" << c.after->fingerprint << "] " << analysis::to_string(c.after->kind);
      if (!c.reason.empty()) std::cout << ": " << c.reason;
      std::cout << "\n";
    }
  }
  std::cout << report::closing_summary(result) << "\n";
  std::cout.flush();
  std::cerr << "streamrace run: " << run.traces.size() << " trace" << (run.traces.size() == 1 ? "" : "s") << " in "
            << dir << "\n";
  if (run.cmd_status != 0) return run.cmd_status;
  if (!result.findings.empty()) return a.error_exitcode;
  // A process whose CUDA calls were not captured cannot be called clean. Nor can one whose CUDA graph
  // launches could not be analysed: the verdict is partial.
  if (result.blind_traces() || result.partial()) return kExitBadInput;
  return kExitClean;
}

int run_traced(RunArgs a) {
  std::string settings_error;
  std::map<const TracerSetting*, std::string> settings = resolve_settings(a, settings_error);
  if (!settings_error.empty()) {
    std::cerr << "streamrace run: error: " << settings_error << "\n";
    return kExitBadInput;
  }
  const TracerSetting* out_setting = tracer::find_tracer_setting("out");
  const TracerSetting* precise_setting = tracer::find_tracer_setting("precise");
  a.out_dir = settings.count(out_setting) && !settings[out_setting].empty() ? settings[out_setting] : "streamrace-traces";
  if (!a.precise_requested && settings.count(precise_setting)) {
    const std::string& v = settings[precise_setting];
    a.precise_requested = !v.empty() && v != "0";
    a.precise = v;
  }
  settings.erase(out_setting);
  settings.erase(precise_setting);
  if (a.confirm && a.precise_requested) {
    std::cerr << "streamrace run: --confirm chooses the kernels for precise mode itself; leave out --precise\n";
    return kExitBadInput;
  }
#if !(defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT)
  if (a.precise_requested) return precise_unavailable();
#endif
  if (a.command.empty()) {
    std::cerr << "streamrace run: no command given (streamrace run [options] -- cmd args...)\n";
    return kExitBadInput;
  }
  if (!a.signatures.empty()) {  // refused before the command runs, not after
    try {
      a.signature_book = std::make_shared<const analysis::SignatureBook>(analysis::SignatureBook::load(a.signatures));
    } catch (const trace::InputFileError& e) {
      std::cerr << "streamrace run: error: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  try {
    report::OutputOptions oo;
    oo.follow_symlink = a.force_output;
    report::check_output_directory(a.out_dir, oo);
  } catch (const report::OutputError& e) {
    std::cerr << "streamrace run: error: -o " << e.what() << "\n";
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
  PreciseSetting precise;
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
  if (a.precise_requested) {
    precise = resolve_precise(a, before, dir);
    if (precise.exit_status >= 0) return precise.exit_status;
  }
#endif

  if (!a.confirm) {
    Launch run = launch_traced(a, settings, lib, dir, precise.env, out_setting, precise_setting);
    if (run.exit_status >= 0) return run.exit_status;
    analysis::AnalysisResult result;
    if (int bad = analyze_run(a, run, result); bad >= 0) return bad;
    return report_run(a, run, dir, result, {});
  }
#if defined(STREAMRACE_PRECISE_BUILT) && STREAMRACE_PRECISE_BUILT
  // --confirm: the default run, then the same command again with precise mode on the kernels
  // behind its possible findings; the second run's report is the verdict.
  Launch first = launch_traced(a, settings, lib, dir, "", out_setting, precise_setting);
  if (first.exit_status >= 0) return first.exit_status;
  analysis::AnalysisResult first_result;
  if (int bad = analyze_run(a, first, first_result); bad >= 0) return bad;
  const std::set<std::string> kernels = kernels_to_confirm(first_result.findings);
  if (kernels.empty() || first.cmd_status != 0) {
    std::cerr << "streamrace run --confirm: "
              << (first.cmd_status != 0 ? "the command failed; not running it again"
                                        : "no possible kernel finding to confirm; one run was enough")
              << "\n";
    return report_run(a, first, dir, first_result, {});
  }
  const std::string confirm_dir = dir + "/confirm";
  if (!make_dirs(confirm_dir)) {
    std::cerr << "streamrace run: cannot create " << confirm_dir << ": " << std::strerror(errno) << "\n";
    return kExitBadInput;
  }
  const std::string list = confirm_dir + "/precise-kernels.txt";
  if (!write_kernel_list(list, kernels)) return kExitBadInput;
  std::cerr << "streamrace run --confirm: " << first_result.findings.size() << " finding"
            << (first_result.findings.size() == 1 ? "" : "s") << " in the default run; running the command again "
            << "with precise mode on the " << kernels.size() << " kernel" << (kernels.size() == 1 ? "" : "s")
            << " behind the possible ones (" << list << ")\n";
  Launch second = launch_traced(a, settings, lib, confirm_dir, "names:" + list, out_setting, precise_setting);
  if (second.exit_status >= 0) return second.exit_status;
  if (second.cmd_status != 0) {
    // The command succeeded untraced by precise mode and failed with it: what the second run
    // recorded decides nothing (a finding it lacks may be one it never reached).
    std::cerr << "streamrace run --confirm: the confirming run failed (the command exited with status "
              << second.cmd_status << " in precise mode, 0 in the default run); nothing was confirmed: the default "
              << "run's findings stand (its traces in " << dir << ", the failed run's in " << confirm_dir << ")\n";
    report_run(a, first, dir, first_result, {});
    return second.cmd_status;
  }
  analysis::AnalysisResult result;
  analysis::SignatureBook learned;
  if (int bad = analyze_run(a, second, result, &learned); bad >= 0) return bad;
  // What the confirming run's measured launches taught, for later runs (--signatures), added
  // to the signatures this run was given.
  if (!learned.empty()) {
    analysis::SignatureBook book;
    if (a.signature_book) book = *a.signature_book;
    book.merge(learned);
    const std::string file = confirm_dir + "/signatures.json";
    try {
      book.save(file);
      std::cerr << "streamrace run --confirm: " << book.size() << " access signature" << (book.size() == 1 ? "" : "s")
                << " (" << book.trusted_count() << " trusted) in " << file
                << "; later runs apply them with --signatures " << file << "\n";
    } catch (const std::runtime_error& e) {
      std::cerr << "streamrace run --confirm: warning: " << e.what() << "\n";
    }
  }
  std::vector<analysis::Confirmation> confirmed =
      analysis::confirm_findings(first_result.findings, result.findings, kernels, measured_kernels(result),
                                 measured_kernels(result, true));
  return report_run(a, second, confirm_dir, result, confirmed);
#else
  return precise_unavailable();
#endif
}

RegisterCommand reg("run", 10, [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Run a command with the tracer in every process it starts, then report races");
  sub->add_option("-o,--output-dir", args->out_dir,
                  "Directory for the trace files, one per traced process (default: streamrace-traces; STREAMRACE_OUT)");
  sub->add_option("--error-exitcode", args->error_exitcode,
                  "Exit status when races are found and the command itself succeeded")
      ->capture_default_str();
  sub->add_flag("--keep-going", args->keep_going, "Skip traces that cannot be read instead of failing");
  sub->add_flag("--no-color", args->no_color, "Never colour the text report");
  sub->add_option("--max-frames", args->max_frames, "Frames shown per stack in the text report")->capture_default_str();
  sub->add_option("--print-limit", args->print_limit, "Findings printed at most in the text report (0 = all); the rest are counted in one line")
      ->capture_default_str();
  auto* timing = sub->add_flag("--timing", args->timing,
                               "Also record device timestamps (CUPTI activity records) for `streamrace overlap` and "
                               "the report timelines; costs about as much again as the rest of the tracer "
                               "(STREAMRACE_TIMING=1)");
  auto* host_accesses = sub->add_flag(
      "--host-accesses", args->host_accesses,
      "Also catch host writes (and reads of a device-to-host destination) to pinned memory while an async copy "
      "still uses it, by guarding the pages from the copy's enqueue to the host synchronisation after it "
      "(docs/host-accesses.md; STREAMRACE_HOST_ACCESSES=1)");
  auto* stacks = sub->add_option("--stacks", "Call stacks: auto (default), native, python or none (STREAMRACE_STACKS)")->type_name("MODE");
  auto* python_sites =
      sub->add_option("--python-sites",
                      "0: every Python stack through the C API; 1 (default): a repeated call site reuses its first "
                      "stack; 2: and print the counts at exit (STREAMRACE_PYTHON_SITES)")
          ->type_name("0|1|2");
  auto* native_unwind =
      sub->add_option("--native-unwind",
                      "Native stacks: cached (default: unwind rules learned per return address from DWARF walks, "
                      "checked) or dwarf (a DWARF walk every time) (STREAMRACE_NATIVE_UNWIND)")
          ->type_name("cached|dwarf");
  auto* kernel_signatures =
      sub->add_option("--kernel-signatures",
                      "0 scans every word of every kernel parameter, also the unused pointer slots of kernels whose "
                      "signature is known (PyTorch's cat) (STREAMRACE_KERNEL_SIGNATURES)")
          ->type_name("0|1");
  auto* launch_memo =
      sub->add_option("--launch-memo",
                      "0 scans every kernel launch's arguments; 1 (default) lets a launch with the same kernel, "
                      "short parameter list (at most 12 words) and grid as an earlier one, allocations unchanged, "
                      "take that scan (STREAMRACE_LAUNCH_MEMO)")
          ->type_name("0|1");
  auto* defer_scan =
      sub->add_option("--defer-scan",
                      "1 (default) leaves each kernel launch's argument scan to the tracer's flusher thread, against "
                      "the allocations as they were at the launch; 0 scans on the launching thread (the same "
                      "records either way) (STREAMRACE_DEFER_SCAN)")
          ->type_name("0|1");
  auto* torch_allocator =
      sub->add_option("--torch-allocator",
                      "0 leaves PyTorch's caching allocator unobserved: kernel extents then reach to the end of "
                      "its cudaMalloc segments (STREAMRACE_TORCH_ALLOCATOR)")
          ->type_name("0|1");
  auto* step_range = sub->add_option("--step-range",
                                     "The step marker: each push of the NVTX range NAME starts a step, for --steps "
                                     "and --ring (docs/long-runs.md; STREAMRACE_STEP_RANGE)")
                         ->type_name("NAME");
  auto* steps = sub->add_option("--steps",
                                "Write only steps A to B-1 (from 0; A: for all from A), counted by --step-range; what "
                                "the earlier calls left live is written as a snapshot (STREAMRACE_STEPS)")
                    ->type_name("A:B");
  auto* window = sub->add_option("--window",
                                 "Write only inside NVTX ranges named NAME (nvtx:NAME) or between cudaProfilerStart "
                                 "and cudaProfilerStop (profiler) (STREAMRACE_WINDOW)")
                     ->type_name("nvtx:NAME|profiler");
  auto* ring = sub->add_option("--ring",
                               "Keep only the last N steps (counted by --step-range) and a snapshot of the state "
                               "before them: the trace stays the size of N steps however long the run "
                               "(STREAMRACE_RING)")
                   ->type_name("N");
  auto* precise_start = sub->add_option(
      "--precise-start", "Precise mode: start the Sanitizer session at load (default) or init (STREAMRACE_PRECISE_START)")
                            ->type_name("WHEN");
  auto* precise_patches = sub->add_option(
      "--precise-patches", "Precise mode: the device callbacks fatbin (default: next to libstreamrace.so; "
                           "STREAMRACE_PRECISE_PATCHES)")
                              ->type_name("FILE");
  auto* module_filter = sub->add_option(
      "--precise-module-filter", "Precise mode: 0 patches every module, not only those holding a selected kernel "
                                 "(STREAMRACE_PRECISE_MODULE_FILTER)")
                            ->type_name("0|1");
  auto* precise_sample = sub->add_option(
      "--precise-sample", "Precise mode: measure at most N launches of each kernel with one launch shape (grid, "
                          "block); the others get what those taught (docs/signatures.md) or the default tier's "
                          "accesses (STREAMRACE_PRECISE_SAMPLE; default 0: every launch)")
                             ->type_name("N");
  auto* precise_unpatch = sub->add_option(
      "--precise-unpatch", "Precise mode with --precise-sample: 0 keeps every module patched; 1 (default) unpatches a "
                           "module once its kernels and launch shapes are all measured N times "
                           "(STREAMRACE_PRECISE_UNPATCH)")
                              ->type_name("0|1");
  auto* precise_debug =
      sub->add_flag("--precise-debug", args->precise_debug, "Precise mode: per-process counts on stderr (STREAMRACE_PRECISE_DEBUG=1)");
  sub->add_flag("--force-output", args->force_output,
                "Write traces into an --output-dir that is a symbolic link (refused by default)");
  auto* precise = sub->add_option("--precise", args->precise,
                                  "Exact kernel byte ranges through the Compute Sanitizer API: all, auto, or a "
                                  "kernel-name regex (needs a streamrace built with STREAMRACE_BUILD_PRECISE)")
                      ->expected(0, 1);
  sub->add_flag("--confirm", args->confirm,
                "Run the command, then once more with precise mode on only the kernels behind its possible "
                "findings: each becomes certain or goes away (the second run's report is the verdict, its traces "
                "in -o DIR/confirm; the whole command runs twice)");
  sub->add_option("--signatures", args->signatures,
                  "Apply the learned kernel access signatures in FILE to the analysis (docs/signatures.md; "
                  "--confirm writes DIR/confirm/signatures.json)");
  sub->add_option("--precise-from", args->precise_from,
                  "With --precise=auto: the directory of the earlier run whose possible findings name the kernels "
                  "to patch (default: the traces already in --output-dir)");
  sub->add_option("command", args->command, "The command to trace, after --")->required();
  sub->footer(settings_help());
  group_advanced(*sub, {"--precise-start", "--precise-patches", "--precise-module-filter", "--precise-sample", "--precise-unpatch", "--precise-debug",
                        "--force-output", "--precise-from", "--torch-allocator", "--python-sites", "--native-unwind", "--kernel-signatures", "--launch-memo", "--defer-scan", "--keep-going"});
  return [=]() {
    args->precise_requested = precise->count() > 0;
    auto& st = args->settings;
    if (sub->get_option("-o")->count()) st["out"] = args->out_dir;
    if (timing->count()) st["timing"] = "1";
    if (host_accesses->count()) st["host_accesses"] = "1";
    if (precise_debug->count()) st["precise_debug"] = "1";
    for (auto [key, opt] : {std::pair{"stacks", stacks}, {"python_sites", python_sites}, {"native_unwind", native_unwind}, {"kernel_signatures", kernel_signatures}, {"launch_memo", launch_memo}, {"defer_scan", defer_scan}, {"torch_allocator", torch_allocator}, {"precise_start", precise_start},
                            {"step_range", step_range}, {"steps", steps}, {"window", window}, {"ring", ring},
                            {"precise_patches", precise_patches}, {"precise_module_filter", module_filter},
                            {"precise_sample", precise_sample}, {"precise_unpatch", precise_unpatch}})
      if (opt->count()) st[key] = opt->as<std::string>();
    return run_traced(*args);
  };
});

}  // namespace
}  // namespace streamrace::cli
