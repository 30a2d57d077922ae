// Finding the real entry point of a library the tracer interposes (NCCL, cuBLAS): the handle
// of the already loaded library, and a symbol looked up in it (a lookup in a handle starts at
// that library, so it never comes back to the interposer; dlsym(RTLD_NEXT) finds nothing when
// the program loaded the library in a local scope, as PyTorch does).
#pragma once

namespace streamrace::tracer {

// The handle of a loaded library: dlopen(RTLD_NOLOAD) of each of `sonames`, else of the first
// loaded object whose path contains `path_part`. nullptr when none is loaded.
void* loaded_library(const char* const* sonames, int count, const char* path_part);

// loaded_library, remembered in `cache` once found (a library is not unloaded while the
// program may still call it).
void* cached_library(void*& cache, const char* const* sonames, int count, const char* path_part);

// `name` in `handle`, or nullptr when absent or when it resolves into libstreamrace.so itself.
void* real_symbol_in(void* handle, const char* name);

}  // namespace streamrace::tracer
