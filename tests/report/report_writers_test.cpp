// Every report format on the two-rank bucket traces through the real analyzer: golden files,
// plus what each consumer needs (SARIF schema, well-formed JUnit, Perfetto flows, escaped HTML).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
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

class ReportWriters : public ::testing::Test {
 protected:
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
    opts.source_root = "/work/proj";
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
  ASSERT_EQ(run["tool"]["driver"]["rules"].size(), 6u);
  EXPECT_EQ(run["tool"]["driver"]["rules"][0]["id"], "SR1001");
  EXPECT_EQ(run["tool"]["driver"]["rules"][3]["id"], "SR2001");
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

TEST_F(ReportWriters, SarifMarksBaselinedResultsUnchanged) {
  auto a = analyse(BucketVariant::kRacy);
  report::ReportOptions opts;
  opts.have_baseline = true;
  EXPECT_EQ(json::parse(render("sarif", a, opts))["runs"][0]["results"][0]["baselineState"], "new");
  opts.baselined.insert(a.result.findings[0].fingerprint);
  EXPECT_EQ(json::parse(render("sarif", a, opts))["runs"][0]["results"][0]["baselineState"], "unchanged");
}

TEST_F(ReportWriters, JunitGoldenAndParses) {
  auto a = analyse(BucketVariant::kRacy);
  auto xml = render("junit", a);
  testing::expect_golden("bucket_race.junit.xml", xml);
  auto r = testing::run_command(dir_.path().string(), std::string(STREAMRACE_PYTHON) + " " + STREAMRACE_SOURCE_DIR +
                                                          "/tests/report/parse_junit.py " + save("junit.xml", xml));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "SR1001 Cross-stream write after read: failed (1 new finding)\n"
            "SR1002 Cross-stream write after write: passed\n"
            "SR1003 Cross-stream read after write: passed\n"
            "SR2001 Possible cross-stream write after read: passed\n"
            "SR2002 Possible cross-stream write after write: passed\n"
            "SR2003 Possible cross-stream read after write: passed\n"
            "testsuites tests=6 failures=1; 6 cases, 1 failed\n");
}

TEST_F(ReportWriters, JunitDoesNotFailOnBaselinedFindings) {
  auto a = analyse(BucketVariant::kRacy);
  report::ReportOptions opts;
  opts.have_baseline = true;
  opts.baselined.insert(a.result.findings[0].fingerprint);
  auto xml = render("junit", a, opts);
  EXPECT_EQ(xml.find("<failure"), std::string::npos);
  EXPECT_NE(xml.find("1 baselined finding (not failing)"), std::string::npos);
  EXPECT_NE(xml.find("failures=\"0\""), std::string::npos);
}

TEST_F(ReportWriters, PerfettoGoldenWithTracksFlowsAndHighlightedRace) {
  auto a = analyse(BucketVariant::kRacy);
  auto text = render("perfetto", a);
  testing::expect_golden("bucket_race.perfetto.json", text);
  auto doc = json::parse(text);
  std::map<std::string, int> phases;
  std::set<std::string> process_names, thread_names;
  int racing_slices = 0, device_slices = 0;
  for (const auto& e : doc["traceEvents"]) {
    ++phases[e["ph"].get<std::string>()];
    if (e["ph"] == "M" && e["name"] == "process_name") process_names.insert(e["args"]["name"]);
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"]);
    if (e["ph"] == "X" && e.contains("cname")) ++racing_slices;
    if (e["ph"] == "X" && e["args"]["timing"] == "device") ++device_slices;
  }
  EXPECT_EQ(process_names, (std::set<std::string>{"rank 0 (v0/rank0.srace)", "rank 1 (v0/rank1.srace)"}));
  EXPECT_EQ(thread_names, (std::set<std::string>{"stream 0x1000 (non-blocking, device 0)", "stream 0x1001 (non-blocking, device 0)"}));
  EXPECT_EQ(phases["X"], 6);  // 3 ops per rank
  EXPECT_EQ(device_slices, 3);
  // The event edge fill -> all-reduce on each rank, and the race edge all-reduce -> refill
  // on the finding's representative trace.
  EXPECT_EQ(phases["s"], 3);
  EXPECT_EQ(phases["f"], 3);
  EXPECT_EQ(racing_slices, 2);  // the finding's representative pair, on its first trace
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
