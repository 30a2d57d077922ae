// Record-level fix edits: copy a recorded trace byte for byte, insert event record/wait pairs.
#include "replay/trace_editor.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "analyzer/fed_trace.h"
#include "traceformat/call_stream.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace streamrace::replay {

namespace fs = std::filesystem;
using namespace streamrace::trace;

namespace {

constexpr const char* kEditedTag = " (edited by streamrace replay: ";
constexpr const char* kEditsKey = "streamrace_fix_edits";

// One chunk of the edited trace as it is assembled. The records the index kept are a framed
// record stream already (u16 kind, u16 size, body: a chunk payload's framing), so with
// `in_place` a copied record is renumbered where it lies and the chunk is the list of those
// runs and of the inserted records (kept in `inserted_`), written and handed to the sink as
// pieces: no megabyte-sized copy of the trace per chunk (its fresh pages and per-record
// appends were a third of the editor's own time). The seqs are put back once the chunk is
// out, so the kept records stay as read (write() may run again). Otherwise (records read
// from the file, which the next chunk's decode overwrites) every record is copied.
class EditedChunk {
 public:
  explicit EditedChunk(bool in_place) : in_place_(in_place) {
    // Cut at 1 MiB after a record (and what is inserted after it): reserved a little above,
    // so it does not double to 2 MiB for the last records of a chunk.
    if (!in_place_) inserted_.reserve((1u << 20) + (256u << 10));
  }
  // A record the edits insert.
  template <FixedRecord T>
  void insert(const T& rec) {
    inserted(inserted_.bytes(), [&] { inserted_.add(rec); });
  }
  void insert_string(uint32_t id, std::string_view text) {
    inserted(inserted_.bytes(), [&] { inserted_.add_string(id, text); });
  }
  // A record of the source, given `seq` when it is a call (renumbered), else as it is.
  void copy(const RecordView& r, std::optional<uint64_t> seq) {
    if (!in_place_) {
      if (!seq) {
        inserted_.add_raw(r.kind, r.body.data(), r.body.size(), nullptr, 0);
      } else {
        body_.assign(r.body.begin(), r.body.end());
        std::memcpy(body_.data(), &*seq, sizeof(*seq));
        inserted_.add_raw(r.kind, body_.data(), body_.size(), nullptr, 0);
      }
      ++records_;
      return;
    }
    // The kept bytes belong to the index this editor owns; only the seq changes, and only
    // until the chunk is written (see restore()).
    uint8_t* body = const_cast<uint8_t*>(r.body.data());
    if (seq) {
      uint64_t was;
      std::memcpy(&was, body, sizeof(was));
      restore_.emplace_back(body, was);
      std::memcpy(body, &*seq, sizeof(*seq));
    }
    const uint8_t* framed = body - sizeof(RecordPrefix);
    const size_t n = sizeof(RecordPrefix) + r.body.size();
    if (!pieces_.empty() && pieces_.back().kept && pieces_.back().at + pieces_.back().size == framed)
      pieces_.back().size += n;
    else
      pieces_.push_back(Piece{true, framed, 0, n});
    bytes_ += n;
    ++records_;
  }
  size_t bytes() const { return in_place_ ? bytes_ : inserted_.bytes(); }
  uint32_t records() const { return records_; }
  bool empty() const { return records_ == 0; }
  // Writes the chunk to `w` and hands it to `sink`, then starts the next one.
  void emit(TraceWriter& w, const TraceEditor::ChunkSink& sink) {
    spans_.clear();
    if (in_place_)
      for (const Piece& p : pieces_)
        spans_.emplace_back(p.kept ? p.at : inserted_.payload().data() + p.offset, p.size);
    else
      spans_.push_back(inserted_.payload());
    const uint64_t at = w.bytes_written();
    w.write_chunk(spans_, records_);
    if (sink) sink(at, spans_, records_);
    for (const auto& [body, seq] : restore_) std::memcpy(body, &seq, sizeof(seq));
    restore_.clear();
    pieces_.clear();
    inserted_.clear();
    bytes_ = 0;
    records_ = 0;
  }

 private:
  struct Piece {
    bool kept;          // in the index's kept records (at), else in inserted_ (offset)
    const uint8_t* at;
    size_t offset;
    size_t size;
  };
  template <typename Add>
  void inserted(size_t from, Add add) {
    add();
    const size_t n = inserted_.bytes() - from;
    ++records_;
    if (!in_place_) return;
    // inserted_ may move as it grows: its pieces are offsets until emit().
    if (!pieces_.empty() && !pieces_.back().kept && pieces_.back().offset + pieces_.back().size == from)
      pieces_.back().size += n;
    else
      pieces_.push_back(Piece{false, nullptr, from, n});
    bytes_ += n;
  }

  bool in_place_;
  ChunkBuilder inserted_;  // in place: the inserted records only; else the whole chunk
  std::vector<Piece> pieces_;
  std::vector<std::span<const uint8_t>> spans_;
  std::vector<std::pair<uint8_t*, uint64_t>> restore_;  // renumbered kept bodies, their seqs
  std::vector<uint8_t> body_;  // a copied call record with its seq renumbered
  size_t bytes_ = 0;
  uint32_t records_ = 0;
};

}  // namespace

TraceEditor::TraceEditor(const std::string& path) : TraceEditor(CallIndex::read(path)) {}

TraceEditor::TraceEditor(CallIndex index) : index_(std::move(index)), next_event_(index_.first_fix_event()) {}

void TraceEditor::add_edit(const analysis::FixEdit& edit) {
  for (uint64_t seq : {edit.after_seq, edit.before_seq})
    if (!index_.is_call(seq)) throw std::invalid_argument(fmt::format("call {} is not in the trace", seq));
  for (uint64_t stream : {edit.record_stream, edit.wait_stream})
    if (!has_stream(stream)) throw std::invalid_argument(fmt::format("stream 0x{:x} is not a stream of the trace", stream));
  // Calls come in seq order, so seq order is the order in the trace.
  if (edit.after_seq >= edit.before_seq)
    throw std::invalid_argument(fmt::format("the record after call {} would not come before the wait before call {}",
                                            edit.after_seq, edit.before_seq));
  if (edit.before_seq >> (64 - kPairBits))
    throw std::invalid_argument(fmt::format("call {} is beyond the editor's 2^48 calls", edit.before_seq));
  // The pairs of one trace are few (its streams' pairs that race): a linear search.
  uint32_t pair = last_pair_;
  auto is = [&](uint32_t i) {
    return pairs_[i].record_stream == edit.record_stream && pairs_[i].wait_stream == edit.wait_stream;
  };
  if (pair >= pairs_.size() || !is(pair))
    for (pair = 0; pair < pairs_.size() && !is(pair);) ++pair;
  if (pair == pairs_.size()) {
    if (pairs_.size() == (1u << kPairBits))
      throw std::invalid_argument(fmt::format("more than the editor's {} stream pairs", 1u << kPairBits));
    uint64_t ev = next_event_;
    while (index_.fix_event_used(ev)) ++ev;
    next_event_ = ev + 1;
    pairs_.push_back(StreamPair{edit.record_stream, edit.wait_stream, ev, {}, {}});
  }
  last_pair_ = pair;
  StreamPair& sp = pairs_[pair];
  const uint64_t a = edit.after_seq, b = edit.before_seq;
  // The latest record before b (after a call below b); one right after a if it comes before a.
  auto r_at = std::lower_bound(sp.after.begin(), sp.after.end(), b);
  uint64_t r;
  if (r_at == sp.after.begin() || *std::prev(r_at) < a) {
    // The record before it (after a call below a) is seen by no wait once this one is in,
    // unless a wait lies between them: it is then left out.
    if (r_at != sp.after.begin()) {
      const uint64_t prev = *std::prev(r_at);
      auto w = std::upper_bound(sp.before.begin(), sp.before.end(), prev);
      if (w == sp.before.end() || *w > a) {
        r_at = sp.after.erase(std::prev(r_at));
        --records_;
      }
    }
    sp.after.insert(r_at, a);
    r = a;
    ++records_;
  } else {
    r = *std::prev(r_at);
  }
  // The latest wait at or before b sees r if it comes after it, on the same stream T.
  auto w_at = std::upper_bound(sp.before.begin(), sp.before.end(), b);
  if (w_at != sp.before.begin()) {
    const uint64_t w = *std::prev(w_at);
    if (w > r && !index_.created_between(sp.wait_stream, w, b)) return;
  }
  sp.before.insert(w_at, b);
  ++waits_;
}

TraceHeader TraceEditor::edited_header() const {
  TraceHeader h = index_.header();
  uint64_t prior = 0;
  if (auto it = h.extra.find(kEditsKey); it != h.extra.end()) prior = std::strtoull(it->second.c_str(), nullptr, 10);
  const uint64_t total = prior + edits();
  if (auto cut = h.producer.find(kEditedTag); cut != std::string::npos) h.producer.resize(cut);
  h.producer += fmt::format("{}{} fix edits)", kEditedTag, total);
  h.extra[kEditsKey] = std::to_string(total);
  return h;
}

WriterOptions TraceEditor::writer_options() const {
  WriterOptions o;
  // The edits add a few records to what was kept: the rule goes by the source's size.
  o.compress = !(index_.has_records() && index_.kept_bytes() <= kStoredTraceBytes);
  return o;
}

uint64_t TraceEditor::write(const std::string& path, WriterOptions opts, const ChunkSink& sink) const {
  const TraceHeader h = edited_header();
  // The records as the analysis read them when the index kept them (a small trace), else
  // the trace read again.
  std::optional<CallStream> source;
  if (!index_.has_records()) source.emplace(index_.path());
  auto each = [&](const std::function<void(const RecordView&)>& fn) {
    if (source)
      source->for_each(fn);
    else
      index_.for_each_record(fn);
  };
  std::optional<TraceWriter> writer;
  writer.emplace(path, h, opts);
  try {
    return write_records(each, !source, *writer, sink);
  } catch (...) {
    writer.reset();  // what was written is no trace: removed
    std::error_code ec;
    fs::remove(path, ec);
    throw;
  }
}

uint64_t TraceEditor::write_records(const RecordSource& source, bool kept, TraceWriter& w, const ChunkSink& sink) const {
  // Every pair's insertions, in trace order.
  struct {
    std::vector<uint64_t> records, waits;
  } p;
  p.records.reserve(records_);
  p.waits.reserve(waits_);
  for (uint32_t i = 0; i < pairs_.size(); ++i) {
    for (uint64_t seq : pairs_[i].after) p.records.push_back(pack(seq, i));
    for (uint64_t seq : pairs_[i].before) p.waits.push_back(pack(seq, i));
  }
  std::sort(p.records.begin(), p.records.end());
  std::sort(p.waits.begin(), p.waits.end());
  // Cut at 1 MiB after a record (and what is inserted after it).
  EditedChunk chunk(kept);
  uint64_t written = 0;
  auto emit = [&]() { chunk.emit(w, sink); };
  auto maybe_flush = [&]() {
    if (chunk.bytes() >= (1u << 20)) emit();
  };
  // API names of the inserted calls (reused when an earlier round defined them).
  uint32_t next_string = index_.next_string();
  auto api = [&](const char* name) -> uint32_t {
    const std::string text = std::string(kFixApiPrefix) + name;
    for (const auto& [t, id] : index_.fix_strings())
      if (t == text) return id;
    const uint32_t id = next_string++;
    if (edits() != 0) {
      chunk.insert_string(id, text);
      ++written;
    }
    return id;
  };
  const uint32_t api_create = api("cudaEventCreate"), api_record = api("cudaEventRecord"),
                 api_wait = api("cudaStreamWaitEvent");

  std::vector<uint8_t> created(pairs_.size(), 0);
  size_t next_record = 0, next_wait = 0;
  uint64_t seq = 0;
  auto synthetic = [&](const CallInfo& like, uint32_t api_id) {
    CallInfo c = like;
    c.seq = seq++;
    c.api_id = api_id;
    c.reserved = 0;
    return c;
  };
  // The records go after their call's trailing KernelAccess/OpTiming records (they belong to
  // it): the records after the last call wait in [pending, pending_end) for the first record
  // that is neither. The chunk is cut after a record and the records inserted after it, so a
  // pending insertion defers the cut.
  size_t pending = 0, pending_end = 0;
  CallInfo pending_like{};
  auto insert_pending = [&]() {
    for (; pending < pending_end; ++pending) {
      const StreamPair& sp = pairs_[pair_of(p.records[pending])];
      if (!created[pair_of(p.records[pending])]) {
        created[pair_of(p.records[pending])] = 1;
        EventCreate ec{};
        ec.call = synthetic(pending_like, api_create);
        ec.event = sp.event;
        ec.flags = 0x2;  // cudaEventDisableTiming
        chunk.insert(ec);
        ++written;
      }
      EventRecord er{};
      er.call = synthetic(pending_like, api_record);
      er.event = sp.event;
      er.stream = sp.record_stream;
      chunk.insert(er);
      ++written;
    }
  };
  source([&](const RecordView& r) {
    if (pending < pending_end) {
      if (r.kind != RecordKind::kKernelAccess && r.kind != RecordKind::kOpTiming) insert_pending();
      maybe_flush();
    }
    if (!has_call_info(r.kind) || record_fixed_size(r.kind) == 0) {
      chunk.copy(r, std::nullopt);
      ++written;
      if (pending == pending_end) maybe_flush();
      return;
    }
    CallInfo like{};
    std::memcpy(&like, r.body.data(), sizeof(like));
    const uint64_t call_seq = like.seq;
    for (; next_wait < p.waits.size() && seq_of(p.waits[next_wait]) == call_seq; ++next_wait) {
      const StreamPair& sp = pairs_[pair_of(p.waits[next_wait])];
      StreamWaitEvent sw{};
      sw.call = synthetic(like, api_wait);
      sw.stream = sp.wait_stream;
      sw.event = sp.event;
      chunk.insert(sw);
      ++written;
    }
    chunk.copy(r, seq++);
    ++written;
    pending = next_record;
    while (next_record < p.records.size() && seq_of(p.records[next_record]) == call_seq) ++next_record;
    pending_end = next_record;
    pending_like = like;
    if (pending == pending_end) maybe_flush();
  });
  insert_pending();
  maybe_flush();
  if (next_wait != p.waits.size() || next_record != p.records.size())
    throw TraceError(fmt::format("{}: the trace no longer holds the calls its index named ({} of {} edits placed)",
                                 index_.path(), next_wait + next_record, edits()));
  if (!chunk.empty()) emit();
  w.close();
  return written;
}

namespace {

// Traces of at most this many records are edited in parallel (see apply_record_fixes).
constexpr uint64_t kParallelEditRecords = 1'000'000;
// The index of a trace file of at most kKeepRecordsFileBytes keeps its records (at most
// kKeepRecordsBytes of them), so its editor writes without decoding and ordering it again:
// on a small trace that is a third of the editor's time, on a large one it would cost memory.
constexpr uint64_t kKeepRecordsFileBytes = 4u << 20;
constexpr size_t kKeepRecordsBytes = 32u << 20;

// The analyses run on their own threads, whose malloc arenas keep what they freed; the editors
// would grow the main arena on top of it. Gives it back to the system (glibc).
void return_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

// What one round did to one trace.
struct TraceEditOutcome {
  size_t edits = 0, events = 0, records = 0, waits = 0;
  std::string written;  // the edited trace, when there were edits
  std::vector<std::string> warnings;
  std::vector<std::string> unfixable;  // fingerprints whose own fix does not fit the trace
  // The edited trace's analysis, made from its chunks as they were written (see `analyse`).
  std::optional<analysis::TraceOutcome> analysed;
};

// `index`: the trace's CallIndex, built while the analysis read it; without one the editor
// reads the trace for its own. `analyse`: also analyse the edited trace from the chunks the
// editor writes (analysis::FedTrace), unless it is a precise-mode trace.
TraceEditOutcome edit_one_trace(const std::string& path, std::optional<CallIndex>&& index, const std::string& out,
                                const std::vector<analysis::Finding*>& findings, bool one_per_round,
                                bool first_round, bool analyse) {
  TraceEditOutcome o;
  TraceEditor ed = index ? TraceEditor(std::move(*index)) : TraceEditor(path);
  index.reset();
  // The edits, merged in order of the later call (the order the analysis found the pairs in,
  // which lets the editor reuse the records and waits of earlier edits): each targeted
  // finding's own fix_edit (it decides whether the finding is fixable) and every racing pair of
  // its places in this trace, whose pairs are released as they are used up.
  struct Source {
    analysis::Finding* f;
    analysis::Occurrence* w;  // null: f's own fix_edit
    analysis::RacingPairs::const_iterator next{};
    uint64_t before() const { return w ? next->later_seq : f->fix_edit.before_seq; }
  };
  std::vector<Source> sources;
  std::set<const analysis::Finding*> planned;
  for (analysis::Finding* f : findings) {
    if (!planned.insert(f).second) continue;
    // A host access (--host-accesses) is ordered by a host synchronisation, which is no
    // record/wait edit between streams: said, never attempted.
    if (f->kind == analysis::RaceKind::kHostWriteDuringCopy || f->kind == analysis::RaceKind::kHostReadDuringCopy) {
      if (f->where[0].trace == path) {
        o.unfixable.push_back(f->fingerprint);
        o.warnings.push_back(fmt::format("finding {}: a host access racing with a copy is fixed by a host "
                                         "synchronisation, not by an event edit: not applied",
                                         f->fingerprint));
      }
      continue;
    }
    if (f->where[0].trace == path) sources.push_back(Source{f, nullptr});
    if (one_per_round) continue;
    for (auto& w : f->where)
      if (w.trace == path && !w.pairs.empty()) sources.push_back(Source{f, &w, w.pairs.begin()});
  }
  // A min-heap of sources by their next edit's later call, then by source (a stable order).
  auto later = [&](size_t x, size_t y) {
    return std::make_pair(sources[x].before(), x) > std::make_pair(sources[y].before(), y);
  };
  std::vector<size_t> heap(sources.size());
  for (size_t i = 0; i < heap.size(); ++i) heap[i] = i;
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Source& src = sources[heap.back()];
    if (!src.w) {
      heap.pop_back();
      try {
        ed.add_edit(src.f->fix_edit);
      } catch (const std::invalid_argument& e) {
        o.unfixable.push_back(src.f->fingerprint);
        o.warnings.push_back(fmt::format("finding {}: its fix cannot be applied: {}", src.f->fingerprint, e.what()));
      }
      continue;
    }
    const analysis::RacingPair pr = *src.next;
    auto earlier = ed.stream_of_call(pr.earlier_seq), later_stream = ed.stream_of_call(pr.later_seq);
    try {
      ed.add_edit(analysis::FixEdit{earlier.value_or(src.f->fix_edit.record_stream), pr.earlier_seq,
                                    later_stream.value_or(src.f->fix_edit.wait_stream), pr.later_seq});
    } catch (const std::invalid_argument&) {
      // A further pair that does not fit is left to the next round.
    }
    if (++src.next != src.w->pairs.end()) {
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
      src.w->pairs.clear();  // used up: the editor holds what is kept of them
    }
  }
  if (ed.edits() == 0) return o;
  if (first_round)
    for (const auto& w : ed.warnings()) o.warnings.push_back(w);
  fs::remove(out);
  const TraceHeader header = ed.edited_header();
  if (analyse && analysis::FedTrace::supports(header)) {
    analysis::FedTrace fed(out, header, verdict_options());
    ed.write(out, ed.writer_options(),
             [&fed](uint64_t at, std::span<const std::span<const uint8_t>> payload, uint32_t records) {
               fed.chunk(at, payload, records);
    });
    o.analysed = fed.finish(fs::file_size(out));
  } else {
    ed.write(out, ed.writer_options());
  }
  o.edits = ed.edits();
  o.events = ed.events();
  o.records = ed.records();
  o.waits = ed.waits();
  o.written = out;
  return o;
}

}  // namespace

RecordFixResult apply_record_fixes(const std::vector<std::string>& traces, const RecordFixOptions& opts) {
  RecordFixResult res;
  std::vector<std::string> cur = traces;
  // The input's analysis also indexes the calls of the traces it reads (one decode for both),
  // for the round that edits them. A path listed twice is indexed once; its second editor
  // reads it. The analyses of edited traces index nothing: most runs need no further round,
  // and one that does has its editors read their traces themselves.
  std::vector<std::optional<CallIndex>> indexes(traces.size());
  std::mutex index_mu;
  auto observe = [&](const std::string& path) -> trace::RecordObserver* {
    std::lock_guard lock(index_mu);
    for (size_t t = 0; t < cur.size(); ++t)
      if (cur[t] == path && !indexes[t]) {
        CallIndex& index = indexes[t].emplace(path);
        std::error_code ec;
        if (const auto bytes = fs::file_size(path, ec); !ec && bytes <= kKeepRecordsFileBytes)
          index.keep_records(kKeepRecordsBytes);
        return &index;
      }
    return nullptr;
  };
  res.before = analyze_traces(cur, observe);
  return_free_memory();
  const std::set<std::string> targets = select_fix_targets(res.before, opts.fingerprints);
  fs::create_directories(opts.out_dir);
  for (const auto& t : traces) res.traces.push_back(RecordFixResult::PerTrace{t, "", 0, 0, 0, 0, {}});
  std::set<std::string> unfixable;
  // The latest analysis of `cur`: the input's until a round has edited something (no copy of
  // its findings, which hold every racing pair).
  std::optional<AnalyzerVerdict> later;
  uint64_t cap = opts.max_rounds;
  if (cap == 0) {
    cap = 1;
    for (const auto& f : res.before.findings)
      if (targets.count(f.fingerprint)) cap += f.occurrences;
  }
  res.round_cap = cap;
  auto occurrences_left = [&](const AnalyzerVerdict& verdict) {
    uint64_t n = 0;
    for (const auto& f : verdict.findings)
      if (targets.count(f.fingerprint)) n += f.occurrences;
    return n;
  };
  auto trace_index = [&](const std::string& path) -> std::optional<size_t> {
    auto it = std::find(cur.begin(), cur.end(), path);
    if (it == cur.end()) return std::nullopt;
    return size_t(it - cur.begin());
  };
  const uint64_t total_occurrences = occurrences_left(res.before);
  if (opts.progress) opts.progress(0, total_occurrences, total_occurrences);
  for (uint32_t round = 0;; ++round) {
    // The traces this round edits: where[0]'s trace of every targeted finding (its own
    // fix_edit is the first occurrence there), and every place of it unless one per round.
    // Each editor releases the racing pairs of its trace's places as it queues them (a place
    // is one trace's, and a trace listed twice is edited once), so `findings` is not const.
    std::vector<analysis::Finding>& findings = later ? later->findings : res.before.findings;
    std::map<size_t, std::vector<analysis::Finding*>> by_trace;
    for (auto& f : findings) {
      if (!targets.count(f.fingerprint) || unfixable.count(f.fingerprint) || f.where.empty()) continue;
      auto t = trace_index(f.where[0].trace);
      if (!t) continue;
      by_trace[*t].push_back(&f);
      if (opts.one_occurrence_per_round) continue;
      for (size_t i = 1; i < f.where.size(); ++i)
        if (auto u = trace_index(f.where[i].trace)) by_trace[*u].push_back(&f);
    }
    if (by_trace.empty()) break;
    if (round >= cap) {
      res.hit_round_cap = true;
      break;
    }
    // Small traces are edited in parallel (one per core), large ones one after another: an
    // editor holds a chunk of the trace it reads and one of the trace it writes with their
    // zstd contexts (about 4 MB), more than the rest of a large run, while on small traces
    // the fixed costs of each editor dominate the time.
    std::vector<std::pair<size_t, const std::vector<analysis::Finding*>*>> work;
    for (const auto& [t, findings] : by_trace) work.emplace_back(t, &findings);
    const std::vector<uint64_t>& records = later ? later->records : res.before.records;
    bool small = true;
    for (const auto& [t, findings] : work) small &= t < records.size() && records[t] <= kParallelEditRecords;
    std::vector<TraceEditOutcome> outcomes(work.size());
    std::vector<std::exception_ptr> errors(work.size());
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < work.size();) {
        const size_t t = work[i].first;
        try {
          const std::string out =
              (fs::path(opts.out_dir) / fmt::format("{}.round{}.srace", fs::path(traces[t]).stem().string(), round + 1))
                  .string();
          outcomes[i] = edit_one_trace(cur[t], std::move(indexes[t]), out, *work[i].second,
                                       opts.one_occurrence_per_round, round == 0, !opts.read_back_edited);
        } catch (...) {
          errors[i] = std::current_exception();
        }
        indexes[t].reset();
      }
    };
    const size_t threads = small ? std::min<size_t>(work.size(), std::max(1u, std::thread::hardware_concurrency())) : 1;
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    return_free_memory();
    bool edited = false;
    std::vector<std::optional<analysis::TraceOutcome>> analysed(cur.size());
    for (size_t i = 0; i < work.size(); ++i) {
      const size_t t = work[i].first;
      auto& o = outcomes[i];
      for (auto& fp : o.unfixable) unfixable.insert(std::move(fp));
      for (auto& w : o.warnings) res.traces[t].warnings.push_back(std::move(w));
      if (o.edits == 0) continue;
      if (cur[t] != traces[t] && !opts.keep_rounds) fs::remove(cur[t]);
      cur[t] = o.written;
      res.traces[t].edits += o.edits;
      res.traces[t].events += o.events;
      res.traces[t].records += o.records;
      res.traces[t].waits += o.waits;
      analysed[t] = std::move(o.analysed);
      edited = true;
    }
    if (!edited) break;
    ++res.rounds;
    for (auto& i : indexes) i.reset();
    later.reset();
    // The edited traces were analysed as they were written; the others are read.
    later = verdict_of(cur, std::move(analysed));
    if (opts.progress) opts.progress(res.rounds, occurrences_left(*later), total_occurrences);
  }
  // `v` is the analysis of `cur`: the final traces are `cur` under their final names, so it is
  // the verdict after the edits once its places name those files (no further analysis).
  std::vector<std::string> final_paths;
  std::map<std::string, std::string> renamed;
  for (size_t t = 0; t < traces.size(); ++t) {
    const std::string dst =
        (fs::path(opts.out_dir) / (fs::path(traces[t]).stem().string() + ".fixed.srace")).string();
    fs::remove(dst);
    if (cur[t] == traces[t]) {
      // Untouched: the edited set is analysed together, so it holds a copy.
      fs::copy_file(traces[t], dst);
    } else if (opts.keep_rounds) {
      fs::copy_file(cur[t], dst);
    } else {
      fs::rename(cur[t], dst);
    }
    renamed[cur[t]] = dst;
    res.traces[t].edited = dst;
    final_paths.push_back(dst);
  }
  AnalyzerVerdict v = later ? std::move(*later) : res.before;
  for (auto& f : v.findings)
    for (auto& w : f.where)
      if (auto it = renamed.find(w.trace); it != renamed.end()) w.trace = it->second;
  v.traces = final_paths;
  res.after = std::move(v);
  res.verdict = judge_fix(res.before, res.after, targets);
  return res;
}

}  // namespace streamrace::replay
