// Every report format on the two-rank bucket traces through the real analyzer: golden files,
// plus what each consumer needs (SARIF schema, well-formed JUnit, Perfetto flows, escaped HTML).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "report/finding_class.h"
#include "report/formats.h"
#include "report/markup_escape.h"
#include "report/progress_meter.h"
#include "analyzer/timeline.h"
#include "report_test_support.h"

namespace streamrace {
namespace {

using nlohmann::json;
using testing::BucketVariant;

struct Analysed {
  analysis::AnalysisResult result;
  std::vector<std::string> traces;
};

constexpr const char* kDocs = "https://streamrace.invalid/docs/";

class ReportWriters : public ::testing::Test {
 protected:
  // Validates a SARIF document against the bundled OASIS schema; "" when valid.
  std::string sarif_schema_errors(const std::string& sarif) {
    std::string path = save("check.sarif", sarif);
    auto r = testing::run_command(dir_.path().string(), std::string(STREAMRACE_PYTHON) + " " + STREAMRACE_SOURCE_DIR +
                                                            "/tests/report/validate_sarif.py " + STREAMRACE_SOURCE_DIR +
                                                            "/tests/report/schema/sarif-schema-2.1.0.json " + path);
    return r.status == 0 ? std::string() : "status " + std::to_string(r.status) + ": " + r.err;
  }

  // Each call writes its traces into a directory of its own: v0/, v1/, ...
  Analysed analyse(BucketVariant v) {
    testing::ScopedCwd cwd(dir_.path());
    std::string sub = "v" + std::to_string(analysed_++);
    std::filesystem::create_directories(sub);
    Analysed a;
    a.traces = testing::write_bucket_traces(sub, v);
    a.result = testing::analyze_files(a.traces);
    return a;
  }

  std::string render(const std::string& format, const Analysed& a, report::ReportOptions opts = {}) {
    testing::ScopedCwd cwd(dir_.path());
    if (opts.source_root.empty()) opts.source_root = "/work/proj";
    opts.docs_url = kDocs;
    opts.trace_paths = a.traces;
    std::ostringstream out;
    report::write_format(format, out, a.result, opts);
    return out.str();
  }

  std::string save(const std::string& name, const std::string& text) {
    std::string path = dir_.file(name);
    testing::write_file(path, text);
    return path;
  }

  testing::TempDir dir_;
  int analysed_ = 0;
};

TEST_F(ReportWriters, FormatNamesInHelpOrder) {
  EXPECT_EQ(report::format_names(), (std::vector<std::string>{"text", "json", "sarif", "junit", "perfetto", "html"}));
  EXPECT_THROW(render("xml", analyse(BucketVariant::kRacy)), std::invalid_argument);
}

TEST_F(ReportWriters, BucketRaceIsOneCertainWriteAfterReadOnBothRanks) {
  auto a = analyse(BucketVariant::kRacy);
  ASSERT_EQ(a.result.findings.size(), 1u);
  const auto& f = a.result.findings[0];
  EXPECT_EQ(f.kind, analysis::RaceKind::kWriteAfterRead);
  EXPECT_EQ(f.confidence, analysis::Confidence::kCertain);
  EXPECT_EQ(f.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(std::string(report::finding_class(f).rule_id), "SR1001");
  EXPECT_TRUE(analyse(BucketVariant::kFixed).result.findings.empty());
}

TEST_F(ReportWriters, EveryOccurrenceKeepsItsCallPairPerRank) {
  auto a = analyse(BucketVariant::kRacy);
  ASSERT_EQ(a.result.findings.size(), 1u);
  const auto& f = a.result.findings[0];
  ASSERT_EQ(f.where.size(), 2u);
  for (const auto& w : f.where) {
    ASSERT_EQ(w.pairs.size(), w.count) << w.trace;
    EXPECT_EQ(w.pairs.front().later_seq, w.first_seq);
  }
  // The representative pair is the first trace's first occurrence.
  EXPECT_EQ(f.where[0].pairs.front(), (analysis::RacingPair{f.earlier.seq, f.later.seq}));
}

TEST_F(ReportWriters, SarifGoldenAndSchemaValid) {
  auto sarif = render("sarif", analyse(BucketVariant::kRacy));
  testing::expect_golden("bucket_race.sarif", sarif);
  std::string path = save("report.sarif", sarif);
  auto r = testing::run_command(dir_.path().string(), std::string(STREAMRACE_PYTHON) + " " + STREAMRACE_SOURCE_DIR +
                                                          "/tests/report/validate_sarif.py " + STREAMRACE_SOURCE_DIR +
                                                          "/tests/report/schema/sarif-schema-2.1.0.json " + path);
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(ReportWriters, SarifResultCarriesRuleFingerprintAndBothStacks) {
  auto a = analyse(BucketVariant::kRacy);
  auto doc = json::parse(render("sarif", a));
  const auto& run = doc["runs"][0];
  ASSERT_EQ(run["tool"]["driver"]["rules"].size(), 10u);
  EXPECT_EQ(run["tool"]["driver"]["rules"][0]["id"], "SR1001");
  EXPECT_EQ(run["tool"]["driver"]["rules"][3]["id"], "SR2001");
  EXPECT_EQ(run["tool"]["driver"]["rules"][6]["id"], "SR1004");
  EXPECT_EQ(run["tool"]["driver"]["rules"][9]["id"], "SR2005");
  EXPECT_EQ(run["originalUriBaseIds"]["%SRCROOT%"]["uri"], "file:///work/proj/");
  ASSERT_EQ(run["results"].size(), 1u);
  const auto& res = run["results"][0];
  EXPECT_EQ(res["ruleId"], "SR1001");
  EXPECT_EQ(res["level"], "error");
  EXPECT_EQ(res["partialFingerprints"]["streamraceFingerprint/v1"], a.result.findings[0].fingerprint);
  const auto& loc = res["locations"][0]["physicalLocation"];
  EXPECT_EQ(loc["artifactLocation"]["uri"], "train/bucket.py");
  EXPECT_EQ(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
  EXPECT_EQ(loc["region"]["startLine"], 41);
  EXPECT_EQ(res["relatedLocations"][0]["physicalLocation"]["region"]["startLine"], 57);
  ASSERT_EQ(res["codeFlows"][0]["threadFlows"].size(), 2u);
  ASSERT_EQ(res["stacks"].size(), 2u);
  EXPECT_EQ(res["stacks"][0]["frames"].size(), 2u);
  EXPECT_FALSE(res.contains("baselineState"));
  EXPECT_EQ(res["occurrenceCount"], 2);
}

TEST_F(ReportWriters, SarifMarksBaselinedResultsUnchangedAndSuppressed) {
  auto a = analyse(BucketVariant::kRacy);
  report::ReportOptions opts;
  opts.have_baseline = true;
  opts.baseline_path = "base.json";
  auto fresh = json::parse(render("sarif", a, opts))["runs"][0]["results"][0];
  EXPECT_EQ(fresh["baselineState"], "new");
  EXPECT_FALSE(fresh.contains("suppressions"));
  opts.baselined.insert(a.result.findings[0].fingerprint);
  auto sarif = render("sarif", a, opts);
  auto known = json::parse(sarif)["runs"][0]["results"][0];
  EXPECT_EQ(known["baselineState"], "unchanged");
  EXPECT_EQ(known["suppressions"],
            json::parse(R"([{"kind": "external", "status": "accepted", "justification": "accepted by the baseline base.json"}])"));
  EXPECT_EQ(sarif_schema_errors(sarif), "");
}

TEST_F(ReportWriters, SarifListsSuppressedFindingsWithTheirSuppression) {
  auto a = analyse(BucketVariant::kRacy);
  report::ReportOptions opts;
  opts.suppressed.push_back({a.result.findings[0], "sup.txt:3 race:fill_bucket"});
  analysis::AnalysisResult none = a.result;
  none.findings.clear();
  Analysed b{none, a.traces};
  auto sarif = render("sarif", b, opts);
  auto doc = json::parse(sarif);
  const auto& results = doc["runs"][0]["results"];
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["partialFingerprints"]["streamraceFingerprint/v1"], a.result.findings[0].fingerprint);
  EXPECT_EQ(results[0]["suppressions"],
            json::parse(R"([{"kind": "external", "status": "accepted", "justification": "suppressed by sup.txt:3 race:fill_bucket"}])"));
  EXPECT_EQ(sarif_schema_errors(sarif), "");
}

TEST_F(ReportWriters, SarifRulesHaveHelpUriAndMarkdownHelp) {
  auto doc = json::parse(render("sarif", analyse(BucketVariant::kRacy)));
  const auto& rules = doc["runs"][0]["tool"]["driver"]["rules"];
  ASSERT_EQ(rules.size(), 10u);
  for (const char* id : {"SR1001", "SR1002", "SR1003", "SR2001", "SR2002", "SR2003"}) {
    const json* rule = nullptr;
    for (const auto& r : rules)
      if (r["id"] == id) rule = &r;
    ASSERT_NE(rule, nullptr) << id;
    std::string anchor = std::string("sr") + (id + 2);
    EXPECT_EQ((*rule)["helpUri"], std::string(kDocs) + "reports.md#" + anchor);
    std::string md = (*rule)["help"]["markdown"];
    EXPECT_EQ(md.rfind(std::string("**") + id + " ", 0), 0u) << md;
    EXPECT_NE(md.find("**Fix.** Order the two accesses"), std::string::npos) << md;
    EXPECT_NE(md.find(std::string("see [") + id + "](" + kDocs + "reports.md#" + anchor + ")"), std::string::npos) << md;
  }
  EXPECT_EQ(rules[3]["help"]["markdown"].get<std::string>().substr(0, 52),
            "**SR2001 Possible cross-stream write after read** (p");
  // The host-access classes (--host-accesses): a host synchronisation is their fix.
  for (const char* id : {"SR1004", "SR1005", "SR2004", "SR2005"}) {
    const json* rule = nullptr;
    for (const auto& r : rules)
      if (r["id"] == id) rule = &r;
    ASSERT_NE(rule, nullptr) << id;
    std::string md = (*rule)["help"]["markdown"];
    EXPECT_EQ(md.rfind(std::string("**") + id + " Host ", 0) == 0 || md.rfind(std::string("**") + id + " Possible host ", 0) == 0,
              true)
        << md;
    EXPECT_NE(md.find("**Fix.** Order the host after the copy before it touches the buffer again"), std::string::npos)
        << md;
  }
  EXPECT_EQ(doc["runs"][0]["automationDetails"]["id"], "streamrace/races/");
  EXPECT_EQ(doc["runs"][0]["automationDetails"]["description"]["text"], "streamrace race analysis of 2 traces");
}

// Every artifactLocation in a document, as "BASE URI".
std::vector<std::string> artifact_locations(const json& j) {
  std::vector<std::string> out;
  std::function<void(const json&)> walk = [&](const json& v) {
    if (v.is_object()) {
      if (v.contains("artifactLocation")) {
        const auto& a = v["artifactLocation"];
        out.push_back(a.value("uriBaseId", std::string("-")) + " " + a.value("uri", std::string("-")));
      }
      for (const auto& [k, x] : v.items()) walk(x);
    } else if (v.is_array()) {
      for (const auto& x : v) walk(x);
    }
  };
  walk(j);
  return out;
}

TEST_F(ReportWriters, SarifUrisAreRelativeToABaseIdWithoutSourceRoot) {
  auto a = analyse(BucketVariant::kRacy);
  auto& later = a.result.findings[0].later.stack;
  later.push_back({"/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", "_call_impl", 1747, true, 0});
  later.push_back({"<frozen runpy>", "_run_module_as_main", 198, true, 0});
  later.push_back({"/usr/lib/python3.12/threading.py", "run", 1010, true, 0});
  later.push_back({"tools/launch.py", "main", 7, true, 0});
  // No --source-root: %SRCROOT% is the current directory, which holds none of these files.
  testing::ScopedCwd cwd(dir_.path());
  report::ReportOptions opts;
  opts.docs_url = kDocs;
  std::ostringstream out;
  report::write_format("sarif", out, a.result, opts);
  auto doc = json::parse(out.str());
  const auto& run = doc["runs"][0];
  EXPECT_EQ(run["originalUriBaseIds"]["%SRCROOT%"]["uri"],
            "file://" + std::filesystem::current_path().string() + "/");
  EXPECT_EQ(run["originalUriBaseIds"]["SITE_PACKAGES"]["uri"], "file:///opt/venv/lib/python3.12/site-packages/");
  EXPECT_EQ(run["originalUriBaseIds"]["FILESYSTEM_ROOT"]["uri"], "file:///");
  std::vector<std::string> later_frames;
  for (const auto& fr : run["results"][0]["stacks"][1]["frames"])
    later_frames.push_back(fr["location"].contains("physicalLocation")
                               ? fr["location"]["physicalLocation"]["artifactLocation"]["uriBaseId"].get<std::string>() + " " +
                                     fr["location"]["physicalLocation"]["artifactLocation"]["uri"].get<std::string>()
                               : "no file: " + fr["location"]["logicalLocations"][0]["fullyQualifiedName"].get<std::string>());
  EXPECT_EQ(later_frames, (std::vector<std::string>{
                              "FILESYSTEM_ROOT work/proj/train/bucket.py",
                              "FILESYSTEM_ROOT work/proj/train/step.py",
                              "SITE_PACKAGES torch/nn/modules/module.py",
                              "no file: _run_module_as_main",
                              "FILESYSTEM_ROOT usr/lib/python3.12/threading.py",
                              "%SRCROOT% tools/launch.py",
                          }));
  for (const auto& loc : artifact_locations(doc)) EXPECT_EQ(loc.find("file:"), std::string::npos) << loc;
  EXPECT_EQ(sarif_schema_errors(out.str()), "");
  // With --source-root the repository's files are relative to it; packages from two
  // environments share the base id, which then names no directory.
  later.push_back({"/usr/lib/python3/dist-packages/numpy/core/x.py", "f", 3, true, 0});
  opts.source_root = "/work/proj";
  out.str("");
  report::write_format("sarif", out, a.result, opts);
  doc = json::parse(out.str());
  EXPECT_EQ(doc["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"], "file:///work/proj/");
  EXPECT_FALSE(doc["runs"][0]["originalUriBaseIds"]["SITE_PACKAGES"].contains("uri"));
  EXPECT_EQ(doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"],
            json::parse(R"({"uri": "train/bucket.py", "uriBaseId": "%SRCROOT%"})"));
  EXPECT_EQ(sarif_schema_errors(out.str()), "");
}

// Validates JUnit XML against tests/report/schema/junit-strict.xsd with xmllint; "" when
// valid, "no xmllint" when it is not installed.
std::string junit_schema_errors(const std::string& dir, const std::string& path) {
  if (std::system("command -v xmllint >/dev/null 2>&1") != 0) return "no xmllint";
  auto r = testing::run_command(dir, std::string("xmllint --noout --schema ") + STREAMRACE_SOURCE_DIR +
                                         "/tests/report/schema/junit-strict.xsd " + path);
  return r.status == 0 ? std::string() : r.err;
}

TEST_F(ReportWriters, JunitGoldenOneCasePerFindingWithItsRacingWindow) {
  auto a = analyse(BucketVariant::kRacy);
  auto xml = render("junit", a);
  testing::expect_golden("bucket_race.junit.xml", xml);
  std::string path = save("junit.xml", xml);
  auto r = testing::run_command(dir_.path().string(), std::string(STREAMRACE_PYTHON) + " " + STREAMRACE_SOURCE_DIR +
                                                          "/tests/report/parse_junit.py " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto& fp = a.result.findings[0].fingerprint;
  // Rank 0 (the finding's first trace) has device times: the all-reduce starts at 5.0025 ms
  // and the refill ends at 5.013 ms, a 10.5 us window (whole microseconds shown); rank 0 spans
  // 5.000 to 5.013 ms, the longest trace.
  EXPECT_EQ(r.out,
            "streamrace.SR1001 " + fp +
                " cudaMemcpyAsync (bucket.py:41 in fill_bucket) vs ncclAllReduce (bucket.py:57 in flush_bucket) "
                "[0.000010 s]: failed (new write-after-read race: cudaMemcpyAsync on stream 0x1000 (non-blocking, "
                "device 0) writes 4096 bytes that ncclAllReduce on stream 0x1001 (non-blocking, device 0) reads)\n"
                "streamrace.SR1002 SR1002 Cross-stream write after write: no findings [0.000000 s]: passed\n"
                "streamrace.SR1003 SR1003 Cross-stream read after write: no findings [0.000000 s]: passed\n"
                "streamrace.SR2001 SR2001 Possible cross-stream write after read: no findings [0.000000 s]: passed\n"
                "streamrace.SR2002 SR2002 Possible cross-stream write after write: no findings [0.000000 s]: passed\n"
                "streamrace.SR2003 SR2003 Possible cross-stream read after write: no findings [0.000000 s]: passed\n"
                "streamrace.SR1004 SR1004 Host write to pinned memory during an async copy: no findings [0.000000 s]: "
                "passed\n"
                "streamrace.SR1005 SR1005 Host read of a device-to-host copy's destination before it completed: no "
                "findings [0.000000 s]: passed\n"
                "streamrace.SR2004 SR2004 Possible host write to pinned memory during an async copy: no findings "
                "[0.000000 s]: passed\n"
                "streamrace.SR2005 SR2005 Possible host read of a device-to-host copy's destination before it "
                "completed: no findings [0.000000 s]: passed\n"
                "testsuites tests=10 failures=1 time=0.000013; 10 cases, 1 failed, 0 skipped\n");
  auto err = junit_schema_errors(dir_.path().string(), path);
  if (err == "no xmllint") GTEST_SKIP() << "xmllint is not installed (apt-get install libxml2-utils)";
  EXPECT_EQ(err, "");
}

TEST_F(ReportWriters, JunitSkipsBaselinedFindings) {
  auto a = analyse(BucketVariant::kRacy);
  report::ReportOptions opts;
  opts.have_baseline = true;
  opts.baseline_path = "base.json";
  opts.baselined.insert(a.result.findings[0].fingerprint);
  auto xml = render("junit", a, opts);
  EXPECT_EQ(xml.find("<failure"), std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"accepted by the baseline base.json\"/>\n      <system-out>[" +
                     a.result.findings[0].fingerprint + "]"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testsuite name=\"streamrace.races\" tests=\"10\" failures=\"0\" errors=\"0\" skipped=\"1\""),
            std::string::npos)
      << xml;
  std::string path = save("junit.xml", xml);
  auto r = testing::run_command(dir_.path().string(), std::string(STREAMRACE_PYTHON) + " " + STREAMRACE_SOURCE_DIR +
                                                          "/tests/report/parse_junit.py " + path);
  EXPECT_EQ(r.status, 0) << r.err;
  auto err = junit_schema_errors(dir_.path().string(), path);
  if (err == "no xmllint") GTEST_SKIP() << "xmllint is not installed";
  EXPECT_EQ(err, "");
}

TEST_F(ReportWriters, JunitOnDeepSpeedHasACasePerFindingWithNonZeroTimes) {
  std::string dir = std::string(STREAMRACE_SOURCE_DIR) + "/tests/data/deepspeed/z1_0142/";
  std::vector<std::string> traces{dir + "vm-1230.srace", dir + "vm-1231.srace"};
  Analysed a{testing::analyze_files(traces), traces};
  auto xml = render("junit", a);
  std::string path = save("ds.xml", xml);
  auto r = testing::run_command(dir_.path().string(), std::string(STREAMRACE_PYTHON) + " " + STREAMRACE_SOURCE_DIR +
                                                          "/tests/report/parse_junit.py " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 11u) << r.out;
  // Device timestamps: the first occurrences' windows on rank 0, and rank 0's whole span.
  EXPECT_EQ(lines[0].substr(0, 35), "streamrace.SR1001 736476b4ff4c71e1 ");
  EXPECT_NE(lines[0].find("[0.000775 s]: failed (new write-after-read race"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1].substr(0, 35), "streamrace.SR1002 1cc292855a3e4161 ");
  EXPECT_NE(lines[1].find("[0.001486 s]: failed (new write-after-write race"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[10], "testsuites tests=10 failures=2 time=3.463560; 10 cases, 2 failed, 0 skipped");
  auto err = junit_schema_errors(dir_.path().string(), path);
  if (err == "no xmllint") GTEST_SKIP() << "xmllint is not installed";
  EXPECT_EQ(err, "");
}

// Counts of one Perfetto document: events by phase, racing slices per process, race flows.
struct PerfettoCounts {
  std::map<std::string, int> phases;
  std::map<int, int> racing_slices_by_pid;
  int race_flows = 0;
  json other;
};

PerfettoCounts count_perfetto(const std::string& text) {
  auto doc = json::parse(text);
  PerfettoCounts c;
  c.other = doc["otherData"];
  for (const auto& e : doc["traceEvents"]) {
    ++c.phases[e["ph"].get<std::string>()];
    if (e["ph"] == "X" && e.contains("cname")) ++c.racing_slices_by_pid[e["pid"].get<int>()];
    if (e["ph"] == "s" && e["cat"] == "race") ++c.race_flows;
  }
  return c;
}

TEST_F(ReportWriters, PerfettoGoldenWithTracksFlowsAndHighlightedRace) {
  auto a = analyse(BucketVariant::kRacy);
  auto text = render("perfetto", a);
  testing::expect_golden("bucket_race.perfetto.json", text);
  auto doc = json::parse(text);
  std::set<std::string> process_names, thread_names;
  int device_slices = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process_names.insert(e["args"]["name"]);
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"]);
    if (e["ph"] == "X" && e["args"]["timing"] == "device") ++device_slices;
  }
  EXPECT_EQ(process_names, (std::set<std::string>{"rank 0 (v0/rank0.srace)", "rank 1 (v0/rank1.srace)"}));
  EXPECT_EQ(thread_names, (std::set<std::string>{"stream 0x1000 (non-blocking, device 0)", "stream 0x1001 (non-blocking, device 0)"}));
  auto c = count_perfetto(text);
  EXPECT_EQ(c.phases["X"], 6);  // 3 ops per rank
  EXPECT_EQ(device_slices, 3);
  // The event edge fill -> all-reduce on each rank, and the race edge all-reduce -> refill
  // on each rank: the occurrence of every trace is marked, not only the first trace's.
  EXPECT_EQ(c.phases["s"], 4);
  EXPECT_EQ(c.phases["f"], 4);
  EXPECT_EQ(c.race_flows, 2);
  EXPECT_EQ(c.racing_slices_by_pid, (std::map<int, int>{{1, 2}, {2, 2}}));
  EXPECT_EQ(c.other["markedOccurrences"], 2);
  EXPECT_EQ(c.other["omittedOps"], 0);
  // One event per line, after the line with otherData and before the closing one.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2 + static_cast<long>(doc["traceEvents"].size()));
}

// The bundled DeepSpeed 0.14.2 recording: 2 findings, 558 occurrences over 2 ranks.
class PerfettoDeepSpeed : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string dir = std::string(STREAMRACE_SOURCE_DIR) + "/tests/data/deepspeed/z1_0142/";
    traces_ = new std::vector<std::string>{dir + "vm-1230.srace", dir + "vm-1231.srace"};
    result_ = new analysis::AnalysisResult(testing::analyze_files(*traces_));
    timeline_ = new analysis::Timeline(analysis::build_timeline(*traces_));
  }
  static void TearDownTestSuite() {
    delete traces_;
    delete result_;
    delete timeline_;
  }
  static std::string render(report::ReportOptions opts) {
    opts.timeline = timeline_;
    std::ostringstream out;
    report::write_format("perfetto", out, *result_, opts);
    return out.str();
  }
  static std::vector<std::string>* traces_;
  static analysis::AnalysisResult* result_;
  static analysis::Timeline* timeline_;
};
std::vector<std::string>* PerfettoDeepSpeed::traces_ = nullptr;
analysis::AnalysisResult* PerfettoDeepSpeed::result_ = nullptr;
analysis::Timeline* PerfettoDeepSpeed::timeline_ = nullptr;

TEST_F(PerfettoDeepSpeed, MarksEveryOccurrenceOnBothRanks) {
  ASSERT_EQ(result_->findings.size(), 2u);
  ASSERT_EQ(result_->findings[0].occurrences + result_->findings[1].occurrences, 558u);
  auto text = render({});
  auto c = count_perfetto(text);
  EXPECT_EQ(c.other["markedFindings"], 2);
  EXPECT_EQ(c.other["markedOccurrences"], 558);
  EXPECT_EQ(c.other["unmarkedOccurrences"], 0);
  EXPECT_EQ(c.other["omittedOps"], 0);
  EXPECT_EQ(c.race_flows, 558);
  ASSERT_EQ(c.racing_slices_by_pid.size(), 2u);  // both ranks
  EXPECT_GT(c.racing_slices_by_pid[1], 0);
  EXPECT_GT(c.racing_slices_by_pid[2], 0);
  EXPECT_EQ(c.phases["X"], 14392);
  EXPECT_LT(text.size(), size_t{5} << 20);
}

TEST_F(PerfettoDeepSpeed, MarksOnlyTheFirstNFindings) {
  report::ReportOptions opts;
  opts.perfetto_findings = 1;
  auto c = count_perfetto(render(opts));
  EXPECT_EQ(c.other["markedFindings"], 1);
  EXPECT_EQ(c.other["markedOccurrences"], result_->findings[0].occurrences);
  EXPECT_EQ(c.race_flows, static_cast<int>(result_->findings[0].occurrences));
  opts.perfetto_findings = 0;
  c = count_perfetto(render(opts));
  EXPECT_EQ(c.race_flows, 0);
  EXPECT_TRUE(c.racing_slices_by_pid.empty());
}

TEST_F(PerfettoDeepSpeed, StaysWithinTheByteBoundKeepingTheRacesFirst) {
  report::ReportOptions opts;
  opts.perfetto_max_bytes = 1'000'000;
  auto text = render(opts);
  EXPECT_LE(text.size(), opts.perfetto_max_bytes);
  auto c = count_perfetto(text);
  EXPECT_EQ(c.other["markedOccurrences"], 558);
  EXPECT_EQ(c.race_flows, 558);
  EXPECT_GT(c.other["omittedOps"].get<int>(), 0);
  EXPECT_EQ(c.phases["X"] + c.other["omittedOps"].get<int>(), 14392);
  // A budget too small for the races themselves marks what fits and says how many did not.
  opts.perfetto_max_bytes = 20'000;
  text = render(opts);
  EXPECT_LE(text.size(), opts.perfetto_max_bytes);
  c = count_perfetto(text);
  EXPECT_EQ(c.other["markedOccurrences"].get<int>() + c.other["unmarkedOccurrences"].get<int>(), 558);
  EXPECT_GT(c.other["unmarkedOccurrences"].get<int>(), 0);
}

TEST_F(ReportWriters, PerfettoWithoutTracesDrawsTheFindingsAccesses) {
  auto a = analyse(BucketVariant::kRacy);
  std::ostringstream out;
  report::write_format("perfetto", out, a.result, report::ReportOptions{});
  auto doc = json::parse(out.str());
  int slices = 0, flows = 0;
  for (const auto& e : doc["traceEvents"]) {
    slices += e["ph"] == "X";
    flows += e["ph"] == "s";
  }
  EXPECT_EQ(slices, 2);
  EXPECT_EQ(flows, 1);
}

TEST_F(ReportWriters, HtmlGoldenIsSelfContained) {
  auto html = render("html", analyse(BucketVariant::kRacy));
  testing::expect_golden("bucket_race.html", html);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"timeline\""), std::string::npos);
  EXPECT_NE(html.find("class=\"op race\""), std::string::npos);
}

// What keeps the page readable at 1000-1600 px without a browser (scripts/html_screenshots.sh
// checks it in one): no fixed widths, tables in scrolling wrappers, long names wrap.
TEST_F(ReportWriters, HtmlLayoutRules) {
  auto html = render("html", analyse(BucketVariant::kRacy));
  std::string css = html.substr(html.find("<style>"), html.find("</style>") - html.find("<style>"));
  EXPECT_TRUE(std::regex_search(css, std::regex(R"(\.table-wrap\{overflow-x:auto)"))) << css;
  EXPECT_TRUE(std::regex_search(css, std::regex(R"(th,td\{[^}]*overflow-wrap:anywhere)"))) << css;
  EXPECT_TRUE(std::regex_search(css, std::regex(R"(p,li,code,\.mono\{overflow-wrap:anywhere\})"))) << css;
  EXPECT_TRUE(std::regex_search(css, std::regex(R"(svg\.timeline\{[^}]*width:100%)"))) << css;
  // No width, min-width or max-width in px or em anywhere, in the CSS or on an element.
  EXPECT_FALSE(std::regex_search(css, std::regex(R"((^|[;{])(min-|max-)?width:\s*[0-9.]+(px|em|rem))"))) << css;
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(<(svg|table|div|main|section)[^>]* width=)"))) << html;
  // Every table sits in a wrapper that scrolls instead of overflowing its card.
  size_t tables = 0, pos = 0;
  while ((pos = html.find("<table", pos)) != std::string::npos) {
    ++tables;
    EXPECT_EQ(html.rfind("<div class=\"table-wrap\">", pos), pos - std::string("<div class=\"table-wrap\">").size());
    ++pos;
  }
  EXPECT_EQ(tables, 3u);  // summary, accesses, traces
}

TEST_F(ReportWriters, HtmlSummaryTableListsEveryFinding) {
  auto a = analyse(BucketVariant::kRacy);
  auto html = render("html", a);
  const auto& f = a.result.findings[0];
  auto at = html.find("<section class=\"summary\"><h2>Summary</h2>");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(at, html.find("<section class=\"finding\""));  // at the top
  EXPECT_NE(html.find("<tr><td><span class=\"badge certain\">SR1001</span></td><td>write-after-read</td><td>cudaMemcpyAsync "
                      "<span class=\"loc\">bucket.py:41 in fill_bucket</span></td><td>ncclAllReduce <span "
                      "class=\"loc\">bucket.py:57 in flush_bucket</span></td><td class=\"num\">2</td><td>0, 1</td><td "
                      "class=\"fp\"><a class=\"mono\" href=\"#f-" +
                      f.fingerprint + "\">" + f.fingerprint + "</a></td></tr>"),
            std::string::npos)
      << html;
}

TEST_F(ReportWriters, HtmlTimelineDrawsEveryRankInOrderWithATimeAxis) {
  auto html = render("html", analyse(BucketVariant::kRacy));
  auto svg = html.substr(html.find("<svg class=\"timeline\""), html.find("</svg>") - html.find("<svg class=\"timeline\""));
  std::vector<std::string> labels;
  std::regex label(R"re(<text class="(rank|lane)"[^>]*>([^<]*)</text>)re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), label), end; it != end; ++it) labels.push_back((*it)[2]);
  EXPECT_EQ(labels, (std::vector<std::string>{
                        "rank 0 (v0/rank0.srace)",
                        "stream 0x1001 (non-blocking, device 0) &#8212; earlier access",
                        "stream 0x1000 (non-blocking, device 0) &#8212; later access",
                        "rank 1 (v0/rank1.srace)",
                        "stream 0x1001 (non-blocking, device 0) &#8212; earlier access",
                        "stream 0x1000 (non-blocking, device 0) &#8212; later access",
                    }));
  std::vector<std::string> ticks;
  std::regex tick(R"re(<text class="ticklabel"[^>]*>([^<]*)</text>)re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), tick), end; it != end; ++it) ticks.push_back((*it)[1]);
  // Each rank its own axis, 1/8 of the window (at least 1 us) either side. Rank 0: device
  // times, the all-reduce (earlier) at 0 and the refill ending 10.5 us later; rank 1: host
  // order, 1 us nominal ops.
  EXPECT_EQ(ticks, (std::vector<std::string>{"0 \xC2\xB5s", "5 \xC2\xB5s", "10 \xC2\xB5s", "-1 \xC2\xB5s", "0 \xC2\xB5s",
                                             "1 \xC2\xB5s", "2 \xC2\xB5s", "3 \xC2\xB5s"}))
      << svg;
  size_t races = 0;
  for (size_t p = 0; (p = svg.find("class=\"op race\"", p)) != std::string::npos; ++p) ++races;
  EXPECT_EQ(races, 4u);  // both accesses on both ranks
}

TEST_F(ReportWriters, HtmlEscapesKernelNamesAndPaths) {
  auto a = analyse(BucketVariant::kHostileNames);
  ASSERT_FALSE(a.result.findings.empty());
  EXPECT_EQ(a.result.findings[0].later.op, "<script>alert('kernel')</script>_fill");
  auto html = render("html", a);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("</script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;kernel&#39;)&lt;/script&gt;_fill"), std::string::npos);
  EXPECT_NE(html.find("train/&lt;script&gt;alert(1)&lt;/script&gt;.py"), std::string::npos);
  // The other markup formats escape the same input.
  auto xml = render("junit", a);
  EXPECT_EQ(xml.find("<script"), std::string::npos);
  auto sarif = json::parse(render("sarif", a));
  EXPECT_EQ(sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "train/%3Cscript%3Ealert%281%29%3C/script%3E.py");
}

TEST(MarkupEscape, EscapesMarkupControlsAndBadUtf8) {
  EXPECT_EQ(report::escape_markup("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(report::escape_markup(std::string("x\x01y", 3)), "x\xEF\xBF\xBDy");
  EXPECT_EQ(report::escape_markup("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(report::escape_markup("\xC3("), "\xEF\xBF\xBD(");
  EXPECT_EQ(report::escape_script_json(R"({"a":"</script>"})"), R"({"a":"\u003c/script>"})");
}

TEST(SourcePaths, RelativeOnlyUnderTheRoot) {
  EXPECT_EQ(report::relative_source_path("/work/proj/a/b.py", "/work/proj"), "a/b.py");
  EXPECT_EQ(report::relative_source_path("/work/proj/a/b.py", "/work/proj/"), "a/b.py");
  EXPECT_EQ(report::relative_source_path("/work/project/b.py", "/work/proj"), "");
  EXPECT_EQ(report::relative_source_path("/work/proj/../x.py", "/work/proj"), "");
  EXPECT_EQ(report::relative_source_path("b.py", "/work/proj"), "");
  EXPECT_EQ(report::relative_source_path("/work/proj/b.py", ""), "");
  EXPECT_EQ(report::source_uri_path("deepspeed/zero/stage.py", "/work/proj"), "deepspeed/zero/stage.py");
  EXPECT_EQ(report::source_uri_path("../x.py", "/work/proj"), "");
  EXPECT_EQ(report::source_uri_path("<frozen runpy>", "/work/proj"), "");
  EXPECT_EQ(report::source_uri_path("/work/proj/a.py", "/work/proj"), "a.py");
}

TEST(ProgressMeter, DrawsOnlyOnATerminalAfterTheDelayAndClearsItsLine) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    report::ProgressMeter quiet("analysing traces", 2'000'000, fds[1], std::chrono::milliseconds(0));
    quiet.update(1'000'000);  // a pipe is no terminal
    EXPECT_FALSE(quiet.drawn());
    report::ProgressMeter slow("analysing traces", 2'000'000, fds[1], std::chrono::hours(1));
    slow.force_terminal();
    slow.update(1'000'000);  // not yet a second (an hour, here) into the work
    EXPECT_FALSE(slow.drawn());
    report::ProgressMeter meter("analysing traces", 2'000'000, fds[1], std::chrono::milliseconds(0));
    meter.force_terminal();
    meter.update(1'000'000);
    EXPECT_TRUE(meter.drawn());
    meter.finish();
  }
  close(fds[1]);
  char buf[256];
  auto n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "\rstreamrace: analysing traces  50% (1.0 of 2.0 MB)\x1b[K\r\x1b[K");
}

// --progress where stderr is no terminal: plain lines from the first update, one a second.
TEST(ProgressMeter, RequestedOnAPipeWritesPlainLines) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    report::ProgressMeter meter("applying fixes", 558, fds[1]);  // the default one-second delay
    meter.request();
    meter.update(0, "round 1, 558 of 558 occurrences left");
    meter.update(2, "round 2, 556 of 558 occurrences left");  // within the second: not written
    EXPECT_FALSE(meter.drawn());  // nothing to clear
  }
  close(fds[1]);
  char buf[256];
  auto n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "streamrace: applying fixes   0% (round 1, 558 of 558 occurrences left)\n");
}

TEST_F(ReportWriters, TimelineFromTracesHasOpsFlowsAndDeviceTimes) {
  testing::ScopedCwd cwd(dir_.path());
  auto traces = testing::write_bucket_traces("", BucketVariant::kRacy);
  auto tl = analysis::build_timeline(traces);
  ASSERT_EQ(tl.ops.size(), 6u);
  EXPECT_EQ(tl.ops[1].name, "ncclAllReduce");
  EXPECT_EQ(tl.ops[1].kind, "nccl");
  EXPECT_TRUE(tl.ops[1].device_time);
  EXPECT_FALSE(tl.ops[4].device_time);
  ASSERT_EQ(tl.flows.size(), 2u);
  EXPECT_EQ(tl.flows[0].from_seq, tl.ops[0].seq);
  EXPECT_EQ(tl.flows[0].to_seq, tl.ops[1].seq);
  // Rank 1 has no device times: ops keep stream order, 1 us each, from their issue time.
  EXPECT_EQ(tl.ops[3].end_ns - tl.ops[3].start_ns, 1000u);
  EXPECT_GE(tl.ops[5].start_ns, tl.ops[3].end_ns);
}

}  // namespace
}  // namespace streamrace
