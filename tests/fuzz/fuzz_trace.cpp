// libFuzzer target: one input is one trace file. It goes through the reader (CallStream), the
// analyzer in its option variants, the timeline, the overlap pass and every report writer.
// A TraceError is the expected answer to a bad input; anything else (a crash, a sanitizer
// report, another exception, a hang past -timeout) is a bug.
//
// Built two ways (tests/fuzz/CMakeLists.txt): with clang's -fsanitize=fuzzer as the fuzzer
// (STREAMRACE_FUZZ=ON), and with an ordinary main() that runs the files named on its command
// line once each, so the committed corpus and regression files run in every ctest.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include <nlohmann/json.hpp>

#include "analyzer/overlap_analysis.h"
#include "report/formats.h"
#include "traceformat/trace_file.h"

namespace {

// The input as a file the reader can open by path (a memfd: regular, never on disk).
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("streamrace-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += size_t(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

void analyse(const std::string& path, bool variant) {
  using namespace streamrace;
  analysis::AnalyzerOptions opts;
  opts.separate_host_threads = variant;
  opts.unknown_streams_blocking = variant;
  opts.kernel_extent_to_allocation_end = variant;
  opts.ignore_precise = variant;
  analysis::Analyzer analyzer(opts);
  analyzer.add_trace(path);
  analysis::AnalysisResult result = analyzer.finish();
  analysis::Timeline timeline = analysis::build_timeline({path});
  report::ReportOptions ro;
  ro.trace_paths = {path};
  ro.timeline = &timeline;
  for (const auto& format : report::format_names()) {
    std::ostringstream out;
    report::write_format(format, out, result, ro);
  }
  analysis::OverlapOptions oo;
  std::vector<analysis::RankOverlap> ranks{analysis::analyze_overlap(path, oo)};
  std::ostringstream text;
  analysis::write_overlap_text(text, ranks, oo);
  (void)analysis::overlap_to_json(ranks, oo).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemFile file(data, size);
  for (bool variant : {false, true}) {
    try {
      analyse(file.path(), variant);
    } catch (const streamrace::trace::TraceError&) {
      return 0;  // refused with a message: the expected answer to a bad trace
    }
  }
  return 0;
}

#ifndef STREAMRACE_LIBFUZZER
// Replays files (the corpus, the regression inputs) once each: `fuzz_trace_replay FILE...`.
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << argv[i] << ": cannot open\n";
      return 2;
    }
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    std::cout << "ok " << argv[i] << "\n";
  }
  return 0;
}
#endif
