// `streamrace run --confirm` decides a default run's possible findings with a second, precise
// run: confirm_findings on recorded pairs of runs of one program (tests/data/precise/: the
// default-tier recording and the precise one of the same sample).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/confirmation.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
using analysis::ConfirmOutcome;

const fs::path kData = SR_PRECISE_DATA_DIR;
const fs::path kGpuData = SR_GPU_DATA_DIR;

analysis::AnalysisResult analyze_case(const std::string& name, const fs::path& dir = kData) {
  analysis::Analyzer a;
  for (const auto& t : analysis::expand_trace_inputs({(dir / name).string()})) a.add_trace(t);
  return a.finish();
}

// The kernels with a measured launch in a (confirming) run, as run --confirm collects them.
std::set<std::string> measured(const analysis::AnalysisResult& r) {
  std::set<std::string> out;
  for (const auto& t : r.traces) out.insert(t.measured_kernels.begin(), t.measured_kernels.end());
  return out;
}

std::vector<analysis::Confirmation> confirm(const analysis::AnalysisResult& first,
                                            const analysis::AnalysisResult& second,
                                            const std::set<std::string>& patched = {}) {
  return analysis::confirm_findings(first.findings, second.findings, patched, measured(second));
}

TEST(Confirmation, APossibleKernelRaceMeasuredOverlappingIsConfirmedCertain) {
  for (auto [first, second] : {std::pair{"torch_views_racy_default", "torch_views_racy_auto"},
                               std::pair{"torch_raw_racy_default", "torch_raw_racy_precise"}}) {
    auto before = analyze_case(first), after = analyze_case(second);
    auto c = confirm(before, after);
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
  auto c = confirm(before, after);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].outcome, ConfirmOutcome::kGone);
  EXPECT_FALSE(c[0].after.has_value());
}

TEST(Confirmation, CertainFindingsNeedNoConfirmationAndStillPossibleIsSaid) {
  auto racy = analyze_case("torch_views_racy_auto");  // certain already
  EXPECT_TRUE(confirm(racy, racy).empty());
  auto possible = analyze_case("torch_views_racy_default");
  auto c = confirm(possible, possible);  // precise run measured nothing new
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].outcome, ConfirmOutcome::kStillPossible);
  EXPECT_EQ(analysis::to_string(c[0].outcome), std::string("still possible"));
  const std::string fill = c[0].before.earlier.op;  // the default run's "read or write" kernel
  EXPECT_EQ(c[0].reason.find(fill + " was not patched (not selected; NCCL's kernels never are)"), 0u) << c[0].reason;
  auto measured_fill = confirm(possible, possible, {fill});
  EXPECT_EQ(measured_fill[0].reason,
            fill + " was measured, but not this access of " + std::to_string(c[0].before.earlier.bytes) +
                " bytes exactly: its intervals overflowed the device-side budget, its measured hull spans a tensor "
                "it has no pointer to, or it reaches this memory by bulk tensor copies (TMA), which precise mode "
                "cannot see; " + c[0].before.later.op +
                " was not patched (not selected; NCCL's kernels never are)")
      << measured_fill[0].reason;
}

TEST(Confirmation, TheConfirmingRunNamesTheKernelsItMeasured) {
  auto after = analyze_case("torch_disjoint_precise");
  EXPECT_EQ(measured(after),
            (std::set<std::string>{
                "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
                "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, "
                "float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
                "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, "
                "float)#1}>, unsigned int, float, 4, 4>)",
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> "
                ">(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"}));
  EXPECT_TRUE(measured(analyze_case("torch_disjoint_default")).empty());  // the default tier measures nothing
}

// Absence from the confirming run is "gone" only when the kernels behind the finding were
// measured there: a confirming run that measured nothing (it failed, or the kernels never ran
// patched) leaves the finding possible, with the reason.
TEST(Confirmation, AFindingWhoseKernelsWereNotMeasuredIsNotGone) {
  auto before = analyze_case("torch_disjoint_default");
  ASSERT_EQ(before.findings.size(), 1u);
  auto c = analysis::confirm_findings(before.findings, {}, {}, {});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].outcome, ConfirmOutcome::kStillPossible);
  EXPECT_FALSE(c[0].after.has_value());
  EXPECT_EQ(c[0].reason, "not decided: " + c[0].before.earlier.op + " had no measured launch in the confirming run");
  EXPECT_EQ(c[0].before.earlier.op, c[0].before.later.op);  // both sides are the fill kernel: named once
  EXPECT_EQ(analysis::confirmation_summary(c),
            "1 possible finding checked in precise mode: 0 confirmed (certain), 0 gone, 1 still possible");
}

// A finding of a kernel node of a CUDA graph is gone only when the confirming run measured a
// kernel node of that kernel (TraceSummary::measured_graph_kernels): eager launches of the
// same name do not count. graph_explicit_racy has two possible findings: the memset node
// against the eager read_sum launch after the graph, and the slow_fill kernel node against a
// memcpy node.
TEST(Confirmation, AGraphKernelNodeFindingIsGoneOnlyWhenSuchANodeWasMeasured) {
  auto before = analyze_case("graph_explicit_racy", kGpuData);
  std::set<std::string> kernels;
  for (const auto& f : before.findings)
    for (const auto* a : {&f.earlier, &f.later})
      if (f.confidence == analysis::Confidence::kPossible && a->op_kind == "kernel") kernels.insert(a->op);
  ASSERT_EQ(kernels, (std::set<std::string>{"read_sum(float const*, unsigned long, float*)",
                                            "slow_fill(float*, unsigned long, long long)"}));
  auto c = analysis::confirm_findings(before.findings, {}, kernels, kernels);
  ASSERT_EQ(c.size(), 2u);
  size_t gone = 0, node = 0;
  for (const auto& e : c) {
    const bool graph_kernel = e.before.earlier.op.rfind("slow_fill", 0) == 0 || e.before.later.op.rfind("slow_fill", 0) == 0;
    if (graph_kernel) {
      ++node;
      EXPECT_EQ(e.outcome, ConfirmOutcome::kStillPossible);
      EXPECT_EQ(e.reason,
                "not decided: slow_fill(float*, unsigned long, long long) ran as a kernel node of a CUDA graph, and "
                "no such node was measured in the confirming run");
    } else {
      ++gone;
      EXPECT_EQ(e.outcome, ConfirmOutcome::kGone);  // read_sum, an eager launch, was measured
    }
  }
  EXPECT_EQ(gone, 1u);
  EXPECT_EQ(node, 1u);
  // Measured nothing: neither is gone.
  for (const auto& e : analysis::confirm_findings(before.findings, {}, kernels, {}))
    EXPECT_EQ(e.outcome, ConfirmOutcome::kStillPossible) << e.reason;
  // slow_fill measured as a graph node, read_sum eagerly: both gone.
  for (const auto& e : analysis::confirm_findings(before.findings, {}, kernels, kernels,
                                                  {"slow_fill(float*, unsigned long, long long)"}))
    EXPECT_EQ(e.outcome, ConfirmOutcome::kGone) << e.reason;
}

// Recorded on the H200 (run 16): `run --confirm` of graph_explicit racy. The default run has 2
// possible findings (the slow_fill kernel node vs a memcpy node of the same graph, a memset
// node vs the eager read_sum); the confirming run measured the slow_fill node (a graph launch
// with one kernel node, KernelNodeAccess) and the read_sum launch: both are certain, with the
// exact 1 MiB ranges.
TEST(Confirmation, TheRecordedGraphKernelNodeFindingIsConfirmedCertain) {
  auto before = analyze_case("graph_explicit_racy_confirm");
  auto after = analyze_case("graph_explicit_racy_confirm/confirm");
  ASSERT_EQ(after.traces.size(), 1u);
  EXPECT_EQ(after.traces[0].measured_graph_kernels, std::vector<std::string>{"slow_fill(float*, unsigned long, long long)"});
  std::set<std::string> nodes(after.traces[0].measured_graph_kernels.begin(), after.traces[0].measured_graph_kernels.end());
  auto c = analysis::confirm_findings(before.findings, after.findings, {}, measured(after), nodes);
  ASSERT_EQ(c.size(), 2u);
  size_t node = 0;
  for (const auto& e : c) {
    EXPECT_EQ(e.outcome, ConfirmOutcome::kConfirmed) << e.reason;
    ASSERT_TRUE(e.after.has_value());
    EXPECT_EQ(e.after->overlap_bytes, 1u << 20);
    for (const auto* a : {&e.after->earlier, &e.after->later}) {
      EXPECT_TRUE(a->exact) << a->op;
      if (a->op.rfind("slow_fill", 0) != 0) continue;
      ++node;
      EXPECT_TRUE(a->graph_launch.has_value());
      EXPECT_EQ(a->direction, "write");
      EXPECT_EQ(a->bytes, 1u << 20);
    }
  }
  EXPECT_EQ(node, 1u);
}

}  // namespace
}  // namespace streamrace
