// Reading and matching suppression files.
#include "report/suppressions.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <sstream>

#include "analyzer/analyzer.h"

namespace streamrace::report {

namespace {

constexpr const char* kTypes[] = {"race", "kernel", "stream", "file", "fingerprint"};

bool glob(const std::string& pattern, const std::string& s) { return fnmatch(pattern.c_str(), s.c_str(), 0) == 0; }

std::string file_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool file_matches(const std::string& pattern, const std::string& file) {
  return !file.empty() && (glob(pattern, file) || glob(pattern, file_name(file)));
}

bool access_matches(const Suppression& s, const analysis::Access& a) {
  if (s.type == "kernel") return glob(s.pattern, a.op);
  if (s.type == "stream")
    return glob(s.pattern, a.stream_label) || glob(s.pattern, fmt::format("{:#x}", a.stream)) ||
           glob(s.pattern, std::to_string(a.stream));
  for (const auto& f : a.stack) {
    if (s.type == "race" && !f.function.empty() && glob(s.pattern, f.function)) return true;
    if ((s.type == "race" || s.type == "file") && file_matches(s.pattern, f.file)) return true;
  }
  return false;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

SuppressionList SuppressionList::parse(std::istream& in, const std::string& name) {
  SuppressionList list;
  int n = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++n;
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    auto colon = line.find(':');
    if (colon == std::string::npos)
      throw SuppressionError(fmt::format("{}:{}: expected TYPE:PATTERN (race, kernel, stream, file or fingerprint), found \"{}\"",
                                         name, n, line));
    std::string type = trim(line.substr(0, colon));
    std::string pattern = trim(line.substr(colon + 1));
    bool known = false;
    for (const char* t : kTypes) known |= type == t;
    if (!known)
      throw SuppressionError(fmt::format(
          "{}:{}: unknown suppression type \"{}\" (expected race, kernel, stream, file or fingerprint)", name, n, type));
    if (pattern.empty()) throw SuppressionError(fmt::format("{}:{}: empty pattern after \"{}:\"", name, n, type));
    list.entries_.push_back(Suppression{type, pattern, fmt::format("{}:{}", name, n)});
  }
  return list;
}

SuppressionList SuppressionList::load(const std::string& path) {
  std::string text;
  try {
    text = analysis::read_input_file(path);
  } catch (const analysis::InputFileError& e) {
    throw SuppressionError(std::string(e.what()) + " (the suppressions file)");
  }
  std::istringstream in(text);
  return parse(in, path);
}

const Suppression* SuppressionList::apply(const analysis::Finding& f) {
  for (auto& s : entries_) {
    bool hit = s.type == "fingerprint" ? glob(s.pattern, f.fingerprint)
                                       : access_matches(s, f.earlier) || access_matches(s, f.later);
    if (hit) {
      ++s.findings;
      s.occurrences += f.occurrences;
      return &s;
    }
  }
  return nullptr;
}

}  // namespace streamrace::report
