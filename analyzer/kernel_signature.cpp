// kernel_signature.h: see there.
#include "analyzer/kernel_signature.h"

#include <array>
#include <string>

namespace streamrace::analysis {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool ends_with_word(std::string_view s, std::string_view w) {
  if (s.size() < w.size() || s.substr(s.size() - w.size()) != w) return false;
  return s.size() == w.size() || s[s.size() - w.size() - 1] == ' ' || s[s.size() - w.size() - 1] == '*';
}

ParamKind classify(std::string_view p) {
  p = trim(p);
  // Qualifiers of the parameter itself (`float* const`, `float* __restrict__`) do not matter.
  for (bool again = true; again;) {
    again = false;
    for (std::string_view q : {"const", "volatile", "__restrict__", "__restrict", "restrict"}) {
      if (ends_with_word(p, q) && p.size() > q.size()) {
        p = trim(p.substr(0, p.size() - q.size()));
        again = true;
      }
    }
  }
  if (!p.empty() && p.back() == '*') {
    std::string_view pointee = trim(p.substr(0, p.size() - 1));
    // A pointer to a pointer may be used to write the inner pointers: not read-only.
    if (pointee.find('*') != std::string_view::npos) return ParamKind::kPointer;
    const bool is_const = ends_with_word(pointee, "const") || pointee.substr(0, 6) == "const ";
    return is_const ? ParamKind::kConstPointer : ParamKind::kPointer;
  }
  if (p.find_first_of("<>(&[") != std::string_view::npos) return ParamKind::kOther;
  // (A trailing `const` was stripped above.)
  static constexpr std::array<std::string_view, 19> kScalars = {
      "bool",  "char",          "signed char", "unsigned char", "short",     "unsigned short", "int",
      "unsigned int", "unsigned", "long",      "unsigned long", "long long", "unsigned long long",
      "float", "double",        "__half",      "__nv_bfloat16", "c10::Half", "c10::BFloat16"};
  for (std::string_view s : kScalars)
    if (p == s) return ParamKind::kScalar;
  return ParamKind::kOther;
}

}  // namespace

std::optional<std::vector<ParamKind>> kernel_params(std::string_view name) {
  name = trim(name);
  if (name.empty() || name.back() != ')') return std::nullopt;
  // The parameter list is the last top-level parenthesis pair.
  int depth = 0;
  size_t open = std::string_view::npos;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string_view::npos) return std::nullopt;
  std::string_view list = name.substr(open + 1, name.size() - open - 2);
  std::vector<ParamKind> out;
  if (trim(list).empty() || trim(list) == "void") return out;
  int nest = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '(' || c == '<' || c == '[' || c == '{') ++nest;
    if (c == ')' || c == '>' || c == ']' || c == '}') --nest;
    if (c == ',' && nest == 0) {
      out.push_back(classify(list.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

std::optional<std::vector<bool>> read_only_pointers(std::string_view demangled, size_t nptrs) {
  auto params = kernel_params(demangled);
  if (!params || nptrs == 0) return std::nullopt;
  std::vector<bool> ro;
  for (ParamKind k : *params) {
    if (k == ParamKind::kOther) return std::nullopt;
    if (k == ParamKind::kConstPointer || k == ParamKind::kPointer) ro.push_back(k == ParamKind::kConstPointer);
  }
  if (ro.size() != nptrs) return std::nullopt;
  return ro;
}

}  // namespace streamrace::analysis
