// Which kernels precise mode patches (`streamrace run --precise=all|auto|REGEX`). Pure
// logic, no CUDA: the Sanitizer session asks `should_patch` at each launch; `auto` mode's
// names come from an earlier run's findings (cli/precise_kernels.h, since tracer/ never
// includes analyzer/).
#pragma once

#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>

namespace streamrace::tracer::precise {

// True for NCCL's device kernels ("ncclDevKernel_AllReduce_...", "ncclKernel_...", also in
// their mangled "_Z24ncclDevKernel..." form). They are never patched: their accesses come
// from the NCCL calls.
bool is_nccl_kernel(std::string_view name);

class KernelSelector {
 public:
  enum class Mode { kAll, kRegex, kNames };

  static KernelSelector all();
  // ECMAScript regex, searched (not anchored) in the kernel's demangled and mangled names.
  // nullopt when the pattern does not compile; `error` then says why.
  static std::optional<KernelSelector> regex(const std::string& pattern, std::string* error = nullptr);
  // Exactly these names (demangled or mangled, as the trace stores them).
  static KernelSelector names(std::set<std::string> names);

  // `demangled` may be empty when demangling failed.
  bool should_patch(std::string_view mangled, std::string_view demangled) const;
  Mode mode() const { return mode_; }
  const std::set<std::string>& name_set() const { return names_; }

 private:
  Mode mode_ = Mode::kAll;
  std::shared_ptr<const std::regex> re_;
  std::set<std::string> names_;
};

// `--precise` value: "all", "auto" or a regex. "auto" needs the earlier run's findings, so
// the caller resolves it (kernels_to_confirm) and builds a names selector.
struct PreciseSpec {
  enum class Kind { kAll, kAuto, kRegex } kind = Kind::kAll;
  std::string pattern;  // kRegex only
};
// Empty value means "all" (a bare `--precise`).
PreciseSpec parse_precise_spec(std::string_view value);

// The traced processes' STREAMRACE_PRECISE value, as `streamrace run` writes it: "all",
// "regex:PATTERN" or "names:FILE" (one kernel name per line). nullopt when it is none of
// these, the regex does not compile or the file cannot be read; `error` then says why.
std::optional<KernelSelector> selector_from_setting(std::string_view setting, std::string* error = nullptr);

}  // namespace streamrace::tracer::precise
