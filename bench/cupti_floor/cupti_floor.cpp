// libcupti_floor.so: the cheapest possible CUPTI subscriber, to measure the floor that any
// CUPTI-callback tracer pays (bench/realistic_overhead.sh compares it with streamrace).
//
// Loaded like streamrace's tracer: CUDA_INJECTION64_PATH=/path/libcupti_floor.so; the CUDA
// driver calls InitializeInjection() during cuInit. CUPTI is dlopen'ed (never linked), the
// callback does nothing, no activity API, no buffers, no thread.
//
// Environment:
//   CUPTI_FLOOR_MODE   domains (default): cuptiEnableDomain for the runtime and driver API
//                                         domains (every runtime and driver call calls back)
//                      cbids:             only the callback ids in CUPTI_FLOOR_CBIDS
//                      none:              load CUPTI and subscribe, enable nothing
//   CUPTI_FLOOR_CBIDS  comma/space/newline separated list, or @FILE to read one:
//                        runtime:NAME | driver:NAME | runtime:NUMBER | driver:NUMBER
//                      NAME is a CUPTI cbid name without its CUPTI_*_TRACE_CBID_ prefix
//                      (runtime:cudaLaunchKernel_v7000, driver:cuLaunchKernel); a runtime NAME
//                      without a _vNNNN suffix matches every NAME_vNNNN id. An unknown name
//                      is an error: the library then enables nothing and says so.
//   CUPTI_FLOOR_LIBCUPTI  a libcupti.so to dlopen first (default: the one the process
//                      already holds, then libcupti.so.13 from the loader path and the toolkit)
//   CUPTI_FLOOR_QUIET  non-empty: no line on stderr
// One line on stderr tells what was enabled (unless quiet).
// streamrace_bench_pause(int paused), exported like libstreamrace.so's: turns what was enabled
// off (non-zero) or on again (zero), for the in-process comparisons of launch_loop.py --ab and
// launch_bench ab; returns 0, or -1 before the subscriber started.
#include <cupti.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct CbidName {
  const char* name;
  uint32_t id;
};
// Generated from the CUPTI headers by build.sh (cupti_floor_cbids.inc in the build folder).
const CbidName kRuntimeNames[] = {
#define CUPTI_FLOOR_RUNTIME(N) {#N, CUPTI_RUNTIME_TRACE_CBID_##N},
#define CUPTI_FLOOR_DRIVER(N)
#include "cupti_floor_cbids.inc"
#undef CUPTI_FLOOR_RUNTIME
#undef CUPTI_FLOOR_DRIVER
};
const CbidName kDriverNames[] = {
#define CUPTI_FLOOR_RUNTIME(N)
#define CUPTI_FLOOR_DRIVER(N) {#N, CUPTI_DRIVER_TRACE_CBID_##N},
#include "cupti_floor_cbids.inc"
#undef CUPTI_FLOOR_RUNTIME
#undef CUPTI_FLOOR_DRIVER
};

bool quiet() {
  const char* q = std::getenv("CUPTI_FLOOR_QUIET");
  return q && *q;
}

void say(const std::string& s) {
  if (!quiet()) std::fprintf(stderr, "cupti_floor: %s\n", s.c_str());
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

struct Fns {
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiEnableDomain) enable_domain = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
};

void* load_cupti(std::string& path) {
  std::vector<std::string> cands;
  if (const char* e = std::getenv("CUPTI_FLOOR_LIBCUPTI"); e && *e) cands.emplace_back(e);
  void* lib = nullptr;
  if (cands.empty()) lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  for (const char* c : {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "libcupti.so"})
    cands.emplace_back(c);
  for (const auto& c : cands) {
    if (lib) break;
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (lib) {
    void* sym = dlsym(lib, "cuptiSubscribe");
    Dl_info info{};
    if (sym && dladdr(sym, &info) && info.dli_fname) path = info.dli_fname;
  }
  return lib;
}

std::string read_list(const char* spec) {
  if (spec[0] != '@') return spec;
  std::ifstream f(spec + 1);
  if (!f) return std::string("\x01") + (spec + 1);  // marks an unreadable file
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool versioned_match(const char* full, const std::string& base) {
  // base "cudaLaunchKernel" matches "cudaLaunchKernel_v7000", not "cudaLaunchKernel_ptsz_v7000".
  size_t n = base.size();
  if (std::strncmp(full, base.c_str(), n) != 0 || full[n] != '_' || full[n + 1] != 'v') return false;
  for (const char* p = full + n + 2; *p; ++p)
    if (!std::isdigit(static_cast<unsigned char>(*p))) return false;
  return full[n + 2] != '\0';
}

struct Wanted {
  CUpti_CallbackDomain domain;
  uint32_t id;
};

// Parses the list; returns "" or the reason it is not usable.
std::string parse_cbids(const std::string& text, std::vector<Wanted>& out) {
  if (!text.empty() && text[0] == '\x01') return "cannot read " + text.substr(1);
  std::string tok;
  std::stringstream ss(text);
  std::vector<std::string> toks;
  for (std::string line; std::getline(ss, line);) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    for (char& c : line)
      if (c == ',' || c == '\t' || c == '\r') c = ' ';
    std::stringstream ls(line);
    while (ls >> tok) toks.push_back(tok);
  }
  for (const auto& t : toks) {
    auto colon = t.find(':');
    if (colon == std::string::npos) return "'" + t + "': want runtime:NAME or driver:NAME";
    std::string dom = t.substr(0, colon), name = t.substr(colon + 1);
    bool runtime = dom == "runtime" || dom == "rt";
    if (!runtime && dom != "driver" && dom != "drv") return "'" + t + "': domain must be runtime or driver";
    CUpti_CallbackDomain d = runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (is_number(name)) {
      out.push_back({d, static_cast<uint32_t>(std::strtoul(name.c_str(), nullptr, 10))});
      continue;
    }
    size_t before = out.size();
    const CbidName* table = runtime ? kRuntimeNames : kDriverNames;
    size_t n = runtime ? sizeof kRuntimeNames / sizeof *kRuntimeNames : sizeof kDriverNames / sizeof *kDriverNames;
    for (size_t i = 0; i < n; ++i)
      if (name == table[i].name) out.push_back({d, table[i].id});
    if (out.size() == before && runtime)
      for (size_t i = 0; i < n; ++i)
        if (versioned_match(table[i].name, name)) out.push_back({d, table[i].id});
    if (out.size() == before) return "'" + t + "': no such callback id in this CUPTI's headers";
  }
  if (out.empty()) return "the list is empty";
  return "";
}

struct Enabled {
  Fns fn;
  CUpti_SubscriberHandle sub = nullptr;
  bool domains = false;
  std::vector<Wanted> wanted;
};
Enabled* g_enabled = nullptr;  // set once the subscriber is up

}  // namespace

extern "C" __attribute__((visibility("default"))) int streamrace_bench_pause(int paused) {
  Enabled* e = g_enabled;
  if (e == nullptr) return -1;
  const uint32_t on = paused ? 0 : 1;
  if (e->domains) {
    for (auto d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) e->fn.enable_domain(on, e->sub, d);
  } else {
    for (const auto& w : e->wanted) e->fn.enable_callback(on, e->sub, w.domain, w.id);
  }
  return 0;
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  static bool done = false;
  if (done) return 1;
  done = true;
  const char* mode_env = std::getenv("CUPTI_FLOOR_MODE");
  std::string mode = mode_env && *mode_env ? mode_env : "domains";
  if (mode != "domains" && mode != "cbids" && mode != "none") {
    say("CUPTI_FLOOR_MODE=" + mode + " is not domains, cbids or none: nothing enabled");
    return 1;
  }
  std::vector<Wanted> wanted;
  if (mode == "cbids") {
    const char* spec = std::getenv("CUPTI_FLOOR_CBIDS");
    std::string why = spec && *spec ? parse_cbids(read_list(spec), wanted) : "CUPTI_FLOOR_CBIDS is not set";
    if (!why.empty()) {
      say("CUPTI_FLOOR_CBIDS: " + why + ": nothing enabled");
      return 1;
    }
  }
  std::string path;
  void* lib = load_cupti(path);
  if (!lib) {
    say("libcupti.so.13 could not be loaded: nothing enabled");
    return 1;
  }
  Fns fn;
  fn.subscribe = reinterpret_cast<decltype(fn.subscribe)>(dlsym(lib, "cuptiSubscribe"));
  fn.subscribe_v2 = reinterpret_cast<decltype(fn.subscribe_v2)>(dlsym(lib, "cuptiSubscribe_v2"));
  fn.enable_callback = reinterpret_cast<decltype(fn.enable_callback)>(dlsym(lib, "cuptiEnableCallback"));
  fn.enable_domain = reinterpret_cast<decltype(fn.enable_domain)>(dlsym(lib, "cuptiEnableDomain"));
  fn.result_string = reinterpret_cast<decltype(fn.result_string)>(dlsym(lib, "cuptiGetResultString"));
  if (!fn.subscribe || !fn.enable_callback || !fn.enable_domain) {
    say("CUPTI at " + path + " lacks cuptiSubscribe/cuptiEnableCallback/cuptiEnableDomain");
    return 1;
  }
  CUpti_SubscriberHandle sub = nullptr;
  CUptiResult rc;
  if (fn.subscribe_v2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "cupti_floor";
    rc = fn.subscribe_v2(&sub, on_callback, nullptr, &params);
  } else {
    rc = fn.subscribe(&sub, on_callback, nullptr);
  }
  if (rc != CUPTI_SUCCESS) {
    const char* msg = nullptr;
    if (fn.result_string) fn.result_string(rc, &msg);
    say(std::string("cuptiSubscribe failed: ") + (msg ? msg : "?"));
    return 1;
  }
  size_t enabled = 0, failed = 0;
  if (mode == "domains") {
    for (auto d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API})
      (fn.enable_domain(1, sub, d) == CUPTI_SUCCESS ? enabled : failed)++;
  } else {
    for (const auto& w : wanted) (fn.enable_callback(1, sub, w.domain, w.id) == CUPTI_SUCCESS ? enabled : failed)++;
  }
  g_enabled = new Enabled{fn, sub, mode == "domains", wanted};
  say("mode " + mode + ", " + std::to_string(enabled) + (mode == "domains" ? " domains" : " callback ids") +
      " enabled" + (failed ? ", " + std::to_string(failed) + " refused" : "") + ", CUPTI " + path);
  return 1;
}
