// Reading and writing baseline files.
#include "report/baseline.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "report/finding_class.h"

namespace streamrace::report {

using nlohmann::ordered_json;

std::set<std::string> read_baseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw BaselineError(path + ": cannot open baseline file (create it with --update-baseline)");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw BaselineError(path + ": baseline is not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.value("schema", "") != "streamrace-baseline")
    throw BaselineError(path + ": not a streamrace baseline (expected \"schema\": \"streamrace-baseline\")");
  if (j.value("version", 0) != 1)
    throw BaselineError(path + ": unsupported baseline version " + j.value("version", nlohmann::json(0)).dump());
  if (!j.contains("findings") || !j["findings"].is_array())
    throw BaselineError(path + ": baseline has no \"findings\" array");
  std::set<std::string> out;
  size_t i = 0;
  for (const auto& e : j["findings"]) {
    if (!e.is_object() || !e.contains("fingerprint") || !e["fingerprint"].is_string())
      throw BaselineError(path + ": findings[" + std::to_string(i) + "] has no \"fingerprint\" string");
    out.insert(e["fingerprint"].get<std::string>());
    ++i;
  }
  return out;
}

void write_baseline(const std::string& path, const std::vector<analysis::Finding>& findings) {
  std::vector<const analysis::Finding*> sorted;
  for (const auto& f : findings) sorted.push_back(&f);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->fingerprint < b->fingerprint; });
  ordered_json list = ordered_json::array();
  for (const auto* f : sorted)
    list.push_back(ordered_json{{"fingerprint", f->fingerprint}, {"rule", finding_class(*f).rule_id}, {"summary", headline(*f)}});
  ordered_json doc{{"schema", "streamrace-baseline"}, {"version", 1}, {"findings", std::move(list)}};
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw BaselineError(path + ": cannot write baseline file");
  out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!out.good()) throw BaselineError(path + ": error writing baseline file");
}

}  // namespace streamrace::report
