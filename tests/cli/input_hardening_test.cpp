// Issue #13 through the built binary: every hostile input class exits 2 with its exact
// message (or, for outputs, leaves a symlink's target untouched); inputs that used to crash
// or hang finish quickly.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "cli/hostile_inputs.h"
#include "report/report_test_support.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
namespace hostile = testing::hostile;
using testing::CommandResult;
using trace::RecordKind;

class InputHardening : public ::testing::Test {
 protected:
  CommandResult sr(const std::string& args) {
    return testing::run_command(dir_.path().string(), std::string(STREAMRACE_BIN) + " " + args);
  }
  std::string file(const std::string& name) const { return dir_.file(name); }
  // `streamrace ARGS` exits 2 and says exactly `message` (one line) on stderr.
  void expect_refused(const std::string& args, const std::string& message) {
    auto r = sr(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err, message + "\n") << args;
  }
  void make_racy_trace(const std::string& name) {
    trace::TraceBuilder b(file(name), trace::TraceBuilder::default_header(0));
    uint64_t s1 = b.create_stream(), s2 = b.create_stream();
    uint64_t p = b.alloc(4096);
    b.memset(s1, p, 4096);
    b.memset(s2, p, 4096);
    b.finish();
  }
  testing::TempDir dir_;
};

// --- crashes --------------------------------------------------------------------------

TEST_F(InputHardening, ShortStringAndNoticeBodiesExitTwo) {
  for (auto [kind, name] : {std::pair{RecordKind::kStringDef, "StringDef"}, std::pair{RecordKind::kNotice, "Notice"}}) {
    fs::remove(file("t.srace"));
    hostile::write_chunks(file("t.srace"), {hostile::short_record(kind, 2)});
    uint64_t at = hostile::only_chunk_offset(fs::file_size(file("t.srace")), 4 + 2);
    expect_refused("analyze t.srace", "streamrace analyze: error: t.srace: chunk at offset " + std::to_string(at) + ": " +
                                          name + " record: body of 2 bytes is shorter than the 4 bytes of its fixed part");
  }
}

// --signatures FILE (docs/signatures.md): a file that is not one is refused before any analysis.
TEST_F(InputHardening, ABadSignatureFileExitsTwo) {
  make_racy_trace("t.srace");
  { std::ofstream(file("bad.json")) << "{\"format\": \"streamrace-signatures\", \"version\": 9}"; }
  expect_refused("analyze t.srace --signatures bad.json",
                 "streamrace analyze: error: bad.json: not a signature file: \"version\" is not 1 or 2 (this "
                 "streamrace reads versions 1 and 2)");
  auto r = sr("analyze t.srace --signatures missing.json");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.rfind("streamrace analyze: error: missing.json: ", 0), 0u) << r.err;
  // `run` refuses it before running the command (which would leave a mark).
  expect_refused("run --signatures bad.json -o out -- touch ran",
                 "streamrace run: error: bad.json: not a signature file: \"version\" is not 1 or 2 (this streamrace "
                 "reads versions 1 and 2)");
  EXPECT_FALSE(fs::exists(file("ran")));
}

TEST_F(InputHardening, MalformedCaptureMarkExitsTwo) {
  hostile::write_chunks(file("t.srace"), {hostile::capture_mark(7)});
  uint64_t at = hostile::only_chunk_offset(fs::file_size(file("t.srace")), 4 + sizeof(trace::CaptureMark));
  expect_refused("analyze t.srace", "streamrace analyze: error: t.srace: chunk at offset " + std::to_string(at) +
                                        ": CaptureMark record: action 7 is not one of 1 (step), 2 (window open), 3 "
                                        "(state end), 4 (window close)");
  fs::remove(file("t.srace"));
  hostile::write_chunks(file("t.srace"), {hostile::short_record(RecordKind::kCaptureMark, 40)});
  at = hostile::only_chunk_offset(fs::file_size(file("t.srace")), 4 + 40);
  expect_refused("check t.srace", "streamrace check: error: t.srace: chunk at offset " + std::to_string(at) +
                                      ": CaptureMark record: body of 40 bytes is shorter than the 64 bytes of its fixed "
                                      "part");
}

TEST_F(InputHardening, SixByteStackRecordExitsTwo) {
  hostile::write_chunks(file("t.srace"), {hostile::short_record(RecordKind::kStackDef, 6)});
  uint64_t at = hostile::only_chunk_offset(fs::file_size(file("t.srace")), 4 + 6);
  expect_refused("check t.srace", "streamrace check: error: t.srace: chunk at offset " + std::to_string(at) +
                                      ": StackDef record: body of 6 bytes is shorter than the 8 bytes of its fixed part");
}

TEST_F(InputHardening, LargestStringIdCostsAnEntryLargerIsRefused) {
  hostile::string_def(file("t.srace"), 0x3FFF'FFFFu);
  auto r = sr("analyze t.srace -f json -o out.json");
  EXPECT_EQ(r.status, 0) << r.err;
  hostile::string_def(file("u.srace"), 0x4000'0000u);
  uint64_t at = hostile::only_chunk_offset(fs::file_size(file("u.srace")), 4 + 4 + 3);
  expect_refused("analyze u.srace", "streamrace analyze: error: u.srace: chunk at offset " + std::to_string(at) +
                                        ": StringDef record: string id 0x40000000 exceeds the limit 0x3fffffff");
}

TEST_F(InputHardening, KernelNameIdNearTheTopIsRefused) {
  hostile::kernel_name_id(file("t.srace"), 0xFFFF'FFF0u);
  auto r = sr("analyze t.srace");
  EXPECT_EQ(r.status, 2) << r.err;
  const uint64_t first_chunk = hostile::header_bytes(testing::read_file(file("t.srace")));
  EXPECT_EQ(r.err, "streamrace analyze: error: t.srace: chunk at offset " + std::to_string(first_chunk) +
                       ": KernelLaunch record: kernel name id 0xfffffff0 exceeds the limit 0x3fffffff\n");
  hostile::kernel_name_id(file("u.srace"), 0x3FFF'FFF0u);
  EXPECT_LE(sr("analyze u.srace").status, 1);
}

TEST_F(InputHardening, LoopingSymlinkInADirectoryExitsTwo) {
  fs::create_directories(file("d"));
  make_racy_trace("d/a.srace");
  fs::create_symlink("x.srace", file("d/x.srace"));
  expect_refused("analyze d", "streamrace analyze: error: d/x.srace: cannot open: symbolic link loop (too many levels "
                              "of symbolic links)");
  expect_refused("check d/x.srace",
                 "streamrace check: error: d/x.srace: symbolic link loop (too many levels of symbolic links)");
}

TEST_F(InputHardening, BaselineWithWrongTypesExitsTwo) {
  make_racy_trace("t.srace");
  testing::write_file(file("b1.json"), R"({"schema":1})");
  expect_refused("check t.srace --baseline b1.json",
                 "streamrace check: error: b1.json: not a streamrace baseline (expected \"schema\": \"streamrace-baseline\")");
  testing::write_file(file("b2.json"), R"({"schema":"streamrace-baseline","version":"1","findings":[]})");
  expect_refused("check t.srace --baseline b2.json", "streamrace check: error: b2.json: unsupported baseline version \"1\"");
}

// --- hangs and memory ------------------------------------------------------------------

template <typename F>
double seconds(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(InputHardening, ZstdChunkClaimingTooMuchIsRefused) {
  hostile::zstd_bomb(file("t.srace"), 2);
  auto r = sr("analyze t.srace");
  EXPECT_EQ(r.status, 2);
  const uint64_t first_chunk = hostile::header_bytes(testing::read_file(file("t.srace")));
  const std::string want = "streamrace analyze: error: t.srace: offset " + std::to_string(first_chunk) +
                           ": chunk raw size 67108864 is more than 256 times its stored size ";
  EXPECT_EQ(r.err.substr(0, want.size()), want) << r.err;
  EXPECT_NE(r.err.find(" (the format's limit)\n"), std::string::npos) << r.err;
}

TEST_F(InputHardening, HugeAllocationAndMemsetTakeWorkPerAccessNotPerByte) {
  hostile::huge_lengths(file("t.srace"));
  CommandResult r;
  double t = seconds([&] { r = sr("analyze t.srace -f json -o out.json"); });
  EXPECT_EQ(r.status, 1) << r.err;  // the two streams' memsets race
  EXPECT_LT(t, 10.0);
}

TEST_F(InputHardening, FortyThousandStreamsAreRefusedAtTheLimit) {
  hostile::many_streams(file("t.srace"), 40000);
  CommandResult r;
  double t = seconds([&] { r = sr("analyze t.srace"); });
  EXPECT_EQ(r.status, 2);
  const uint64_t first_chunk = hostile::header_bytes(testing::read_file(file("t.srace")));
  EXPECT_EQ(r.err, "streamrace analyze: error: t.srace: chunk at offset " + std::to_string(first_chunk) +
                       ": stream 0x2000 is one more than the 4096 streams one trace may use (the analyzer's limit)\n");
  EXPECT_LT(t, 5.0);
}

TEST_F(InputHardening, StreamsUpToTheLimitThatAllMeetStayFast) {
  // A device synchronisation, then work on every stream: every clock holds every slot.
  hostile::many_streams(file("t.srace"), 4000);
  CommandResult r;
  double t = seconds([&] { r = sr("analyze t.srace"); });
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_LT(t, 10.0);
}

TEST_F(InputHardening, FifoAsTraceOrBaselineIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(file("t.srace").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(file("base.json").c_str(), 0600), 0);
  expect_refused("analyze t.srace", "streamrace analyze: error: t.srace: is a FIFO (named pipe), not a regular file");
  expect_refused("check t.srace", "streamrace check: error: t.srace: is a FIFO (named pipe), not a regular file");
  make_racy_trace("r.srace");
  expect_refused("check r.srace --baseline base.json",
                 "streamrace check: error: base.json: is a FIFO (named pipe), not a regular file (the baseline file)");
  expect_refused("check r.srace --suppressions base.json",
                 "streamrace check: error: base.json: is a FIFO (named pipe), not a regular file (the suppressions file)");
}

// --- unsafe outputs --------------------------------------------------------------------

class UnsafeOutputs : public InputHardening {
 protected:
  void SetUp() override {
    make_racy_trace("t.srace");
    testing::write_file(file("precious"), "keep me\n");
    fs::create_symlink("precious", file("link"));
    fs::create_symlink("nothere", file("dangling"));
  }
  void expect_untouched() {
    EXPECT_EQ(testing::read_file(file("precious")), "keep me\n");
    EXPECT_FALSE(fs::exists(file("nothere")));
    EXPECT_TRUE(fs::is_symlink(file("link")));
  }
  std::string refusal(const std::string& cmd, const std::string& link, const std::string& to) {
    return "streamrace " + cmd + ": error: " + link + ": is a symbolic link (to " + to +
           "); refusing to write the output through it (--force-output writes to what it points to)";
  }
};

TEST_F(UnsafeOutputs, AnalyzeRefusesSymlinkedOutputs) {
  auto r = sr("analyze t.srace --format html=link");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, refusal("analyze", "link", "precious") + "\n");
  r = sr("analyze t.srace -o link");
  EXPECT_EQ(r.err, refusal("analyze", "link", "precious") + "\n");
  r = sr("analyze t.srace -f json -o dangling");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, refusal("analyze", "dangling", "nothere") + "\n");
  expect_untouched();
}

TEST_F(UnsafeOutputs, CheckRefusesSymlinkedReportsAndBaseline) {
  for (const char* f : {"json", "sarif", "junit", "perfetto", "html", "text"}) {
    auto r = sr(std::string("check t.srace --format ") + f + "=link");
    EXPECT_EQ(r.status, 2) << f;
    EXPECT_EQ(r.err, refusal("check", "link", "precious") + "\n") << f;
  }
  auto r = sr("check t.srace --baseline link --update-baseline");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, refusal("check", "link", "precious") + "\n");
  r = sr("check t.srace --baseline dangling --update-baseline");
  EXPECT_EQ(r.err, refusal("check", "dangling", "nothere") + "\n");
  expect_untouched();
}

TEST_F(UnsafeOutputs, ForceOutputWritesTheLinkTargetByRename) {
  auto r = sr("analyze t.srace -f json -o link --force-output");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(testing::read_file(file("precious")).substr(0, 1), "{");
  EXPECT_TRUE(fs::is_symlink(file("link")));
}

TEST_F(UnsafeOutputs, ReportReplacesAFileAtomically) {
  auto r = sr("analyze t.srace -f json -o out.json");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(testing::read_file(file("out.json")).substr(0, 1), "{");
  for (const auto& e : fs::directory_iterator(dir_.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();  // no temporary left
}

TEST_F(UnsafeOutputs, RunRefusesASymlinkedOutputDirectory) {
  fs::create_directories(file("real"));
  fs::create_directory_symlink("real", file("dirlink"));
  auto r = sr("run -o dirlink -- /bin/true");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "streamrace run: error: -o dirlink: is a symbolic link (to real); refusing to write traces through "
                   "it (--force-output writes to what it points to)\n");
  r = sr("run -o dirlink/ -- /bin/true");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(fs::is_empty(file("real")));
}

// --- silent passes ---------------------------------------------------------------------

TEST_F(InputHardening, GarbageInputIsRefusedNotPassed) {
  testing::write_file(file("garbage.json"), "this is not json\n");
  expect_refused("check garbage.json",
                 "streamrace check: error: garbage.json: not a streamrace trace, findings JSON or CUDA-sanitizer log (no "
                 "CSAN report, and no line showing the CUDA sanitizer ran: TORCH_CUDA_SANITIZER, \"CUDA sanitizer\" or "
                 "torch/cuda/_sanitizer.py)");
  testing::write_file(file("clean.log"), "TORCH_CUDA_SANITIZER=1 python train.py\nstep 1 loss 2.0\n");
  auto r = sr("check clean.log");
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(InputHardening, TraceCutInsideItsFirstChunkHasNoVerdict) {
  std::string bytes = hostile::small_trace_bytes(file("whole.srace"));
  uint64_t header = hostile::header_bytes(bytes);
  hostile::write_bytes(file("t.srace"), bytes.substr(0, header + 30));
  expect_refused("analyze t.srace", "streamrace analyze: error: t.srace: holds no whole chunk of records (the file ends "
                                    "at offset " + std::to_string(header + 30) + ", inside its first chunk): no verdict");
  expect_refused("check t.srace", "streamrace check: error: t.srace: holds no whole chunk of records (the file ends at "
                                  "offset " + std::to_string(header + 30) + ", inside its first chunk): no verdict");
  hostile::write_bytes(file("h.srace"), bytes.substr(0, header));
  expect_refused("analyze h.srace", "streamrace analyze: error: h.srace: holds no whole chunk of records (the file ends "
                                    "at offset " + std::to_string(header) + ", after its header): no verdict");
}

TEST_F(InputHardening, DirectoryAsSuppressionsFileIsRefused) {
  make_racy_trace("t.srace");
  fs::create_directories(file("sup"));
  expect_refused("check t.srace --suppressions sup",
                 "streamrace check: error: sup: is a directory, not a regular file (the suppressions file)");
}

// --- misleading messages ---------------------------------------------------------------

TEST_F(InputHardening, FileEndingInsideItsHeaderSaysSo) {
  std::string bytes = hostile::small_trace_bytes(file("whole.srace"));
  hostile::write_bytes(file("t.srace"), bytes.substr(0, 100));
  uint64_t header = hostile::header_bytes(bytes);
  expect_refused("analyze t.srace", "streamrace analyze: error: t.srace: offset 100: file ends inside the header (its " +
                                        std::to_string(header) + " bytes; the file has 100)");
}

TEST_F(InputHardening, SymlinkLoopIsNamedAsOne) {
  fs::create_symlink("loop.srace", file("loop.srace"));
  expect_refused("analyze loop.srace",
                 "streamrace analyze: error: loop.srace: symbolic link loop (too many levels of symbolic links)");
}

TEST_F(InputHardening, BaselineThatIsADirectoryIsNamed) {
  make_racy_trace("t.srace");
  fs::create_directories(file("base"));
  expect_refused("check t.srace --baseline base",
                 "streamrace check: error: base: is a directory, not a regular file (the baseline file)");
}

}  // namespace
}  // namespace streamrace
