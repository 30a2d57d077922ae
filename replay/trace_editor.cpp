// Record-level fix edits: copy a recorded trace byte for byte, insert event record/wait pairs.
#include "replay/trace_editor.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "traceformat/call_stream.h"

namespace streamrace::replay {

namespace fs = std::filesystem;
using namespace streamrace::trace;

namespace {

constexpr const char* kEditedTag = " (edited by streamrace replay: ";
constexpr const char* kEditsKey = "streamrace_fix_edits";

}  // namespace

TraceEditor::TraceEditor(const std::string& path) {
  // Records in the order the analyzer sees them (CallStream): writing them in this order with
  // dense seqs makes the analyzer see exactly what it saw in the original.
  CallStream stream(path);
  header_ = stream.header();
  std::set<uint64_t> used_events;
  uint32_t max_string = 0;
  stream.for_each([&](const RecordView& r) {
    recs_.push_back(Rec{r.kind, arena_.size(), r.body.size()});
    arena_.insert(arena_.end(), r.body.begin(), r.body.end());
    switch (r.kind) {
      case RecordKind::kStringDef: {
        auto h = r.as<StringDefHead>();
        max_string = std::max(max_string, h.id);
        auto t = r.tail<StringDefHead>();
        std::string text(reinterpret_cast<const char*>(t.data()), t.size());
        if (text.rfind(kFixApiPrefix, 0) == 0) strings_.emplace_back(std::move(text), h.id);
        break;
      }
      case RecordKind::kStreamCreate:
        if (r.body.size() >= sizeof(StreamCreate)) created_streams_.push_back(r.as<StreamCreate>().stream);
        break;
      case RecordKind::kEventCreate: used_events.insert(r.as<EventCreate>().event); break;
      case RecordKind::kEventRecord: used_events.insert(r.as<EventRecord>().event); break;
      case RecordKind::kStreamWaitEvent: used_events.insert(r.as<StreamWaitEvent>().event); break;
      default: break;
    }
  });
  for (const auto& w : stream.warnings()) warnings_.push_back(path + ": " + w);
  if (stream.stats().seq_gaps) warnings_.push_back(path + ": the edited trace numbers calls densely");
  for (size_t pos = 0; pos < recs_.size(); ++pos) {
    const Rec& r = recs_[pos];
    if (!has_call_info(r.kind) || record_fixed_size(r.kind) == 0) continue;
    uint64_t seq;
    std::memcpy(&seq, arena_.data() + r.offset, sizeof(seq));
    pos_of_seq_.emplace_back(seq, pos);
    ++ncalls_;
  }
  std::sort(pos_of_seq_.begin(), pos_of_seq_.end());
  std::sort(created_streams_.begin(), created_streams_.end());
  next_string_ = max_string + 1;
  used_events_.assign(used_events.begin(), used_events.end());
  // Continue after the fix events a previous round inserted.
  auto hi = std::lower_bound(used_events_.begin(), used_events_.end(), kFixEventBase + (1ull << 32));
  if (hi != used_events_.begin() && *std::prev(hi) >= kFixEventBase) next_event_ = *std::prev(hi) + 1;
}

void TraceEditor::add_edit(const analysis::FixEdit& edit) {
  auto find = [&](uint64_t seq) -> size_t {
    auto it = std::lower_bound(pos_of_seq_.begin(), pos_of_seq_.end(), std::make_pair(seq, size_t{0}));
    if (it == pos_of_seq_.end() || it->first != seq)
      throw std::invalid_argument(fmt::format("call {} is not in the trace", seq));
    return it->second;
  };
  const size_t a = find(edit.after_seq), b = find(edit.before_seq);
  for (uint64_t stream : {edit.record_stream, edit.wait_stream})
    if (!has_stream(stream)) throw std::invalid_argument(fmt::format("stream 0x{:x} is not a stream of the trace", stream));
  if (a >= b)
    throw std::invalid_argument(fmt::format("the record after call {} would not come before the wait before call {}",
                                            edit.after_seq, edit.before_seq));
  uint64_t ev = next_event_;
  while (std::binary_search(used_events_.begin(), used_events_.end(), ev)) ++ev;
  next_event_ = ev + 1;
  edits_.push_back(Edit{edit, ev, a, b});
}

bool TraceEditor::has_stream(uint64_t handle) const {
  if (is_legacy_stream(handle) || is_per_thread_stream(handle)) return true;
  return std::binary_search(created_streams_.begin(), created_streams_.end(), handle);
}

std::optional<uint64_t> TraceEditor::stream_of_call(uint64_t seq) const {
  auto it = std::lower_bound(pos_of_seq_.begin(), pos_of_seq_.end(), std::make_pair(seq, size_t{0}));
  if (it == pos_of_seq_.end() || it->first != seq) return std::nullopt;
  const Rec& r = recs_[it->second];
  // The accessing calls all carry their stream right after the call's common fields.
  static_assert(offsetof(KernelLaunchHead, stream) == sizeof(CallInfo));
  static_assert(offsetof(Memcpy, stream) == sizeof(CallInfo));
  static_assert(offsetof(Memset, stream) == sizeof(CallInfo));
  static_assert(offsetof(NcclCall, stream) == sizeof(CallInfo));
  switch (r.kind) {
    case RecordKind::kKernelLaunch:
    case RecordKind::kMemcpy:
    case RecordKind::kMemset:
    case RecordKind::kNcclCall: break;
    default: return std::nullopt;
  }
  if (r.size < sizeof(CallInfo) + sizeof(uint64_t)) return std::nullopt;
  uint64_t stream;
  std::memcpy(&stream, arena_.data() + r.offset + sizeof(CallInfo), sizeof(stream));
  return stream;
}

uint64_t TraceEditor::write(const std::string& path, WriterOptions opts) const {
  TraceHeader h = header_;
  uint64_t prior = 0;
  if (auto it = h.extra.find(kEditsKey); it != h.extra.end()) prior = std::strtoull(it->second.c_str(), nullptr, 10);
  const uint64_t total = prior + edits_.size();
  if (auto cut = h.producer.find(kEditedTag); cut != std::string::npos) h.producer.resize(cut);
  h.producer += fmt::format("{}{} fix edits)", kEditedTag, total);
  h.extra[kEditsKey] = std::to_string(total);

  TraceWriter w(path, h, opts);
  ChunkBuilder chunk;
  uint64_t written = 0;
  auto maybe_flush = [&]() {
    if (chunk.bytes() >= (1u << 20)) {
      w.write_chunk(chunk);
      chunk.clear();
    }
  };
  // API names of the inserted calls (reused when an earlier round defined them).
  uint32_t next_string = next_string_;
  auto api = [&](const char* name) -> uint32_t {
    const std::string text = std::string(kFixApiPrefix) + name;
    for (const auto& [t, id] : strings_)
      if (t == text) return id;
    const uint32_t id = next_string++;
    if (!edits_.empty()) {
      chunk.add_string(id, text);
      ++written;
    }
    return id;
  };
  const uint32_t api_create = api("cudaEventCreate"), api_record = api("cudaEventRecord"),
                 api_wait = api("cudaStreamWaitEvent");

  // A record goes after its call's trailing KernelAccess/OpTiming records (they belong to it).
  // (position, edit) sorted by position, edits at one position in the order they were added.
  std::vector<std::pair<size_t, const Edit*>> after, before;
  for (const auto& e : edits_) {
    size_t p = e.after_pos;
    while (p + 1 < recs_.size() && p + 1 < e.before_pos) {
      RecordKind k = recs_[p + 1].kind;
      if (k != RecordKind::kKernelAccess && k != RecordKind::kOpTiming) break;
      ++p;
    }
    after.emplace_back(p, &e);
    before.emplace_back(e.before_pos, &e);
  }
  auto by_pos = [](const auto& x, const auto& y) { return x.first < y.first; };
  std::stable_sort(after.begin(), after.end(), by_pos);
  std::stable_sort(before.begin(), before.end(), by_pos);
  size_t next_after = 0, next_before = 0;
  std::vector<uint8_t> copy;  // a call record with its seq renumbered
  uint64_t seq = 0;
  auto call_of = [&](size_t pos) {
    const Rec& r = recs_[pos];
    CallInfo c{};
    std::memcpy(&c, arena_.data() + r.offset, sizeof(c));
    return c;
  };
  auto synthetic = [&](const CallInfo& like, uint32_t api_id) {
    CallInfo c = like;
    c.seq = seq++;
    c.api_id = api_id;
    c.reserved = 0;
    return c;
  };
  for (size_t pos = 0; pos < recs_.size(); ++pos) {
    for (; next_before < before.size() && before[next_before].first == pos; ++next_before) {
      const Edit* e = before[next_before].second;
      StreamWaitEvent sw{};
      sw.call = synthetic(call_of(pos), api_wait);
      sw.stream = e->fix.wait_stream;
      sw.event = e->event;
      chunk.add(sw);
      ++written;
    }
    const Rec& r = recs_[pos];
    const uint8_t* body = arena_.data() + r.offset;
    if (has_call_info(r.kind) && record_fixed_size(r.kind) != 0) {
      copy.assign(body, body + r.size);
      const uint64_t s = seq++;
      std::memcpy(copy.data(), &s, sizeof(s));
      chunk.add_raw(r.kind, copy.data(), copy.size(), nullptr, 0);
    } else {
      chunk.add_raw(r.kind, body, r.size, nullptr, 0);
    }
    ++written;
    for (; next_after < after.size() && after[next_after].first == pos; ++next_after) {
      const Edit* e = after[next_after].second;
      const CallInfo like = call_of(e->after_pos);
      EventCreate ec{};
      ec.call = synthetic(like, api_create);
      ec.event = e->event;
      ec.flags = 0x2;  // cudaEventDisableTiming
      chunk.add(ec);
      EventRecord er{};
      er.call = synthetic(like, api_record);
      er.event = e->event;
      er.stream = e->fix.record_stream;
      chunk.add(er);
      written += 2;
    }
    maybe_flush();
  }
  if (!chunk.empty()) w.write_chunk(chunk);
  w.close();
  return written;
}

namespace {

// The edits one round makes in one trace: every listed racing pair of each targeted finding
// there (or, the former method, the first occurrence of each finding whose first place is
// this trace), each pair once.
struct TraceEdits {
  // (finding, the edit, whether it is the finding's own fix_edit): a finding whose own edit
  // does not fit is unfixable, a further pair that does not fit is left to the next round.
  struct Planned {
    const analysis::Finding* finding;
    analysis::FixEdit edit;
    bool primary;
  };
  std::vector<Planned> planned;
};

void plan_pairs(TraceEdits& te, const TraceEditor& ed, const analysis::Finding& f, const analysis::Occurrence& w) {
  for (const auto& p : w.pairs) {
    auto earlier = ed.stream_of_call(p.earlier_seq), later = ed.stream_of_call(p.later_seq);
    te.planned.push_back({&f,
                          analysis::FixEdit{earlier.value_or(f.fix_edit.record_stream), p.earlier_seq,
                                            later.value_or(f.fix_edit.wait_stream), p.later_seq},
                          false});
  }
}

// Drops a further pair whose edit is already planned, keeping the order (one sort: a trace
// can hold 10^5 racing pairs). A finding's own edit always stays: it decides whether the
// finding is fixable.
void drop_repeated_edits(TraceEdits& te) {
  auto key = [&](size_t i) {
    const auto& e = te.planned[i].edit;
    return std::make_tuple(e.record_stream, e.after_seq, e.wait_stream, e.before_seq, !te.planned[i].primary);
  };
  std::vector<size_t> order(te.planned.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<uint8_t> keep(order.size(), 1);
  auto same_edit = [&](size_t a, size_t b) {
    const auto &x = te.planned[a].edit, &y = te.planned[b].edit;
    return x.record_stream == y.record_stream && x.after_seq == y.after_seq && x.wait_stream == y.wait_stream &&
           x.before_seq == y.before_seq;
  };
  for (size_t i = 1; i < order.size(); ++i)
    if (!te.planned[order[i]].primary && same_edit(order[i], order[i - 1])) keep[order[i]] = 0;
  size_t out = 0;
  for (size_t i = 0; i < te.planned.size(); ++i)
    if (keep[i]) te.planned[out++] = te.planned[i];
  te.planned.resize(out);
}

// Traces edited at once. Each editor holds its trace's records (about 100 bytes per record),
// so one at a time keeps the memory at one trace's; the analyses are the parallel part.
constexpr size_t kEditThreads = 1;

// What one round did to one trace.
struct TraceEditOutcome {
  size_t edits = 0;
  std::string written;  // the edited trace, when there were edits
  std::vector<std::string> warnings;
  std::vector<std::string> unfixable;  // fingerprints whose own fix does not fit the trace
};

TraceEditOutcome edit_one_trace(const std::string& path, const std::string& out,
                                const std::vector<const analysis::Finding*>& findings, bool one_per_round,
                                bool first_round) {
  TraceEditOutcome o;
  TraceEditor ed(path);
  TraceEdits te;
  std::set<const analysis::Finding*> planned;
  for (const auto* f : findings) {
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
    if (f->where[0].trace == path) te.planned.push_back({f, f->fix_edit, true});
    if (one_per_round) continue;
    for (const auto& w : f->where)
      if (w.trace == path) plan_pairs(te, ed, *f, w);
  }
  drop_repeated_edits(te);
  for (const auto& p : te.planned) {
    try {
      ed.add_edit(p.edit);
    } catch (const std::invalid_argument& e) {
      if (!p.primary) continue;
      o.unfixable.push_back(p.finding->fingerprint);
      o.warnings.push_back(fmt::format("finding {}: its fix cannot be applied: {}", p.finding->fingerprint, e.what()));
    }
  }
  if (ed.edits() == 0) return o;
  if (first_round)
    for (const auto& w : ed.warnings()) o.warnings.push_back(w);
  fs::remove(out);
  ed.write(out);
  o.edits = ed.edits();
  o.written = out;
  return o;
}

}  // namespace

RecordFixResult apply_record_fixes(const std::vector<std::string>& traces, const RecordFixOptions& opts) {
  RecordFixResult res;
  res.before = analyze_traces(traces);
  const std::set<std::string> targets = select_fix_targets(res.before, opts.fingerprints);
  fs::create_directories(opts.out_dir);
  std::vector<std::string> cur = traces;
  for (const auto& t : traces) res.traces.push_back(RecordFixResult::PerTrace{t, "", 0, {}});
  std::set<std::string> unfixable;
  AnalyzerVerdict v = res.before;
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
    std::map<size_t, std::vector<const analysis::Finding*>> by_trace;
    for (const auto& f : v.findings) {
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
    // The traces are edited one at a time: the editor holds one trace's records. Outcomes are
    // applied in trace order.
    std::vector<std::pair<size_t, const std::vector<const analysis::Finding*>*>> work;
    for (const auto& [t, findings] : by_trace) work.emplace_back(t, &findings);
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
          outcomes[i] = edit_one_trace(cur[t], out, *work[i].second, opts.one_occurrence_per_round, round == 0);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    const size_t threads = std::min<size_t>(work.size(), kEditThreads);
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
    bool edited = false;
    for (size_t i = 0; i < work.size(); ++i) {
      if (errors[i]) std::rethrow_exception(errors[i]);
      const size_t t = work[i].first;
      auto& o = outcomes[i];
      for (auto& fp : o.unfixable) unfixable.insert(std::move(fp));
      for (auto& w : o.warnings) res.traces[t].warnings.push_back(std::move(w));
      if (o.edits == 0) continue;
      if (cur[t] != traces[t] && !opts.keep_rounds) fs::remove(cur[t]);
      cur[t] = o.written;
      res.traces[t].edits += o.edits;
      edited = true;
    }
    if (!edited) break;
    ++res.rounds;
    v = analyze_traces(cur);
    if (opts.progress) opts.progress(res.rounds, occurrences_left(v), total_occurrences);
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
  for (auto& f : v.findings)
    for (auto& w : f.where)
      if (auto it = renamed.find(w.trace); it != renamed.end()) w.trace = it->second;
  v.traces = final_paths;
  res.after = std::move(v);
  res.verdict = judge_fix(res.before, res.after, targets);
  return res;
}

}  // namespace streamrace::replay
