// PyTorch CUDA-sanitizer logs in, findings out; suppression files; fingerprint merging.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "report/csan_log.h"
#include "report/finding_merge.h"
#include "report/suppressions.h"

namespace streamrace {
namespace {

std::string fixture(const std::string& name) { return std::string(STREAMRACE_SOURCE_DIR) + "/tests/report/fixtures/" + name; }

report::CsanLog read_fixture(const std::string& name) {
  std::ifstream in(fixture(name));
  return report::read_csan_log(in, name);
}

TEST(CsanLog, SeedShapedReportBecomesOneFindingWithBothPythonStacks) {
  auto log = read_fixture("csan_bucket.log");
  ASSERT_EQ(log.reports, 1u);
  ASSERT_EQ(log.findings.size(), 1u);
  const auto& f = log.findings[0];
  EXPECT_EQ(f.kind, analysis::RaceKind::kWriteAfterRead);
  EXPECT_EQ(f.confidence, analysis::Confidence::kPossible);
  EXPECT_EQ(f.mode, "csan");
  EXPECT_EQ(f.later.op, "aten::narrow");
  EXPECT_EQ(f.later.op_kind, "aten");
  EXPECT_EQ(f.later.direction, "write");
  EXPECT_FALSE(f.later.exact);
  EXPECT_EQ(f.later.stream, 0u);
  EXPECT_EQ(f.later.stream_label, "default stream");
  EXPECT_EQ(f.earlier.op, "c10d::allreduce_");
  EXPECT_EQ(f.earlier.direction, "read");
  EXPECT_EQ(f.earlier.stream, 94411873284096u);
  EXPECT_EQ(f.earlier.stream_label, "stream 0x55ddfa2b7000");
  EXPECT_EQ(f.later.addr, 139872312410112u);
  EXPECT_EQ(f.overlap_addr, 139872312410112u);
  // Innermost first, the sanitizer's own frames dropped.
  ASSERT_EQ(f.later.stack.size(), 3u);
  EXPECT_EQ(f.later.stack[0].function, "_copy_into_bucket");
  EXPECT_EQ(f.later.stack[0].line, 356u);
  EXPECT_EQ(f.later.stack[0].file, "/opt/venv/lib/python3.11/site-packages/zero/bucket_reducer.py");
  EXPECT_TRUE(f.later.stack[0].python);
  EXPECT_EQ(f.later.stack[2].function, "backward");
  ASSERT_EQ(f.earlier.stack.size(), 4u);
  EXPECT_EQ(f.earlier.stack[0].function, "all_reduce");
  EXPECT_EQ(f.earlier.stack[1].function, "_flush");
  EXPECT_EQ(f.fingerprint, analysis::fingerprint_of(f));
  EXPECT_EQ(f.fingerprint.size(), 16u);
  EXPECT_EQ(f.occurrences, 1u);
  EXPECT_TRUE(f.ranks.empty());
  ASSERT_EQ(f.where.size(), 1u);
  EXPECT_EQ(f.where[0].trace, "csan_bucket.log");
  EXPECT_NE(f.missing_edge.find("nothing synchronised the two streams"), std::string::npos);
  EXPECT_NE(f.fix.find("record_stream"), std::string::npos);
}

TEST(CsanLog, InterleavedRankPrefixedReportsMergeIntoOneFinding) {
  auto log = read_fixture("csan_two_ranks.log");
  ASSERT_EQ(log.findings.size(), 2u);
  EXPECT_EQ(log.findings[0].ranks, (std::vector<int>{0}));
  EXPECT_EQ(log.findings[1].ranks, (std::vector<int>{1}));
  EXPECT_EQ(log.findings[0].later.stack.size(), 3u);
  EXPECT_EQ(log.findings[1].earlier.stack.size(), 4u);
  std::vector<analysis::Finding> merged;
  report::merge_findings(merged, log.findings);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].occurrences, 2u);
  EXPECT_EQ(merged[0].ranks, (std::vector<int>{0, 1}));
  ASSERT_EQ(merged[0].where.size(), 2u);
  // The same report from the unprefixed log has the same fingerprint.
  EXPECT_EQ(merged[0].fingerprint, read_fixture("csan_bucket.log").findings[0].fingerprint);
}

TEST(CsanLog, TruncatedReportNamesFileLineAndWhatWasExpected) {
  try {
    read_fixture("csan_truncated.log");
    FAIL() << "no error";
  } catch (const report::CsanLogError& e) {
    EXPECT_STREQ(e.what(),
                 "csan_truncated.log:22: log ends inside a CUDA-sanitizer report: expected \"writing to ...\" or "
                 "\"reading from ...\"");
  }
}

TEST(CsanLog, MissingPreviousAccessIsAnError) {
  std::istringstream in(
      "CSAN detected a possible data race on tensor with data pointer 42\n"
      "Access by stream 7 during kernel:\n"
      "aten::add_(Tensor(a!) self, Tensor other) -> Tensor(a!)\n"
      "writing to argument(s) self, and to the output\n"
      "With stack trace:\n"
      "  File \"t.py\", line 3, in f\n"
      "\n"
      "something else\n");
  try {
    report::read_csan_log(in, "x.log");
    FAIL() << "no error";
  } catch (const report::CsanLogError& e) {
    EXPECT_STREQ(e.what(),
                 "x.log:8: expected \"Previous access by stream \" after the first access's stack, found \"something else\"");
  }
}

TEST(CsanLog, OtherReportKindsBecomeNoticesAndPlainLogsHaveNoFindings) {
  std::istringstream in("hello\nCSAN detected an allocator reuse of memory on stream 3\nbye\n");
  auto log = report::read_csan_log(in, "y.log");
  EXPECT_EQ(log.reports, 0u);
  EXPECT_TRUE(log.findings.empty());
  ASSERT_EQ(log.notices.size(), 1u);
  EXPECT_EQ(log.notices[0].text,
            "line 2: CUDA-sanitizer report of a kind not imported: CSAN detected an allocator reuse of memory on stream 3");
}

analysis::Finding sample_finding() {
  analysis::Finding f;
  f.fingerprint = "00112233aabbccdd";
  f.occurrences = 3;
  f.earlier.op = "ncclAllReduce";
  f.earlier.stream = 0x2000;
  f.earlier.stream_label = "stream 0x2000 (non-blocking)";
  f.earlier.stack = {{"/src/zero/stage_1_and_2.py", "allreduce_bucket", 1100, true, 0}};
  f.later.op = "vectorAdd";
  f.later.stream = 0x1000;
  f.later.stream_label = "stream 0x1000 (non-blocking)";
  f.later.stack = {{"/src/model/layers.py", "forward", 20, true, 0}};
  return f;
}

report::SuppressionList parse(const std::string& text) {
  std::istringstream in(text);
  return report::SuppressionList::parse(in, "sup.txt");
}

TEST(Suppressions, EachTypeMatchesItsField) {
  auto f = sample_finding();
  for (const char* line : {"race:allreduce_*", "race:*/zero/*", "race:layers.py", "kernel:vector*", "kernel:nccl*",
                           "stream:0x2000", "stream:*(non-blocking)", "stream:4096", "file:stage_1_and_2.py",
                           "file:/src/model/*", "fingerprint:0011*"}) {
    auto list = parse(line);
    EXPECT_NE(list.apply(f), nullptr) << line;
  }
  for (const char* line : {"race:backward", "kernel:memcpy*", "stream:0x3000", "file:train.py", "fingerprint:ff*"}) {
    auto list = parse(line);
    EXPECT_EQ(list.apply(f), nullptr) << line;
  }
}

TEST(Suppressions, FirstMatchIsCreditedAndCommentsSkipped) {
  auto list = parse("# accepted until the bucket fix lands\n\nkernel:vectorAdd\n  race:forward  # not reached\n");
  ASSERT_EQ(list.entries().size(), 2u);
  EXPECT_EQ(list.entries()[1].pattern, "forward  # not reached");
  auto f = sample_finding();
  const auto* s = list.apply(f);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->source, "sup.txt:3");
  EXPECT_EQ(list.entries()[0].findings, 1u);
  EXPECT_EQ(list.entries()[0].occurrences, 3u);
  EXPECT_EQ(list.entries()[1].findings, 0u);
}

TEST(Suppressions, BadLinesNameFileAndLine) {
  EXPECT_THROW(parse("kernel:x\nmutex:foo\n"), report::SuppressionError);
  try {
    parse("kernel:x\nmutex:foo\n");
  } catch (const report::SuppressionError& e) {
    EXPECT_STREQ(e.what(), "sup.txt:2: unknown suppression type \"mutex\" (expected race, kernel, stream, file or fingerprint)");
  }
  try {
    parse("just words\n");
  } catch (const report::SuppressionError& e) {
    EXPECT_STREQ(e.what(),
                 "sup.txt:1: expected TYPE:PATTERN (race, kernel, stream, file or fingerprint), found \"just words\"");
  }
  try {
    parse("race:\n");
  } catch (const report::SuppressionError& e) {
    EXPECT_STREQ(e.what(), "sup.txt:1: empty pattern after \"race:\"");
  }
}

TEST(FindingMerge, SameFingerprintSumsOccurrencesAndUnitesRanks) {
  auto a = sample_finding();
  a.ranks = {1};
  a.where = {{"r1.srace", 1, 3, 10, 20, {}}};
  auto b = a;
  b.ranks = {0};
  b.occurrences = 2;
  b.where = {{"r0.srace", 0, 2, 5, 6, {}}};
  auto c = a;
  c.fingerprint = "ffff000000000000";
  c.confidence = analysis::Confidence::kPossible;
  c.occurrences = 9;
  std::vector<analysis::Finding> all{c};
  report::merge_findings(all, {a, b, a});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].occurrences, 8u);
  EXPECT_EQ(all[1].ranks, (std::vector<int>{0, 1}));
  ASSERT_EQ(all[1].where.size(), 2u);
  EXPECT_EQ(all[1].where[0].count, 6u);
  report::sort_findings(all);
  EXPECT_EQ(all[0].fingerprint, "00112233aabbccdd");  // certain before possible
}

}  // namespace
}  // namespace streamrace
