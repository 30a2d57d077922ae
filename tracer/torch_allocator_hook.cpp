// TorchAllocatorHook: see torch_allocator_hook.h.
#include "tracer/torch_allocator_hook.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <new>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "traceformat/records.h"
#include "tracer/cuda_call_handler.h"
#include "tracer/self_time.h"
#include "tracer/tracer_settings.h"

namespace streamrace::tracer {

namespace {

// Read from PyTorch's own headers of each version (c10/cuda/CUDACachingAllocator.h and
// c10/core/CachingDeviceAllocator.h): the slot of each virtual method of CUDAAllocator we
// call, and where TraceEntry keeps its fields. Checked on the GPU machine per version.
constexpr TorchAllocatorLayout kLayouts[] = {
    // torch 2.11: TraceEntry {int action; int8 device; size_t addr; shared_ptr context;
    // void* stream; size_t size; ...}
    {"2.11.", 6, 49, 44, 0, 4, 8, 32, 40},
};

// The trace tracker's argument type. Opaque: fields are read at the layout's offsets.
struct TraceEntryBytes;
using Tracker = std::function<void(const TraceEntryBytes&)>;

// The allocator's methods as plain functions (Itanium C++ ABI, x86-64): `this` first; a
// class returned by value through a hidden pointer passed before `this`; a class argument
// with a non-trivial destructor passed as a pointer to the caller's temporary.
using InitializedFn = bool (*)(void* self);
using NameFn = void (*)(std::string* result, void* self);
using AttachFn = void (*)(void* self, Tracker* tracker);

struct LoadedModule {
  std::string path;
  std::vector<std::pair<uint64_t, uint64_t>> code;  // executable segments [begin, end)
  unsigned long long adds = 0;
  unsigned long long skip_if_adds = 0;  // nothing loaded since a look that found nothing
  bool first = true;
};

int find_c10_cuda(struct dl_phdr_info* info, size_t, void* data) {
  auto* m = static_cast<LoadedModule*>(data);
  m->adds = info->dlpi_adds;
  if (m->first) {
    m->first = false;
    if (m->skip_if_adds != 0 && info->dlpi_adds == m->skip_if_adds) return 1;
  }
  const char* name = info->dlpi_name;
  if (name == nullptr) return 0;
  std::string_view n(name);
  constexpr std::string_view kLib = "/libc10_cuda.so";
  if (n.size() < kLib.size() || n.substr(n.size() - kLib.size()) != kLib) return 0;
  m->path = name;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      m->code.emplace_back(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  return 1;
}

bool in_code(const LoadedModule& m, const void* fn) {
  const auto p = reinterpret_cast<uint64_t>(fn);
  for (const auto& [b, e] : m.code)
    if (p >= b && p < e) return true;
  return false;
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > (1u << 16)) s.resize(1u << 16);
  return s;
}

// torch/lib/libc10_cuda.so -> torch/version.py
std::string version_py_of(const std::string& lib) {
  auto slash = lib.rfind('/');
  if (slash == std::string::npos) return {};
  std::string dir = lib.substr(0, slash);  // .../torch/lib
  slash = dir.rfind('/');
  if (slash == std::string::npos) return {};
  return dir.substr(0, slash) + "/version.py";
}

const char* kApiNames[] = {"CUDACachingAllocator alloc",          "CUDACachingAllocator free",
                           "CUDACachingAllocator free completed", "CUDACachingAllocator segment alloc",
                           "CUDACachingAllocator segment free",   "CUDACachingAllocator segment map",
                           "CUDACachingAllocator segment unmap"};

}  // namespace

const TorchAllocatorLayout* torch_allocator_layout(const std::string& version) {
  for (const auto& l : kLayouts)
    if (version.rfind(l.version_prefix, 0) == 0) return &l;
  return nullptr;
}

std::string torch_version_from_file_text(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("__version__", 0) != 0) continue;
    auto q = line.find_first_of("'\"");
    if (q == std::string::npos) continue;
    auto e = line.find(line[q], q + 1);
    if (e == std::string::npos) continue;
    return line.substr(q + 1, e - q - 1);
  }
  return {};
}

bool TorchAllocatorHook::enabled_by_env() {
  auto v = tracer_setting("torch_allocator");
  return !v || *v != "0";
}

void TorchAllocatorHook::give_up(const std::string& why, bool warning) {
  int expected = kWaiting;
  if (!state_.compare_exchange_strong(expected, kGaveUp)) return;
  handler_.recorder().add_notice(warning ? trace::NoticeLevel::kWarning : trace::NoticeLevel::kInfo,
                                 "PyTorch caching allocator not observed (" + why +
                                     "): kernel argument extents reach to the end of cudaMalloc segments");
}

void TorchAllocatorHook::maybe_attach() {
  if (state_.load(std::memory_order_relaxed) != kWaiting) return;
  LoadedModule m;
  m.skip_if_adds = seen_loads_.load(std::memory_order_relaxed);
  dl_iterate_phdr(find_c10_cuda, &m);
  if (m.path.empty()) {
    seen_loads_.store(m.adds, std::memory_order_relaxed);  // PyTorch's CUDA part not loaded (yet): look again after the next load
    return;
  }
  const std::string version = torch_version_from_file_text(read_small_file(version_py_of(m.path)));
  layout_ = torch_allocator_layout(version);
  if (layout_ == nullptr)
    return give_up("torch " + (version.empty() ? std::string("of unknown version") : version) +
                       " is not a version streamrace knows the allocator of",
                   false);
  void* lib = dlopen(m.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return;
  void* sym = dlsym(lib, "_ZN3c104cuda20CUDACachingAllocator9allocatorE");
  dlclose(lib);  // RTLD_NOLOAD took a reference of its own
  if (sym == nullptr) return give_up("no allocator symbol in " + m.path, true);
  void* self = static_cast<std::atomic<void*>*>(sym)->load();
  if (self == nullptr) return;  // not set up yet
  void** vtable = *static_cast<void***>(self);
  void* fn_init = vtable[layout_->slot_initialized];
  void* fn_name = vtable[layout_->slot_name];
  void* fn_attach = vtable[layout_->slot_attach_trace_tracker];
  // Every method called must be libc10_cuda.so's own: a backend from elsewhere (a pluggable
  // allocator) or a layout that is not what the table says stops here.
  if (!in_code(m, fn_init) || !in_code(m, fn_name) || !in_code(m, fn_attach))
    return give_up("allocator backend outside libc10_cuda.so", false);
  try {
    if (!reinterpret_cast<InitializedFn>(fn_init)(self)) return;  // try again at the next allocation
    std::string name;
    {
      alignas(std::string) unsigned char slot[sizeof(std::string)];
      reinterpret_cast<NameFn>(fn_name)(reinterpret_cast<std::string*>(slot), self);
      std::string* s = std::launder(reinterpret_cast<std::string*>(slot));
      name = *s;
      s->~basic_string();
    }
    // cudaMallocAsync: every tensor is its own stream-ordered allocation, already exact.
    if (name != "native") return give_up("allocator backend '" + name + "'", false);
    const TorchAllocatorLayout* L = layout_;
    Tracker tracker = [this, L](const TraceEntryBytes& entry) {
      self_time::Scope timed(self_time::kAllocator);
      const auto* p = reinterpret_cast<const unsigned char*>(&entry);
      int32_t action;
      int8_t device;
      uint64_t addr, size, stream;
      std::memcpy(&action, p + L->off_action, sizeof(action));
      std::memcpy(&device, p + L->off_device, sizeof(device));
      std::memcpy(&addr, p + L->off_addr, sizeof(addr));
      std::memcpy(&stream, p + L->off_stream, sizeof(stream));
      std::memcpy(&size, p + L->off_size, sizeof(size));
      on_entry(action, device, addr, size, stream);
    };
    int expected = kWaiting;
    if (!state_.compare_exchange_strong(expected, kAttached)) return;
    reinterpret_cast<AttachFn>(fn_attach)(self, &tracker);
    handler_.recorder().add_notice(trace::NoticeLevel::kInfo,
                                   "PyTorch " + version + " caching allocator observed: kernel argument extents end "
                                   "at the tensor's block");
  } catch (...) {
    give_up("attaching failed", true);
  }
}

bool TorchAllocatorHook::validate(TracerThreadState& ts, uint64_t addr, uint64_t size) {
  // Its first and last byte in traced allocations (with expandable segments one event covers
  // several cuMemMap ranges, and a block may span two of them).
  if (size == 0 || size - 1 > ~uint64_t(0) - addr) return false;
  const AllocationTable::Finder lookup = handler_.allocations().finder(ts.allocation_cache);
  auto first = lookup.find(addr);
  if (!first) return false;
  if (size <= first->base + first->bytes - addr) return true;
  return lookup.find(addr + size - 1).has_value();
}

uint32_t TorchAllocatorHook::api_id(TraceRecorder& rec, int action) {
  if (api_uid_.load(std::memory_order_acquire) != rec.uid()) {
    for (auto& id : api_ids_) id.store(0, std::memory_order_relaxed);
    api_uid_.store(rec.uid(), std::memory_order_release);
  }
  uint32_t id = api_ids_[action].load(std::memory_order_relaxed);
  if (id == 0) {
    id = rec.strings().intern(kApiNames[action]);
    api_ids_[action].store(id, std::memory_order_relaxed);
  }
  return id;
}

void TorchAllocatorHook::on_entry(int action, int device, uint64_t addr, uint64_t size, uint64_t stream) {
  if (state_.load(std::memory_order_relaxed) != kAttached || paused_.load(std::memory_order_relaxed)) return;
  try {
    if (action < 0 || action > 8) return;
    if (action == 7 || action == 8) return;  // SNAPSHOT, OOM: nothing about blocks
    // FREE_COMPLETED is not recorded: no analysis reads it (a block's reuse is the next ALLOC
    // at its address, a record_stream's wait the events the allocator queries), and it is a
    // third of a training step's allocator events (ZeRO-2: ~1,400 of ~4,100 per step).
    if (action == 2) return;
    // Events that hand out memory (a block, a segment) must lie inside an allocation the
    // tracer recorded; releases are recorded as they come (the memory may be gone already).
    const bool hands_out = action == 0 || action == 3 || action == 5;
    TracerThreadState& ts = thread_state();  // once per event, passed on
    const bool ok = !hands_out || validate(ts, addr, size);
    if (validated_.load(std::memory_order_relaxed) == 0 && hands_out) {
      if (!ok) {
        // The first events must match, or the layout is not what the table says.
        if (mismatches_.fetch_add(1) + 1 >= 4) {
          state_.store(kStopped);
          handler_.recorder().add_notice(
              trace::NoticeLevel::kWarning,
              "PyTorch caching allocator events did not match the traced allocations: stopped recording them "
              "(kernel argument extents reach to the end of cudaMalloc segments)");
        }
        return;
      }
      validated_.store(1);
    }
    if (!ok) return;  // a block the tracer cannot place: left out rather than recorded wrong
    trace::AllocatorBlock r{};
    r.addr = addr;
    r.bytes = size;
    r.device = device >= 0 ? uint32_t(device) : 0;
    r.stream = handler_.normalize_stream(stream, false, r.device);
    r.action = trace::BlockAction(action + 1);
    r.allocator = trace::BlockAllocator::kTorchCaching;
    TraceRecorder& rec = handler_.recorder();
    const uint32_t api = api_id(rec, action);
    // Only a free's stack is ever shown (the "freed at" line of a use-after-reuse); the
    // others would cost a stack walk per tensor for nothing.
    rec.add_call(ts, r, api, action == 1 ? handler_.capture_stack(ts) : 0);
  } catch (...) {
    // Never let the tracer's trouble reach the allocator.
  }
}

}  // namespace streamrace::tracer
