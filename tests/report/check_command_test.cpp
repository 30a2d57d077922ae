// `streamrace check` and `streamrace explain` end to end through the built binary: exit
// statuses, baselines, suppressions, CUDA-sanitizer logs, malformed input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "report_test_support.h"
#include "traceformat/trace_builder.h"

namespace streamrace {
namespace {

using testing::BucketVariant;
using testing::CommandResult;

class CheckCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "racy");
    std::filesystem::create_directories(dir_.path() / "fixed");
    testing::write_bucket_traces(dir_.file("racy"), BucketVariant::kRacy);
    testing::write_bucket_traces(dir_.file("fixed"), BucketVariant::kFixed);
    for (const char* name : {"csan_bucket.log", "csan_two_ranks.log", "csan_truncated.log"})
      std::filesystem::copy_file(std::string(STREAMRACE_SOURCE_DIR) + "/tests/report/fixtures/" + name, dir_.file(name));
  }

  CommandResult streamrace(const std::string& args) {
    return testing::run_command(dir_.path().string(), std::string(STREAMRACE_BIN) + " " + args);
  }

  std::string fingerprint_of_racy() {
    auto r = streamrace("check racy --format json");
    auto doc = nlohmann::json::parse(r.out);
    return doc["findings"][0]["fingerprint"];
  }

  testing::TempDir dir_;
};

TEST_F(CheckCommand, NewFindingFails) {
  auto r = streamrace("check racy -f sarif=out.sarif");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "streamrace check: 1 new finding, 0 suppressed - FAILED");
  EXPECT_NE(r.out.find("  new: SR1001 " + fingerprint_of_racy() + " write-after-read race: cudaMemcpyAsync on"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(ranks 0, 1)"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir_.file("out.sarif")));
}

TEST_F(CheckCommand, PerfettoFindingsFlagSetsHowManyFindingsAreMarked) {
  for (const char* cmd : {"check", "analyze"}) {
    auto all = streamrace(std::string(cmd) + " racy -f perfetto=all.json");
    EXPECT_EQ(all.status, 1) << all.err;
    auto none = streamrace(std::string(cmd) + " racy -f perfetto=none.json --perfetto-findings 0");
    EXPECT_EQ(none.status, 1) << none.err;
    EXPECT_EQ(nlohmann::json::parse(testing::read_file(dir_.file("all.json")))["otherData"]["markedOccurrences"], 2) << cmd;
    EXPECT_EQ(nlohmann::json::parse(testing::read_file(dir_.file("none.json")))["otherData"]["markedOccurrences"], 0) << cmd;
  }
}

TEST_F(CheckCommand, SuppressedFindingStaysInSarifAsSuppressed) {
  std::string fp = fingerprint_of_racy();
  testing::write_file(dir_.file("sup.txt"), "# accepted for now\nfingerprint:" + fp + "\n");
  auto r = streamrace("check racy --suppressions sup.txt -f sarif=out.sarif -f json=out.json");
  EXPECT_EQ(r.status, 0) << r.err;
  auto doc = nlohmann::json::parse(testing::read_file(dir_.file("out.sarif")));
  const auto& results = doc["runs"][0]["results"];
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["suppressions"][0]["justification"], "suppressed by sup.txt:2 fingerprint:" + fp);
  EXPECT_EQ(results[0]["suppressions"][0]["kind"], "external");
  // The other formats leave it out.
  EXPECT_TRUE(nlohmann::json::parse(testing::read_file(dir_.file("out.json")))["findings"].empty());
}

TEST_F(CheckCommand, CleanTracesPass) {
  auto r = streamrace("check fixed -f junit=out.xml");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "streamrace check: 0 new findings, 0 suppressed - passed\n");
}

TEST_F(CheckCommand, BaselinedFindingPassesAndUpdateWritesTheBaseline) {
  auto w = streamrace("check racy --baseline base.json --update-baseline -f json=all.json");
  ASSERT_EQ(w.status, 0) << w.err;
  EXPECT_EQ(w.out, "streamrace check: wrote base.json with 1 finding, 0 suppressed - passed\n");
  auto base = nlohmann::json::parse(testing::read_file(dir_.file("base.json")));
  EXPECT_EQ(base["schema"], "streamrace-baseline");
  ASSERT_EQ(base["findings"].size(), 1u);
  EXPECT_EQ(base["findings"][0]["fingerprint"], fingerprint_of_racy());
  EXPECT_EQ(base["findings"][0]["rule"], "SR1001");

  auto r = streamrace("check racy --baseline base.json -f junit=out.xml");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "streamrace check: 0 new findings, 1 baselined, 0 suppressed - passed\n");
  EXPECT_EQ(testing::read_file(dir_.file("out.xml")).find("<failure"), std::string::npos);

  // The text report shows only new findings; its summary names the baselined ones instead of
  // saying "no races found".
  auto t = streamrace("check racy --baseline base.json -f text");
  EXPECT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(t.out,
            "streamrace: no new races in 2 traces (1 baselined finding not shown)\n"
            "streamrace check: 0 new findings, 1 baselined, 0 suppressed - passed\n"
            "SUMMARY: streamrace: 0 races (0 certain, 0 possible) in 2 traces; 1 baselined\n");

  // A CSAN finding is not in that baseline: it fails on its own.
  auto c = streamrace("check racy csan_bucket.log --baseline base.json -f json=out.json");
  EXPECT_EQ(c.status, 1);
  EXPECT_EQ(c.out.substr(0, c.out.find('\n')), "streamrace check: 1 new finding, 1 baselined, 0 suppressed - FAILED");

  // A fixed program leaves a stale baseline entry, reported but not failing.
  auto f = streamrace("check fixed --baseline base.json -f json=out.json");
  EXPECT_EQ(f.status, 0);
  EXPECT_EQ(f.out,
            "streamrace check: 0 new findings, 0 baselined, 0 suppressed - passed\n"
            "  1 finding in the baseline no longer seen (--update-baseline drops them)\n");
}

TEST_F(CheckCommand, SuppressedFindingPassesAndIsCounted) {
  testing::write_file(dir_.file("sup.txt"),
                      "# the bucket refill race is tracked in issue 12\n"
                      "race:fill_bucket\n"
                      "kernel:neverLaunched*\n");
  auto r = streamrace("check racy --suppressions sup.txt -f json=out.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "streamrace check: 0 new findings, 1 suppressed - passed\n"
            "  suppressed by sup.txt:2 race:fill_bucket: 1 finding (2 occurrences)\n"
            "  unused suppression: sup.txt:3 kernel:neverLaunched*\n");
  auto doc = nlohmann::json::parse(testing::read_file(dir_.file("out.json")));
  EXPECT_TRUE(doc["findings"].empty());
}

TEST_F(CheckCommand, CsanLogBecomesAFinding) {
  auto r = streamrace("check csan_bucket.log --format json");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("streamrace check: 1 new finding, 0 suppressed - FAILED"), std::string::npos) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["findings"].size(), 1u);
  const auto& f = doc["findings"][0];
  // "accesses": [earlier, later]
  EXPECT_EQ(f["accesses"][1]["op"], "aten::narrow");
  EXPECT_EQ(f["accesses"][0]["op"], "c10d::allreduce_");
  EXPECT_EQ(f["accesses"][1]["stack"][0]["function"], "_copy_into_bucket");
  EXPECT_EQ(f["accesses"][0]["stack"].size(), 4u);
}

TEST_F(CheckCommand, SameCsanReportFromSeveralLogsAndRanksMerges) {
  auto r = streamrace("check csan_bucket.log csan_two_ranks.log --format json");
  EXPECT_EQ(r.status, 1) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["findings"].size(), 1u);
  EXPECT_EQ(doc["findings"][0]["occurrences"], 3);
  EXPECT_EQ(doc["findings"][0]["ranks"], nlohmann::json::array({0, 1}));
}

TEST_F(CheckCommand, SarifToStdoutKeepsTheVerdictOnStderr) {
  auto r = streamrace("check racy --format sarif --source-root /work/proj");
  EXPECT_EQ(r.status, 1);
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["version"], "2.1.0");
  EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "streamrace check: 1 new finding, 0 suppressed - FAILED");
}

// Input that was not wholly analysed never passes: a CUDA graph launch run without its nodes
// (partial verdict) and a trace whose CUDA calls were not captured (another tool held CUPTI).
TEST_F(CheckCommand, UnanalysedInputGivesNoVerdictNotAPass) {
  std::filesystem::create_directories(dir_.path() / "graph");
  {
    trace::TraceBuilder b(dir_.file("graph/rank0.srace"), trace::TraceBuilder::default_header(0));
    const uint64_t s = b.create_stream();
    b.graph_launch(s);  // an exec the trace never saw instantiated from a capture
  }
  auto r = streamrace("check graph --no-color");
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("\nstreamrace check: 0 new findings, 0 suppressed - NO VERDICT (input not wholly analysed)\n"),
            std::string::npos)
      << r.out;
  // A blind trace (CUPTI's slot held by another tool): from its header, and when the header
  // said "ok" and the refusal came later, as a notice (a trace that its analysis once called clean).
  for (const char* blind : {"cupti_busy_racy", "cupti_busy_status_late"}) {
    SCOPED_TRACE(blind);
    std::filesystem::copy(std::string(STREAMRACE_SOURCE_DIR) + "/tests/data/gpu/" + blind, dir_.path() / blind);
    auto b = streamrace("check " + std::string(blind) + " --no-color");
    EXPECT_EQ(b.status, 2) << b.out << b.err;
    EXPECT_NE(b.out.find("\nstreamrace check: 0 new findings, 0 suppressed - NO VERDICT (input not wholly analysed)\n"),
              std::string::npos)
        << b.out;
  }
  // Records the tracer dropped (its buffer outgrew its limit): analysed as far as they go, never
  // a pass; `analyze` says why.
  std::filesystem::create_directories(dir_.path() / "dropped");
  {
    trace::TraceBuilder b(dir_.file("dropped/rank0.srace"), trace::TraceBuilder::default_header(0));
    b.create_stream();
    b.notice(trace::NoticeLevel::kWarning, "7 records dropped: a thread's buffer outgrew its limit");
  }
  auto d = streamrace("check dropped --no-color");
  EXPECT_EQ(d.status, 2) << d.out << d.err;
  EXPECT_NE(d.out.find("\nstreamrace check: 0 new findings, 0 suppressed - NO VERDICT (input not wholly analysed)\n"),
            std::string::npos)
      << d.out;
  auto da = streamrace("analyze dropped --no-color");
  EXPECT_EQ(da.status, 2) << da.out << da.err;
  EXPECT_NE(da.out.find("streamrace: partial verdict: no races found in 1 trace, but the tracer dropped 7 records "
                        "(see the warnings above)"),
            std::string::npos)
      << da.out;
  // A trace cut short (a killed process: its last chunk cut, no end-of-trace marker): the whole
  // chunks are analysed; clean, the verdict is partial, never a pass; a race in them still fails.
  for (const bool racy : {false, true}) {
    const std::string name = racy ? "cut_racy" : "cut_clean";
    std::filesystem::create_directories(dir_.path() / name);
    const std::string file = dir_.file(name + "/rank0.srace");
    {
      trace::TraceBuilder b(file, trace::TraceBuilder::default_header(0));
      const uint64_t s1 = b.create_stream(), s2 = b.create_stream();
      const uint64_t buf = b.alloc(4096), out = b.alloc(4096);
      b.memset(s1, buf, 4096);
      if (!racy) {
        const uint64_t e = b.create_event();
        b.record_event(e, s1);
        b.wait_event(s2, e);
      }
      b.memcpy(s2, out, buf, 4096);
      b.flush();  // a whole chunk
      b.memset(s2, out, 4096);
    }
    std::filesystem::resize_file(file, std::filesystem::file_size(file) - 16);  // the last chunk cut
    auto a = streamrace("analyze " + name + " --no-color");
    EXPECT_EQ(a.status, racy ? 1 : 2) << a.out << a.err;
    EXPECT_NE(a.out.find("truncated at offset"), std::string::npos) << a.out;
    if (racy) {
      EXPECT_NE(a.out.find("SUMMARY: streamrace: 1 race (1 certain, 0 possible) in 1 trace; partial: 1 trace cut short "
                           "(no end-of-trace marker)"),
                std::string::npos)
          << a.out;
    } else {
      EXPECT_NE(a.out.find("streamrace: partial verdict: no races found in 1 trace, but 1 trace ends without the "
                           "tracer's end-of-trace marker (cut short) (see the warnings above)"),
                std::string::npos)
          << a.out;
      auto c = streamrace("check " + name + " --no-color");
      EXPECT_EQ(c.status, 2) << c.out << c.err;
      EXPECT_NE(c.out.find("NO VERDICT (input not wholly analysed)"), std::string::npos) << c.out;
    }
  }
  auto fixed = streamrace("check fixed");  // analysed whole and clean: still passes
  EXPECT_EQ(fixed.status, 0) << fixed.out;
}

TEST_F(CheckCommand, MalformedInputsExitTwoNamingTheFile) {
  struct Case {
    std::string setup_name, setup_text, args, message;
  };
  std::vector<Case> cases = {
      {"", "", "check missing.srace", "streamrace check: error: missing.srace: no such file or directory\n"},
      {"empty.log", "", "check empty.log",
       "streamrace check: error: empty.log: empty file (expected a trace, findings JSON or CUDA-sanitizer log)\n"},
      {"blob.bin", std::string("\x7f" "ELF\0\0\1", 7), "check blob.bin",
       "streamrace check: error: blob.bin: not a streamrace trace, findings JSON or CUDA-sanitizer log (binary data)\n"},
      {"bad.json", "{\"schema\": \"something-else\"}", "check bad.json",
       "streamrace check: error: bad.json: not a streamrace findings document (expected \"schema\": "
       "\"streamrace-findings\")\n"},
      {"broken.json", "{\"findings\": [", "check broken.json", "streamrace check: error: broken.json: not valid JSON: "},
      {"", "", "check csan_truncated.log",
       "streamrace check: error: csan_truncated.log:22: log ends inside a CUDA-sanitizer report: expected \"writing "
       "to ...\" or \"reading from ...\"\n"},
      {"sup.txt", "thread:foo\n", "check racy --suppressions sup.txt",
       "streamrace check: error: sup.txt:1: unknown suppression type \"thread\" (expected race, kernel, stream, file "
       "or fingerprint)\n"},
      {"", "", "check racy --baseline nothere.json",
       "streamrace check: error: nothere.json: cannot open baseline file (create it with --update-baseline)\n"},
      {"base.json", "{\"schema\": \"streamrace-baseline\", \"version\": 1, \"findings\": [{}]}",
       "check racy --baseline base.json",
       "streamrace check: error: base.json: findings[0] has no \"fingerprint\" string\n"},
      {"", "", "check racy --update-baseline", "streamrace check: error: --update-baseline needs --baseline FILE\n"},
      {"", "", "check racy --format xml",
       "streamrace check: error: unknown format 'xml' (choose from: text json sarif junit perfetto html)\n"},
      {"empty_dir/.keep", "", "check empty_dir",
       "streamrace check: error: empty_dir: directory holds no *.srace trace files (its subdirectories included)\n"},
  };
  for (const auto& c : cases) {
    if (!c.setup_name.empty()) {
      std::filesystem::create_directories(std::filesystem::path(dir_.file(c.setup_name)).parent_path());
      testing::write_file(dir_.file(c.setup_name), c.setup_text);
    }
    auto r = streamrace(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.substr(0, c.message.size()), c.message) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

TEST_F(CheckCommand, CorruptTraceExitsTwoNamingTheFile) {
  auto good = testing::read_file(dir_.file("racy/rank0.srace"));
  testing::write_file(dir_.file("corrupt.srace"), good.substr(0, 8) + std::string(64, '\xff'));
  auto r = streamrace("check corrupt.srace");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("streamrace check: error: corrupt.srace", 0), 0u) << r.err;
}

TEST_F(CheckCommand, FindingsJsonRoundTripsThroughCheck) {
  ASSERT_EQ(streamrace("check racy -f json=findings.json").status, 1);
  auto r = streamrace("check findings.json -f json=again.json");
  EXPECT_EQ(r.status, 1) << r.err;
  auto a = nlohmann::json::parse(testing::read_file(dir_.file("findings.json")));
  auto b = nlohmann::json::parse(testing::read_file(dir_.file("again.json")));
  EXPECT_EQ(a["findings"], b["findings"]);
}

TEST_F(CheckCommand, ExplainTellsTheWholeStory) {
  std::string fp = fingerprint_of_racy();
  auto r = streamrace("explain " + fp.substr(0, 6) + " racy");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
            "Finding " + fp + ": SR1001 Cross-stream write after read (certain, default mode)");
  for (const char* part : {"Later access: cudaMemcpyAsync (memcpy) on stream 0x1000 (non-blocking, device 0)",
                           "  #0  fill_bucket /work/proj/train/bucket.py:41", "  #1  backward /work/proj/train/step.py:16",
                           "Earlier access: ncclAllReduce (nccl) on stream 0x1001 (non-blocking, device 0)",
                           "Occurrences: 2 in all; ranks 0, 1", "rank 0: 1 time", "rank 1: 1 time",
                           "<- earlier access", "<- later access", "(waits for event",
                           "Fix edit: record an event on stream 0x1001 (non-blocking, device 0) after call #",
                           "; make stream 0x1000 (non-blocking, device 0) wait on it before call #"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  // The legacy default stream is named, never shown as its raw handle.
  const std::string synthetic = std::string(STREAMRACE_SOURCE_DIR) + "/samples/traces/zero1-synthetic";
  auto doc = nlohmann::json::parse(streamrace("analyze --format json " + synthetic).out);
  auto l = streamrace("explain " + doc["findings"][0]["fingerprint"].get<std::string>() + " " + synthetic);
  EXPECT_EQ(l.status, 0) << l.err;
  EXPECT_NE(l.out.find("; make legacy default stream (device 0) wait on it before call #"), std::string::npos) << l.out;
  EXPECT_EQ(l.out.find("0xffffffff00000000"), std::string::npos) << l.out;
  auto missing = streamrace("explain ffffffffffffffff racy");
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err,
            "streamrace explain: error: no finding with fingerprint ffffffffffffffff in these inputs (1 found: " + fp + ")\n");
}

}  // namespace
}  // namespace streamrace
