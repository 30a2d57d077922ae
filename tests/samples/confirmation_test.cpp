// `streamrace run --confirm` decides a default run's possible findings with a second, precise
// run: confirm_findings on recorded pairs of runs of one program (tests/data/precise/: the
// default-tier recording and the precise one of the same sample).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "analyzer/analyzer.h"
#include "analyzer/confirmation.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using analysis::ConfirmOutcome;

const fs::path kData = SR_PRECISE_DATA_DIR;

analysis::AnalysisResult analyze_case(const std::string& name) {
  analysis::Analyzer a;
  for (const auto& t : analysis::expand_trace_inputs({(kData / name).string()})) a.add_trace(t);
  return a.finish();
}

TEST(Confirmation, APossibleKernelRaceMeasuredOverlappingIsConfirmedCertain) {
  for (auto [first, second] : {std::pair{"torch_views_racy_default", "torch_views_racy_auto"},
                               std::pair{"torch_raw_racy_default", "torch_raw_racy_precise"}}) {
    auto before = analyze_case(first), after = analyze_case(second);
    auto c = analysis::confirm_findings(before.findings, after.findings);
    ASSERT_EQ(c.size(), 1u) << first;
    EXPECT_EQ(c[0].outcome, ConfirmOutcome::kConfirmed) << first;
    ASSERT_TRUE(c[0].after.has_value());
    EXPECT_EQ(c[0].before.confidence, analysis::Confidence::kPossible);
    EXPECT_EQ(c[0].after->confidence, analysis::Confidence::kCertain);
    EXPECT_EQ(c[0].before.kind, analysis::RaceKind::kWriteAfterWrite);  // "read or write" before measuring
    EXPECT_EQ(c[0].after->kind, analysis::RaceKind::kReadAfterWrite);
    EXPECT_EQ(analysis::confirmation_summary(c),
              "1 possible finding checked in precise mode: 1 confirmed (certain), 0 gone, 0 still possible");
  }
}

TEST(Confirmation, APossibleRaceOnDisjointViewsIsGone) {
  auto before = analyze_case("torch_disjoint_default"), after = analyze_case("torch_disjoint_precise");
  ASSERT_EQ(before.findings.size(), 1u);
  ASSERT_TRUE(after.findings.empty());
  auto c = analysis::confirm_findings(before.findings, after.findings);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].outcome, ConfirmOutcome::kGone);
  EXPECT_FALSE(c[0].after.has_value());
}

TEST(Confirmation, CertainFindingsNeedNoConfirmationAndStillPossibleIsSaid) {
  auto racy = analyze_case("torch_views_racy_auto");  // certain already
  EXPECT_TRUE(analysis::confirm_findings(racy.findings, racy.findings).empty());
  auto possible = analyze_case("torch_views_racy_default");
  auto c = analysis::confirm_findings(possible.findings, possible.findings);  // precise run measured nothing new
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].outcome, ConfirmOutcome::kStillPossible);
  EXPECT_EQ(analysis::to_string(c[0].outcome), std::string("still possible"));
  const std::string fill = c[0].before.earlier.op;  // the default run's "read or write" kernel
  EXPECT_EQ(c[0].reason.find(fill + " was not patched"), 0u) << c[0].reason;
  auto measured = analysis::confirm_findings(possible.findings, possible.findings, {fill});
  EXPECT_EQ(measured[0].reason.find(fill + " was measured, but its intervals overflowed the device-side budget"), 0u)
      << measured[0].reason;
}

}  // namespace
}  // namespace streamrace
