// KernelSelector: see kernel_selection.h.
#include "tracer/precise/kernel_selection.h"

#include <fstream>

#include <cctype>

namespace streamrace::tracer::precise {

namespace {

// "_Z24ncclDevKernel_..." -> "ncclDevKernel_...": the Itanium mangling of a function at
// namespace scope is _Z, the length of the name, then the name.
std::string_view strip_mangling_prefix(std::string_view name) {
  if (!name.starts_with("_Z")) return name;
  size_t i = 2;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > 2 ? name.substr(i) : name;
}

}  // namespace

bool is_nccl_kernel(std::string_view name) {
  std::string_view n = strip_mangling_prefix(name);
  return n.starts_with("ncclKernel") || n.starts_with("ncclDevKernel");
}

KernelSelector KernelSelector::all() { return KernelSelector{}; }

std::optional<KernelSelector> KernelSelector::regex(const std::string& pattern, std::string* error) {
  KernelSelector s;
  s.mode_ = Mode::kRegex;
  try {
    s.re_ = std::make_shared<const std::regex>(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    if (error) *error = std::string("invalid kernel regex '") + pattern + "': " + e.what();
    return std::nullopt;
  }
  return s;
}

KernelSelector KernelSelector::names(std::set<std::string> names) {
  KernelSelector s;
  s.mode_ = Mode::kNames;
  s.names_ = std::move(names);
  return s;
}

bool KernelSelector::should_patch(std::string_view mangled, std::string_view demangled) const {
  if (is_nccl_kernel(mangled) || is_nccl_kernel(demangled)) return false;
  switch (mode_) {
    case Mode::kAll:
      return true;
    case Mode::kRegex:
      return (!demangled.empty() && std::regex_search(demangled.begin(), demangled.end(), *re_)) ||
             (!mangled.empty() && std::regex_search(mangled.begin(), mangled.end(), *re_));
    case Mode::kNames:
      return (!demangled.empty() && names_.count(std::string(demangled)) > 0) ||
             (!mangled.empty() && names_.count(std::string(mangled)) > 0);
  }
  return false;
}

PreciseSpec parse_precise_spec(std::string_view value) {
  PreciseSpec spec;
  if (value.empty() || value == "all") return spec;
  if (value == "auto") {
    spec.kind = PreciseSpec::Kind::kAuto;
    return spec;
  }
  spec.kind = PreciseSpec::Kind::kRegex;
  spec.pattern = std::string(value);
  return spec;
}

std::optional<KernelSelector> selector_from_setting(std::string_view setting, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<KernelSelector> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  if (setting == "all" || setting == "1") return KernelSelector::all();
  if (setting.substr(0, 6) == "regex:") {
    std::string why;
    auto sel = KernelSelector::regex(std::string(setting.substr(6)), &why);
    if (!sel) return fail("STREAMRACE_PRECISE: the kernel regex does not compile: " + why);
    return sel;
  }
  if (setting.substr(0, 6) == "names:") {
    const std::string path(setting.substr(6));
    std::ifstream in(path);
    if (!in) return fail("STREAMRACE_PRECISE: cannot read the kernel list " + path);
    std::set<std::string> names;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) names.insert(line);
    return KernelSelector::names(std::move(names));
  }
  return fail("STREAMRACE_PRECISE=" + std::string(setting) + " is not all, regex:PATTERN or names:FILE");
}

}  // namespace streamrace::tracer::precise
