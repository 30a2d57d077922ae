// Writes SARIF 2.1.0. Paths under ReportOptions::source_root become relative URIs against
// %SRCROOT%, which is what GitHub needs to place results on files of the repository.
#include "report/sarif_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "report/finding_class.h"

namespace streamrace::report {

namespace {

using nlohmann::ordered_json;
using analysis::Access;
using analysis::Finding;
using analysis::Frame;

constexpr const char* kSchemaUri =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
constexpr const char* kRootBase = "%SRCROOT%";

// RFC 3986: keep unreserved characters and '/', percent-encode the rest.
std::string encode_uri_path(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

class SarifWriter {
 public:
  explicit SarifWriter(const ReportOptions& opts) : opts_(opts) {}

  ordered_json artifact_location(const std::string& file) const {
    ordered_json a;
    auto rel = source_uri_path(file, opts_.source_root);
    if (!rel.empty()) {
      a["uri"] = encode_uri_path(rel);
      a["uriBaseId"] = kRootBase;
    } else if (!file.empty() && file.front() == '/') {
      a["uri"] = "file://" + encode_uri_path(file);
    } else {
      a["uri"] = encode_uri_path(file);
    }
    return a;
  }

  ordered_json location(const Frame& f, const std::string& message = {}, int id = -1) const {
    ordered_json loc;
    if (id >= 0) loc["id"] = id;
    if (!f.file.empty()) {
      ordered_json phys;
      phys["artifactLocation"] = artifact_location(f.file);
      if (f.line > 0) phys["region"] = ordered_json{{"startLine", f.line}};
      loc["physicalLocation"] = std::move(phys);
    }
    if (!f.function.empty())
      loc["logicalLocations"] = ordered_json::array({ordered_json{{"fullyQualifiedName", f.function}, {"kind", "function"}}});
    if (!message.empty()) loc["message"] = ordered_json{{"text", message}};
    return loc;
  }

  // Where a result points for one access; a stackless access points at nothing in the source.
  ordered_json access_location(const Access& a, const std::string& message, int id = -1) const {
    if (const Frame* f = primary_frame(a, opts_.source_root)) return location(*f, message, id);
    ordered_json loc;
    if (id >= 0) loc["id"] = id;
    loc["message"] = ordered_json{{"text", message}};
    return loc;
  }

  static std::string access_text(const Access& a, const char* which) {
    return fmt::format("{} access: {} on {} {}", which, a.op, a.stream_label, verb(a.direction));
  }

  ordered_json stack(const Access& a, const char* which) const {
    ordered_json frames = ordered_json::array();
    for (const auto& f : a.stack) frames.push_back(ordered_json{{"location", location(f)}});
    return ordered_json{{"message", {{"text", access_text(a, which)}}}, {"frames", std::move(frames)}};
  }

  // One thread flow per stream: the access's stack from the outermost frame inwards.
  ordered_json thread_flow(const Access& a, const char* which) const {
    ordered_json locs = ordered_json::array();
    std::vector<const Frame*> shown;
    for (const auto& f : a.stack)
      if (!f.file.empty() && (f.python || f.line > 0)) shown.push_back(&f);
    if (shown.empty())
      if (const Frame* f = primary_frame(a, opts_.source_root)) shown.push_back(f);
    int depth = 0;
    for (auto it = shown.rbegin(); it != shown.rend(); ++it, ++depth) {
      bool last = std::next(it) == shown.rend();
      ordered_json tfl;
      tfl["location"] = location(**it, last ? access_text(a, which) : std::string{});
      tfl["nestingLevel"] = depth;
      locs.push_back(std::move(tfl));
    }
    if (locs.empty())
      locs.push_back(ordered_json{{"location", {{"message", {{"text", access_text(a, which)}}}}}});
    return ordered_json{{"id", a.stream_label.empty() ? fmt::format("stream {:#x}", a.stream) : a.stream_label},
                        {"message", {{"text", access_text(a, which)}}},
                        {"locations", std::move(locs)}};
  }

  ordered_json result(const Finding& f) const {
    const auto& cls = finding_class(f);
    ordered_json r;
    r["ruleId"] = cls.rule_id;
    r["ruleIndex"] = finding_class_index(f);
    r["kind"] = "fail";
    r["level"] = f.confidence == analysis::Confidence::kCertain ? "error" : "warning";
    std::string text = headline(f) + " ([earlier access](1)).";
    if (!f.missing_edge.empty()) text += " " + f.missing_edge;
    r["message"] = ordered_json{{"text", text}};
    r["locations"] = ordered_json::array({access_location(f.later, access_text(f.later, "later"))});
    r["relatedLocations"] = ordered_json::array({access_location(f.earlier, access_text(f.earlier, "earlier"), 1)});
    r["partialFingerprints"] = ordered_json{{kSarifFingerprintKey, f.fingerprint}};
    r["codeFlows"] = ordered_json::array({ordered_json{
        {"message", {{"text", "the two unordered accesses, one thread flow per stream"}}},
        {"threadFlows", ordered_json::array({thread_flow(f.earlier, "earlier"), thread_flow(f.later, "later")})}}});
    r["stacks"] = ordered_json::array({stack(f.earlier, "earlier"), stack(f.later, "later")});
    if (f.occurrences > 0) r["occurrenceCount"] = f.occurrences;
    if (opts_.have_baseline) r["baselineState"] = is_new(f, opts_) ? "new" : "unchanged";
    ordered_json props;
    props["kind"] = analysis::to_string(f.kind);
    props["confidence"] = analysis::to_string(f.confidence);
    props["mode"] = f.mode;
    props["ranks"] = f.ranks;
    props["overlapAddress"] = fmt::format("{:#x}", f.overlap_addr);
    props["overlapBytes"] = f.overlap_bytes;
    if (!f.fix.empty()) props["fix"] = f.fix;
    r["properties"] = std::move(props);
    return r;
  }

  static ordered_json rule(const FindingClass& c) {
    ordered_json r;
    r["id"] = c.rule_id;
    r["name"] = c.name;
    r["shortDescription"] = ordered_json{{"text", c.title}};
    r["fullDescription"] = ordered_json{{"text", c.description}};
    r["help"] = ordered_json{
        {"text", std::string(c.description) +
                     " Fix: order the two accesses: record a CUDA event on the earlier access's stream after it "
                     "and make the later access's stream wait on that event before it (or use "
                     "stream.wait_stream / tensor.record_stream in PyTorch)."}};
    bool certain = c.confidence == analysis::Confidence::kCertain;
    r["defaultConfiguration"] = ordered_json{{"level", certain ? "error" : "warning"}};
    r["properties"] = ordered_json{{"tags", {"concurrency", "cuda", "data-race"}},
                                   {"precision", certain ? "very-high" : "medium"},
                                   {"problem.severity", certain ? "error" : "warning"}};
    return r;
  }

  ordered_json document(const analysis::AnalysisResult& result) const {
    ordered_json driver;
    driver["name"] = "streamrace";
    driver["version"] = opts_.tool_version;
    driver["semanticVersion"] = opts_.tool_version;
    ordered_json rules = ordered_json::array();
    for (const auto& c : finding_classes()) rules.push_back(rule(c));
    driver["rules"] = std::move(rules);

    ordered_json run;
    run["tool"] = ordered_json{{"driver", std::move(driver)}};
    if (!opts_.source_root.empty()) {
      std::string root = opts_.source_root;
      if (root.back() != '/') root += '/';
      std::string uri = root.front() == '/' ? "file://" + encode_uri_path(root) : encode_uri_path(root);
      run["originalUriBaseIds"] = ordered_json{{kRootBase, {{"uri", uri}}}};
    }
    ordered_json notes = ordered_json::array();
    for (const auto& n : result.notices) {
      std::string level = n.level == "error" ? "error" : n.level == "warning" ? "warning" : "note";
      std::string text = n.trace.empty() ? n.text : n.trace + ": " + n.text;
      notes.push_back(ordered_json{{"level", level}, {"message", {{"text", text}}}});
    }
    ordered_json invocation{{"executionSuccessful", true}};
    if (!notes.empty()) invocation["toolExecutionNotifications"] = std::move(notes);
    run["invocations"] = ordered_json::array({std::move(invocation)});
    ordered_json results = ordered_json::array();
    for (const auto& f : result.findings) results.push_back(result_json(f));
    run["results"] = std::move(results);
    ordered_json traces = ordered_json::array();
    for (const auto& t : result.traces) traces.push_back(t.path);
    run["properties"] = ordered_json{{"traces", std::move(traces)}, {"records", result.records}, {"accesses", result.accesses}};

    ordered_json doc;
    doc["$schema"] = kSchemaUri;
    doc["version"] = "2.1.0";
    doc["runs"] = ordered_json::array({std::move(run)});
    return doc;
  }

 private:
  ordered_json result_json(const Finding& f) const { return result(f); }
  const ReportOptions& opts_;
};

}  // namespace

void write_sarif(std::ostream& out, const analysis::AnalysisResult& result, const ReportOptions& opts) {
  out << SarifWriter(opts).document(result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace streamrace::report
