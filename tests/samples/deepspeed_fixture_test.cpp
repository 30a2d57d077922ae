// DeepSpeed ZeRO on 2 x H200, recorded with `streamrace run` (tests/data/deepspeed/README.md):
// the seed race is found on both ranks of 0.14.2 with Python stacks naming
// stage_1_and_2.py, and nothing is found with the seed's event patch, in 0.14.3, or in stage 3.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "analyzer/analyzer.h"
#include "analyzer/overlap_analysis.h"

namespace streamrace {
namespace {

using analysis::Confidence;
using analysis::Finding;
using analysis::RaceKind;

analysis::AnalysisResult analyze(const std::string& run) {
  analysis::Analyzer a;
  auto paths = analysis::expand_trace_inputs({std::string(SR_DEEPSPEED_DATA) + "/" + run});
  EXPECT_EQ(paths.size(), 2u) << run;
  for (const auto& p : paths) a.add_trace(p);
  return a.finish();
}

// The first Python frame of an access, as "file-basename:line function".
std::string top_python(const analysis::Access& a) {
  for (const auto& f : a.stack)
    if (f.python) return f.file.substr(f.file.rfind('/') + 1) + ":" + std::to_string(f.line) + " " + f.function;
  return "<none>";
}

bool stack_has(const analysis::Access& a, const std::string& file, uint32_t line) {
  return std::any_of(a.stack.begin(), a.stack.end(), [&](const analysis::Frame& f) {
    return f.python && f.line == line && f.file.size() >= file.size() &&
           f.file.compare(f.file.size() - file.size(), file.size(), file) == 0;
  });
}

TEST(DeepSpeed, Zero1On0142RacesOnBothRanksAtTheBucketCopy) {
  auto r = analyze("z1_0142");
  ASSERT_EQ(r.traces.size(), 2u);
  for (const auto& t : r.traces) EXPECT_EQ(t.capture_status, "ok");
  ASSERT_EQ(r.findings.size(), 2u);
  const Finding* war = nullptr;
  const Finding* waw = nullptr;
  for (const auto& f : r.findings) (f.kind == RaceKind::kWriteAfterRead ? war : waw) = &f;
  ASSERT_NE(war, nullptr);
  ASSERT_NE(waw, nullptr);
  // The write into ipg_buffer on the compute (legacy default) stream ...
  for (const Finding* f : {war, waw}) {
    EXPECT_EQ(f->confidence, Confidence::kCertain);
    EXPECT_EQ(f->later.op, "cudaMemcpyAsync");
    EXPECT_EQ(f->later.direction, "write");
    EXPECT_EQ(f->later.stream_label, "legacy default stream (device 0)");
    EXPECT_EQ(top_python(f->later),
              "stage_1_and_2.py:950 DeepSpeedZeroOptimizer.reduce_independent_p_g_buckets_and_remove_grads");
    EXPECT_EQ(f->ranks, (std::vector<int>{0, 1}));
    EXPECT_EQ(f->overlap_bytes, 2u << 20);
    EXPECT_EQ(f->earlier.stream, f->fix_edit.record_stream);
    EXPECT_EQ(f->later.stream, f->fix_edit.wait_stream);
  }
  // ... against the partition copy that still reads the bucket on the reduction stream ...
  EXPECT_EQ(war->earlier.op, "cudaMemcpyAsync");
  EXPECT_EQ(war->earlier.direction, "read");
  EXPECT_EQ(top_python(war->earlier), "stage_1_and_2.py:1351 DeepSpeedZeroOptimizer.copy_grads_in_partition");
  EXPECT_EQ(war->occurrences, 280u);
  // ... and against the in-place all-reduce of the bucket issued from allreduce_bucket.
  EXPECT_EQ(waw->earlier.op, "ncclAllReduce");
  EXPECT_EQ(waw->earlier.direction, "read and write");
  EXPECT_TRUE(stack_has(waw->earlier, "stage_1_and_2.py", 1500));
  EXPECT_EQ(waw->occurrences, 278u);
  EXPECT_NE(waw->missing_edge.find("never waited for"), std::string::npos);
}

TEST(DeepSpeed, SeedEventPatchIsClean) {
  auto r = analyze("z1_0142_patch");
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.accesses, 24548u);
}

TEST(DeepSpeed, Zero1On0143IsClean) {
  auto r = analyze("z1_0143");
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.accesses, 24594u);
}

TEST(DeepSpeed, KernelExtentToAllocationEndAddsOnlyPossibleFindings) {
  // With every kernel argument reaching to the end of its caching-allocator segment, the
  // patched run shows the divide kernel against neighbouring tensors: possible, never certain.
  // Five: the embedding backward kernel's `Half const*` argument is a read, its `Half*` one
  // read-or-write, so that pair of sites gives a possible RAW and a possible WAW.
  analysis::AnalyzerOptions opts;
  opts.kernel_extent_to_allocation_end = true;
  analysis::Analyzer a(opts);
  for (const auto& p : analysis::expand_trace_inputs({std::string(SR_DEEPSPEED_DATA) + "/z1_0142_patch"}))
    a.add_trace(p);
  auto r = a.finish();
  ASSERT_EQ(r.findings.size(), 5u);
  for (const auto& f : r.findings) {
    EXPECT_EQ(f.confidence, Confidence::kPossible);
    EXPECT_EQ(top_python(f.earlier), "stage_1_and_2.py:1111 DeepSpeedZeroOptimizer.average_tensor");
  }
}

TEST(DeepSpeed, Zero3IsCleanOn0142And0143) {
  EXPECT_TRUE(analyze("z3_0142").findings.empty());
  EXPECT_TRUE(analyze("z3_0143").findings.empty());
}

TEST(DeepSpeed, Seed002ReduceScatterDoesNotOverlapCompute) {
  // Stage 3, bf16, default reduce_bucket_size (5e8 elements): the 16M-parameter model fits in
  // one bucket, so each step flushes once, at the end of backward, with nothing left to overlap.
  for (const auto& path : analysis::expand_trace_inputs({std::string(SR_DEEPSPEED_DATA) + "/seed002"})) {
    auto r = analysis::analyze_overlap(path, {});
    uint64_t rs = 0, rs_overlap = 0;
    for (const auto& c : r.per_collective)
      if (c.op == "ncclReduceScatter") {
        ++rs;
        rs_overlap += c.overlapped_ns;
      }
    EXPECT_EQ(rs, 20u) << path;  // one per step
    EXPECT_EQ(rs_overlap, 0u) << path;
    EXPECT_EQ(r.collectives, 146u) << path;
    EXPECT_EQ(r.untimed_ops, 0u) << path;
  }
}

}  // namespace
}  // namespace streamrace
