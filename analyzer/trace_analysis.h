// TraceAnalysis: one trace file through the happens-before engine and the shadow memory.
// Puts records back in call order, turns each operation into byte-range accesses, and
// gathers conflicts into findings (one per distinct pair of sites).
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/address_length_map.h"
#include "analyzer/allocator_blocks.h"
#include "analyzer/graph_captures.h"
#include "analyzer/analyzer.h"
#include "analyzer/happens_before.h"
#include "analyzer/shadow_memory.h"
#include "traceformat/call_stream.h"

namespace streamrace::analysis {

class TraceAnalysis {
 public:
  // With a shard of more than one worker, this is one worker of a split analysis of the trace
  // (`analyze -j` on one large trace): it replays every record's happens-before steps but
  // checks accesses only in the allocations it owns (ShadowShard), and logs its findings'
  // occurrences so that merge_workers can put them in the order one analysis meets them.
  TraceAnalysis(std::string path, const AnalyzerOptions& opts, ShadowShard shard = {});
  // Reads and analyses the whole file. Throws trace::TraceError on unreadable input, and
  // ShardSplitUnsupported when the split cannot give the unsplit result.
  void run();
  // The same analysis of a stream driven from outside (records handed in as a trace is
  // written, analyzer/fed_trace.h): begin() before its first record, record() for each record
  // it hands out, end() once it has handed out the last. Not for precise-mode traces, whose
  // pre-pass reads the file before the main pass (std::invalid_argument).
  void begin(const trace::CallStream& stream);
  void record(const trace::RecordView& r) { dispatch(r); }
  void end(trace::CallStream& stream);
  // On worker 0, after every worker's run(): makes this worker's findings exactly those of
  // one unsplit analysis of the trace (the rest of its state already is).
  void merge_workers(const std::vector<const TraceAnalysis*>& workers);
  // Findings of this trace (fingerprinted, stacks resolved), notices and summary.
  std::vector<Finding> findings() const;
  // The same, moving the racing pairs into the findings instead of copying them (the
  // analysis keeps none after).
  std::vector<Finding> take_findings();
  const std::vector<Notice>& notices() const { return notices_; }
  const TraceSummary& summary() const { return summary_; }
  // Graph launches not analysed (their graph is unknown or holds work the trace cannot show).
  uint64_t graph_launches() const { return unanalysed_launches_; }
  // The access signatures this trace's precise launches taught (analyzer/access_signatures.h).
  const SignatureBook& learned_signatures() const { return observed_; }

 private:
  struct PendingFinding {
    RaceKind kind;
    Confidence confidence;
    AccessEpoch earlier, later;
    uint64_t earlier_stream, later_stream;
    std::string earlier_label, later_label;
    uint64_t overlap_lo, overlap_hi;
    uint64_t alloc_base, alloc_bytes;
    uint8_t alloc_kind;
    uint32_t seen_clock;  // the later stream's knowledge of the earlier stream's clock
    uint64_t count = 0;
    uint64_t first_seq = 0, last_seq = 0;
    bool same_launch = false;   // both are nodes of one CUDA graph launch
    bool has_released = false;  // kUseAfterReuse: the earlier tensor's release
    ReleasedBlock released;
    RacingPairs pairs;  // the first Occurrence::kMaxRacingPairs
  };
  // Identity of a finding inside one trace: both sites and the shape of the conflict.
  struct SiteKey {
    uint32_t earlier_stack, earlier_name, later_stack, later_name, shape;
    bool operator==(const SiteKey&) const = default;
  };
  struct SiteKeyHash {
    size_t operator()(const SiteKey& k) const {
      uint64_t h = k.earlier_stack;
      for (uint32_t v : {k.earlier_name, k.later_stack, k.later_name, k.shape}) h = h * 0x9E3779B97F4A7C15ull + v;
      return size_t(h ^ (h >> 29));
    }
  };
  // A split worker's record of one occurrence: the access it belongs to (access_number_,
  // the same in every worker), and either a finding of this worker
  // (`index` into pending_) or, for an access that reaches allocations of several workers,
  // a conflict held back (`index` into held_): which of those conflicts count is decided
  // only once all workers' conflicts of the access are together.
  struct LoggedOccurrence {
    uint64_t access;
    uint32_t index;
    bool held;
    uint64_t later_when, earlier_when;
  };
  struct HeldConflict {
    Conflict conflict;  // its `piece` orders it among the access's conflicts
    SiteKey key;
    PendingFinding first;  // the finding, should this be its first occurrence
  };
  // How a conflict of access `a` is classified: its finding's kind, confidence and key.
  struct Classified {
    RaceKind kind;
    Confidence confidence;
    const LiveBlock* block;
    bool reuse;
    SiteKey key;
  };

  void collect_precise_accesses();
  // The trace records no CUDA calls (its capture status, from the header or a later notice).
  void blind(const std::string& status);
  // run()'s and begin()/end()'s parts: the header's facts before the first record; the
  // stream's stats, warnings and the notices once it is read (observer->end() among them).
  void start(const trace::CallStream& stream);
  void finish(trace::CallStream& stream, trace::RecordObserver* observer);
  void dispatch(const trace::RecordView& r);
  void on_memcpy(const trace::Memcpy& m);
  void on_memset(const trace::Memset& m);
  void on_kernel(const trace::KernelLaunchHead& k, std::span<const uint8_t> tail);
  bool read_call_ranges(const trace::KernelLaunchHead& k, std::span<const uint8_t> tail);
  void on_nccl(const trace::NcclCall& n);
  void on_group_end(const trace::NcclGroupEnd& g);
  void on_alloc(const trace::Alloc& a);
  // --host-accesses: a host access caught on a guarded page, against the async copies whose
  // pinned host side it touches and that the host has not been ordered after.
  void on_host_access(const trace::HostAccess& h);
  void remember_host_side(const AccessEpoch& copy, uint64_t stream, uint64_t addr, uint64_t bytes, bool device_writes);
  void on_free(const trace::Free& f);
  // Applies one op's accesses on its (already begun) stream and collects findings.
  void apply(StreamState& s, std::vector<AccessEpoch>& accesses);
  void apply_one(StreamState& s, const AccessEpoch& a);
  // Keeps, per earlier stream, the conflict that matters for a fix (sorted by stream).
  static void keep_one_per_stream(std::vector<Conflict>& conflicts);
  Classified classify(const AccessEpoch& a, const Conflict& c) const;
  PendingFinding first_occurrence(const StreamState& s, const AccessEpoch& a, const Conflict& c,
                                  const Classified& k);
  // Counts an occurrence of pending_[index] (and logs it in a split worker).
  void count_occurrence(size_t index, uint64_t later_when, uint64_t earlier_when);
  void nccl_accesses(const trace::NcclCall& n, const AccessEpoch& proto, std::vector<AccessEpoch>& out) const;
  AccessEpoch epoch_for(const trace::CallInfo& c, const StreamState& s, OpKind op, uint32_t name_id) const;
  // cudaGraphLaunch of a graph made by stream capture: its nodes run on one virtual stream per
  // capture branch, after what precedes the launch on its stream (and the exec's previous
  // launch); what follows on that stream runs after all of them.
  void on_graph_launch(const trace::GraphLaunch& g);
  // cudaGraphLaunch of a graph built with the explicit API: each node runs on its branch's
  // virtual stream after its dependencies; the same entry and exit rules as a captured graph.
  void on_built_graph_launch(const trace::GraphLaunch& g, StreamState& s, const GraphCaptures::Exec& ex);
  void replay_work(trace::RecordKind kind, const std::vector<uint8_t>& body, uint64_t stream, uint32_t thread);
  void replay_node(const CapturedNode& node, uint64_t stream, uint32_t thread,
                   std::unordered_map<uint64_t, VectorClock>& events);
  // When an access ran, in call order: a graph node's launch, else its own call.
  uint64_t when(const AccessEpoch& a) const { return a.launch ? launches_[a.launch - 1].seq : a.seq; }
  // findings() and take_findings(): `take` is pending_ when the pairs are moved out.
  std::vector<Finding> make_findings(std::vector<PendingFinding>* take) const;
  Access make_access(const AccessEpoch& e, uint64_t stream, const std::string& label,
                     const PendingFinding& pf) const;
  std::vector<Frame> resolve_stack(uint32_t id) const;
  const std::string& str(uint32_t id) const;
  void note_measured(uint32_t name_id);  // summary_.measured_kernels
  // The measured intervals of the kernel node being run with this name (KernelNodeAccess),
  // or nullptr: by the node's handle, else by the name when the launch's graph has one kernel
  // node with it.
  const std::vector<trace::KernelAccess>* node_measurement(uint32_t name_id) const;
  // Applies one measured interval of a launch whose pointer arguments are `ptrs` (tail words).
  // Returns false when part of it was taken as a hull (see the definition).
  bool apply_measured(StreamState& s, const AccessEpoch& base, const trace::KernelAccess& ka,
                      std::span<const uint8_t> ptrs, size_t nptrs);
  // At a graph launch with this correlation: counts the kernel names of its nodes (each node's
  // work kind and body by `work`) if any of its nodes was measured.
  template <typename Node, typename Work>
  void begin_node_measurements(uint64_t correlation, const std::vector<Node>& nodes, Work work) {
    current_graph_correlation_ = correlation;
    current_kernel_names_.clear();
    if (node_by_name_.empty()) return;
    auto it = node_by_name_.lower_bound({correlation, 0});
    if (it == node_by_name_.end() || it->first.first != correlation) return;
    for (const Node& n : nodes) {
      const auto [kind, body] = work(n);
      if (kind != trace::RecordKind::kKernelLaunch || body->size() < sizeof(trace::KernelLaunchHead)) continue;
      trace::KernelLaunchHead k;
      std::memcpy(&k, body->data(), sizeof k);
      ++current_kernel_names_[k.name_id];
    }
  }

  std::string path_;
  AnalyzerOptions opts_;
  HappensBefore hb_;
  ShadowMemory shadow_;
  AllocatorBlocks blocks_;
  // The trace's strings and stacks: the stream's while it runs, then kept for findings().
  trace::TraceDictionary owned_dict_;
  const trace::TraceDictionary* dict_ = &owned_dict_;
  std::vector<trace::NcclCall> group_ops_;
  // Precise tier: each launch's measured intervals, by correlation id.
  std::unordered_map<uint64_t, std::vector<trace::KernelAccess>> precise_;
  // ... and each kernel node's of a graph launch, by {the launch's correlation, node handle};
  // by {correlation, name id}: the node measured with that name, 0 when several were.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<trace::KernelAccess>> node_precise_;
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> node_by_name_;
  // While a graph launch runs its nodes: its correlation, the node's handle (0: not known, as
  // for captured graphs), and how many kernel nodes of each name id the graph holds (only
  // when the launch has measured nodes).
  uint64_t current_graph_correlation_ = 0, current_node_handle_ = 0;
  std::unordered_map<uint32_t, uint32_t> current_kernel_names_;
  // Length of the latest exact access starting at each address (kernel extents, see
  // AnalyzerOptions): the caching allocator reuses addresses, so the latest use counts.
  AddressLengthMap exact_extent_;
  // Per kernel name id: for the pointer count last seen with it, which recorded pointers are
  // `T const*` parameters (empty: the signature does not tell). Name ids are dense.
  struct ReadOnlyEntry {
    uint32_t nptrs_plus1 = 0;  // 0 = not looked at yet
    std::vector<bool> read_only;
  };
  static constexpr uint32_t kDenseNameIds = 1u << 16;
  std::vector<ReadOnlyEntry> read_only_cache_;
  std::unordered_map<uint32_t, ReadOnlyEntry> read_only_sparse_;
  std::vector<PendingFinding> pending_;
  std::vector<SiteKey> pending_keys_;  // pending_'s keys, in step with it
  ShadowShard shard_;
  bool split() const { return shard_.count > 1; }
  std::vector<LoggedOccurrence> log_;  // split workers only
  std::vector<HeldConflict> held_;
  // Each access the trace could make (every kernel pointer, every side of a copy, ...) in
  // the order met, numbered alike in every worker: a split worker skips pointers into other
  // workers' allocations without looking them up, so summary_.accesses cannot number them.
  uint64_t access_number_ = 0;
  uint64_t pointer_accesses_ = 0;  // kernel pointer accesses checked here (a split worker's share)
  // Async copies with a pinned host side, until the host is ordered after them: the host
  // bytes, whether the copy writes them (device to host) or reads them, and the copy's epoch.
  struct HostSide {
    uint64_t lo, hi;
    bool device_writes;
    uint64_t stream;
    AccessEpoch copy;
  };
  std::vector<HostSide> host_sides_;
  static constexpr size_t kMaxHostSides = 8192;  // in flight at once; oldest dropped beyond (with a notice)
  uint64_t host_sides_dropped_ = 0;
  std::unordered_map<SiteKey, size_t, SiteKeyHash> pending_index_;
  std::vector<Conflict> conflicts_;
  std::vector<AccessEpoch> scratch_;
  std::vector<Notice> notices_;
  TraceSummary summary_;
  std::vector<bool> measured_name_ids_;  // precise tier: name ids with a measured launch
  GraphCaptures captures_;
  struct LaunchSite {
    uint64_t seq, graph_exec, stream;
    uint32_t stack_id, api_id, thread;
    bool built = false;  // a graph built with the explicit API (not captured)
  };
  std::vector<LaunchSite> launches_;  // analysed graph launches, in call order
  std::vector<std::string> launch_labels_;  // their streams' labels
  uint32_t current_launch_ = 0;       // 1 + index in launches_ while its nodes run; 0 otherwise
  struct ExecRun {
    std::vector<uint64_t> branches;  // virtual stream per capture branch
    VectorClock end;                 // all nodes of the previous launch
  };
  std::unordered_map<uint32_t, ExecRun> exec_runs_;  // by GraphCaptures::Exec::id
  uint64_t next_virtual_stream_ = 0;
  // Capture windows and ring mode: what the CaptureMark records said (one notice at the end).
  uint64_t capture_opens_ = 0, capture_steps_dropped_ = 0, capture_calls_left_out_ = 0;
  uint64_t capture_first_step_ = ~0ull;
  uint8_t capture_reason_ = 0;
  uint64_t unanalysed_launches_ = 0, unnamed_captured_ops_ = 0, precise_graph_kernels_ = 0;
  uint64_t precise_unmeasured_pointers_ = 0, precise_unmeasured_launches_ = 0;
  std::vector<uint32_t> precise_unmeasured_kernels_;  // name ids, the first few
  std::vector<uint8_t> unmeasured_;  // per pointer of the precise launch being analysed
  std::vector<trace::KernelAccess> call_ranges_;  // the cuBLAS call's ranges of the launch being analysed
  uint64_t measured_hulls_ = 0;       // measured intervals that spanned tensors the launch had no pointer to
  uint64_t call_range_launches_ = 0;  // launches whose accesses came from their cuBLAS call's arguments
  uint64_t call_range_unread_ = 0;    // launches flagged with call ranges whose list could not be read
  // Learned access signatures: the loaded ones and this trace's so far (book_), this trace's
  // alone (observed_); launches that took their accesses from one, launches learnt from.
  SignatureBook book_, observed_;
  uint64_t signature_launches_ = 0, learned_launches_ = 0;
  uint64_t hashed_launches_[3] = {};  // default-tier launches with an arguments' hash, by ArgsHashKind
  std::vector<SignatureInterval> learning_;
  // A precise launch whose whole measurement is exact: its intervals, relative to its pointers.
  void learn_signature(const trace::KernelLaunchHead& k, std::span<const uint8_t> tail,
                       const trace::KernelAccess* measured, size_t measured_n);
  // A default-tier launch with a trusted signature: its exact accesses; false if none applies.
  bool apply_signature(StreamState& s, const trace::KernelLaunchHead& k, std::span<const uint8_t> tail,
                       const AccessEpoch& base);
  std::map<std::string, uint64_t> unanalysed_why_;  // reason -> launches
  int comm_rank_ = -1, comm_size_ = 0;
};

}  // namespace streamrace::analysis
