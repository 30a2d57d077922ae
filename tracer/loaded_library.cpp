// Loaded libraries' real entry points: see loaded_library.h.
#include "tracer/loaded_library.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <string>
#include <string_view>

namespace streamrace::tracer {
namespace {

struct Search {
  const char* part;
  std::string path;
};

int find_module(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  std::string_view name = info->dlpi_name ? info->dlpi_name : "";
  if (name.find(s->part) == std::string_view::npos) return 0;
  s->path = std::string(name);
  return 1;
}

}  // namespace

void* loaded_library(const char* const* sonames, int count, const char* path_part) {
  for (int i = 0; i < count; ++i)
    if (void* h = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD)) return h;
  Search s{path_part, {}};
  dl_iterate_phdr(find_module, &s);
  return s.path.empty() ? nullptr : dlopen(s.path.c_str(), RTLD_NOW | RTLD_NOLOAD);
}

void* cached_library(void*& cache, const char* const* sonames, int count, const char* path_part) {
  std::atomic_ref<void*> slot(cache);
  void* h = slot.load(std::memory_order_acquire);
  if (h) return h;
  h = loaded_library(sonames, count, path_part);
  if (h) slot.store(h, std::memory_order_release);
  return h;
}

void* real_symbol_in(void* handle, const char* name) {
  if (!handle) return nullptr;
  void* fn = dlsym(handle, name);
  Dl_info self{}, found{};
  static const int anchor = 0;
  if (fn && dladdr(&anchor, &self) && dladdr(fn, &found) && self.dli_fbase == found.dli_fbase) return nullptr;
  return fn;
}

}  // namespace streamrace::tracer
