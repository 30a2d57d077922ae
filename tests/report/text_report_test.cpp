// Golden test: the bundled ZeRO-1 trace in, the exact text report out.
#include <gtest/gtest.h>

#include <sstream>

#include "report/closing_summary.h"
#include "report/text_report.h"
#include "report_test_support.h"

namespace streamrace {
namespace {

TEST(TextReport, BundledZeroTraceMatchesGolden) {
  const std::string dir = std::string(STREAMRACE_SOURCE_DIR) + "/samples/traces/zero1-synthetic";
  auto r = testing::analyze_files(analysis::expand_trace_inputs({dir}));
  for (auto& t : r.traces) t.path = t.path.substr(t.path.rfind('/') + 1);
  std::ostringstream out;
  report::write_text(out, r);
  testing::expect_golden("zero1-synthetic.txt", out.str());
}

TEST(TextReport, CleanSummaryLine) {
  analysis::AnalysisResult r;
  r.traces.resize(2);
  for (auto& t : r.traces) t.complete = true;  // each ends with the tracer's end-of-trace marker
  r.accesses = 12;
  EXPECT_EQ(report::summary_line(r), "streamrace: no races found in 2 traces (12 accesses checked)");
}

}  // namespace
}  // namespace streamrace

namespace streamrace {
namespace {

TEST(TextReport, TraceThatCapturedNothingGivesNoVerdict) {
  analysis::AnalysisResult r;
  r.traces.resize(2);
  r.traces[0].capture_status = "ok";
  r.traces[1].capture_status = "cupti-busy: another tool holds CUPTI's only subscriber slot";
  EXPECT_EQ(report::summary_line(r), "streamrace: no verdict: 1 of 2 traces captured no CUDA calls (see the errors above)");
}

// CUDA graph launches that could not be analysed make the verdict partial, never clean.
TEST(TextReport, UnanalysedGraphLaunchesGiveAPartialVerdict) {
  analysis::AnalysisResult r;
  r.traces.resize(1);
  r.traces[0].capture_status = "ok";
  r.traces[0].complete = true;
  r.unanalysed_graph_launches = 3;
  EXPECT_TRUE(r.partial());
  EXPECT_EQ(report::summary_line(r),
            "streamrace: partial verdict: no races found in 1 trace, but 3 CUDA graph launches were not analysed "
            "(see the warnings above)");
  EXPECT_EQ(report::closing_summary(r),
            "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 1 trace; partial: 3 CUDA graph launches not analysed");
}

// A trace cut short (no end-of-trace marker: a killed process, a cut file) or missing call
// records makes the verdict partial, never clean; each reason is named.
TEST(TextReport, TracesCutShortOrMissingRecordsGiveAPartialVerdict) {
  analysis::AnalysisResult r;
  r.traces.resize(2);
  for (auto& t : r.traces) {
    t.capture_status = "ok";
    t.complete = true;
  }
  r.accesses = 40;
  EXPECT_FALSE(r.partial());
  r.traces[1].complete = false;
  r.traces[1].truncated = true;
  EXPECT_TRUE(r.partial());
  EXPECT_EQ(report::summary_line(r),
            "streamrace: partial verdict: no races found in 2 traces, but 1 trace ends without the tracer's "
            "end-of-trace marker (cut short) (see the warnings above)");
  EXPECT_EQ(report::closing_summary(r),
            "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces; partial: 1 trace cut short (no "
            "end-of-trace marker)");
  r.traces[0].missing_records = 3;
  r.traces[0].dropped_records = 1;
  EXPECT_EQ(report::summary_line(r),
            "streamrace: partial verdict: no races found in 2 traces, but the tracer dropped 1 record; 1 trace ends "
            "without the tracer's end-of-trace marker (cut short); 3 call records are missing (see the warnings above)");
  EXPECT_EQ(report::closing_summary(r),
            "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces; partial: the tracer dropped 1 record; "
            "partial: 1 trace cut short (no end-of-trace marker); partial: 3 call records missing");
}

// A trace that recorded only part of its run (a capture window, a ring that dropped steps):
// its clean verdict says so in the summary line and the SUMMARY line; a whole run's does not.
TEST(TextReport, AWindowedTracesVerdictCoversWhatWasRecorded) {
  analysis::AnalysisResult r;
  r.traces.resize(2);
  r.traces[0].capture_status = "ok";
  r.traces[1].capture_status = "ok";
  for (auto& t : r.traces) t.complete = true;
  r.accesses = 40;
  EXPECT_EQ(report::summary_line(r), "streamrace: no races found in 2 traces (40 accesses checked)");
  EXPECT_EQ(report::closing_summary(r), "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces");
  r.traces[1].capture = "steps 10:20";
  EXPECT_EQ(r.windowed_traces(), 1u);
  EXPECT_EQ(report::summary_line(r),
            "streamrace: no races found in what 2 traces recorded (40 accesses checked; 1 recorded only part of the "
            "run: see the warnings above)");
  EXPECT_EQ(report::closing_summary(r),
            "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces; 1 trace recorded in part (a capture "
            "window or ring): the verdict covers what was recorded");
}

}  // namespace
}  // namespace streamrace

namespace streamrace {
namespace {

// Names and paths come from the traced process: escape sequences in them must reach the
// terminal as text, never as control bytes (a kernel named "\x1b[2J" would clear the screen).
TEST(TextReport, ControlCharactersFromTheTraceAreEscaped) {
  analysis::AnalysisResult r;
  r.traces.resize(1);
  analysis::Finding f;
  f.later.op = "evil\x1b[2Jkernel";
  f.later.stream_label = "stream 0x1000 (non-blocking, device 0)";
  f.later.stack.push_back(analysis::Frame{"/tmp/a\x07.py", "fn\x1b]0;title\x07", 3, true, 0});
  f.earlier.op = "cudaMemcpyAsync";
  f.missing_edge = "edge\r\n";
  r.findings.push_back(f);
  r.notices.push_back(analysis::Notice{"warning", "t.srace", "note\x1b[31m"});
  std::ostringstream out;
  report::write_text(out, r);
  const std::string text = out.str();
  for (char c : text) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << int(c);
  EXPECT_NE(text.find("by evil\\x1b[2Jkernel ("), std::string::npos) << text;
  EXPECT_NE(text.find("    #0 /tmp/a\\x07.py:3 in fn\\x1b]0;title\\x07\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Missing edge: edge\\x0d\\x0a\n"), std::string::npos) << text;
  EXPECT_NE(text.find("streamrace: warning: note\\x1b[31m\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace streamrace
