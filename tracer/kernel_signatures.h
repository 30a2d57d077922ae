// Kernel argument signatures: where a kernel's own code says which words of a by-value
// parameter it reads as pointers, the default tier takes only those words.
//
// The default tier records every 8-byte word of every parameter that points into live memory
// (docs/tracer.md). That is right for plain pointer arguments and for structs of pointers, and
// wrong for one pattern common in PyTorch: a metadata struct with a fixed number of pointer
// slots of which a launch fills only the first few, the rest left as the host stack had them.
// A stale slot that happens to hold the address of a live tensor then looks like an access and
// can make a false `possible` finding. A signature names such a kernel (a part of its mangled
// or demangled name), the parameter, and how many of its leading words the launch uses, as a
// function of the launch shape; every other word of that parameter is not taken as a pointer.
// Each signature says where its facts come from. (analyzer/kernel_signature.h is another
// thing: the const-ness of pointer parameters read from a demangled name.)
#pragma once

#include <cstdint>
#include <string_view>

namespace streamrace::tracer {

enum class SignatureCount : uint8_t {
  kGridY,  // the launch's grid.y
};

struct KernelSignature {
  const char* name_part;  // contained in the kernel's name (mangled or demangled)
  uint32_t param;         // the parameter (0-based) whose leading words are the only pointers
  SignatureCount count;   // how many of its leading 8-byte words are
  // The first parameter from which on no word is a pointer (sizes, strides, scalars; a 4-dim
  // size/stride struct of a 3-dim launch leaves its last entries as the host stack had them,
  // and two of those 32-bit words can read as a live address); 0: every later one is scanned.
  uint32_t scalars_from;
  const char* source;  // where the facts come from
};

// The built-in signature for a kernel name, or null.
const KernelSignature* signature_for(std::string_view kernel_name);

// The alignment in bytes every pointer argument of a kernel has (1: nothing known; always a power
// of two, so that the launch's scan tests it with a mask). PyTorch's
// `vectorized_elementwise_kernel<VEC, ...>` runs only when every data pointer is aligned to VEC
// elements of its type (aten/src/ATen/native/cuda/MemoryAccess.cuh, can_vectorize_up_to: the
// host picks VEC as the smallest such count over the pointers), so to at least VEC bytes; a
// word that is not is a scalar (seen on the H200: dropout's float scale in the low half of a
// word whose high half was stack garbage read as a pointer into a live 100 MB block).
uint32_t pointer_alignment(std::string_view kernel_name);

// How many leading 8-byte words of parameter `param` may hold pointers under `sig` (all of
// them, `param_words`, when `sig` is null or is about another parameter; none for a parameter
// the signature says holds only scalars).
uint32_t pointer_words(const KernelSignature* sig, uint32_t param, uint32_t param_words, const uint32_t grid[3]);

}  // namespace streamrace::tracer
