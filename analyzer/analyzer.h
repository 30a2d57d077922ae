// The analyzer's front door: feed it trace files, get findings. Pure CPU, no CUDA headers.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/access_signatures.h"
#include "analyzer/finding.h"
#include "traceformat/call_stream.h"
#include "traceformat/input_file.h"
#include "traceformat/trace_file.h"

namespace streamrace::analysis {

struct AnalyzerOptions {
  // Keep one host clock per thread instead of one host clock ordered by real call order.
  bool separate_host_threads = false;
  // Streams whose creation was not traced are treated as non-blocking (exempt from the
  // legacy default stream's implicit synchronisation) unless this is set.
  bool unknown_streams_blocking = false;
  // A kernel's pointer argument has no extent. By default, when an exact operation (copy,
  // memset, collective) last used a range starting at that very address, the kernel is
  // taken to touch that range (a PyTorch tensor passed to a kernel usually is the tensor a
  // copy or collective used); otherwise, and always with this set, it reaches to the end of
  // its allocation (a caching-allocator segment holding many tensors).
  bool kernel_extent_to_allocation_end = false;
  // Analyse precise-mode traces as the default tier: a patched launch's measured intervals
  // (KernelAccess records) are ignored and its pointer arguments used, as if CUPTI had
  // recorded it. Compares the two event sources on one program, or shows what precise mode added.
  bool ignore_precise = false;
  // By default a kernel's `T const*` parameters (from its demangled C++ signature, when the
  // recorded pointers map onto the pointer parameters one to one) are taken as reads. With
  // this set every pointer argument is "read or write", as for kernels without a signature.
  bool kernel_pointers_unknown_direction = false;
  // Racing call pairs kept per finding and trace (Occurrence::pairs): enough for the timeline
  // reports by default; `replay trace --apply-fix` keeps them all (16 bytes per occurrence) to
  // edit every occurrence in one round.
  size_t racing_pairs_kept = Occurrence::kMaxRacingPairs;
  // add_traces with more jobs than traces splits each trace at least this large (bytes on
  // disk) over jobs / traces workers by allocation (TraceAnalysis, ShadowShard); 0: every
  // trace. Off by default (kNoSplit): each worker repeats ~0.8 of a whole analysis, so a split
  // gains little wall time on idle cores and loses on shared ones (`analyze --split` asks for
  // it, from kSplitMinBytes on: smaller traces cost more in threads than they would gain).
  uint64_t split_min_bytes = kNoSplit;
  static constexpr uint64_t kNoSplit = ~0ull;
  static constexpr uint64_t kSplitMinBytes = 16ull << 20;
  // log2 of the address region whose allocations one worker owns (ShadowShard): tests only.
  uint32_t split_region_shift = 22;  // 4 MiB, ShadowShard's default
  // Called with (bytes read, total bytes) while reading; may be empty.
  std::function<void(uint64_t, uint64_t)> progress;
  // Another consumer of each trace's records, sharing the analysis's decode (`replay trace
  // --apply-fix` indexes the calls it will edit this way): called once per trace, on the
  // thread that analyses it, before its records are read, with the trace's path; null or an
  // empty function: none. The observer sees the main pass only (not precise mode's pre-pass).
  std::function<trace::RecordObserver*(const std::string& path)> observe_records;
  // Learned access signatures to apply (`--signatures FILE`, docs/signatures.md): a default-tier
  // launch whose key one of them trusts takes its intervals as exact accesses. Each trace also
  // learns from its own precise launches, in trace order. Null: none loaded.
  std::shared_ptr<const SignatureBook> signatures;
};

// What one trace contributes to an Analyzer before it is merged with the others' findings:
// made by Analyzer::analyse (from the file) or FedTrace (from records handed in), on any
// thread, and merged with Analyzer::add_outcome.
struct TraceOutcome {
  TraceSummary summary;
  uint64_t graph_launches = 0;
  std::vector<Notice> notices;
  std::vector<Finding> findings;
  SignatureBook learned;
};

class Analyzer {
 public:
  explicit Analyzer(AnalyzerOptions opts = {});
  ~Analyzer();
  // Analyses one trace file. Throws trace::TraceError on unreadable input.
  void add_trace(const std::string& path);
  // Analyses `paths` on up to `jobs` threads (0: the machine's cores) and merges them in the
  // order given, so the result is the same as add_trace on each in turn. The traces of a job
  // are independent (device memory is per process). With fewer traces than jobs, each trace
  // of at least split_min_bytes is itself split over jobs / traces threads, with the same
  // result. `done(i)` is called, one call at a time, as trace i finishes. Throws the error of
  // the first unreadable trace in that order (the options' progress callback is not called
  // when more than one trace is analysed at once).
  void add_traces(const std::vector<std::string>& paths, unsigned jobs,
                  const std::function<void(size_t)>& done = {});
  // One trace analysed on the calling thread, apart from any Analyzer; add_outcome of it
  // gives what add_trace(path) gives. Throws trace::TraceError on unreadable input.
  static TraceOutcome analyse(const std::string& path, const AnalyzerOptions& opts);
  // Merges one trace's outcome as add_trace merges the trace's (in the order of the add calls).
  void add_outcome(TraceOutcome&& o);
  // Adds a result analysed elsewhere (a findings document of one rank or shard, read with
  // result_from_json) as if its traces had been added here: its traces, notices and counts
  // are appended and its findings merged by fingerprint exactly as traces' findings are.
  // Results of the consecutive shards of a trace list, added in shard order, give the same
  // result as the whole list (`streamrace merge`).
  void add_result(AnalysisResult&& r);
  // Merges findings of all traces (same fingerprint = one finding) and returns them.
  AnalysisResult finish();
  // What the traces' precise launches taught, in trace order (not the loaded signatures).
  const SignatureBook& learned_signatures() const;

 private:
  struct Impl;
  // One trace, split over `workers` threads when it is large enough (1: never).
  static TraceOutcome analyze_one(const std::string& path, const AnalyzerOptions& opts, unsigned workers);
  static TraceOutcome analyze_split(const std::string& path, const AnalyzerOptions& opts, unsigned workers);
  void merge(TraceOutcome&& o);
  void merge_findings(std::vector<Finding>&& findings);
  std::unique_ptr<Impl> impl_;
};

// Input that is not a readable trace (the message names the file and what is wrong).
using TraceInputError = trace::TraceError;
// Reading any other input file whole (findings, baselines, suppressions, logs) the same way:
// never blocking on a FIFO or device, refusing what is not a regular file.
using trace::InputFileError;
using trace::open_error_reason;
using trace::open_input_file;
using trace::read_input_file;

// Whether the first bytes of a file are a streamrace trace's.
bool is_trace_head(std::string_view head);

// Expands directories into the *.srace files they and their subdirectories hold (sorted;
// a directory reached twice through links is read once); keeps files as given.
// Throws trace::TraceError for a path that does not exist or a directory with no traces.
std::vector<std::string> expand_trace_inputs(const std::vector<std::string>& inputs);

// Shard `index` of `count` (0 <= index < count) of an expanded trace list: a consecutive
// slice, traces [index * n / count, (index + 1) * n / count), so the shards in index order
// are the list in its order and every trace is in exactly one shard. Shards of a list
// shorter than `count` may be empty.
std::vector<std::string> shard_of(const std::vector<std::string>& paths, uint32_t index, uint32_t count);

}  // namespace streamrace::analysis
