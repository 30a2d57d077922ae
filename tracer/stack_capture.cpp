// StackCapture: see stack_capture.h.
#include "tracer/stack_capture.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tracer/self_time.h"


namespace streamrace::tracer {

StackMode parse_stack_mode(const char* text) {
  if (text == nullptr) return StackMode::kAuto;
  std::string_view t(text);
  if (t == "none" || t == "0" || t == "off") return StackMode::kNone;
  if (t == "native") return StackMode::kNative;
  if (t == "python") return StackMode::kPython;
  return StackMode::kAuto;
}

StackCapture::StackCapture(StackTable& stacks, StringTable& strings, StackMode mode, size_t max_frames,
                           bool strip_own_module)
    : stacks_(stacks), python_(strings), mode_(mode), max_frames_(max_frames), strip_own_(strip_own_module) {}

uint32_t StackCapture::capture() {
  switch (mode_) {
    case StackMode::kNone: return 0;
    case StackMode::kPython: {
      self_time::Scope timed(self_time::kPython);
      return capture_python();
    }
    case StackMode::kNative: {
      self_time::Scope timed(self_time::kNative);
      return capture_native();
    }
    case StackMode::kAuto: {
      uint32_t id;
      {
        self_time::Scope timed(self_time::kPython);
        id = capture_python();
      }
      if (id != 0) return id;
      // A Python thread inside a call where the GIL may not be taken back (allocation, sync,
      // event calls): its native frames are the framework's, and unwinding them costs more
      // than they tell. Native stacks are for native programs.
      if (python_.thread_runs_python()) return 0;
      self_time::Scope timed(self_time::kNative);
      return capture_native();
    }
  }
  return 0;
}

namespace {
// The calling thread's stacks by Python call site (PythonFrames::site_key), for one
// StackCapture. Each entry counts its uses so a sample of hits is checked against the C API.
struct SiteCache {
  const void* owner = nullptr;
  struct Hash {
    size_t operator()(const PythonFrames::SiteKey& k) const { return size_t(k.a ^ (k.b >> 1)); }
  };
  struct Entry {
    uint32_t id;
    uint32_t uses;
  };
  std::unordered_map<PythonFrames::SiteKey, Entry, Hash> by_site;
  std::unordered_set<uint32_t> stacks_seen;  // stack ids of this thread's misses
};
constexpr size_t kSiteCacheLimit = 1 << 15;

SiteCache& site_cache(const void* owner) {
  thread_local SiteCache c;
  if (c.owner != owner || c.by_site.size() > kSiteCacheLimit) {
    c = SiteCache{};
    c.owner = owner;
  }
  return c;
}

// Hits checked against the C API's walk: the first two of each site, then one in 128.
bool check_hit(uint32_t uses) { return uses < 2 || (uses & 127) == 0; }
}  // namespace

uint32_t StackCapture::capture_python_walk() {
  thread_local std::vector<trace::StackFrame> frames;
  frames.clear();
  if (python_.capture(frames, max_frames_) == 0) return 0;
  return stacks_.intern_frames(frames);
}

uint32_t StackCapture::capture_python() {
  PythonFrames::SiteKey key;
  if (!python_sites_ || !python_.site_key(key)) return capture_python_walk();
  SiteCache& cache = site_cache(this);
  auto it = cache.by_site.find(key);
  if (it != cache.by_site.end()) {
    const uint32_t uses = it->second.uses++;
    site_hits_.fetch_add(1, std::memory_order_relaxed);
    // A key known to give no frames is not checked: the check would take the GIL back (from a
    // thread that has no Python frames to show) only to compare nothing with nothing.
    if (it->second.id == 0 || !check_hit(uses)) return it->second.id;
    const uint32_t id = capture_python_walk();
    if (id != it->second.id) {
      python_.site_key_mismatch();
      site_mismatches_.fetch_add(1, std::memory_order_relaxed);
    }
    return id;
  }
  const uint32_t id = capture_python_walk();
  site_misses_.fetch_add(1, std::memory_order_relaxed);
  // A key whose walk gave no frames is kept too (id 0): a thread with a Python thread state but
  // no complete frame (PyTorch's autograd threads launching backward kernels) would otherwise
  // take the GIL back at every launch only to find nothing.
  cache.by_site.emplace(key, SiteCache::Entry{id, 1});
  if (id != 0) {
    // A new key whose stack this thread already had under another key: the key changed
    // though the stack did not (counted for diagnostics: such misses cost a C-API walk).
    if (!cache.stacks_seen.insert(id).second) site_rekeys_.fetch_add(1, std::memory_order_relaxed);
  }
  return id;
}

std::string StackCapture::python_sites_summary() const {
  return std::string("python call sites: ") + (python_sites_ ? python_.site_key_state() : "disabled") + ", " +
         std::to_string(site_hits_.load()) + " hits, " + std::to_string(site_misses_.load()) + " misses (" + std::to_string(site_rekeys_.load()) +
         " of them with a stack seen before), " +
         std::to_string(site_mismatches_.load()) + " mismatches; native walks: " +
         (native_cached_ ? (NativeUnwinder::fast_path_on() ? "cached" : "cached, off after a mismatch") : "dwarf") +
         ", " + std::to_string(NativeUnwinder::counts().fast) + " learned, " +
         std::to_string(NativeUnwinder::counts().reference) + " dwarf, " +
         std::to_string(NativeUnwinder::counts().mismatches) + " mismatches";
}

namespace {
struct ModuleScan {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  bool include_own;
};

int collect_module(dl_phdr_info* info, size_t, void* data) {
  auto* scan = static_cast<ModuleScan*>(data);
  auto* out = &scan->ranges;
  std::string_view name = info->dlpi_name ? info->dlpi_name : "";
  static const int anchor = 0;
  Dl_info self{};
  dladdr(&anchor, &self);
  bool ours = self.dli_fbase != nullptr && reinterpret_cast<uint64_t>(self.dli_fbase) == info->dlpi_addr;
  bool internal = (ours && scan->include_own) || name.find("libcupti") != std::string_view::npos ||
                  name.find("libcuda.so") != std::string_view::npos ||
                  name.find("libsanitizer-public") != std::string_view::npos;  // precise mode's event source
  if (!internal) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      uint64_t b = info->dlpi_addr + ph.p_vaddr;
      out->emplace_back(b, b + ph.p_memsz);
    }
  }
  return 0;
}
}  // namespace

void StackCapture::find_internal_modules() {
  ModuleScan scan{{}, strip_own_};
  dl_iterate_phdr(collect_module, &scan);
  internal_ = std::move(scan.ranges);
  modules_known_ = true;
}

bool StackCapture::internal_pc(uint64_t pc) const {
  for (auto& [b, e] : internal_)
    if (pc >= b && pc < e) return true;
  return false;
}

uint32_t StackCapture::capture_native() {
  if (!modules_known_) find_internal_modules();
  constexpr size_t kMax = 64;
  uint64_t pcs[kMax];
  const size_t limit = max_frames_ < kMax ? max_frames_ : kMax;
  auto skip = [](const void* self, uint64_t pc) { return static_cast<const StackCapture*>(self)->internal_pc(pc); };
  const size_t n = unwinder_.capture(pcs, limit, skip, this, native_cached_);
  if (n == 0) return 0;
  return stacks_.intern_native({pcs, n});
}

}  // namespace streamrace::tracer
