// Test support: build a trace with TraceBuilder into a temporary file (through the real
// writer), analyse it with the real reader and analyzer.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "analyzer/analyzer.h"
#include "traceformat/trace_builder.h"

namespace streamrace::testing {

// A fresh directory under the test's temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info ? info->test_suite_name() : "suite") + "." + (info ? info->name() : "test");
    for (char& c : name)
      if (c == '/') c = '_';
    path_ = std::filesystem::temp_directory_path() / ("streamrace-test-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline analysis::AnalysisResult analyze_files(const std::vector<std::string>& paths, analysis::AnalyzerOptions opts = {}) {
  analysis::Analyzer a(opts);
  for (const auto& p : paths) a.add_trace(p);
  return a.finish();
}

// Builds one trace with `program` and analyses it.
inline analysis::AnalysisResult run_program(const std::function<void(trace::TraceBuilder&)>& program,
                                            analysis::AnalyzerOptions opts = {}, int rank = 0) {
  TempDir dir;
  std::string path = dir.file("rank" + std::to_string(rank) + ".srace");
  {
    trace::TraceBuilder b(path, trace::TraceBuilder::default_header(rank));
    program(b);
  }
  return analyze_files({path}, opts);
}

}  // namespace streamrace::testing
