// libstreamrace.so preloaded into real processes: silent and traceless without CUDA, and
// its NCCL interposer reaching a libnccl.so.2 that sits in a local scope (as under PyTorch).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "tests/tracer/trace_contents.h"
#include "traceformat/ring_trace.h"

namespace streamrace::tracer {
namespace {

namespace fs = std::filesystem;
using testing::read_trace;
using trace::RecordKind;

struct Result {
  int rc;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The hits and misses of the call-site cache that STREAMRACE_PYTHON_SITES=2 prints at exit, with
// the cache on; false when the line is missing or the cache is not on.
bool python_site_counts(const std::string& err, unsigned& hits, unsigned& misses) {
  const auto at = err.find("python call sites: on, ");
  return at != std::string::npos &&
         std::sscanf(err.c_str() + at, "python call sites: on, %u hits, %u misses", &hits, &misses) == 2;
}

// The interpreters the call-site tests run under: `python3`, and `python3.12` where one is installed
// and is not the same version (from 3.12 the running thread's state is its own thread-local, a
// path of its own in PythonFrames::site_words; 3.11's is one global).
// Looked for on PATH, then among pyenv's versions (whose shim answers only for the selected one).
std::vector<std::string> site_test_pythons() {
  std::vector<std::string> out{"python3"};
  if (std::system("python3 -c 'import sys; sys.exit(sys.version_info[:2] == (3, 12))' >/dev/null 2>&1") != 0) return out;
  const char* find =
      "for p in \"$(command -v python3.12)\" \"${PYENV_ROOT:-$HOME/.pyenv}\"/versions/3.12*/bin/python3.12; do "
      "[ -x \"$p\" ] && \"$p\" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1 && "
      "{ echo \"$p\"; break; }; done";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(find, "r"), pclose);
  char line[4096] = {};
  if (pipe != nullptr && std::fgets(line, sizeof line, pipe.get()) != nullptr) {
    std::string path(line);
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
    if (!path.empty()) out.push_back("'" + path + "'");
  }
  return out;
}

class PreloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("sr_preload_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    traces_ = base_ / "traces";
    fs::create_directories(traces_);
  }
  void TearDown() override { fs::remove_all(base_); }

  // Runs `cmd` through sh with the tracer preloaded and `env` added.
  Result run(const std::string& env, const std::string& cmd) {
    std::string line = "cd '" + base_.string() + "' && env -u CUDA_INJECTION64_PATH LD_PRELOAD='" SR_TRACER_LIB
                       "' STREAMRACE_OUT='" + traces_.string() + "' " + env + " " + cmd + " >'" +
                       (base_ / "out").string() + "' 2>'" + (base_ / "err").string() + "'";
    int status = std::system(line.c_str());
    return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base_ / "out"), slurp(base_ / "err")};
  }
  // A call-site test's script under `python` (GIL held or released), with fresh traces and the
  // site cache's counts on stderr.
  Result run_sites(const std::string& python, const fs::path& script, const char* gil) {
    fs::remove_all(traces_);
    fs::create_directories(traces_);
    return run("FAKE_NCCL_LOG=/dev/null STREAMRACE_PYTHON_SITES=2 STREAMRACE_STACKS=python",
               python + " '" + script.string() + "' '" SR_FAKE_FRAMEWORK "' " + gil);
  }
  // The fake framework app run in `mode` with `env`, into an emptied trace directory.
  Result run_framework(const std::string& env, const std::string& mode) {
    fs::remove_all(traces_);
    fs::create_directories(traces_);
    return run(env, "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "' " + mode);
  }
  // A Python script, written as `name` in the test's directory, run by python3 (`flags` before
  // the script) with the fake framework as its argument.
  Result run_python(const std::string& env, const std::string& name, const std::string& source,
                    const std::string& flags = "") {
    const fs::path script = base_ / name;
    std::ofstream(script) << source;
    return run(env, "python3 " + flags + (flags.empty() ? "" : " ") + "'" + script.string() + "' '" SR_FAKE_FRAMEWORK "'");
  }
  std::vector<fs::path> trace_files() const {
    std::vector<fs::path> out;
    for (auto& e : fs::directory_iterator(traces_)) out.push_back(e.path());
    return out;
  }

  fs::path base_, traces_;
};

TEST_F(PreloadTest, NonCudaProgramRunsSilentlyAndLeavesNoTrace) {
  auto r = run("", "/bin/true");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(trace_files().empty());
}

TEST_F(PreloadTest, NonCudaProgramOutputAndStatusAreUntouched) {
  auto r = run("", "sh -c 'echo hello; echo oops >&2; exit 3'");
  EXPECT_EQ(r.rc, 3);
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_TRUE(trace_files().empty());
}

TEST_F(PreloadTest, PointsCudaInjectionAtItselfForTheProgramOnly) {
  auto r = run("", "sh -c 'echo \"$CUDA_INJECTION64_PATH\"'");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, std::string(SR_TRACER_LIB) + "\n");
}

TEST_F(PreloadTest, DisabledByEnvironment) {
  auto r = run("STREAMRACE_DISABLE=1", "sh -c 'echo \"[$CUDA_INJECTION64_PATH]\"'");
  EXPECT_EQ(r.out, "[]\n");
}

// STREAMRACE_OPTIONS read by the library itself (no `streamrace run`): out= and stacks= land
// in the trace; a STREAMRACE_<NAME> variable wins over its word.
TEST_F(PreloadTest, ReadsStreamraceOptionsBelowTheVariables) {
  fs::path other = base_ / "other";
  fs::create_directories(other);
  auto r = run("STREAMRACE_OUT= STREAMRACE_OPTIONS='out=" + other.string() + " stacks=none' RANK=0 FAKE_NCCL_LOG=/dev/null",
               "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(trace_files().empty());
  std::vector<fs::path> files(fs::directory_iterator(other), fs::directory_iterator{});
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(read_trace(files[0].string()).header.extra.at("stacks"), "none");

  r = run("STREAMRACE_STACKS=native STREAMRACE_OPTIONS='stacks=none' RANK=0 FAKE_NCCL_LOG=/dev/null",
          "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto here = trace_files();
  ASSERT_EQ(here.size(), 1u);
  EXPECT_EQ(read_trace(here[0].string()).header.extra.at("stacks"), "native");
}

// Ring mode in a real process (docs/long-runs.md): the settings reach the recorder, the trace
// is assembled at exit, also when a fatal signal ends the process, and no segment is left.
// (The fake framework pushes no NVTX range: the whole run is one step, and the trace says so.)
// Settings that do not parse trace the whole run and say why.
TEST_F(PreloadTest, RingModeAssemblesItsTraceAtExitAndAtAFatalSignal) {
  for (const char* mode : {"", " segv"}) {
    fs::remove_all(traces_);
    fs::create_directories(traces_);
    auto r = run("STREAMRACE_RING=2 STREAMRACE_STEP_RANGE=step RANK=0 FAKE_NCCL_LOG=/dev/null",
                 "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "'" + std::string(mode));
    EXPECT_EQ(r.rc, *mode ? 128 + SIGSEGV : 0) << r.err;
    auto files = trace_files();
    ASSERT_EQ(files.size(), 1u) << mode;  // the trace, and no <trace>.ring directory
    auto t = read_trace(files[0].string());
    EXPECT_TRUE(t.stats.complete) << mode;
    EXPECT_EQ(t.header.extra.at("capture"), "ring 2");
    EXPECT_EQ(t.header.extra.at("ring_steps_seen"), "0");
    EXPECT_EQ(t.records.size() - t.of(RecordKind::kNotice).size(), 8u) << mode;
    std::vector<std::string> notices = t.notice_texts();
    EXPECT_EQ(notices, std::vector<std::string>{"ring mode: no step marker (NVTX range 'step') was seen, so nothing "
                                                "was dropped: the whole run is one step"});
  }
  fs::remove_all(traces_);
  fs::create_directories(traces_);
  auto r = run("STREAMRACE_RING=0 STREAMRACE_STEP_RANGE=step RANK=0 FAKE_NCCL_LOG=/dev/null",
               "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "'");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.err.find("capture settings ignored in pid"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": ring '0' is not a number of steps from 1 to 1000000; the whole run is traced\n"),
            std::string::npos)
      << r.err;
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  auto t = read_trace(files[0].string());
  EXPECT_EQ(t.header.extra.count("capture"), 0u);
  EXPECT_EQ(t.records.size() - t.of(RecordKind::kNotice).size(), 8u);
}

// SIGKILL: the ring stays on disk as the flusher left it, and assembling it gives the trace.
TEST_F(PreloadTest, RingOfAKilledProcessIsLeftWholeAndSalvages) {
  auto r = run("STREAMRACE_RING=2 STREAMRACE_STEP_RANGE=step RANK=0 FAKE_NCCL_LOG=/dev/null",
               "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "' kill");
  EXPECT_EQ(r.rc, 128 + SIGKILL);
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  const std::string ring = files[0].string();
  ASSERT_EQ(ring.substr(ring.size() - 11), ".srace.ring");
  const std::string out = ring.substr(0, ring.size() - 5);
  trace::RingAssembly a = trace::assemble_ring(ring, out, nullptr, true);
  trace::remove_ring(ring);
  EXPECT_EQ(a.steps_seen, 0u);
  auto t = read_trace(out);
  EXPECT_TRUE(t.stats.complete);
  EXPECT_EQ(t.header.extra.at("ring_salvaged"), "1");
  EXPECT_EQ(t.header.producer, "libstreamrace 0.1.0");
  EXPECT_EQ(t.records.size() - t.of(RecordKind::kNotice).size(), 8u);
  std::vector<std::string> notices = t.notice_texts();
  EXPECT_EQ(notices, (std::vector<std::string>{
                         "ring mode: no step marker (NVTX range 'step') was seen, so nothing was dropped: the whole "
                         "run is one step",
                         "ring salvaged after the traced process died: steps from the start to the last are kept, the "
                         "last may be cut short, and calls not yet flushed are missing"}));
}

TEST_F(PreloadTest, NcclCallsInALocalScopeReachTheRealLibraryAndTheTrace) {
  fs::path log = base_ / "nccl.log";
  auto r = run("RANK=1 FAKE_NCCL_LOG='" + log.string() + "'", "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(slurp(log),
            "CommInitRank nranks=2 rank=1\n"
            "AllReduce send=0x70000000 recv=0x70000000 count=256 type=7 op=0 stream=0x5000\n"
            "GroupStart\n"
            "Send send=0x70000000 count=16 type=9 peer=0\n"
            "Recv recv=0x70001000 count=16 type=9 peer=0\n"
            "GroupEnd\n"
            "CommSplit color=0 key=1\n"
            "Broadcast send=0x70000000 recv=0x70000000 count=8 type=4 root=0\n");
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  auto t = read_trace(files[0].string());
  EXPECT_TRUE(t.stats.complete);
  EXPECT_TRUE(t.defs_before_use);
  EXPECT_EQ(t.header.rank, 1);
  EXPECT_EQ(t.header.producer, "libstreamrace 0.1.0");
  EXPECT_EQ(t.header.nccl_version, "22809");
  EXPECT_EQ(files[0].filename().string(), t.header.host + "-" + std::to_string(t.header.pid) + ".srace");

  std::vector<RecordKind> kinds;
  for (auto& rec : t.records) kinds.push_back(rec.kind);
  ASSERT_EQ(kinds, (std::vector<RecordKind>{RecordKind::kNcclCommInit, RecordKind::kNcclCall,
                                            RecordKind::kNcclGroupStart, RecordKind::kNcclCall, RecordKind::kNcclCall,
                                            RecordKind::kNcclGroupEnd, RecordKind::kNcclCommInit,
                                            RecordKind::kNcclCall}));
  for (size_t i = 0; i < t.records.size(); ++i) {
    trace::CallInfo ci;
    std::memcpy(&ci, t.records[i].body.data(), sizeof ci);
    EXPECT_EQ(ci.seq, i);
  }
  auto init = t.records[0].as<trace::NcclCommInit>();
  EXPECT_EQ(init.rank, 1);
  EXPECT_EQ(init.nranks, 2);
  EXPECT_EQ(init.device, 1u);
  EXPECT_EQ(init.parent, 0u);
  EXPECT_EQ(t.str(init.call.api_id), "ncclCommInitRank");

  auto ar = t.records[1].as<trace::NcclCall>();
  EXPECT_EQ(ar.op, trace::NcclOp::kAllReduce);
  EXPECT_EQ(ar.comm, init.comm);
  EXPECT_EQ(ar.stream, 0x5000u);
  EXPECT_EQ(ar.sendbuff, 0x7000'0000u);
  EXPECT_EQ(ar.recvbuff, 0x7000'0000u);
  EXPECT_EQ(ar.count, 256u);
  EXPECT_EQ(ar.datatype, trace::NcclType::kFloat32);
  EXPECT_EQ(ar.root_or_peer, -1);
  EXPECT_EQ(ar.rank, 1);
  EXPECT_EQ(ar.nranks, 2);
  EXPECT_EQ(ar.group_depth, 0u);
  EXPECT_EQ(ar.device, 1u);
  EXPECT_EQ(t.str(ar.call.api_id), "ncclAllReduce");

  EXPECT_EQ(t.records[2].as<trace::NcclGroupStart>().depth, 1u);
  auto send = t.records[3].as<trace::NcclCall>();
  EXPECT_EQ(send.op, trace::NcclOp::kSend);
  EXPECT_EQ(send.sendbuff, 0x7000'0000u);
  EXPECT_EQ(send.recvbuff, 0u);
  EXPECT_EQ(send.root_or_peer, 0);
  EXPECT_EQ(send.group_depth, 1u);
  EXPECT_EQ(send.datatype, trace::NcclType::kBfloat16);
  auto recv = t.records[4].as<trace::NcclCall>();
  EXPECT_EQ(recv.op, trace::NcclOp::kRecv);
  EXPECT_EQ(recv.recvbuff, 0x7000'1000u);
  EXPECT_EQ(recv.group_depth, 1u);
  EXPECT_EQ(t.records[5].as<trace::NcclGroupEnd>().depth, 0u);

  auto split = t.records[6].as<trace::NcclCommInit>();
  EXPECT_EQ(split.parent, init.comm);
  EXPECT_EQ(split.rank, 0);
  EXPECT_EQ(split.nranks, 1);
  EXPECT_EQ(t.str(split.call.api_id), "ncclCommSplit");
  auto bc = t.records[7].as<trace::NcclCall>();
  EXPECT_EQ(bc.op, trace::NcclOp::kBroadcast);
  EXPECT_EQ(bc.comm, split.comm);
  EXPECT_EQ(bc.stream, trace::legacy_stream(1));  // stream 0 on the communicator's device
  EXPECT_EQ(bc.datatype, trace::NcclType::kInt64);
  EXPECT_EQ(bc.root_or_peer, 0);
}

// self_time=1 (for the overhead benchmarks): the tracer's own time by part, on stderr and as a
// notice in the trace, with the exact number of timed calls of each part; off, nothing.
TEST_F(PreloadTest, SelfTimeCountsEachPartOfTheTracersOwnWork) {
  const std::string app = "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "'";
  auto off = run("RANK=1", app);
  ASSERT_EQ(off.rc, 0) << off.err;
  EXPECT_EQ(off.err, "");
  fs::remove_all(traces_);
  fs::create_directories(traces_);
  auto r = run("RANK=1 STREAMRACE_SELF_TIME=1", app);
  ASSERT_EQ(r.rc, 0) << r.err;
  // No CUDA call (the fake framework makes NCCL calls only); 4 NCCL calls recorded; a stack
  // for each of them and the 2 communicator inits: a Python attempt (no interpreter), then native.
  const std::regex line(
      "streamrace \\(pid [0-9]+\\): (self time \\(1 threads\\): cupti 0 calls 0\\.000 ms \\(0 ns each\\); "
      "nccl 4 calls [0-9.]+ ms \\([0-9]+ ns each\\); allocator 0 calls 0\\.000 ms \\(0 ns each\\); "
      "python 6 calls [0-9.]+ ms \\([0-9]+ ns each\\); native 6 calls [0-9.]+ ms \\([0-9]+ ns each\\); "
      "scan 0 calls 0\\.000 ms \\(0 ns each\\); record 0 calls 0\\.000 ms \\(0 ns each\\); "
      "facts 0 calls 0\\.000 ms \\(0 ns each\\); lookup 0 calls 0\\.000 ms \\(0 ns each\\); "
      "hash 0 calls 0\\.000 ms \\(0 ns each\\))\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(r.err, m, line)) << r.err;
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  auto t = read_trace(files[0].string());
  std::vector<std::string> notices = t.notice_texts();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0], m[1].str());
}

// The ways a process leaves (issue #13): each gives the program's own status, and every
// process that made calls leaves a complete trace (end marker written) holding all of them.
// --host-accesses installs a SIGSEGV handler of the tracer's when the process first uses
// CUDA (here NCCL): the program's own faults must still reach the program's handler, or kill
// it the default way, exactly as without the tracer.
TEST_F(PreloadTest, HostAccessesLeaveTheProgramsOwnFaultsAsTheyWere) {
  for (const char* env : {"", "STREAMRACE_HOST_ACCESSES=1", "STREAMRACE_OPTIONS=host_accesses=1"}) {
    SCOPED_TRACE(env);
    auto killed = run(env, "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "' segv");
    EXPECT_EQ(killed.rc, 128 + SIGSEGV) << killed.err;
    EXPECT_EQ(killed.out, "");
    fs::remove_all(traces_);
    fs::create_directories(traces_);
    auto handled = run(env, "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "' segv_handled");
    EXPECT_EQ(handled.rc, 0) << handled.err;
    EXPECT_EQ(handled.out, "handled 1 value 5\n");
    // The setting reached the tracer: its closing notice says what was guarded.
    auto files = trace_files();
    ASSERT_EQ(files.size(), 1u);
    auto t = read_trace(files[0].string());
    // The program's handled SIGSEGV flushed the trace but left it open: it ends complete, with
    // every record of the run (8 NCCL records) and the closing notice after the fault.
    EXPECT_TRUE(t.stats.complete);
    EXPECT_EQ(t.records.size() - t.of(trace::RecordKind::kNotice).size(), 8u);
    std::string notice;
    for (const auto& r : t.of(trace::RecordKind::kNotice)) {
      std::string text(r.body.begin() + sizeof(trace::NoticeHead), r.body.end());
      if (text.rfind("host accesses:", 0) == 0) notice = text;
    }
    if (std::string(env).empty()) {
      EXPECT_EQ(notice, "");
    } else {
      EXPECT_EQ(notice,
                "host accesses: 0 copy windows guarded, 0 not guarded (no slot or protection refused), 0 host accesses "
                "caught, 0 lost (no free slot), 0 pinned allocations left unguarded (not plain read-write pages)");
    }
  }
}

// Loaded after start-up, as the CUDA driver loads it from CUDA_INJECTION64_PATH (dlopen, not
// LD_PRELOAD): its thread_locals are then outside the static TLS block, and the thread state is
// found through the dynamic TLS descriptor (tracer/thread_state.cpp). Four threads started
// afterwards each run the framework once: every call is recorded, by its own thread, in order.
TEST_F(PreloadTest, ATracerLoadedAfterStartUpRecordsEveryThreadsCalls) {
  fs::path log = base_ / "nccl.log";
  std::string line = "cd '" + base_.string() + "' && env -u LD_PRELOAD -u CUDA_INJECTION64_PATH FRAMEWORK_APP_TRACER='" SR_TRACER_LIB
                     "' STREAMRACE_OUT='" + traces_.string() + "' RANK=1 FAKE_NCCL_LOG='" + log.string() +
                     "' '" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "' threads >'" + (base_ / "out").string() + "' 2>'" +
                     (base_ / "err").string() + "'";
  const int status = std::system(line.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << slurp(base_ / "err");
  EXPECT_EQ(slurp(base_ / "err"), "");
  std::string four;
  for (int i = 0; i < 4; ++i)
    four += "CommInitRank nranks=2 rank=1\n"
            "AllReduce send=0x70000000 recv=0x70000000 count=256 type=7 op=0 stream=0x5000\n"
            "GroupStart\n"
            "Send send=0x70000000 count=16 type=9 peer=0\n"
            "Recv recv=0x70001000 count=16 type=9 peer=0\n"
            "GroupEnd\n"
            "CommSplit color=0 key=1\n"
            "Broadcast send=0x70000000 recv=0x70000000 count=8 type=4 root=0\n";
  // Each thread's runs leave the same log lines; they may interleave between threads.
  auto sorted_lines = [](const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(sorted_lines(slurp(log)), sorted_lines(four));  // every call reached the real library
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  auto t = read_trace(files[0].string());
  EXPECT_TRUE(t.stats.complete);
  const std::vector<RecordKind> one_run{RecordKind::kNcclCommInit, RecordKind::kNcclCall, RecordKind::kNcclGroupStart,
                                        RecordKind::kNcclCall,     RecordKind::kNcclCall, RecordKind::kNcclGroupEnd,
                                        RecordKind::kNcclCommInit, RecordKind::kNcclCall};
  ASSERT_EQ(t.records.size(), 4 * one_run.size());
  // By thread, in the order of their sequence numbers: each thread's records are one run's.
  std::map<uint32_t, std::vector<std::pair<uint64_t, RecordKind>>> by_thread;
  std::set<uint64_t> seqs;
  for (const auto& rec : t.records) {
    trace::CallInfo ci;
    std::memcpy(&ci, rec.body.data(), sizeof ci);
    by_thread[ci.thread].emplace_back(ci.seq, rec.kind);
    seqs.insert(ci.seq);
  }
  EXPECT_EQ(seqs.size(), t.records.size());
  EXPECT_EQ(*seqs.rbegin(), t.records.size() - 1);
  ASSERT_EQ(by_thread.size(), 4u);
  for (auto& [thread, recs] : by_thread) {
    SCOPED_TRACE(thread);
    std::sort(recs.begin(), recs.end());
    std::vector<RecordKind> kinds;
    for (auto& r : recs) kinds.push_back(r.second);
    EXPECT_EQ(kinds, one_run);
  }
}

// Setting chunk_kib: a thread's records handed to the flusher every N KiB. 2,000 runs of the
// framework with 64 KiB buffers (the least) hand over many buffers: every record reaches the
// file, once, sequence numbers without a gap, and nothing is dropped. A value outside 64..65536
// is refused, on stderr and in the trace, and the default taken.
TEST_F(PreloadTest, ChunkKibHandsSmallBuffersOverWithoutLosingRecords) {
  for (const char* value : {"64", "8", "lots"}) {
    SCOPED_TRACE(value);
    auto r = run_framework("RANK=1 FAKE_NCCL_LOG=/dev/null STREAMRACE_CHUNK_KIB=" + std::string(value), "many");
    ASSERT_EQ(r.rc, 0) << r.err;
    auto files = trace_files();
    ASSERT_EQ(files.size(), 1u);
    auto t = read_trace(files[0].string());
    EXPECT_TRUE(t.stats.complete);
    std::vector<std::string> notices = t.notice_texts();
    const std::string refused =
        "setting chunk_kib=" + std::string(value) + " ignored (takes 64 to 65536): buffers of 256 KiB";
    if (std::string(value) == "64") {
      EXPECT_EQ(r.err, "");
      EXPECT_EQ(notices, std::vector<std::string>{});
    } else {
      EXPECT_EQ(notices, std::vector<std::string>{refused});
      EXPECT_NE(r.err.find("streamrace: " + refused + " in pid "), std::string::npos) << r.err;
    }
    std::vector<uint64_t> seqs;
    for (const auto& rec : t.records) {
      if (rec.kind == RecordKind::kNotice) continue;
      trace::CallInfo ci;
      std::memcpy(&ci, rec.body.data(), sizeof ci);
      seqs.push_back(ci.seq);
    }
    ASSERT_EQ(seqs.size(), 2000u * 8u);
    std::sort(seqs.begin(), seqs.end());
    for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], seqs[0] + i) << i;
  }
}

// Setting host_clock: by default (auto, or unset) and with tsc, where the kernel keeps
// CLOCK_MONOTONIC with the time-stamp counter, the records' host times come from the counter,
// scaled by the flusher (tracer/host_clock.h); the framework runs twice, 450 ms apart, so the
// second run's records are timed by the counter (the first scale is set at the first flush,
// 200 ms in). Their times must lie on the clock the test reads around the process, in the order
// of their sequence numbers, 450 ms after the first run's, whichever clock timed them; the
// header's host_clock says which. tsc asked for where it cannot be, or any value not known, is
// refused with a warning; auto falls back to clock_gettime silently; monotonic is clock_gettime.
TEST_F(PreloadTest, EveryHostClockTimesRecordsOnTheMonotonicClock) {
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
  };
  std::string source;
  {
    std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::getline(in, source);
  }
  for (const std::string value : {"tsc", "sundial", "", "auto", "monotonic"}) {
    SCOPED_TRACE(value);
    const uint64_t before = now();
    auto r = run_framework("RANK=1 FAKE_NCCL_LOG=/dev/null" + (value.empty() ? "" : " STREAMRACE_HOST_CLOCK=" + value),
                           "twice");
    const uint64_t after = now();
    ASSERT_EQ(r.rc, 0) << r.err;
    auto files = trace_files();
    ASSERT_EQ(files.size(), 1u);
    auto t = read_trace(files[0].string());
    EXPECT_TRUE(t.stats.complete);
    std::vector<std::string> notices = t.notice_texts();
    const bool counter = (value == "tsc" || value == "auto" || value.empty()) && source == "tsc";
    EXPECT_EQ(t.header.extra.at("host_clock"), counter ? "tsc" : "clock_gettime");
    if (value == "tsc" && counter) {
      EXPECT_EQ(r.err, "");
      EXPECT_EQ(notices, std::vector<std::string>{
                             "setting host_clock=tsc: host times from the time-stamp counter, scaled to CLOCK_MONOTONIC"});
    } else if (value != "tsc" && value != "sundial") {
      EXPECT_EQ(r.err, "");
      EXPECT_TRUE(notices.empty());
    } else {
      ASSERT_EQ(notices.size(), 1u);
      EXPECT_EQ(notices[0].rfind("setting host_clock=" + std::string(value) + " ignored (", 0), 0u) << notices[0];
      EXPECT_NE(notices[0].find("): host times from clock_gettime"), std::string::npos) << notices[0];
      EXPECT_NE(r.err.find("streamrace: setting host_clock=" + std::string(value) + " ignored in pid "), std::string::npos)
          << r.err;
    }
    // Two runs of 8 records, by sequence number: on the clock, in order, the second 450 ms on.
    std::vector<std::pair<uint64_t, uint64_t>> times;  // seq, host time
    for (const auto& rec : t.records) {
      if (rec.kind == RecordKind::kNotice) continue;
      trace::CallInfo ci;
      std::memcpy(&ci, rec.body.data(), sizeof ci);
      times.emplace_back(ci.seq, ci.host_ts_ns);
    }
    ASSERT_EQ(times.size(), 16u);
    std::sort(times.begin(), times.end());
    for (size_t i = 0; i < times.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_GE(times[i].second, before);
      EXPECT_LE(times[i].second, after);
      if (i > 0) {
        EXPECT_GE(times[i].second, times[i - 1].second);
      }
    }
    const uint64_t gap = times[8].second - times[7].second;
    EXPECT_GE(gap, 450'000'000u);
    EXPECT_LT(gap, 2'000'000'000u);
  }
}

TEST_F(PreloadTest, EveryExitPathKeepsTheStatusAndACompleteTrace) {
  struct Case {
    const char* mode;
    int rc;
    size_t traces;
  } cases[] = {{"return", 0, 1}, {"exit", 7, 1}, {"child", 15, 2}, {"signal", 128 + SIGTERM, 1}, {"thread", 9, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode);
    fs::remove_all(traces_);
    fs::create_directories(traces_);
    auto r = run("RANK=1", "'" SR_FRAMEWORK_APP "' '" SR_FAKE_FRAMEWORK "' " + std::string(c.mode));
    EXPECT_EQ(r.rc, c.rc) << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
    auto files = trace_files();
    ASSERT_EQ(files.size(), c.traces);
    for (const auto& f : files) {
      auto t = read_trace(f.string());
      EXPECT_TRUE(t.stats.complete) << f;
      // One run of the fake framework is 8 NCCL records; the thread case runs it in a loop.
      if (std::string(c.mode) == "thread")
        EXPECT_GE(t.records.size(), 8u) << f;
      else
        EXPECT_EQ(t.records.size(), 8u) << f;
    }
  }
}

// exec replaces the image without exit handlers: the trace is finished before (a new image
// writes its own, beside it); an exec that fails takes the end marker back and the same trace
// goes on; a vfork() child whose exec failed leaves with _exit in the parent's memory, and must
// not finish (before this, it closed) the parent's trace.
TEST_F(PreloadTest, ExecFinishesTheTraceAndAFailedExecOrVforkChildLeavesItWhole) {
  struct Case {
    const char* mode;
    std::vector<size_t> records;  // per trace, sorted
  } cases[] = {{"exec", {8, 8}}, {"exec_failed", {16}}, {"vfork_failed", {16}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode);
    auto r = run_framework("RANK=1", c.mode);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    auto files = trace_files();
    ASSERT_EQ(files.size(), c.records.size());
    std::vector<size_t> got;
    for (const auto& f : files) {
      auto t = read_trace(f.string());
      EXPECT_TRUE(t.stats.complete) << f;
      EXPECT_FALSE(t.stats.truncated) << f;
      got.push_back(t.records.size());
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, c.records);
  }
}

// A trace with capture windows (here: a profiler window that never opens) is written whole only
// at close: an exec closes it; a failed exec goes on in a new trace that says so.
TEST_F(PreloadTest, ExecClosesAWindowedTraceAndAFailedExecGoesOnInANewOne) {
  for (const char* mode : {"exec", "exec_failed"}) {
    SCOPED_TRACE(mode);
    auto r = run_framework("STREAMRACE_WINDOW=profiler FAKE_NCCL_LOG=/dev/null", mode);
    EXPECT_EQ(r.rc, 0) << r.err;
    auto files = trace_files();
    ASSERT_EQ(files.size(), 2u);
    std::sort(files.begin(), files.end());  // HOST-PID-1.srace (the second) sorts first
    size_t warned = 0;
    for (const auto& f : files) {
      auto t = read_trace(f.string());
      EXPECT_TRUE(t.stats.complete) << f;
      for (const std::string& n : t.notice_texts())
        warned += n.rfind("an exec failed after this process's trace " + files[1].string() + " was finished", 0) == 0;
    }
    EXPECT_EQ(warned, std::string(mode) == "exec" ? 0u : 1u);
  }
}

// Python's subprocess starts a child with vfork(); a command that cannot be started makes that
// child _exit in the parent's memory. The parent's trace stays whole and complete.
TEST_F(PreloadTest, APythonSubprocessThatCannotStartLeavesTheTraceWhole) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  auto r = run_python("FAKE_NCCL_LOG=/dev/null", "spawn.py",
                      "import ctypes, subprocess, sys\n"
                      "lib = ctypes.PyDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
                      "assert lib.fake_framework_run() == 0\n"
                      "try:\n"
                      "    subprocess.run(['/nonexistent/streamrace-test-program'])\n"
                      "    sys.exit(5)\n"
                      "except FileNotFoundError:\n"
                      "    pass\n"
                      "assert lib.fake_framework_run() == 0\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  auto t = read_trace(files[0].string());
  EXPECT_TRUE(t.stats.complete);
  EXPECT_EQ(t.of(RecordKind::kNcclCall).size(), 8u);
}

TEST_F(PreloadTest, PythonInterpreterShutdownKeepsTheStatusAndACompleteTrace) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  // From CPython 3.12, os.fork() in a process with more than one thread (the tracer's flusher)
  // warns on stderr (DeprecationWarning): Python's, not the tracer's, so it is silenced here.
  auto r = run_python("RANK=1", "leave.py",
                      "import ctypes, sys, threading\n"
                      "lib = ctypes.PyDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
                      "assert lib.fake_framework_run() == 0\n"
                      "threading.Thread(target=lambda: [lib.fake_framework_run() for _ in range(1000)], daemon=True).start()\n"
                      "pid = __import__('os').fork()\n"
                      "if pid == 0:\n"
                      "    lib.fake_framework_run()\n"
                      "    __import__('os')._exit(4)  # a worker leaving without Python's or C's exit handlers\n"
                      "assert __import__('os').waitpid(pid, 0)[1] >> 8 == 4\n"
                      "sys.exit(3)\n", "-W ignore::DeprecationWarning");
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(r.err, "");
  auto files = trace_files();
  ASSERT_EQ(files.size(), 2u);  // the interpreter's and the os._exit worker's
  for (const auto& f : files) {
    auto t = read_trace(f.string());
    EXPECT_TRUE(t.stats.complete) << f;
    EXPECT_GE(t.records.size(), 8u) << f;
  }
}

// The NCCL calls come from Python (through ctypes.PyDLL, which keeps the GIL): their stacks
// must be the Python frames, innermost first, naming the script, function and line.
TEST_F(PreloadTest, CallsFromPythonCarryPythonStacks) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  auto r = run_python("FAKE_NCCL_LOG=/dev/null", "drive.py",
                      "import ctypes, sys\n"
                      "lib = ctypes.PyDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
                      "def train_step():\n"
                      "    return lib.fake_framework_run()\n"
                      "sys.exit(train_step())\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  auto t = read_trace(files[0].string());
  EXPECT_TRUE(t.defs_before_use);
  auto calls = t.of(RecordKind::kNcclCall);
  ASSERT_EQ(calls.size(), 4u);
  auto ar = calls[0].as<trace::NcclCall>();
  ASSERT_NE(ar.call.stack_id, 0u);
  const auto& frames = t.stacks.at(ar.call.stack_id);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].kind, trace::FrameKind::kPython);
  EXPECT_EQ(t.str(frames[0].file_id), (base_ / "drive.py").string());
  EXPECT_EQ(t.str(frames[0].function_id), "train_step");
  EXPECT_EQ(frames[0].line, 4u);
  EXPECT_EQ(t.str(frames[1].function_id), "<module>");
  EXPECT_EQ(frames[1].line, 5u);
  // Every call of the step comes from the same two frames' code objects.
  auto bc = calls[3].as<trace::NcclCall>();
  EXPECT_EQ(t.stacks.at(bc.call.stack_id)[0].function_id, frames[0].function_id);
}

// A repeated Python call site reuses its first stack (the call-site cache reads the frames
// without the C API); calls from other lines, other callers or generator frames must still
// get their own stacks, with the GIL held (ctypes.PyDLL) and released (ctypes.CDLL, as
// PyTorch's ops release it), and the cache must have been used with no disagreement.
TEST_F(PreloadTest, RepeatedPythonCallSitesKeepTheirOwnStacks) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  fs::path script = base_ / "sites.py";
  {
    std::ofstream py(script);
    py << "import ctypes, sys\n"                                                          // 1
          "lib = (ctypes.PyDLL if sys.argv[2] == 'held' else ctypes.CDLL)(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
          "def leaf():\n"                                                                 // 3
          "    return lib.fake_framework_run()\n"                                         // 4
          "def via_g():\n"                                                                // 5
          "    return leaf()\n"                                                           // 6
          "def via_h():\n"                                                                // 7
          "    return leaf()\n"                                                           // 8
          "def gen():\n"                                                                  // 9
          "    while True:\n"                                                             // 10
          "        yield lib.fake_framework_run()\n"                                      // 11
          "g = gen()\n"                                                                   // 12
          "for i in range(30):\n"                                                         // 13
          "    lib.fake_framework_run()\n"                                                // 14
          "    via_g()\n"                                                                 // 15
          "    lib.fake_framework_run()\n"                                                // 16
          "    via_h()\n"                                                                 // 17
          "    next(g)\n"                                                                 // 18
          "print(sys.version_info[0] * 100 + sys.version_info[1])\n";
  }
  for (const char* gil : {"held", "released"}) {
    SCOPED_TRACE(gil);
    fs::remove_all(traces_);
    fs::create_directories(traces_);
    auto r = run("FAKE_NCCL_LOG=/dev/null STREAMRACE_PYTHON_SITES=2",
                 "python3 '" + script.string() + "' '" SR_FAKE_FRAMEWORK "' " + gil);
    ASSERT_EQ(r.rc, 0) << r.err;
    const int version = std::atoi(r.out.c_str());
    if (version == 311 || version == 312) {
      EXPECT_NE(r.err.find("python call sites: on, "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(" 0 mismatches"), std::string::npos) << r.err;
    }
    auto files = trace_files();
    ASSERT_EQ(files.size(), 1u);
    auto t = read_trace(files[0].string());
    auto calls = t.of(RecordKind::kNcclCall);
    // 4 NCCL calls per run; 5 runs per iteration; 30 iterations.
    ASSERT_EQ(calls.size(), 4u * 5 * 30);
    // Innermost line and the caller's line of each run, in loop order.
    const std::vector<std::pair<uint32_t, uint32_t>> expected = {{14, 0}, {4, 6}, {16, 0}, {4, 8}, {11, 18}};
    for (size_t i = 0; i < calls.size(); i += 4) {
      const auto& want = expected[(i / 4) % expected.size()];
      auto c = calls[i].as<trace::NcclCall>();
      ASSERT_NE(c.call.stack_id, 0u) << "call " << i;
      const auto& frames = t.stacks.at(c.call.stack_id);
      ASSERT_GE(frames.size(), want.second != 0 ? 2u : 1u) << "call " << i;
      EXPECT_EQ(frames[0].line, want.first) << "call " << i;
      if (want.second != 0) {
        EXPECT_EQ(frames[1].line, want.second) << "call " << i;
      } else {
        EXPECT_EQ(t.str(frames[0].function_id), "<module>") << "call " << i;
      }
    }
  }
}

// A call site's hits are compared with the C API's walk: its first two uses, one in 128 of its
// first 8,192 and one in 2,048 after that (a check takes the GIL and walks the C API: a site that
// repeats for a whole run must not pay for one every 128 calls). One site, one miss, and exactly
// the checks that rule gives for its number of hits.
TEST_F(PreloadTest, ARepeatedCallSiteIsCheckedAgainstTheCApiAtTheSampledUsesOnly) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  fs::path script = base_ / "one_site.py";
  {
    std::ofstream py(script);
    py << "import ctypes, sys\n"
          "lib = ctypes.PyDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
          "for i in range(3000):\n"
          "    lib.fake_framework_run()\n"
          "print(sys.version_info[0] * 100 + sys.version_info[1])\n";
  }
  auto r = run("FAKE_NCCL_LOG=/dev/null STREAMRACE_PYTHON_SITES=2 STREAMRACE_STACKS=python",
               "python3 '" + script.string() + "' '" SR_FAKE_FRAMEWORK "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const int version = std::atoi(r.out.c_str());
  if (version != 311 && version != 312) GTEST_SKIP() << "call sites are keyed on CPython 3.11 and 3.12 only";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m,
                                std::regex(R"(python call sites: on, (\d+) hits, (\d+) misses \((\d+) of them with a stack seen before\), (\d+) checked, (\d+) mismatches)")))
      << r.err;
  const uint64_t hits = std::stoull(m[1]), checked = std::stoull(m[4]);
  EXPECT_EQ(m[2], "1");
  EXPECT_EQ(m[5], "0");
  EXPECT_GT(hits, 16384u);  // 3000 runs of 6 stacks each, one site: well past its 8,192nd use
  // The site's first use was its miss; its hits are uses 1 .. hits.
  uint64_t want = 0;
  for (uint64_t u = 1; u <= hits; ++u) want += u < 2 || (u < 8192 ? u % 128 == 0 : u % 2048 == 0);
  EXPECT_EQ(checked, want);
  EXPECT_EQ(want, 1u + 63 + (hits / 2048 - 3));  // spelled out: use 1, 128..8064, 8192 and every 2048th after
}

// The thread's last call site is taken again without its key when the frames' words are the
// same (StackCapture's last-site shortcut): calls whose innermost frame is the same code at the
// same instruction, back to back, but reached from another caller or at another depth must not
// take the last call's stack. Each of the 4 calls of a run is compared: a run from via_a, then
// one from via_b, then the same function one and two recursion levels deeper.
TEST_F(PreloadTest, BackToBackCallsFromTheSameLineKeepTheirOwnCallers) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  fs::path script = base_ / "callers.py";
  {
    std::ofstream py(script);
    py << "import ctypes, sys\n"                                                          // 1
          "lib = (ctypes.PyDLL if sys.argv[2] == 'held' else ctypes.CDLL)(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
          "def leaf():\n"                                                                 // 3
          "    return lib.fake_framework_allreduce()\n"                                   // 4
          "def via_a():\n"                                                                // 5
          "    return leaf()\n"                                                           // 6
          "def via_b():\n"                                                                // 7
          "    return leaf()\n"                                                           // 8
          "def down(k):\n"                                                                // 9
          "    return leaf() if k == 0 else down(k - 1)\n"                                // 10
          "for i in range(200):\n"                                                        // 11
          "    via_a()\n"                                                                 // 12
          "    via_b()\n"                                                                 // 13
          "    down(i % 3)\n"                                                             // 14
          "print(sys.version_info[0] * 100 + sys.version_info[1])\n";
  }
  for (const std::string& python : site_test_pythons())
  for (const char* gil : {"held", "released"}) {
    SCOPED_TRACE(python + " " + gil);
    auto r = run_sites(python, script, gil);
    ASSERT_EQ(r.rc, 0) << r.err;
    const int version = std::atoi(r.out.c_str());
    if (version == 311 || version == 312) {
      unsigned hits = 0, misses = 0;
      ASSERT_TRUE(python_site_counts(r.err, hits, misses)) << r.err;
      EXPECT_LE(misses, 12u) << r.err;  // via_a, via_b, down at 3 depths (+ the layout's checks)
      EXPECT_GE(hits, 580u) << r.err;
      EXPECT_NE(r.err.find(" 0 mismatches"), std::string::npos) << r.err;
    }
    auto files = trace_files();
    ASSERT_EQ(files.size(), 1u);
    auto t = read_trace(files[0].string());
    auto calls = t.of(RecordKind::kNcclCall);
    ASSERT_EQ(calls.size(), 3u * 200);  // the all-reduces (the communicator's making is another record)
    for (size_t i = 0; i < calls.size(); ++i) {
      const size_t turn = i / 3, which = i % 3;
      const auto id = calls[i].as<trace::NcclCall>().call.stack_id;
      ASSERT_NE(id, 0u) << "call " << i;
      const auto& frames = t.stacks.at(id);
      // leaf, then its callers; the module's line last.
      const size_t depth = which == 2 ? 1 + turn % 3 : 1;  // frames between leaf and <module>
      ASSERT_EQ(frames.size(), depth + 2) << "call " << i;
      EXPECT_EQ(frames[0].line, 4u) << "call " << i;
      const uint32_t caller_line = which == 0 ? 6 : which == 1 ? 8 : 10;
      EXPECT_EQ(frames[1].line, caller_line) << "call " << i;
      EXPECT_EQ(frames[depth + 1].line, uint32_t(12 + which)) << "call " << i;
    }
  }
}

// More call sites than the call-site cache's front has slots (256): sites that share a slot
// take it from each other and from the map behind it, and every call keeps its own line, in
// the first pass (misses) and the later ones (hits, front or map), with the GIL held or not.
TEST_F(PreloadTest, PythonCallSitesSharingTheCachesFrontKeepTheirOwnStacks) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  constexpr int kSites = 700, kPasses = 3, kFirstLine = 4;
  fs::path script = base_ / "many_sites.py";
  {
    std::ofstream py(script);
    py << "import ctypes, sys\n"                                                              // 1
          "lib = (ctypes.PyDLL if sys.argv[2] == 'held' else ctypes.CDLL)(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
          "def calls():\n";                                                                  // 3
    for (int i = 0; i < kSites; ++i) py << "    lib.fake_framework_run()\n";                 // 4 ..
    py << "for _ in range(" << kPasses << "):\n"
          "    calls()\n"
          "print(sys.version_info[0] * 100 + sys.version_info[1])\n";
  }
  for (const std::string& python : site_test_pythons())
  for (const char* gil : {"held", "released"}) {
    SCOPED_TRACE(python + " " + gil);
    auto r = run_sites(python, script, gil);
    ASSERT_EQ(r.rc, 0) << r.err;
    const int version = std::atoi(r.out.c_str());
    if (version == 311 || version == 312) {
      unsigned hits = 0, misses = 0;
      ASSERT_TRUE(python_site_counts(r.err, hits, misses)) << r.err;
      // Each site misses once (the first runs check the layout before the cache is used);
      // its later calls hit: 4 NCCL calls a run, kPasses runs a site.
      EXPECT_LE(misses, unsigned(kSites)) << r.err;
      EXPECT_GE(hits, unsigned(kSites * (4 * kPasses - 1) - 40)) << r.err;
      EXPECT_NE(r.err.find(" 0 mismatches"), std::string::npos) << r.err;
    }
    auto files = trace_files();
    ASSERT_EQ(files.size(), 1u);
    auto t = read_trace(files[0].string());
    auto calls = t.of(RecordKind::kNcclCall);
    ASSERT_EQ(calls.size(), size_t(4) * kSites * kPasses);
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto id = calls[i].as<trace::NcclCall>().call.stack_id;
      ASSERT_NE(id, 0u) << "call " << i;
      const auto& frames = t.stacks.at(id);
      ASSERT_GE(frames.size(), 2u) << "call " << i;
      ASSERT_EQ(frames[0].line, uint32_t(kFirstLine + (i / 4) % kSites)) << "call " << i;
      ASSERT_EQ(t.str(frames[0].function_id), "calls") << "call " << i;
    }
  }
}

// A native thread with a Python thread state and no Python frame (PyTorch's autograd device
// threads, which launch the backward kernels): its calls have no Python stack, and the call-site
// cache remembers that, so the GIL is not taken back at every call to find nothing (one miss per
// call site, not one per call).
TEST_F(PreloadTest, ANativeThreadWithAPythonThreadStateIsAKnownSiteWithoutFrames) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  fs::path script = base_ / "native_thread.py";
  {
    std::ofstream py(script);
    py << "import ctypes, sys\n"
          "lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)\n"
          "for _ in range(5):\n"
          "    lib.fake_framework_run()  # from Python first: the frame layout gets checked\n"
          "rc = lib.fake_framework_run_in_native_thread(50)\n"
          "print(sys.version_info[0] * 100 + sys.version_info[1])\n"
          "sys.exit(rc)\n";
  }
  auto r = run("FAKE_NCCL_LOG=/dev/null STREAMRACE_PYTHON_SITES=2 STREAMRACE_STACKS=python",
               "python3 '" + script.string() + "' '" SR_FAKE_FRAMEWORK "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const int version = std::atoi(r.out.c_str());
  if (version == 311 || version == 312) {
    // The native thread's 200 calls come from 4 call sites: 4 misses there (and at most 4 for
    // the main thread's sites once the layout was checked), every other call a hit.
    unsigned hits = 0, misses = 0;
    ASSERT_TRUE(python_site_counts(r.err, hits, misses)) << r.err;
    EXPECT_LE(misses, 8u) << r.err;
    EXPECT_GE(hits, 196u) << r.err;
  }
  auto files = trace_files();
  ASSERT_EQ(files.size(), 1u);
  auto t = read_trace(files[0].string());
  auto calls = t.of(RecordKind::kNcclCall);
  ASSERT_EQ(calls.size(), 4u * 55);
  // The main thread's calls carry their Python line; the native thread's carry no stack.
  for (size_t i = 0; i < calls.size(); ++i) {
    const auto id = calls[i].as<trace::NcclCall>().call.stack_id;
    if (i < 4 * 5) {
      ASSERT_NE(id, 0u) << "call " << i;
      EXPECT_EQ(t.stacks.at(id)[0].line, 4u) << "call " << i;
    } else {
      EXPECT_EQ(id, 0u) << "call " << i;
    }
  }
}

}  // namespace
}  // namespace streamrace::tracer
