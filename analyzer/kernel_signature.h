// What a kernel's demangled signature says about its pointer arguments, for the default tier
// (pointer arguments without extent or direction). A C++ kernel taking `T const*` cannot
// write through that parameter without a cast, so a pointer recorded for it is a read; a
// `T*` may be read or written. Kernels whose signature does not map onto the recorded
// pointers one to one (structs passed by value, such as PyTorch's functor kernels, unknown
// parameter types, C names without a parameter list) get no direction from here.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace streamrace::analysis {

enum class ParamKind : uint8_t { kConstPointer, kPointer, kScalar, kOther };

// The top-level parameters of a demangled function name ("f(float const*, int, float*)"),
// classified; nullopt when the name has no parameter list.
std::optional<std::vector<ParamKind>> kernel_params(std::string_view demangled);

// For `nptrs` pointers recorded in parameter order (each a pointer parameter's value that
// landed in a live allocation): which are read-only. nullopt unless every parameter is a
// pointer or a scalar and exactly `nptrs` of them are pointers.
std::optional<std::vector<bool>> read_only_pointers(std::string_view demangled, size_t nptrs);

}  // namespace streamrace::analysis
