// Record-level fix edits: copy a recorded trace byte for byte, insert event record/wait pairs.
#include "replay/trace_editor.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

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
  for (const Rec& r : recs_) {
    if (r.kind != RecordKind::kStreamCreate || r.size < sizeof(StreamCreate)) continue;
    StreamCreate sc;
    std::memcpy(&sc, arena_.data() + r.offset, sizeof(sc));
    if (sc.stream == handle) return true;
  }
  return false;
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
  std::multimap<size_t, const Edit*> after, before;
  for (const auto& e : edits_) {
    size_t p = e.after_pos;
    while (p + 1 < recs_.size() && p + 1 < e.before_pos) {
      RecordKind k = recs_[p + 1].kind;
      if (k != RecordKind::kKernelAccess && k != RecordKind::kOpTiming) break;
      ++p;
    }
    after.emplace(p, &e);
    before.emplace(e.before_pos, &e);
  }
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
    for (auto [it, end] = before.equal_range(pos); it != end; ++it) {
      StreamWaitEvent sw{};
      sw.call = synthetic(call_of(pos), api_wait);
      sw.stream = it->second->fix.wait_stream;
      sw.event = it->second->event;
      chunk.add(sw);
      ++written;
    }
    const Rec& r = recs_[pos];
    const uint8_t* body = arena_.data() + r.offset;
    if (has_call_info(r.kind) && record_fixed_size(r.kind) != 0) {
      std::vector<uint8_t> copy(body, body + r.size);
      const uint64_t s = seq++;
      std::memcpy(copy.data(), &s, sizeof(s));
      chunk.add_raw(r.kind, copy.data(), copy.size(), nullptr, 0);
    } else {
      chunk.add_raw(r.kind, body, r.size, nullptr, 0);
    }
    ++written;
    for (auto [it, end] = after.equal_range(pos); it != end; ++it) {
      const CallInfo like = call_of(it->second->after_pos);
      EventCreate ec{};
      ec.call = synthetic(like, api_create);
      ec.event = it->second->event;
      ec.flags = 0x2;  // cudaEventDisableTiming
      chunk.add(ec);
      EventRecord er{};
      er.call = synthetic(like, api_record);
      er.event = it->second->event;
      er.stream = it->second->fix.record_stream;
      chunk.add(er);
      written += 2;
    }
    maybe_flush();
  }
  if (!chunk.empty()) w.write_chunk(chunk);
  w.close();
  return written;
}

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
  const uint64_t total_occurrences = occurrences_left(res.before);
  if (opts.progress) opts.progress(0, total_occurrences, total_occurrences);
  for (uint32_t round = 0;; ++round) {
    // One edit per targeted finding: its first occurrence, in the trace its seqs belong to.
    std::map<size_t, std::vector<const analysis::Finding*>> by_trace;
    for (const auto& f : v.findings) {
      if (!targets.count(f.fingerprint) || unfixable.count(f.fingerprint) || f.where.empty()) continue;
      auto it = std::find(cur.begin(), cur.end(), f.where[0].trace);
      if (it == cur.end()) continue;
      by_trace[size_t(it - cur.begin())].push_back(&f);
    }
    if (by_trace.empty()) break;
    if (round >= cap) {
      res.hit_round_cap = true;
      break;
    }
    bool edited = false;
    for (auto& [t, findings] : by_trace) {
      TraceEditor ed(cur[t]);
      for (const auto* f : findings) {
        try {
          ed.add_edit(f->fix_edit);
        } catch (const std::invalid_argument& e) {
          unfixable.insert(f->fingerprint);
          res.traces[t].warnings.push_back(fmt::format("finding {}: its fix cannot be applied: {}", f->fingerprint, e.what()));
        }
      }
      if (ed.edits() == 0) continue;
      if (round == 0)
        for (const auto& w : ed.warnings()) res.traces[t].warnings.push_back(w);
      const std::string out =
          (fs::path(opts.out_dir) / fmt::format("{}.round{}.srace", fs::path(traces[t]).stem().string(), round + 1))
              .string();
      fs::remove(out);
      ed.write(out);
      if (cur[t] != traces[t] && !opts.keep_rounds) fs::remove(cur[t]);
      cur[t] = out;
      res.traces[t].edits += ed.edits();
      edited = true;
    }
    if (!edited) break;
    ++res.rounds;
    v = analyze_traces(cur);
    if (opts.progress) opts.progress(res.rounds, occurrences_left(v), total_occurrences);
  }
  std::vector<std::string> final_paths;
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
    res.traces[t].edited = dst;
    final_paths.push_back(dst);
  }
  res.after = analyze_traces(final_paths);
  res.verdict = judge_fix(res.before, res.after, targets);
  return res;
}

}  // namespace streamrace::replay
