// CudaQueries: the few questions the call handler must ask the CUDA driver (which device a
// context belongs to, a kernel's parameter layout, what kind of memory a pointer is). An
// interface so the handler runs in tests with no driver; DriverApi answers them for real.
#pragma once

#include <cstdint>
#include <vector>

#include "traceformat/records.h"

namespace streamrace::tracer {

struct ParamSlot {
  uint32_t offset;
  uint32_t size;
};

class CudaQueries {
 public:
  virtual ~CudaQueries() = default;
  // Device ordinal of `context` (0 = the calling thread's current context).
  virtual uint32_t device_of_context(uint64_t context) = 0;
  // Parameter layout of `func` (a CUfunction, or a CUkernel when `library_kernel`).
  // Returns false when the driver cannot say.
  virtual bool param_layout(uint64_t func, bool library_kernel, std::vector<ParamSlot>& out) = 0;
  // Memory kind of an address the tracer has no allocation record for: kDevice, kPinnedHost,
  // kManaged, or kPageableHost when the driver does not know the address.
  virtual trace::MemKind memory_kind(uint64_t ptr) = 0;
  // The (mangled) name of `func` (a CUfunction, or a CUkernel when `library_kernel`), for calls
  // whose callback names no symbol (graph kernel nodes); null when the driver cannot say.
  virtual const char* function_name(uint64_t /*func*/, bool /*library_kernel*/) { return nullptr; }
  // A module, library or context was unloaded: what is cached per function handle goes (the
  // driver may hand the same handle out again for another kernel).
  virtual void forget_functions() {}
};

}  // namespace streamrace::tracer
