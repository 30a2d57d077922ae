// Writes SARIF 2.1.0. Every file URI is relative, against one of three base ids: %SRCROOT%
// (ReportOptions::source_root, default the current directory: what GitHub needs to place
// results on files of the repository), SITE_PACKAGES (installed Python packages) and
// FILESYSTEM_ROOT (any other absolute path). Pseudo-files such as "<frozen runpy>" get no
// physical location.
#include "report/sarif_report.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "report/finding_class.h"

namespace streamrace::report {

namespace {

using nlohmann::ordered_json;
using analysis::Access;
using analysis::Finding;
using analysis::Frame;

constexpr const char* kSchemaUri =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
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

constexpr const char* kRootBase = "%SRCROOT%";
constexpr const char* kPackagesBase = "SITE_PACKAGES";
constexpr const char* kFilesystemBase = "FILESYSTEM_ROOT";

// For a file inside an installed package: the package directory ("/x/site-packages/") and
// the path below it; else two empty strings.
std::pair<std::string, std::string> split_installed(const std::string& file) {
  for (const char* dir : {"/site-packages/", "/dist-packages/"}) {
    auto at = file.rfind(dir);
    if (at != std::string::npos) {
      size_t end = at + std::string(dir).size();
      if (end < file.size()) return {file.substr(0, end), file.substr(end)};
    }
  }
  return {};
}

std::string directory_uri(std::string dir) {
  if (dir.empty() || dir.back() != '/') dir += '/';
  return dir.front() == '/' ? "file://" + encode_uri_path(dir) : encode_uri_path(dir);
}


class SarifWriter {
 public:
  explicit SarifWriter(const ReportOptions& opts) : opts_(opts), root_(opts.source_root) {
    if (root_.empty()) {
      std::error_code ec;
      root_ = std::filesystem::current_path(ec).string();
    }
  }

  // A frame's file has a place on disk unless it is one of Python's "<string>", "<frozen x>".
  static bool is_file(const std::string& file) { return !file.empty() && file.front() != '<'; }

  ordered_json artifact_location(const std::string& file) const {
    ordered_json a;
    auto [packages, inside] = split_installed(file);
    if (!inside.empty()) {
      package_dirs_.insert(packages);
      a["uri"] = encode_uri_path(inside);
      a["uriBaseId"] = kPackagesBase;
      return a;
    }
    auto rel = source_uri_path(file, root_);
    if (!rel.empty()) {
      a["uri"] = encode_uri_path(rel);
      a["uriBaseId"] = kRootBase;
    } else if (file.front() == '/') {
      used_filesystem_root_ = true;
      a["uri"] = encode_uri_path(std::filesystem::path(file).lexically_normal().generic_string().substr(1));
      a["uriBaseId"] = kFilesystemBase;
    } else {
      a["uri"] = encode_uri_path(std::filesystem::path(file).lexically_normal().generic_string());  // "../x.py"
      a["uriBaseId"] = kRootBase;
    }
    return a;
  }

  ordered_json location(const Frame& f, const std::string& message = {}, int id = -1) const {
    ordered_json loc;
    if (id >= 0) loc["id"] = id;
    if (is_file(f.file)) {
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
    if (const Frame* f = primary_frame(a, root_)) return location(*f, message, id);
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
      if (is_file(f.file) && (f.python || f.line > 0)) shown.push_back(&f);
    if (shown.empty())
      if (const Frame* f = primary_frame(a, root_)) shown.push_back(f);
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

  // `suppressed_by`: the suppression line that took the finding out of the check, if any.
  ordered_json result(const Finding& f, const std::string& suppressed_by = {}) const {
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
    ordered_json suppressions = ordered_json::array();
    if (!suppressed_by.empty())
      suppressions.push_back(ordered_json{{"kind", "external"}, {"status", "accepted"},
                                          {"justification", "suppressed by " + suppressed_by}});
    if (!is_new(f, opts_))
      suppressions.push_back(ordered_json{
          {"kind", "external"},
          {"status", "accepted"},
          {"justification", opts_.baseline_path.empty() ? std::string("accepted by the baseline")
                                                        : "accepted by the baseline " + opts_.baseline_path}});
    if (!suppressions.empty()) r["suppressions"] = std::move(suppressions);
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

  ordered_json rule(const FindingClass& c) const {
    static constexpr const char* kFix =
        "Order the two accesses: record a CUDA event on the earlier access's stream right after it and make "
        "the later access's stream wait on that event right before it (in PyTorch: `stream.wait_stream`, "
        "`event.record()` / `stream.wait_event()`, or `tensor.record_stream` for memory freed under another "
        "stream). The result's message names the missing edge and the properties carry the suggested fix.";
    std::string anchor = c.rule_id;
    for (auto& ch : anchor) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    bool certain = c.confidence == analysis::Confidence::kCertain;
    ordered_json r;
    r["id"] = c.rule_id;
    r["name"] = c.name;
    r["shortDescription"] = ordered_json{{"text", c.title}};
    r["fullDescription"] = ordered_json{{"text", c.description}};
    if (!opts_.docs_url.empty()) r["helpUri"] = opts_.docs_url + "reports.md#" + anchor;
    static constexpr const char* kHostFix =
        "Order the host after the copy before it touches the buffer again: synchronize the copy's stream, or "
        "record an event right after the copy and synchronize on it (in PyTorch: "
        "`torch.cuda.current_stream().synchronize()`, `event.synchronize()`), or give each in-flight copy its own "
        "pinned buffer. The result's message names the copy and the host access.";
    const bool host = c.kind == analysis::RaceKind::kHostWriteDuringCopy || c.kind == analysis::RaceKind::kHostReadDuringCopy;
    std::string fix_text = host ? kHostFix : kFix;
    std::string plain_fix;
    for (char ch : fix_text)
      if (ch != '`') plain_fix += ch;
    r["help"] = ordered_json{
        {"text", std::string(c.description) + " Fix: " + plain_fix},
        {"markdown", fmt::format("**{} {}** ({})\n\n{}\n\n**Fix.** {}\n\n`streamrace explain FINGERPRINT TRACE_DIR` "
                                 "tells the whole story of one finding{}.",
                                 c.rule_id, c.title, certain ? "certain" : "possible", c.description, fix_text,
                                 opts_.docs_url.empty() ? std::string()
                                                        : fmt::format("; see [{}]({}reports.md#{})", c.rule_id,
                                                                      opts_.docs_url, anchor))}};
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

    ordered_json results = ordered_json::array();
    for (const auto& f : result.findings) results.push_back(this->result(f));
    for (const auto& s : opts_.suppressed) results.push_back(this->result(s.finding, s.by));

    ordered_json run;
    run["tool"] = ordered_json{{"driver", std::move(driver)}};
    run["automationDetails"] = ordered_json{
        {"id", "streamrace/races/"},
        {"description", {{"text", fmt::format("streamrace race analysis of {} trace{}", result.traces.size(),
                                              result.traces.size() == 1 ? "" : "s")}}}};
    ordered_json bases;
    if (!root_.empty())
      bases[kRootBase] = ordered_json{{"uri", directory_uri(root_)},
                                      {"description", {{"text", opts_.source_root.empty()
                                                                    ? "the current directory (no --source-root given)"
                                                                    : "--source-root"}}}};
    if (!package_dirs_.empty()) {
      ordered_json b{{"description", {{"text", "the installed Python packages (site-packages)"}}}};
      if (package_dirs_.size() == 1) b["uri"] = directory_uri(*package_dirs_.begin());
      bases[kPackagesBase] = std::move(b);
    }
    if (used_filesystem_root_)
      bases[kFilesystemBase] = ordered_json{{"uri", "file:///"},
                                            {"description", {{"text", "files outside the source root"}}}};
    if (!bases.empty()) run["originalUriBaseIds"] = std::move(bases);
    ordered_json notes = ordered_json::array();
    for (const auto& n : result.notices) {
      std::string level = n.level == "error" ? "error" : n.level == "warning" ? "warning" : "note";
      std::string text = n.trace.empty() ? n.text : n.trace + ": " + n.text;
      notes.push_back(ordered_json{{"level", level}, {"message", {{"text", text}}}});
    }
    ordered_json invocation{{"executionSuccessful", true}};
    if (!notes.empty()) invocation["toolExecutionNotifications"] = std::move(notes);
    run["invocations"] = ordered_json::array({std::move(invocation)});
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
  const ReportOptions& opts_;
  std::string root_;
  // Filled while results are written, read when the run's base ids are.
  mutable std::set<std::string> package_dirs_;
  mutable bool used_filesystem_root_ = false;
};

}  // namespace

void write_sarif(std::ostream& out, const analysis::AnalysisResult& result, const ReportOptions& opts) {
  out << SarifWriter(opts).document(result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace streamrace::report
