// Traces and helpers for the report tests: a two-rank bucket race (a copy into a buffer on
// the compute stream while an all-reduce on the communication stream still reads it), its
// fixed twin, and a variant whose kernel name and source path carry markup.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "support/trace_test_support.h"
#include "traceformat/trace_builder.h"

namespace streamrace::testing {

enum class BucketVariant { kRacy, kFixed, kHostileNames };

// One rank of the bucket program. Rank 0 carries device timestamps for every op, rank 1
// none, so both timeline sources are exercised.
inline void write_bucket_program(trace::TraceBuilder& b, BucketVariant v, int rank) {
  using trace::NcclOp;
  const bool hostile = v == BucketVariant::kHostileNames;
  const std::string step_py = "/work/proj/train/step.py";
  const std::string bucket_py = hostile ? "/work/proj/train/<script>alert(1)</script>.py" : "/work/proj/train/bucket.py";
  uint64_t compute = b.create_stream();
  uint64_t comm = b.create_stream();
  uint64_t comm_handle = b.comm_init(rank, 2);
  uint64_t grad = b.alloc(1 << 12);
  uint64_t bucket = b.alloc(1 << 12);
  uint64_t reduced = b.alloc(1 << 12);
  uint64_t ready = b.create_event();
  uint64_t done = b.create_event();
  std::vector<uint64_t> corr;
  uint64_t t = 5'000'000;
  auto timed = [&](uint64_t c, uint64_t len) {
    if (rank == 0) b.timing(c, t, t + len);
    t += len + 500;
  };
  b.at(b.stack({{bucket_py, "fill_bucket", 41}, {step_py, "backward", 12}}));
  timed(b.memcpy(compute, bucket, grad, 1 << 12), 2000);
  b.record_event(ready, compute);
  b.at(b.stack({{bucket_py, "flush_bucket", 57}, {step_py, "backward", 14}}));
  b.wait_event(comm, ready);
  timed(b.nccl(NcclOp::kAllReduce, comm, comm_handle, bucket, reduced, 1024), 8000);
  if (v == BucketVariant::kFixed) {
    b.record_event(done, comm);
    b.wait_event(compute, done);
  }
  b.at(b.stack({{bucket_py, "fill_bucket", 41}, {step_py, "backward", 16}}));
  if (hostile)
    timed(b.kernel(compute, "<script>alert('kernel')</script>_fill", {bucket, grad}), 1500);
  else
    timed(b.memcpy(compute, bucket, grad, 1 << 12), 2000);
  b.stream_synchronize(comm);
  b.stream_synchronize(compute);
}

// Writes rank0.srace and rank1.srace into `dir` and returns their paths as given.
inline std::vector<std::string> write_bucket_traces(const std::string& dir, BucketVariant v) {
  std::vector<std::string> paths;
  for (int rank = 0; rank < 2; ++rank) {
    paths.push_back(dir + (dir.empty() ? "" : "/") + "rank" + std::to_string(rank) + ".srace");
    trace::TraceBuilder b(paths.back(), trace::TraceBuilder::default_header(rank));
    write_bucket_program(b, v, rank);
  }
  return paths;
}

// Runs the test inside `dir` (so trace paths in reports are short and stable), restoring
// the working directory afterwards.
class ScopedCwd {
 public:
  explicit ScopedCwd(const std::filesystem::path& dir) : old_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~ScopedCwd() { std::filesystem::current_path(old_); }

 private:
  std::filesystem::path old_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

struct CommandResult {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs a shell command line in `dir`, capturing stdout, stderr and the exit status.
inline CommandResult run_command(const std::string& dir, const std::string& command) {
  std::string out = dir + "/.stdout", err = dir + "/.stderr";
  std::string line = "cd '" + dir + "' && " + command + " >'" + out + "' 2>'" + err + "' </dev/null";
  int raw = std::system(line.c_str());
  CommandResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

// Compares `actual` with tests/report/golden/<name>; STREAMRACE_UPDATE_GOLDEN=1 rewrites it.
inline void expect_golden(const std::string& name, const std::string& actual) {
  std::string path = std::string(STREAMRACE_SOURCE_DIR) + "/tests/report/golden/" + name;
  if (std::getenv("STREAMRACE_UPDATE_GOLDEN")) {
    write_file(path, actual);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run with STREAMRACE_UPDATE_GOLDEN=1";
  std::string expected = read_file(path);
  EXPECT_EQ(expected, actual) << "differs from " << path << " (STREAMRACE_UPDATE_GOLDEN=1 rewrites it)";
}

}  // namespace streamrace::testing
