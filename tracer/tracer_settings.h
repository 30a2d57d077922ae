// The tracer's settings, the contract between libstreamrace.so and `streamrace run`: each is a
// STREAMRACE_<NAME> environment variable, and all of them can also be given as one
// STREAMRACE_OPTIONS string of KEY=VALUE words ("stacks=none timing=1"), as TSAN_OPTIONS is
// for ThreadSanitizer. The tracer reads every setting through tracer_setting(); `run` lists
// this table in --help, takes each setting as an option, and hands the traced processes the
// resolved values as STREAMRACE_<NAME> variables (docs/tracer.md, "Settings").
//
// Precedence, highest first: a `streamrace run` option, STREAMRACE_<NAME> (set and not empty),
// STREAMRACE_OPTIONS, the default. Header-only and plain C++, because the CLI is also built where tracer/ is not.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracer/capture_options.h"

namespace streamrace::tracer {

struct TracerSetting {
  const char* key;       // in STREAMRACE_OPTIONS ("precise_start"; "precise-start" is accepted too)
  const char* env;       // "STREAMRACE_PRECISE_START"
  const char* values;    // what it takes, for --help
  const char* fallback;  // the default, as --help shows it
  const char* meaning;
};

inline constexpr TracerSetting kTracerSettings[] = {
    {"out", "STREAMRACE_OUT", "DIR", "streamrace-traces under run, else .", "directory for the <host>-<pid>.srace traces"},
    {"stacks", "STREAMRACE_STACKS", "auto|native|python|none", "auto",
     "call stacks: Python frames in threads that run Python, native return addresses in others"},
    {"python_sites", "STREAMRACE_PYTHON_SITES", "0|1|2", "1",
     "a repeated Python call site reuses its first stack (frames read directly, checked against the C API; "
     "CPython 3.11/3.12); 2: also print the counts on stderr at exit"},
    {"native_unwind", "STREAMRACE_NATIVE_UNWIND", "cached|dwarf", "cached",
     "native stacks: unwind rules learned per return address from DWARF walks (checked), or DWARF every time"},
    {"kernel_signatures", "STREAMRACE_KERNEL_SIGNATURES", "0|1", "1",
     "kernels whose signature is known (PyTorch's cat) have only the pointer slots a launch uses scanned"},
    {"launch_memo", "STREAMRACE_LAUNCH_MEMO", "0|1", "1",
     "a launch with the same kernel, short parameter list (<= 12 words) and grid as an earlier one, the allocations "
     "unchanged, takes that launch's argument scan (sampled hits are checked); 0 scans every launch"},
    {"defer_scan", "STREAMRACE_DEFER_SCAN", "0|1", "1",
     "a kernel launch's argument scan is finished by the tracer's flusher thread against the allocations as they were "
     "at the launch (the same records); 0 scans on the launching thread"},
    {"timing", "STREAMRACE_TIMING", "0|1", "0", "device timestamps (CUPTI activity records) for `streamrace overlap`"},
    {"runtime_launches", "STREAMRACE_RUNTIME_LAUNCHES", "0|1", "0",
     "1: kernel launches also through the runtime's callbacks (cudaLaunchKernel...), so that their records name the "
     "runtime call; 0 takes them from the driver's callbacks alone (the same stream and correlation, two callbacks "
     "per launch instead of four)"},
    {"host_accesses", "STREAMRACE_HOST_ACCESSES", "0|1", "0",
     "host writes (and reads of a device-to-host destination) to pinned memory while an async copy still uses it: "
     "the copy's pages are guarded until the host synchronises (docs/host-accesses.md)"},
    {"torch_allocator", "STREAMRACE_TORCH_ALLOCATOR", "0|1", "1",
     "PyTorch's caching allocator observed (block events: kernel extents end at the tensor's block)"},
    {"step_range", "STREAMRACE_STEP_RANGE", "NAME", "(none)",
     "the step marker: each push of the NVTX range NAME starts a step (steps and ring count them; docs/long-runs.md)"},
    {"steps", "STREAMRACE_STEPS", "A:B|A:", "(all)",
     "write only steps A to B-1 (counted from 0 by step_range); the state before them is kept as a snapshot"},
    {"window", "STREAMRACE_WINDOW", "nvtx:NAME|profiler", "(all)",
     "write only inside NVTX ranges named NAME, or between cudaProfilerStart and cudaProfilerStop"},
    {"ring", "STREAMRACE_RING", "N", "(off)",
     "keep only the last N steps (counted by step_range) and a snapshot of the state before them"},
    {"launch_corpus", "STREAMRACE_LAUNCH_CORPUS", "PATH[:SKIP[:COUNT]]", "(off)",
     "benchmarks: write COUNT (20000) scanned launches after the first SKIP (0) to PATH (%p: the pid) for bench/launch_replay (slow)"},
    {"self_time", "STREAMRACE_SELF_TIME", "0|1", "0",
     "print on stderr at exit (and keep as a notice) the time spent in the tracer's own code, by part: CUDA "
     "callbacks, NCCL calls, allocator events, Python and native stacks (for overhead measurements)"},
    {"bench_cut", "STREAMRACE_BENCH_CUT", "0|1|2|3|4|5|6", "0",
     "benchmarks, not tracing: a kernel launch's callback stops early (1 at CUPTI's callback, 2 after the call's "
     "lookup, 3 before the stack, 4 before the record; 3 and 4 with defer_scan 1; 5 at CUPTI's callback after "
     "a locked add to the sequence counter), so that overhead can be taken apart on the GPU machine; launches are "
     "then missing from the trace. 6: every record written, its sequence number taken without a locked add "
     "(records of threads that call at once may share one)"},
    {"chunk_kib", "STREAMRACE_CHUNK_KIB", "64..65536", "256",
     "the most a thread's records fill (KiB) before the buffer is handed to the flusher, which is woken to drain "
     "it; smaller buffers are handed over more often, and their memory is written again sooner (still in the "
     "CPU's caches). Drained records are written every 200 ms or once 4 MiB wait, whatever the size. Under a "
     "capture window or ring (steps, window, ring) the default is 4096, and each handoff writes"},
    {"host_clock", "STREAMRACE_HOST_CLOCK", "auto|monotonic|tsc", "auto",
     "host times: auto, the time-stamp counter scaled to CLOCK_MONOTONIC where the kernel's clocksource is tsc "
     "(no call per record), else clock_gettime; monotonic, clock_gettime(CLOCK_MONOTONIC) per record; tsc, the "
     "counter, with a warning where it cannot be used"},
    {"disable", "STREAMRACE_DISABLE", "0|1", "0", "1: the library does nothing"},
    {"precise", "STREAMRACE_PRECISE", "all|regex:RE|names:FILE", "(off)",
     "precise mode: the Compute Sanitizer API instead of CUPTI, for these kernels"},
    {"precise_start", "STREAMRACE_PRECISE_START", "load|init", "load",
     "precise mode: start the Sanitizer session at load time or in InitializeInjection"},
    {"precise_patches", "STREAMRACE_PRECISE_PATCHES", "FILE", "streamrace_precise_patches.fatbin next to the library",
     "precise mode: the device callbacks"},
    {"precise_module_filter", "STREAMRACE_PRECISE_MODULE_FILTER", "0|1", "1",
     "precise mode: 0 patches every module, not only those holding a selected kernel"},
    {"precise_debug", "STREAMRACE_PRECISE_DEBUG", "0|1", "0", "precise mode: per-process counts on stderr"},
    {"precise_sample", "STREAMRACE_PRECISE_SAMPLE", "N", "0",
     "precise mode: measure at most N launches of each kernel with one launch shape (0: every launch); the analysis "
     "gives the others what the measured ones taught (learned access signatures, docs/signatures.md) or the default "
     "tier's accesses"},
    {"precise_unpatch", "STREAMRACE_PRECISE_UNPATCH", "0|1", "1",
     "precise mode with a sample limit: a module whose kernels and launch shapes are all measured N times is "
     "unpatched (its kernels run at full speed; a new shape patches it again)"},
    {"precise_graph_nodes", "STREAMRACE_PRECISE_GRAPH_NODES", "0|1", "1",
     "precise mode: 0 leaves kernel nodes of CUDA graph launches unmeasured (their accesses the default tier's)"},
};

inline const TracerSetting* find_tracer_setting(std::string_view key) {
  std::string k(key);
  for (auto& ch : k)
    if (ch == '-') ch = '_';
  for (const auto& s : kTracerSettings)
    if (k == s.key || k == s.env) return &s;
  return nullptr;
}

// STREAMRACE_OPTIONS: words separated by blanks, each KEY=VALUE; a value may be quoted with
// '...' or "..." to hold blanks. A later word for the same key wins.
struct ParsedTracerOptions {
  std::vector<std::pair<const TracerSetting*, std::string>> values;
  std::string error;  // empty when the whole string parsed
};

inline ParsedTracerOptions parse_tracer_options(std::string_view text) {
  ParsedTracerOptions out;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t i = 0;
  while (i < text.size()) {
    if (blank(text[i])) {
      ++i;
      continue;
    }
    size_t key_end = i;
    while (key_end < text.size() && text[key_end] != '=' && !blank(text[key_end])) ++key_end;
    std::string_view key = text.substr(i, key_end - i);
    if (key_end == text.size() || text[key_end] != '=') {
      out.error = "'" + std::string(key) + "' is not KEY=VALUE";
      return out;
    }
    const TracerSetting* s = find_tracer_setting(key);
    if (!s) {
      out.error = "unknown setting '" + std::string(key) + "' (known:";
      for (const auto& t : kTracerSettings) out.error += std::string(" ") + t.key;
      out.error += ")";
      return out;
    }
    std::string value;
    size_t j = key_end + 1;
    if (j < text.size() && (text[j] == '\'' || text[j] == '"')) {
      size_t close = text.find(text[j], j + 1);
      if (close == std::string_view::npos) {
        out.error = "the value of '" + std::string(key) + "' has no closing quote";
        return out;
      }
      value = std::string(text.substr(j + 1, close - j - 1));
      j = close + 1;
      if (j < text.size() && !blank(text[j])) {
        out.error = "blank expected after the quoted value of '" + std::string(key) + "'";
        return out;
      }
    } else {
      size_t end = j;
      while (end < text.size() && !blank(text[end])) ++end;
      value = std::string(text.substr(j, end - j));
      j = end;
    }
    out.values.emplace_back(s, std::move(value));
    i = j;
  }
  return out;
}

using EnvLookup = char* (*)(const char*);  // std::getenv, or a test's table

// The value of a setting: STREAMRACE_<NAME> when set and not empty, else its word in
// STREAMRACE_OPTIONS, else nullopt (the default applies). A STREAMRACE_OPTIONS that does not
// parse gives nothing here; the caller reports `parse_tracer_options(...).error`.
inline std::optional<std::string> tracer_setting(const TracerSetting& s, EnvLookup env = std::getenv) {
  if (const char* v = env(s.env); v && *v) return std::string(v);
  const char* all = env("STREAMRACE_OPTIONS");
  if (!all) return std::nullopt;
  ParsedTracerOptions parsed = parse_tracer_options(all);
  if (!parsed.error.empty()) return std::nullopt;
  std::optional<std::string> found;
  for (auto& [setting, value] : parsed.values)
    if (setting == &s) found = value;
  return found;
}

inline std::optional<std::string> tracer_setting(std::string_view key, EnvLookup env = std::getenv) {
  const TracerSetting* s = find_tracer_setting(key);
  return s ? tracer_setting(*s, env) : std::nullopt;
}

// A 0|1 setting: on when set, non-empty and not "0" (as the variables have always been read).
inline bool tracer_flag(std::string_view key, EnvLookup env = std::getenv) {
  auto v = tracer_setting(key, env);
  return v && !v->empty() && *v != "0";
}

// The capture window and ring settings together (tracer/capture_options.h); nullopt and
// `error` when they do not parse or do not go together.
inline std::optional<CaptureOptions> capture_settings(std::string* error, EnvLookup env = std::getenv) {
  auto get = [&](const char* key) { return tracer_setting(key, env).value_or(""); };
  return parse_capture_options(get("steps"), get("window"), get("ring"), get("step_range"), error);
}

}  // namespace streamrace::tracer
