// The real analyzer judges the generated schedules, and applying its suggested fixes to a
// recorded trace removes the finding without introducing another (also on the simulator).
#include <gtest/gtest.h>

#include <filesystem>

#include "replay/analyzer_verdict.h"
#include "replay/stream_simulator.h"
#include "replay/trace_editor.h"
#include "replay/trace_lifter.h"
#include "replay/zero_replay.h"
#include "replay/zero_schedule.h"
#include "traceformat/trace_builder.h"

using namespace streamrace::replay;
namespace fs = std::filesystem;
namespace tr = streamrace::trace;
using streamrace::analysis::Confidence;

namespace {

std::string temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("streamrace_replay_an_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::vector<Schedule> all_ranks(int stage, const std::string& variant, const std::string& preset = "tiny") {
  std::vector<Schedule> out;
  for (int r = 0; r < 2; ++r) {
    ZeroConfig c;
    c.stage = stage;
    apply_zero_preset(preset, c);
    EXPECT_TRUE(set_zero_variant(c, variant));
    c.rank = r;
    out.push_back(make_zero_schedule(c));
  }
  return out;
}

RecordFixOptions fix_options(std::vector<std::string> fingerprints, std::string out_dir, uint32_t max_rounds) {
  RecordFixOptions o;
  o.fingerprints = std::move(fingerprints);
  o.out_dir = std::move(out_dir);
  o.max_rounds = max_rounds;
  return o;
}

bool later_site_is(const streamrace::analysis::Finding& f, const std::string& fn, uint32_t line) {
  return !f.later.stack.empty() && f.later.stack[0].function == fn && f.later.stack[0].line == line;
}

}  // namespace

TEST(ReplayAnalyzer, Stage12NoneHasACertainBucketReuseRaceAndTheFixesHaveNone) {
  for (int stage : {1, 2}) {
    auto none = analyze_schedules(all_ranks(stage, "none"), temp_dir("s" + std::to_string(stage) + "_none"));
    EXPECT_GT(none.certain, 0u) << "stage " << stage;
    bool copy_in = false;
    for (const auto& f : none.findings)
      if (f.confidence == Confidence::kCertain &&
          later_site_is(f, "reduce_independent_p_g_buckets_and_remove_grads", 950) && f.later.op_kind == "memcpy")
        copy_in = true;
    EXPECT_TRUE(copy_in) << "no certain finding whose later access is the copy into ipg_buffer";
    for (const char* fix : {"event", "wait-stream", "sync"}) {
      auto v = analyze_schedules(all_ranks(stage, fix), temp_dir(std::string("s") + std::to_string(stage) + fix));
      EXPECT_EQ(v.findings.size(), 0u) << "stage " << stage << " " << fix << ": "
                                       << (v.findings.empty() ? "" : v.findings[0].missing_edge);
    }
  }
}

TEST(ReplayAnalyzer, Stage3DefaultStreamWaitWithASideStreamProducerIsARace) {
  // The producer is a kernel: until the analyzer consumes the precise tier's KernelAccess
  // records the finding is "possible"; either way it is the copy-in reading the gradient.
  auto racy = analyze_schedules(all_ranks(3, "default-stream"), temp_dir("s3_default"));
  ASSERT_EQ(racy.findings.size(), 1u);
  bool raw = false;
  for (const auto& f : racy.findings)
    if (f.kind == streamrace::analysis::RaceKind::kReadAfterWrite &&
        later_site_is(f, "_DeepSpeedZeroOptimizer_Stage3__add_grad_to_ipg_bucket", 1240))
      raw = true;
  EXPECT_TRUE(raw);
  for (const char* v : {"default-stream-same", "current-stream"}) {
    auto clean = analyze_schedules(all_ranks(3, v), temp_dir(std::string("s3_") + v));
    EXPECT_EQ(clean.findings.size(), 0u) << v;
  }
}

TEST(ReplayAnalyzer, ApplyingEveryFixToTheRecordedNoneTraceRemovesTheRaces) {
  const std::string in = temp_dir("fix_in"), out = temp_dir("fix_out");
  auto before = analyze_schedules(all_ranks(1, "none"), in);
  ASSERT_FALSE(before.findings.empty());
  auto res = apply_record_fixes(before.traces, fix_options({}, out, 256));
  EXPECT_EQ(res.before.findings.size(), before.findings.size());
  EXPECT_EQ(res.after.findings.size(), 0u);
  EXPECT_EQ(res.verdict.removed.size(), before.findings.size());
  EXPECT_TRUE(res.verdict.remaining.empty());
  EXPECT_TRUE(res.verdict.introduced.empty());
  ASSERT_EQ(res.traces.size(), 2u);
  for (const auto& t : res.traces) {
    EXPECT_GT(t.edits, 0u);
    EXPECT_TRUE(fs::exists(t.edited));
    // The CPU executor agrees: the lifted original corrupts, the lifted edited trace cannot.
    StreamSimulator orig(lift_trace(t.source).schedule), fixed(lift_trace(t.edited).schedule);
    EXPECT_EQ(orig.search().verdict, SearchResult::Verdict::kCorruptionFound) << t.source;
    EXPECT_EQ(fixed.search().verdict, SearchResult::Verdict::kNoCorruption) << t.source;
  }
}

TEST(ReplayAnalyzer, ApplyingOneFingerprintToABuilderTraceRemovesExactlyThatFinding) {
  const std::string dir = temp_dir("builder");
  const std::string path = dir + "/rank0.srace";
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    const uint64_t C = tr::legacy_stream(0);
    const uint64_t R = b.create_stream(tr::kStreamNonBlocking);
    const uint64_t A = b.alloc(4096), out = b.alloc(4096);
    const uint64_t ev = b.create_event();
    b.at("train.py", 10, "fill");
    b.memcpy(C, A, out, 4096);
    b.record_event(ev, C);
    b.wait_event(R, ev);
    b.at("train.py", 20, "drain");
    b.memcpy(R, out, A, 4096);
    b.at("train.py", 30, "refill");
    b.memcpy(C, A, out, 4096);  // WAR on A against the drain, RAW... on out as well
    b.finish();
  }
  auto before = analyze_traces({path});
  ASSERT_GE(before.findings.size(), 1u);
  const std::string target = before.findings[0].fingerprint;
  auto res = apply_record_fixes({path}, fix_options({target}, dir + "/fixed", 16));
  EXPECT_EQ(res.verdict.removed, std::vector<std::string>{target});
  EXPECT_TRUE(res.verdict.remaining.empty());
  EXPECT_TRUE(res.verdict.introduced.empty());
  for (const auto& f : res.after.findings) EXPECT_NE(f.fingerprint, target);
  EXPECT_THROW(apply_record_fixes({path}, fix_options({"0000000000000000"}, dir + "/x", 16)),
               std::invalid_argument);
}

// A host access racing with a copy (--host-accesses) is fixed by a host synchronisation, not by
// an event edit: apply-fix says so and leaves the trace unedited.
TEST(ReplayAnalyzer, AHostAccessFindingIsReportedUnfixableNotEdited) {
  const std::string dir = temp_dir("hostaccess");
  const std::string path = dir + "/rank0.srace";
  {
    tr::TraceBuilder b(path, tr::TraceBuilder::default_header(0));
    const uint64_t s = b.create_stream();
    const uint64_t host = b.alloc(8192, tr::AllocKind::kHostPinned), dev = b.alloc(8192);
    b.at("loader.py", 30, "copy");
    b.memcpy(s, dev, host, 8192, tr::CopyKind::kHostToDevice, true, tr::MemKind::kPinnedHost, tr::MemKind::kDevice);
    b.at("loader.py", 31, "refill");
    b.host_access(host + 100, tr::AccessDir::kWrite);
    b.finish();
  }
  auto before = analyze_traces({path});
  ASSERT_EQ(before.findings.size(), 1u);
  const std::string fp = before.findings[0].fingerprint;
  auto res = apply_record_fixes({path}, fix_options({}, dir + "/fixed", 16));
  EXPECT_EQ(res.total_edits(), 0u);
  ASSERT_EQ(res.traces.size(), 1u);
  ASSERT_EQ(res.traces[0].warnings.size(), 1u);
  EXPECT_EQ(res.traces[0].warnings[0], "finding " + fp +
                                           ": a host access racing with a copy is fixed by a host synchronisation, not "
                                           "by an event edit: not applied");
  EXPECT_EQ(res.verdict.remaining, std::vector<std::string>{fp});
}

TEST(ZeroReplay, VerdictTableForStage1TinyMatchesEveryTool) {
  ZeroReplayOptions o;
  o.base.stage = 1;
  apply_zero_preset("tiny", o.base);
  o.simulate = true;
  o.steps = 30;
  auto reports = run_zero_replay(o);
  ASSERT_EQ(reports.size(), 4u);
  for (const auto& r : reports) {
    const bool none = r.variant == "none";
    EXPECT_EQ(r.races(), none) << r.variant;
    EXPECT_EQ(r.certain > 0, none) << r.variant;
    EXPECT_EQ(r.possible, 0u) << r.variant;
    EXPECT_EQ(r.exhaustive_found, none) << r.variant;
    EXPECT_EQ(r.exhaustive, none ? "corrupting interleaving (rank 0)" : "proven: none exists") << r.variant;
    EXPECT_EQ(r.sim_steps, 60u);
    EXPECT_EQ(r.sim_corrupt_steps > 0, none) << r.variant;
  }
  o.variants = {"bogus"};
  EXPECT_THROW(run_zero_replay(o), std::invalid_argument);
}
