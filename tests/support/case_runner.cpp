// The case runner: every test case is a program and the full report it must give, side by
// side (TSan's lit tests, Perfetto's diff tests). A case is either
//
//   - a directory of recorded traces (`*.srace`, with a case.json saying how they were
//     recorded) and its `expected[.FLAG...].json|txt`, or
//   - a trace script `NAME.trace` (support/trace_script.h) and its
//     `NAME.expected[.FLAG...].json|txt`;
//
// each FLAG is an `analyze` option (ignore-precise, separate-host-threads, ...) the analysis
// runs with. The runner analyses the program, renders the report with the CLI's writer (json
// or text), makes trace paths relative to the case, and compares it with the expected file
// byte for byte; a mismatch prints a unified diff. STREAMRACE_UPDATE_EXPECTED=1 writes the
// expected files instead (tests/update_expected.sh). The roots to search are compiled in
// (STREAMRACE_CASE_ROOTS: "label=dir|label=dir", registered by each area with
// streamrace_add_cases in tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "report/formats.h"
#include "support/trace_script.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;

struct CaseRun {
  std::string name;        // the test's name: label and path, [A-Za-z0-9_] only
  fs::path program;        // a directory of *.srace, or a .trace script
  std::vector<std::string> flags;
  std::string format;      // "json" or "text"
  fs::path expected;
};

void PrintTo(const CaseRun& c, std::ostream* os) { *os << c.expected.string(); }

std::string test_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// "expected.ignore-precise.json" after the prefix -> flags {"ignore-precise"}, format "json".
bool parse_expected(const std::string& file, const std::string& prefix, std::vector<std::string>& flags,
                    std::string& format) {
  if (file.rfind(prefix + "expected.", 0) != 0) return false;
  std::vector<std::string> parts;
  std::stringstream ss(file.substr(prefix.size()));
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  if (parts.size() < 2) return false;
  const std::string& ext = parts.back();
  if (ext != "json" && ext != "txt") return false;
  format = ext == "json" ? "json" : "text";
  flags.assign(parts.begin() + 1, parts.end() - 1);
  return true;
}

// The runs of one program: one per expected file beside it, or the default run (json, no
// flags) when there is none yet.
void add_runs(std::vector<CaseRun>& out, const std::string& label, const fs::path& root, const fs::path& program,
              const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string base = label + "/" + fs::relative(program, root).string();
  if (program.extension() == ".trace") base = base.substr(0, base.size() - 6);
  size_t before = out.size();
  for (const auto& f : files) {
    CaseRun c;
    if (!parse_expected(f.filename().string(), prefix, c.flags, c.format)) continue;
    c.program = program;
    c.expected = f;
    c.name = base;
    for (const auto& flag : c.flags) c.name += "." + flag;
    if (c.format == "text") c.name += ".text";
    c.name = test_name(c.name);
    out.push_back(c);
  }
  if (out.size() == before)
    out.push_back(CaseRun{test_name(base), program, {}, "json", dir / (prefix + "expected.json")});
}

std::vector<CaseRun> discover() {
  std::vector<CaseRun> out;
  std::stringstream roots(STREAMRACE_CASE_ROOTS);
  for (std::string spec; std::getline(roots, spec, '|');) {
    auto eq = spec.find('=');
    const std::string label = spec.substr(0, eq);
    const fs::path root = spec.substr(eq + 1);
    if (!fs::is_directory(root)) continue;
    std::vector<fs::path> dirs{root};
    for (auto& e : fs::recursive_directory_iterator(root))
      if (e.is_directory()) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& dir : dirs) {
      bool recording = false;
      std::vector<fs::path> scripts;
      for (auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() == ".srace") recording = true;
        if (e.path().extension() == ".trace") scripts.push_back(e.path());
      }
      std::sort(scripts.begin(), scripts.end());
      if (recording) add_runs(out, label, root, dir, dir, "");
      for (const auto& s : scripts) add_runs(out, label, root, s, dir, s.stem().string() + ".");
    }
  }
  return out;
}

analysis::AnalyzerOptions options_for(const std::vector<std::string>& flags) {
  analysis::AnalyzerOptions o;
  for (const auto& f : flags) {
    if (f == "ignore-precise") o.ignore_precise = true;
    else if (f == "separate-host-threads") o.separate_host_threads = true;
    else if (f == "unknown-streams-blocking") o.unknown_streams_blocking = true;
    else if (f == "kernel-extent-to-allocation-end") o.kernel_extent_to_allocation_end = true;
    else if (f == "no-const-pointer-reads") o.kernel_pointers_unknown_direction = true;
    else throw std::invalid_argument("unknown analyze flag '" + f + "' in an expected file's name");
  }
  return o;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `diff -u` of the two texts, or both in full where diff is missing.
std::string unified_diff(const fs::path& expected, const std::string& actual, const fs::path& scratch) {
  const fs::path got = scratch / "actual";
  std::ofstream(got, std::ios::binary) << actual;
  std::string cmd = "diff -u --label '" + expected.string() + "' --label actual '" + expected.string() + "' '" +
                    got.string() + "' 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  if (out.empty()) out = "(diff failed)\n--- actual ---\n" + actual;
  return out;
}

class CaseTest : public ::testing::TestWithParam<CaseRun> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CaseTest);

TEST_P(CaseTest, Report) {
  const CaseRun& c = GetParam();
  const fs::path scratch = fs::temp_directory_path() / ("streamrace-case-" + std::to_string(::getpid()) + "-" + c.name);
  fs::remove_all(scratch);
  fs::create_directories(scratch);

  // The traces, and the directory their paths are shown relative to.
  std::vector<std::string> traces;
  fs::path trace_dir;
  if (c.program.extension() == ".trace") {
    traces = testing::run_trace_script(c.program, scratch);
    trace_dir = scratch;
  } else {
    traces = analysis::expand_trace_inputs({c.program.string()});
    trace_dir = c.program;
  }
  ASSERT_FALSE(traces.empty()) << c.program;

  // The report of one analysis, or (workers > 1) of each trace split over that many workers
  // (`analyze -j`, forced on traces this small, with 64 KiB ownership regions so that the
  // builder's allocations, 64 KiB apart, fall to different workers).
  auto report_of = [&](unsigned workers) {
    analysis::AnalyzerOptions opts = options_for(c.flags);
    opts.split_min_bytes = 0;
    opts.split_region_shift = 16;
    analysis::Analyzer analyzer(opts);
    if (workers == 1)
      for (const auto& t : traces) analyzer.add_trace(t);
    else
      analyzer.add_traces(traces, unsigned(traces.size()) * workers);
    analysis::AnalysisResult result = analyzer.finish();
    std::ostringstream out;
    report::ReportOptions ro;
    report::write_format(c.format, out, result, ro);
    std::string text = out.str();
    replace_all(text, trace_dir.string() + "/", "");
    return text;
  };
  const std::string actual = report_of(1);
  for (unsigned workers : {2u, 3u, 7u}) {
    const std::string split = report_of(workers);
    if (split == actual) continue;
    const fs::path unsplit = scratch / "unsplit";
    std::ofstream(unsplit, std::ios::binary) << actual;
    ADD_FAILURE() << "the report of " << c.program.string() << " split over " << workers
                  << " workers per trace differs from the unsplit one:\n"
                  << unified_diff(unsplit, split, scratch);
  }

  const char* update = std::getenv("STREAMRACE_UPDATE_EXPECTED");
  if (update && std::string(update) == "1") {
    std::ofstream(c.expected, std::ios::binary) << actual;
    std::cout << "updated " << c.expected.string() << "\n";
  } else if (!fs::exists(c.expected)) {
    ADD_FAILURE() << c.expected.string() << " does not exist; write it with tests/update_expected.sh and review it";
  } else {
    const std::string expected = slurp(c.expected);
    if (expected != actual)
      ADD_FAILURE() << "the report of " << c.program.string() << " differs from " << c.expected.string()
                    << " (if the change is intended: tests/update_expected.sh, then review the diff)\n"
                    << unified_diff(c.expected, actual, scratch);
  }
  fs::remove_all(scratch);
}

INSTANTIATE_TEST_SUITE_P(Cases, CaseTest, ::testing::ValuesIn(discover()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace streamrace
