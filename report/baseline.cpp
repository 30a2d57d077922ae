// Reading and writing baseline files.
#include "report/baseline.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "analyzer/analyzer.h"
#include "report/finding_class.h"
#include "report/output_file.h"

namespace streamrace::report {

using nlohmann::ordered_json;

std::set<std::string> read_baseline(const std::string& path) {
  std::string text;
  try {
    text = analysis::read_input_file(path);
  } catch (const analysis::InputFileError& e) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
      throw BaselineError(path + ": cannot open baseline file (create it with --update-baseline)");
    throw BaselineError(std::string(e.what()) + " (the baseline file)");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw BaselineError(path + ": baseline is not valid JSON: " + e.what());
  }
  auto schema = j.is_object() ? j.find("schema") : j.end();
  if (!j.is_object() || schema == j.end() || !schema->is_string() || *schema != "streamrace-baseline")
    throw BaselineError(path + ": not a streamrace baseline (expected \"schema\": \"streamrace-baseline\")");
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || *version != 1)
    throw BaselineError(path + ": unsupported baseline version " + (version == j.end() ? std::string("(none)") : version->dump()));
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

void write_baseline(const std::string& path, const std::vector<analysis::Finding>& findings,
                    const OutputOptions& opts) {
  std::vector<const analysis::Finding*> sorted;
  for (const auto& f : findings) sorted.push_back(&f);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->fingerprint < b->fingerprint; });
  ordered_json list = ordered_json::array();
  for (const auto* f : sorted)
    list.push_back(ordered_json{{"fingerprint", f->fingerprint}, {"rule", finding_class(*f).rule_id}, {"summary", headline(*f)}});
  ordered_json doc{{"schema", "streamrace-baseline"}, {"version", 1}, {"findings", std::move(list)}};
  write_output_file(path, doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", opts);
}

}  // namespace streamrace::report
