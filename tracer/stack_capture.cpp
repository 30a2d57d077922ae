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

uint32_t StackCapture::capture() { return mode_ == StackMode::kNone ? 0 : capture(thread_state()); }

uint32_t StackCapture::capture(TracerThreadState& ts) {
  switch (mode_) {
    case StackMode::kNone: return 0;
    case StackMode::kPython: {
      self_time::Scope timed(self_time::kPython);
      return capture_python(ts);
    }
    case StackMode::kNative: {
      self_time::Scope timed(self_time::kNative);
      return capture_native();
    }
    case StackMode::kAuto: {
      uint32_t id;
      {
        self_time::Scope timed(self_time::kPython);
        id = capture_python(ts);
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
// The calling thread's stacks by Python call site (PythonFrames::site_words, key_of), for one
// StackCapture, reached from the thread's TracerThreadState. In front, a direct-mapped table
// of the sites seen last (a hit reads one 32-byte slot: the key's first word is XXH3's, well
// mixed, so its low bits pick the slot); behind it the map of every site, whose entries keep
// their uses while a slot does not hold them. Each site counts its uses so that a sample of
// hits is checked against the C API.
struct SiteCache {
  using SiteKey = PythonFrames::SiteKey;
  struct Hash {
    size_t operator()(const SiteKey& k) const { return size_t(k.a ^ (k.b >> 1)); }
  };
  struct Entry {
    uint32_t id;
    uint32_t uses;
  };
  struct Slot {
    uint64_t a = 0, b = 0;
    Entry* entry = nullptr;  // null: empty; the map's node (stable), where `uses` goes back
    uint32_t id = 0;
    uint32_t uses = 0;
  };
  static constexpr int kFrontBits = 8;  // 256 slots, 8 KiB
  static_assert(sizeof(Slot) == 32);

  std::shared_ptr<void> counts_owner;  // keeps `counts` alive while this thread may add to it
  std::atomic<uint64_t>* hits = nullptr;
  uint32_t pending_hits = 0;  // not yet added to *hits
  std::unique_ptr<Slot[]> front{new Slot[1u << kFrontBits]};
  std::unordered_map<SiteKey, Entry, Hash> by_site;
  std::unordered_set<uint32_t> stacks_seen;  // stack ids of this thread's misses
  // The site of this thread's last call: its words (PythonFrames::site_words) and the front
  // slot that holds it. A call whose words are the same is that site, without its key's hash
  // and the slot's search (a PyTorch op launches its kernels, and frees its temporaries, from
  // one Python line; a launch loop repeats one). The walk writes into the buffer that does not
  // hold the last site's words; a different site becomes the last by turning the buffers
  // round, with no copy. Only this thread changes its slots: each change below sets `last`
  // again, and clear() forgets it.
  Slot* last = nullptr;
  size_t last_n = 0;
  uint32_t last_buf = 0;  // words[last_buf] are the last site's
  uint64_t words[2][PythonFrames::kSiteWordsMax];  // (the cache is on the heap: 8 KiB)

  Slot& slot_for(const SiteKey& k) { return front[k.a & ((1u << kFrontBits) - 1)]; }
  uint64_t* walk_buffer() { return words[last_buf ^ 1]; }
  // Whether the walk buffer holds the last site. Sites that follow each other differ mostly in
  // the innermost frame's instruction: those two words are compared first, inline.
  bool is_last(size_t n) const {
    if (last == nullptr || n != last_n) return false;
    if (n == 0) return true;
    const uint64_t* now = words[last_buf ^ 1];
    const uint64_t* before = words[last_buf];
    if (((now[0] ^ before[0]) | (now[1] ^ before[1])) != 0) return false;
    return std::memcmp(now + 2, before + 2, (n - 1) * 2 * sizeof(uint64_t)) == 0;
  }
  // The walk buffer's site (n frames) is now the last, at `slot`.
  void remember(size_t n, Slot& slot) {
    last_buf ^= 1;
    last_n = n;
    last = &slot;
  }
  void flush_hits() {
    if (pending_hits != 0 && hits != nullptr) hits->fetch_add(pending_hits, std::memory_order_relaxed);
    pending_hits = 0;
  }
  // Forgets every site (the map's nodes go, so the slots go first).
  void clear() {
    last = nullptr;
    for (uint32_t i = 0; i < (1u << kFrontBits); ++i) front[i] = Slot{};
    by_site.clear();
    stacks_seen.clear();
  }
  ~SiteCache() { flush_hits(); }
};
constexpr size_t kSiteCacheLimit = 1 << 15;
constexpr uint32_t kHitsPerFlush = 64;

// Hits checked against the C API's walk: the first two of each site, one in 128 of its first
// 8,192 uses, then one in 2,048. A check is a walk through the C API with the GIL held (~7,700
// instructions at depth 5 on CPython 3.12): one in 128 cost ~60 instructions on every stack of a
// site that repeats for the whole run (a training loop's), as much as the raw walk itself.
bool check_hit(uint32_t uses) {
  if (uses < 2) return true;
  return uses < 8192 ? (uses & 127) == 0 : (uses & 2047) == 0;
}
}  // namespace

uint32_t StackCapture::capture_python_walk() {
  thread_local std::vector<trace::StackFrame> frames;
  frames.clear();
  if (python_.capture(frames, max_frames_) == 0) return 0;
  return stacks_.intern_frames(frames);
}

uint32_t StackCapture::capture_python(TracerThreadState& ts) {
  if (!python_sites_) return capture_python_walk();
  // Freed when the thread exits (adding its last hits to the counts).
  SiteCache& cache = thread_owned<SiteCache, &TracerThreadState::python_sites>(ts);
  // The owner is told by its counts, not its address: a StackCapture made where a destroyed
  // one was (tests) has other counts, which the old one's, kept alive by this cache, cannot be.
  if (cache.hits != &counts_->hits || cache.by_site.size() > kSiteCacheLimit) [[unlikely]] {
    if (cache.hits != &counts_->hits) {
      cache.flush_hits();
      cache.counts_owner = counts_;
      cache.hits = &counts_->hits;
    }
    cache.clear();
  }
  size_t n = 0;
  if (!python_.site_words(cache.walk_buffer(), n, ts)) return capture_python_walk();
  SiteCache::Slot* hit = cache.last;
  if (!cache.is_last(n)) {
    const PythonFrames::SiteKey key = PythonFrames::key_of(cache.walk_buffer(), n);
    SiteCache::Slot& slot = cache.slot_for(key);
    if (slot.entry == nullptr || slot.a != key.a || slot.b != key.b) {
      auto it = cache.by_site.find(key);
      if (it != cache.by_site.end()) {
        // Known, but not in front: it takes the slot (the slot's site keeps its uses in the map).
        if (slot.entry != nullptr) slot.entry->uses = slot.uses;
        slot = SiteCache::Slot{key.a, key.b, &it->second, it->second.id, it->second.uses};
      } else {
        const uint32_t id = capture_python_walk();
        counts_->misses.fetch_add(1, std::memory_order_relaxed);
        // A key whose walk gave no frames is kept too (id 0): a thread with a Python thread state
        // but no complete frame (PyTorch's autograd threads launching backward kernels) would
        // otherwise take the GIL back at every launch only to find nothing.
        auto at = cache.by_site.emplace(key, SiteCache::Entry{id, 1}).first;
        if (slot.entry != nullptr) slot.entry->uses = slot.uses;
        slot = SiteCache::Slot{key.a, key.b, &at->second, id, 1};
        cache.remember(n, slot);
        if (id != 0) {
          // A new key whose stack this thread already had under another key: the key changed
          // though the stack did not (counted for diagnostics: such misses cost a C-API walk).
          if (!cache.stacks_seen.insert(id).second) counts_->rekeys.fetch_add(1, std::memory_order_relaxed);
        }
        return id;
      }
    }
    cache.remember(n, slot);
    hit = &slot;
  }
  SiteCache::Slot& slot = *hit;
  const uint32_t uses = slot.uses++;
  if (++cache.pending_hits == kHitsPerFlush) cache.flush_hits();
  // A key known to give no frames is not checked: the check would take the GIL back (from a
  // thread that has no Python frames to show) only to compare nothing with nothing.
  if (slot.id == 0 || !check_hit(uses)) return slot.id;
  counts_->checks.fetch_add(1, std::memory_order_relaxed);
  const uint32_t id = capture_python_walk();
  if (id != slot.id) {
    python_.site_key_mismatch();
    counts_->mismatches.fetch_add(1, std::memory_order_relaxed);
  }
  return id;
}

std::string StackCapture::python_sites_summary() const {
  // Other threads' hits since their last batch are not counted; the calling thread's are.
  uint64_t hits = counts_->hits.load();
  if (const auto* mine = static_cast<const SiteCache*>(thread_state().python_sites); mine != nullptr && mine->hits == &counts_->hits)
    hits += mine->pending_hits;
  const NativeUnwinder::Counts walks = NativeUnwinder::counts();
  const std::string slow = NativeUnwinder::why_slow();
  return std::string("python call sites: ") + (python_sites_ ? python_.site_key_state() : "disabled") + ", " +
         std::to_string(hits) + " hits, " + std::to_string(counts_->misses.load()) + " misses (" + std::to_string(counts_->rekeys.load()) +
         " of them with a stack seen before), " + std::to_string(counts_->checks.load()) + " checked, " +
         std::to_string(counts_->mismatches.load()) + " mismatches; native walks: " +
         (native_cached_ ? (NativeUnwinder::fast_path_on() ? "cached" : "cached, off after a mismatch") : "dwarf") +
         ", " + std::to_string(walks.fast) + " learned, " + std::to_string(walks.reference) + " dwarf, " +
         std::to_string(walks.mismatches) + " mismatches" + (slow.empty() ? "" : "; " + slow);
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
