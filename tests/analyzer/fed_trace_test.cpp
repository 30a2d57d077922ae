// FedTrace (analyzer/fed_trace.h): a trace analysed from the chunks handed to it as they are
// written gives exactly the outcome Analyzer::analyse gives for the file they make: the same
// findings with the same racing pairs, notices and summary, on recorded traces (racy and
// clean) and on one whose calls reach the file out of order, twice and with a seq missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/fed_trace.h"
#include "support/trace_test_support.h"
#include "traceformat/trace_builder.h"
#include "traceformat/trace_file.h"

namespace streamrace {
namespace {

namespace fs = std::filesystem;
namespace tr = streamrace::trace;

// One record as it lies in a chunk of the source file.
struct RawRecord {
  tr::RecordKind kind;
  std::vector<uint8_t> body;
};

// Copies `src` to `dst` chunk for chunk (the records of each chunk through `edit`, in file
// order), handing every chunk written to `fed` as the editor of `replay trace` does.
// Returns the copy's size.
uint64_t copy_feeding(const std::string& src, const std::string& dst, analysis::FedTrace& fed,
                      const std::function<void(std::vector<RawRecord>&)>& edit) {
  tr::TraceReader r(src);
  tr::TraceWriter w(dst, r.header());
  std::vector<RawRecord> records;
  tr::ChunkBuilder chunk;
  for (;;) {
    records.clear();
    if (!r.next_chunk([&](const tr::RecordView& v) { records.push_back({v.kind, {v.body.begin(), v.body.end()}}); }))
      break;
    edit(records);
    for (const auto& rec : records) chunk.add_raw(rec.kind, rec.body.data(), rec.body.size(), nullptr, 0);
    if (chunk.empty()) continue;
    const uint64_t at = w.bytes_written();
    w.write_chunk(chunk);
    fed.chunk(at, chunk.payload(), chunk.records());
    chunk.clear();
  }
  w.close();
  return w.bytes_written();
}

// The parts of an outcome a report shows, and every occurrence's racing pairs (which it does not).
struct Shown {
  nlohmann::json result;
  std::vector<analysis::RacingPairs> pairs;
  bool operator==(const Shown&) const = default;
};

Shown shown(analysis::TraceOutcome&& o) {
  Shown s;
  for (const auto& f : o.findings)
    for (const auto& w : f.where) s.pairs.push_back(w.pairs);
  analysis::Analyzer a;
  a.add_outcome(std::move(o));
  s.result = a.finish();
  return s;
}

analysis::AnalyzerOptions every_pair() {
  analysis::AnalyzerOptions opts;
  opts.racing_pairs_kept = SIZE_MAX;  // as replay's verdicts keep them
  return opts;
}

void expect_same_as_the_file(const std::string& src, const std::string& dst,
                             const std::function<void(std::vector<RawRecord>&)>& edit) {
  const tr::TraceHeader header = tr::TraceReader(src).header();
  ASSERT_TRUE(analysis::FedTrace::supports(header)) << src;
  analysis::FedTrace fed(dst, header, every_pair());
  const uint64_t bytes = copy_feeding(src, dst, fed, edit);
  EXPECT_EQ(bytes, fs::file_size(dst));
  const Shown from_chunks = shown(fed.finish(bytes));
  const Shown from_file = shown(analysis::Analyzer::analyse(dst, every_pair()));
  EXPECT_EQ(from_chunks.result, from_file.result) << src;
  EXPECT_TRUE(from_chunks.pairs == from_file.pairs) << src;
}

TEST(FedTrace, RecordedTracesGiveTheOutcomeOfTheirFiles) {
  testing::TempDir dir;
  std::vector<std::string> traces = analysis::expand_trace_inputs(
      {STREAMRACE_SOURCE_DIR "/samples/traces/deepspeed-0.14.2", STREAMRACE_SOURCE_DIR "/samples/traces/zero1-synthetic",
       STREAMRACE_SOURCE_DIR "/tests/data/deepspeed/z1_0142_patch", STREAMRACE_SOURCE_DIR "/tests/data/deepspeed/z3_0143"});
  size_t racy = 0, clean = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    const std::string copy = dir.file("copy" + std::to_string(i) + ".srace");
    expect_same_as_the_file(traces[i], copy, [](std::vector<RawRecord>&) {});
    (analysis::Analyzer::analyse(copy, every_pair()).findings.empty() ? clean : racy)++;
  }
  // Both kinds are among them: the bundled recording races, the patched DeepSpeed runs do not.
  EXPECT_GT(racy, 0u);
  EXPECT_GT(clean, 0u);
}

TEST(FedTrace, CallsOutOfOrderTwiceAndMissingGiveTheOutcomeOfTheirFile) {
  testing::TempDir dir;
  const std::string src = dir.file("src.srace");
  {
    // Small chunks, so that calls can be moved across chunk boundaries.
    tr::TraceBuilder b(src, tr::TraceBuilder::default_header(0), {}, 512);
    const uint64_t s1 = b.create_stream(), s2 = b.create_stream();
    for (int i = 0; i < 40; ++i) {
      const uint64_t a = b.alloc(4096), c = b.alloc(4096);
      b.at("loop.py", 10, "produce");
      b.memset(s1, a, 4096);
      b.at("loop.py", 20, "consume");
      b.memcpy(s2, c, a, 4096);
    }
    b.finish();
  }
  // Within each chunk: the first two calls swapped (they wait for their seq), the third
  // repeated (a duplicate), and in the fourth chunk one call left out (a seq gap).
  int chunk = 0;
  expect_same_as_the_file(src, dir.file("shuffled.srace"), [&](std::vector<RawRecord>& records) {
    std::vector<size_t> calls;
    for (size_t i = 0; i < records.size(); ++i)
      if (tr::has_call_info(records[i].kind) && tr::record_fixed_size(records[i].kind) != 0) calls.push_back(i);
    if (calls.size() >= 3) {
      std::swap(records[calls[0]], records[calls[1]]);
      records.insert(records.begin() + long(calls[2]) + 1, records[calls[2]]);
    }
    if (++chunk == 4 && !calls.empty()) records.erase(records.begin() + long(calls.back()));
  });
  // The edits did what they meant to: the file's own analysis warns of both.
  const auto analysed = analysis::Analyzer::analyse(dir.file("shuffled.srace"), every_pair());
  EXPECT_EQ(analysed.summary.missing_records, 1u);  // the call left out: the verdict is partial
  const auto& notices = analysed.notices;
  std::string text;
  for (const auto& n : notices) text += n.text + "\n";
  EXPECT_NE(text.find("missing from the sequence"), std::string::npos) << text;
  EXPECT_NE(text.find("repeat a sequence number"), std::string::npos) << text;
}

TEST(FedTrace, APreciseModeTraceIsReadFromItsFile) {
  tr::TraceHeader h = tr::TraceBuilder::default_header(0);
  h.mode = "precise";
  EXPECT_FALSE(analysis::FedTrace::supports(h));
  EXPECT_THROW(analysis::FedTrace("x.srace", h, {}), std::invalid_argument);
}

}  // namespace
}  // namespace streamrace
