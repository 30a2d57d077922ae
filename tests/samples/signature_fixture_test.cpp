// Learned access signatures on GPU recordings (scripts/gpu/signatures_batch.sh, H200, tracer at
// 6abb6d0; tests/data/signatures/README.md): each PyTorch sample ran twice under --precise=all
// (learn/) and once in the default tier (use/). What the precise runs teach makes the default
// run's racy samples `certain` with precise mode's exact ranges and clears its clean twins'
// false `possible` findings (read-read, disjoint slices), where the default tier alone reports
// them `possible`. On the realistic ZeRO-2 job, signatures from a 2-step precise run cover a
// counted share of a 10-step default run's launches and add no finding.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "analyzer/analyzer.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using analysis::AnalysisResult;
using analysis::Confidence;

const fs::path kRoot = fs::path(SR_SIGNATURE_DATA_DIR);
constexpr uint64_t kMiB = 1u << 20;

std::shared_ptr<const analysis::SignatureBook> learn(const std::string& c) {
  analysis::Analyzer learner;
  learner.add_traces(analysis::expand_trace_inputs({(kRoot / c / "learn").string()}), 1);
  learner.finish();
  return std::make_shared<const analysis::SignatureBook>(learner.learned_signatures());
}

AnalysisResult use(const std::string& c, std::shared_ptr<const analysis::SignatureBook> book) {
  analysis::AnalyzerOptions opts;
  opts.signatures = std::move(book);
  analysis::Analyzer analyzer(opts);
  analyzer.add_traces(analysis::expand_trace_inputs({(kRoot / c / "use").string()}), 1);
  return analyzer.finish();
}

std::string signature_notice(const AnalysisResult& r) {
  for (const auto& n : r.notices)
    if (n.text.rfind("access signatures:", 0) == 0) return n.text;
  return "";
}

struct Racy {
  const char* name;
  const char* writer;
  uint64_t write_bytes, overlap_offset, overlap_bytes;  // offsets from the writer's start
};

TEST(SignatureFixtures, RacySamplesAreCertainWithTheMeasuredRanges) {
  // views: a side stream fills [0, N/2) of a 4 MiB buffer, the default stream sums [N/4, 3N/4);
  // raw: a raw kernel writes the whole 4 MiB tensor, which the sum reads.
  for (const Racy& c : {Racy{"torch_views_racy", "FillFunctor", 2 * kMiB, kMiB, kMiB},
                        Racy{"torch_raw_racy", "raw_fill", 4 * kMiB, 0, 4 * kMiB}}) {
    SCOPED_TRACE(c.name);
    auto plain = use(c.name, nullptr);
    ASSERT_EQ(plain.findings.size(), 1u);
    EXPECT_EQ(plain.findings[0].confidence, Confidence::kPossible);
    auto r = use(c.name, learn(c.name));
    ASSERT_EQ(r.findings.size(), 1u);
    const auto& f = r.findings[0];
    EXPECT_EQ(f.confidence, Confidence::kCertain);
    EXPECT_EQ(f.kind, analysis::RaceKind::kReadAfterWrite);
    EXPECT_NE(f.earlier.op.find(c.writer), std::string::npos) << f.earlier.op;
    EXPECT_NE(f.later.op.find("reduce_kernel"), std::string::npos) << f.later.op;
    EXPECT_TRUE(f.earlier.by_signature);
    EXPECT_TRUE(f.later.by_signature);
    EXPECT_EQ(f.earlier.direction, "write");
    EXPECT_EQ(f.later.direction, "read");
    EXPECT_EQ(f.earlier.bytes, c.write_bytes);
    EXPECT_EQ(f.overlap_addr, f.earlier.addr + c.overlap_offset);
    EXPECT_EQ(f.overlap_bytes, c.overlap_bytes);
    EXPECT_EQ(f.mode, "default");
  }
}

TEST(SignatureFixtures, CleanTwinsHaveNothing) {
  // readread and disjoint are `possible` in the default tier alone; the ordered twins are clean anyway.
  for (const char* c : {"torch_readread", "torch_disjoint"}) {
    SCOPED_TRACE(c);
    auto plain = use(c, nullptr);
    ASSERT_EQ(plain.findings.size(), 1u);
    EXPECT_EQ(plain.findings[0].confidence, Confidence::kPossible);
    EXPECT_TRUE(use(c, learn(c)).findings.empty());
  }
  for (const char* c : {"torch_views_clean", "torch_raw_clean"}) {
    SCOPED_TRACE(c);
    EXPECT_TRUE(use(c, nullptr).findings.empty());
    EXPECT_TRUE(use(c, learn(c)).findings.empty());
  }
}

TEST(SignatureFixtures, ZeroTwoLearnsFromTwoPreciseStepsAndStaysClean) {
  auto book = learn("zero2");
  EXPECT_EQ(book->size(), 317u);  // launch keys (kernel, shape, arguments' hash)
  EXPECT_EQ(book->trusted_count(), 290u);  // covered by their own or their shape's signature
  auto r = use("zero2", book);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(signature_notice(r),
            "access signatures: 0 measured launches taught 0 (0 trusted: seen 2 times alike); 4756 launches took exact "
            "accesses from one");
}

}  // namespace
}  // namespace streamrace
