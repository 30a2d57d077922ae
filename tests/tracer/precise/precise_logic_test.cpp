// Precise mode's pure logic: which kernels are patched, and how one launch's device
// interval slot becomes KernelAccess records.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>

#include "cli/precise_kernels.h"
#include "tracer/precise/interval_conversion.h"
#include "tracer/precise/kernel_selection.h"
#include "tracer/precise/sample_plan.h"

namespace streamrace::tracer::precise {
namespace {

using cli::kernels_to_confirm;
using trace::AccessDir;
using trace::KernelAccess;

// ---------------------------------------------------------------------------------------
// Kernel selection

TEST(PreciseSelection, NcclKernelsAreNeverPatched) {
  EXPECT_TRUE(is_nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(is_nccl_kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t"));
  EXPECT_TRUE(is_nccl_kernel("_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
  EXPECT_FALSE(is_nccl_kernel("vectorAdd"));
  EXPECT_FALSE(is_nccl_kernel("my_ncclKernel_wrapper"));
  EXPECT_FALSE(is_nccl_kernel(""));

  KernelSelector all = KernelSelector::all();
  EXPECT_TRUE(all.should_patch("_Z9vectorAddPfS_", "vectorAdd(float*, float*)"));
  EXPECT_FALSE(all.should_patch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ""));
  auto re = KernelSelector::regex(".*");
  ASSERT_TRUE(re);
  EXPECT_FALSE(re->should_patch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ""));
  auto names = KernelSelector::names({"ncclDevKernel_AllReduce_Sum_f32_RING_LL"});
  EXPECT_FALSE(names.should_patch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", ""));
}

TEST(PreciseSelection, RegexSearchesDemangledThenMangledName) {
  auto s = KernelSelector::regex("elementwise_kernel");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->mode(), KernelSelector::Mode::kRegex);
  EXPECT_TRUE(s->should_patch("_ZN2at6native18elementwise_kernelILi128ELi2EEEviT1_",
                              "void at::native::elementwise_kernel<128, 2>(int, T1)"));
  EXPECT_TRUE(s->should_patch("_ZN2at6native18elementwise_kernelILi128ELi2EEEviT1_", ""));  // demangling failed
  EXPECT_FALSE(s->should_patch("_Z9vectorAddPfS_", "vectorAdd(float*, float*)"));
  auto anchored = KernelSelector::regex("^vectorAdd\\(");
  ASSERT_TRUE(anchored);
  EXPECT_TRUE(anchored->should_patch("_Z9vectorAddPfS_", "vectorAdd(float*, float*)"));
  EXPECT_FALSE(anchored->should_patch("_Z10vectorAdd2PfS_", "vectorAdd2(float*, float*)"));
}

TEST(PreciseSelection, InvalidRegexIsRefusedWithTheReason) {
  std::string error;
  EXPECT_FALSE(KernelSelector::regex("(unclosed", &error));
  EXPECT_EQ(error.rfind("invalid kernel regex '(unclosed': ", 0), 0u) << error;
}

TEST(PreciseSelection, NamesMatchExactly) {
  KernelSelector s = KernelSelector::names({"vectorAdd(float*, float*)", "_Z5scalePf"});
  EXPECT_EQ(s.mode(), KernelSelector::Mode::kNames);
  EXPECT_TRUE(s.should_patch("_Z9vectorAddPfS_", "vectorAdd(float*, float*)"));
  EXPECT_TRUE(s.should_patch("_Z5scalePf", ""));
  EXPECT_FALSE(s.should_patch("_Z9vectorAddPiS_", "vectorAdd(int*, int*)"));
  EXPECT_FALSE(s.should_patch("_Z5scalePfi", "scale(float*, int)"));
}

TEST(PreciseSelection, ParsesTheFlagValue) {
  EXPECT_EQ(parse_precise_spec("").kind, PreciseSpec::Kind::kAll);
  EXPECT_EQ(parse_precise_spec("all").kind, PreciseSpec::Kind::kAll);
  EXPECT_EQ(parse_precise_spec("auto").kind, PreciseSpec::Kind::kAuto);
  PreciseSpec re = parse_precise_spec("gemm|conv");
  EXPECT_EQ(re.kind, PreciseSpec::Kind::kRegex);
  EXPECT_EQ(re.pattern, "gemm|conv");
}

analysis::Finding finding(analysis::Confidence c, std::string op1, std::string kind1, std::string op2,
                          std::string kind2) {
  analysis::Finding f;
  f.confidence = c;
  f.earlier.op = std::move(op1);
  f.earlier.op_kind = std::move(kind1);
  f.later.op = std::move(op2);
  f.later.op_kind = std::move(kind2);
  return f;
}

TEST(PreciseSelection, AutoTakesTheKernelsOfPossibleFindings) {
  using analysis::Confidence;
  std::vector<analysis::Finding> f = {
      finding(Confidence::kPossible, "fill_narrow_view(float*, int)", "kernel", "sum_narrow_view(float const*, float*)",
              "kernel"),
      finding(Confidence::kPossible, "cudaMemcpyAsync", "memcpy", "scale(float*)", "kernel"),
      finding(Confidence::kPossible, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", "scale(float*)", "kernel"),
      finding(Confidence::kCertain, "certain_writer(float*)", "kernel", "cudaMemcpyAsync", "memcpy"),
      finding(Confidence::kPossible, "ncclAllReduce", "nccl", "fill_narrow_view(float*, int)", "kernel"),
  };
  std::set<std::string> want = {"fill_narrow_view(float*, int)", "scale(float*)",
                                "sum_narrow_view(float const*, float*)"};
  EXPECT_EQ(kernels_to_confirm(f), want);
  EXPECT_TRUE(kernels_to_confirm({}).empty());
}

// ---------------------------------------------------------------------------------------
// Device slot -> KernelAccess records

constexpr uint32_t kShift = 20;  // 1 MiB granules

std::unique_ptr<LaunchIntervals> empty_slot() {
  auto s = std::make_unique<LaunchIntervals>();
  std::memset(s.get(), 0, sizeof(LaunchIntervals));
  s->granule_shift = kShift;
  return s;
}

// What the device callback leaves after an access [lo, hi) in granule lo >> kShift.
void touch(LaunchIntervals& s, uint32_t entry, uint64_t lo, uint64_t hi, uint32_t dirs) {
  GranuleEntry& e = s.entries[entry];
  e.key_plus1 = (lo >> kShift) + 1;
  if (dirs & kDirRead) {
    e.read_lo_inv = std::max(e.read_lo_inv, ~lo);
    e.read_hi = std::max(e.read_hi, hi);
  }
  if (dirs & kDirWrite) {
    e.write_lo_inv = std::max(e.write_lo_inv, ~lo);
    e.write_hi = std::max(e.write_hi, hi);
  }
}

void expect_access(const KernelAccess& a, uint64_t corr, uint64_t addr, uint64_t bytes, AccessDir dir,
                   bool overflowed) {
  EXPECT_EQ(a.correlation, corr);
  EXPECT_EQ(a.addr, addr);
  EXPECT_EQ(a.bytes, bytes);
  EXPECT_EQ(a.dir, dir);
  EXPECT_EQ(a.overflowed, overflowed ? 1 : 0);
}

TEST(PreciseConversion, EmptySlotGivesNoRecords) {
  auto s = empty_slot();
  EXPECT_TRUE(slot_to_accesses(*s, 7).empty());
  // A claimed entry with neither direction set (claimed, then nothing folded in yet).
  s->entries[3].key_plus1 = 0x7f0000001;
  EXPECT_TRUE(slot_to_accesses(*s, 7).empty());
}

TEST(PreciseConversion, OneReadInterval) {
  auto s = empty_slot();
  touch(*s, 5, 0x7f0000001000, 0x7f0000001100, kDirRead);
  touch(*s, 5, 0x7f0000001080, 0x7f0000001200, kDirRead);
  auto out = slot_to_accesses(*s, 42);
  ASSERT_EQ(out.size(), 1u);
  expect_access(out[0], 42, 0x7f0000001000, 0x200, AccessDir::kRead, false);
}

TEST(PreciseConversion, ContiguousWriteAcrossGranulesIsOneRecord) {
  auto s = empty_slot();
  // 3 MiB written from 0x7f00000f0000: four granules, entries in hash order, not address order.
  const uint64_t lo = 0x7f00000f0000, hi = lo + (3u << 20);
  touch(*s, 90, 0x7f0000200000, 0x7f0000300000, kDirWrite);
  touch(*s, 2, lo, 0x7f0000100000, kDirWrite);
  touch(*s, 17, 0x7f0000300000, hi, kDirWrite);
  touch(*s, 64, 0x7f0000100000, 0x7f0000200000, kDirWrite);
  auto out = slot_to_accesses(*s, 9);
  ASSERT_EQ(out.size(), 1u);
  expect_access(out[0], 9, lo, hi - lo, AccessDir::kWrite, false);
}

TEST(PreciseConversion, DisjointSlicesStaySeparate) {
  auto s = empty_slot();
  touch(*s, 0, 0x7f0000000000, 0x7f0000000400, kDirWrite);
  touch(*s, 1, 0x7f0000100800, 0x7f0000100c00, kDirWrite);
  auto out = slot_to_accesses(*s, 3);
  ASSERT_EQ(out.size(), 2u);
  expect_access(out[0], 3, 0x7f0000000000, 0x400, AccessDir::kWrite, false);
  expect_access(out[1], 3, 0x7f0000100800, 0x400, AccessDir::kWrite, false);
}

TEST(PreciseConversion, OverlappingReadAndWriteSplitIntoThreePieces) {
  auto s = empty_slot();
  const uint64_t b = 0x7f0000000000;
  touch(*s, 11, b + 100, b + 300, kDirRead);
  touch(*s, 11, b + 200, b + 400, kDirWrite);
  auto out = slot_to_accesses(*s, 5);
  ASSERT_EQ(out.size(), 3u);
  expect_access(out[0], 5, b + 100, 100, AccessDir::kRead, false);
  expect_access(out[1], 5, b + 200, 100, AccessDir::kReadWrite, false);
  expect_access(out[2], 5, b + 300, 100, AccessDir::kWrite, false);
}

TEST(PreciseConversion, InPlaceUpdateIsReadWrite) {
  auto s = empty_slot();
  const uint64_t b = 0x7f0000000000;
  touch(*s, 1, b, b + 4096, kDirRead | kDirWrite);
  auto out = slot_to_accesses(*s, 1);
  ASSERT_EQ(out.size(), 1u);
  expect_access(out[0], 1, b, 4096, AccessDir::kReadWrite, false);
}

TEST(PreciseConversion, OverflowBecomesOneRegionAfterTheExactRecords) {
  auto s = empty_slot();
  const uint64_t b = 0x7f0000000000;
  touch(*s, 0, b, b + 64, kDirRead);
  s->overflow_dirs = kDirWrite;
  s->overflow_lo_inv = ~(b + 0x10000000);
  s->overflow_hi = b + 0x20000000;
  auto out = slot_to_accesses(*s, 77);
  ASSERT_EQ(out.size(), 2u);
  expect_access(out[0], 77, b, 64, AccessDir::kRead, false);
  expect_access(out[1], 77, b + 0x10000000, 0x10000000, AccessDir::kWrite, true);

  s->overflow_dirs = kDirRead | kDirWrite;
  out = slot_to_accesses(*s, 77);
  ASSERT_EQ(out.size(), 2u);
  expect_access(out[1], 77, b + 0x10000000, 0x10000000, AccessDir::kReadWrite, true);
}

// A launch touching more granules than the table holds: the rest land in coarse entries (64
// granules each), which keep their direction but are only hulls (overflowed = kAccessHull),
// not one region spanning every address between the launch's buffers.
TEST(PreciseConversion, CoarseEntriesAreHullsWithTheirDirection) {
  auto s = empty_slot();
  const uint64_t b = 0x7f0000000000;
  touch(*s, 0, b, b + 64, kDirRead);
  GranuleEntry& c = s->coarse[5];
  c.key_plus1 = ((b + 0x40000000) >> (kShift + kCoarseExtraShift)) + 1;
  c.write_lo_inv = ~(b + 0x40000000);
  c.write_hi = b + 0x40000000 + 0x100000;
  c.read_lo_inv = ~(b + 0x40100000);
  c.read_hi = b + 0x40100000 + 0x1000;
  auto out = slot_to_accesses(*s, 8);
  ASSERT_EQ(out.size(), 3u);
  expect_access(out[0], 8, b, 64, AccessDir::kRead, false);
  EXPECT_EQ(out[1].overflowed, trace::kAccessHull);
  EXPECT_EQ(out[1].addr, b + 0x40100000);
  EXPECT_EQ(out[1].bytes, 0x1000u);
  EXPECT_EQ(out[1].dir, AccessDir::kRead);
  EXPECT_EQ(out[2].overflowed, trace::kAccessHull);
  EXPECT_EQ(out[2].addr, b + 0x40000000);
  EXPECT_EQ(out[2].bytes, 0x100000u);
  EXPECT_EQ(out[2].dir, AccessDir::kWrite);
}

// The STREAMRACE_PRECISE value `streamrace run` hands the traced processes.
TEST(PreciseSelection, SettingsFromTheEnvironment) {
  std::string why;
  auto all = selector_from_setting("all", &why);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->mode(), KernelSelector::Mode::kAll);
  auto re = selector_from_setting("regex:layer_norm", &why);
  ASSERT_TRUE(re);
  EXPECT_TRUE(re->should_patch("_Z10layer_normv", "layer_norm()"));
  EXPECT_FALSE(re->should_patch("_Z7softmaxv", "softmax()"));

  const std::string list = ::testing::TempDir() + "precise_kernels.txt";
  {
    std::ofstream out(list);
    out << "consume(float const*, float*, int)\n\nproduce(float*, int)\n";
  }
  auto names = selector_from_setting("names:" + list, &why);
  ASSERT_TRUE(names);
  EXPECT_EQ(names->name_set(), (std::set<std::string>{"consume(float const*, float*, int)", "produce(float*, int)"}));

  EXPECT_FALSE(selector_from_setting("regex:([", &why));
  EXPECT_EQ(why.rfind("STREAMRACE_PRECISE: the kernel regex does not compile: ", 0), 0u) << why;
  EXPECT_FALSE(selector_from_setting("names:/nonexistent/kernels.txt", &why));
  EXPECT_EQ(why, "STREAMRACE_PRECISE: cannot read the kernel list /nonexistent/kernels.txt");
  EXPECT_FALSE(selector_from_setting("some", &why));
  EXPECT_EQ(why, "STREAMRACE_PRECISE=some is not all, regex:PATTERN or names:FILE");
}


// ---------------------------------------------------------------------------------------
// Sampling and unpatching (SamplePlan)

using V = SamplePlan::Verdict;
constexpr uint64_t kMod = 0x1000, kOther = 0x2000, kS1 = 0x51, kS2 = 0x52;
LaunchShape shape(uint64_t fn, uint32_t grid) { return LaunchShape{fn, {grid, 1, 1}, {256, 1, 1}}; }

SamplePlan::Options sampled(uint32_t n, uint32_t quiet, uint32_t max_repatches = 4) {
  SamplePlan::Options o;
  o.sample = n;
  o.quiet_launches = quiet;
  o.max_repatches = max_repatches;
  return o;
}

TEST(PreciseSamplePlan, WithoutALimitEveryLaunchOfAPatchedModuleIsMeasuredAndNothingUnpatched) {
  SamplePlan p(SamplePlan::Options{});
  p.module_patched(kMod);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  EXPECT_FALSE(p.tracks_streams());
  EXPECT_FALSE(p.has_unpatch_work());
  // A module the session did not patch (patching failed): its slot would come back empty.
  EXPECT_EQ(p.on_launch(kOther, shape(2, 8), kS1), V::kUnpatchedNoMeasure);
  EXPECT_EQ(p.unmeasured_unpatched(), 1u);
}

TEST(PreciseSamplePlan, AFullySampledModuleIsUnpatchedAfterItsQuietLaunches) {
  SamplePlan p(sampled(2, 3));
  p.module_patched(kMod);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS2), V::kMeasure);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  p.on_other_launch(kMod, 0x53);  // an unselected kernel of the module, on a third stream
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  EXPECT_FALSE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  ASSERT_TRUE(p.has_unpatch_work());
  auto work = p.take_unpatch_work();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].module, kMod);
  EXPECT_EQ(work[0].streams, (std::vector<uint64_t>{kS1, kS2, 0x53}));
  EXPECT_FALSE(p.has_unpatch_work());
  p.unpatch_done(kMod, true);
  EXPECT_EQ(p.unpatched(), 1u);
  // Unpatched: the measured shape stays sampled out; a new shape patches the module again,
  // unmeasured itself, and the next launch of it is measured.
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 16), kS1), V::kRepatch);
  p.repatch_done(kMod, true);
  EXPECT_EQ(p.repatched(), 1u);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 16), kS1), V::kMeasure);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 16), kS1), V::kMeasure);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 16), kS1), V::kSampledOut);
  EXPECT_FALSE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  EXPECT_TRUE(p.has_unpatch_work());
  EXPECT_EQ(p.unmeasured_unpatched(), 0u);
}

TEST(PreciseSamplePlan, QuietCountsTheLaunchesOfEveryModule) {
  SamplePlan p(sampled(1, 4));
  p.module_patched(kMod);
  p.module_patched(kOther);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);  // a rare kernel: once per step
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.on_launch(kOther, shape(2, 8), kS2), i == 0 ? V::kMeasure : V::kSampledOut);
  EXPECT_FALSE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kOther, shape(2, 8), kS2), V::kSampledOut);  // 4 launches after kMod's last
  auto work = p.take_unpatch_work();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].module, kMod);
  EXPECT_EQ(work[0].streams, (std::vector<uint64_t>{kS1}));
}

TEST(PreciseSamplePlan, AShapeMeasuredTooFewTimesKeepsItsModulePatched) {
  SamplePlan p(sampled(2, 3));
  p.module_patched(kMod);
  EXPECT_EQ(p.on_launch(kMod, shape(2, 4), kS1), V::kMeasure);  // kernel 2: once only so far
  for (int i = 0; i < 2; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  EXPECT_FALSE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kMod, shape(2, 4), kS1), V::kMeasure);  // its second: complete, quiet starts over
  for (int i = 0; i < 2; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  EXPECT_FALSE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kMod, shape(2, 4), kS1), V::kSampledOut);
  EXPECT_TRUE(p.has_unpatch_work());
}

TEST(PreciseSamplePlan, ANewShapeAfterQueueingCancelsTheUnpatch) {
  SamplePlan p(sampled(1, 2));
  p.module_patched(kMod);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  ASSERT_TRUE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kMod, shape(3, 8), kS1), V::kMeasure);  // sample 1: complete at once, but not quiet
  EXPECT_TRUE(p.take_unpatch_work().empty());
  EXPECT_EQ(p.unpatched(), 0u);
}

TEST(PreciseSamplePlan, AModuleRepatchedTooOftenStaysPatched) {
  SamplePlan p(sampled(1, 1, /*max_repatches=*/1));
  p.module_patched(kMod);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  ASSERT_EQ(p.take_unpatch_work().size(), 1u);
  p.unpatch_done(kMod, true);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 9), kS1), V::kRepatch);
  p.repatch_done(kMod, true);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 9), kS1), V::kMeasure);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 9), kS1), V::kSampledOut);
  EXPECT_FALSE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kMod, shape(1, 10), kS1), V::kMeasure);  // still patched: measured
}

TEST(PreciseSamplePlan, AFailedRepatchOrUnpatchIsNotRetried) {
  SamplePlan p(sampled(1, 1));
  p.module_patched(kMod);
  p.module_patched(kOther);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  ASSERT_EQ(p.take_unpatch_work().size(), 1u);
  p.unpatch_done(kMod, true);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 9), kS1), V::kRepatch);
  p.repatch_done(kMod, false);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 9), kS1), V::kUnpatchedNoMeasure);
  EXPECT_EQ(p.unmeasured_unpatched(), 1u);
  EXPECT_EQ(p.repatched(), 0u);
  // kOther: its unpatch fails; it stays patched and is never queued again.
  EXPECT_EQ(p.on_launch(kOther, shape(5, 8), kS1), V::kMeasure);
  EXPECT_EQ(p.on_launch(kOther, shape(5, 8), kS1), V::kSampledOut);
  ASSERT_EQ(p.take_unpatch_work().size(), 1u);
  p.unpatch_done(kOther, false);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.on_launch(kOther, shape(5, 8), kS1), V::kSampledOut);
  EXPECT_FALSE(p.has_unpatch_work());
  EXPECT_EQ(p.on_launch(kOther, shape(5, 9), kS1), V::kMeasure);
}

TEST(PreciseSamplePlan, WithUnpatchOffNothingIsQueued) {
  SamplePlan::Options o = sampled(1, 1);
  o.unpatch = false;
  SamplePlan p(o);
  p.module_patched(kMod);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  EXPECT_FALSE(p.tracks_streams());
  EXPECT_FALSE(p.has_unpatch_work());
}

TEST(PreciseSamplePlan, ADestroyedStreamIsNotWaitedFor) {
  SamplePlan p(sampled(1, 1));
  p.module_patched(kMod);
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kMeasure);
  p.on_other_launch(kMod, kS2);
  EXPECT_TRUE(p.stream_destroyed(kS2));
  EXPECT_FALSE(p.stream_destroyed(kS2));
  EXPECT_FALSE(p.stream_destroyed(0x99));
  EXPECT_EQ(p.on_launch(kMod, shape(1, 8), kS1), V::kSampledOut);
  auto work = p.take_unpatch_work();
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].streams, (std::vector<uint64_t>{kS1}));
}

}  // namespace
}  // namespace streamrace::tracer::precise
