// Ring assembly: see ring_trace.h.
#include "traceformat/ring_trace.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

namespace streamrace::trace {

namespace {

bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

uint64_t seq_of(std::span<const uint8_t> body) {
  uint64_t s;
  std::memcpy(&s, body.data(), sizeof s);
  return s;
}

bool is_call(const RecordView& v) { return has_call_info(v.kind) && v.body.size() >= sizeof(CallInfo); }

void add_renumbered(ChunkBuilder& out, const RecordView& v, uint64_t seq) {
  out.add_raw(v.kind, &seq, sizeof seq, v.body.data() + sizeof seq, v.body.size() - sizeof seq);
}

uint64_t key(const TraceHeader& h, const char* k, uint64_t fallback) {
  auto it = h.extra.find(k);
  if (it == h.extra.end() || it->second.empty() || it->second == "none") return fallback;
  try {
    return std::stoull(it->second);
  } catch (const std::exception&) {
    return fallback;
  }
}

}  // namespace

RingAssembly assemble_ring(const std::string& dir, const std::string& out, const TraceHeader* header, bool salvaged) {
  RingAssembly a;
  TraceReader defs(RingFiles::definitions(dir));
  TraceHeader h = header ? *header : defs.header();
  // The checkpoint, if any segment was folded.
  uint64_t covers = ~0ull;  // the newest folded segment
  std::vector<std::vector<uint8_t>> snapshot;
  std::vector<RecordKind> snapshot_kinds;
  if (exists(RingFiles::state(dir))) {
    TraceReader st(RingFiles::state(dir));
    covers = key(st.header(), "ring_covers_segment", ~0ull);
    a.steps_dropped = key(st.header(), "ring_steps_dropped", 0);
    st.for_each([&](const RecordView& v) {
      if (!is_call(v)) return;
      snapshot_kinds.push_back(v.kind);
      snapshot.emplace_back(v.body.begin(), v.body.end());
    });
  }
  // The segments after it, in order.
  std::map<uint64_t, std::string> segments;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("segment-", 0) != 0 || name.size() < 15 || name.compare(name.size() - 6, 6, ".srace") != 0) continue;
      const std::string num = name.substr(8, name.size() - 14);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 18) continue;
      const uint64_t n = std::stoull(num);
      if (covers != ~0ull && n <= covers) continue;  // folded into the checkpoint, not yet deleted
      segments[n] = dir + "/" + name;
    }
    ::closedir(d);
  }
  uint64_t b0 = 0, first_step = kNoStep;
  if (!segments.empty()) {
    TraceReader first(segments.begin()->second);
    b0 = key(first.header(), "ring_begin_seq", 0);
    first_step = key(first.header(), "ring_step", kNoStep);
  }
  for (const auto& [n, path] : segments) {
    TraceReader r(path);
    if (key(r.header(), "ring_step", kNoStep) != kNoStep) ++a.steps_kept;
  }
  a.steps_seen = a.steps_dropped + a.steps_kept;
  a.calls_dropped = b0;
  const bool cut = b0 > 0;

  h.extra["ring_steps_seen"] = std::to_string(a.steps_seen);
  h.extra["ring_steps_kept"] = std::to_string(a.steps_kept);
  h.extra["ring_steps_dropped"] = std::to_string(a.steps_dropped);
  h.extra["ring_calls_dropped"] = std::to_string(b0);
  if (salvaged) h.extra["ring_salvaged"] = "1";
  TraceWriter w(out, h);
  // Definitions and notices, every whole chunk.
  {
    ChunkBuilder c;
    while (defs.next_chunk([&](const RecordView& v) { c.add_raw(v.kind, v.body.data(), v.body.size(), nullptr, 0); })) {
      w.write_chunk(c);
      c.clear();
    }
  }
  uint64_t shift_to = 0;
  if (cut) {
    // The window-open mark takes the first kept step's marker call (its thread, name, time).
    CaptureMark m{};
    {
      TraceReader first(segments.begin()->second);
      bool found = false;
      while (!found && first.next_chunk([&](const RecordView& v) {
        if (!found && v.kind == RecordKind::kCaptureMark) {
          m = v.as<CaptureMark>();
          found = true;
        }
      })) {
      }
    }
    ChunkBuilder head;
    m.call.seq = 0;
    m.step = first_step;
    m.action = CaptureAction::kWindowOpen;
    m.reason = CaptureReason::kRing;
    m.steps_dropped = a.steps_dropped;
    m.calls_left_out = b0;
    head.add(m);
    uint64_t seq = 1;
    for (size_t i = 0; i < snapshot.size(); ++i) {
      add_renumbered(head, RecordView{snapshot_kinds[i], snapshot[i]}, seq++);
      if (head.bytes() > (8u << 20)) {  // a chunk holds at most 64 MiB
        w.write_chunk(head);
        head.clear();
      }
    }
    CaptureMark end = m;
    end.call.seq = seq;
    end.action = CaptureAction::kStateEnd;
    end.steps_dropped = end.calls_left_out = 0;
    head.add(end);
    w.write_chunk(head);
    shift_to = seq + 1;
  }
  for (const auto& [n, path] : segments) {
    TraceReader r(path);
    ChunkBuilder c;
    while (r.next_chunk([&](const RecordView& v) {
      if (!is_call(v)) {
        c.add_raw(v.kind, v.body.data(), v.body.size(), nullptr, 0);
        return;
      }
      const uint64_t seq = seq_of(v.body);
      if (seq < b0) {
        ++a.late_calls;  // a call of the dropped step that reached the flusher late
        return;
      }
      add_renumbered(c, v, seq - b0 + shift_to);
    })) {
      w.write_chunk(c);
      c.clear();
    }
  }
  ChunkBuilder notes;
  if (a.steps_seen == 0) {
    auto sr = h.extra.find("step_range");
    notes.add_notice(NoticeLevel::kWarning, "ring mode: no step marker (NVTX range '" +
                                                (sr == h.extra.end() ? std::string() : sr->second) +
                                                "') was seen, so nothing was dropped: the whole run is one step");
  }
  if (salvaged)
    notes.add_notice(NoticeLevel::kWarning,
                     "ring salvaged after the traced process died: steps " +
                         (first_step == kNoStep ? std::string("from the start") : std::to_string(first_step)) +
                         " to the last are kept, the last may be cut short, and calls not yet flushed are missing");
  if (salvaged && a.late_calls)
    notes.add_notice(NoticeLevel::kWarning, std::to_string(a.late_calls) +
                                                " calls of a dropped step reached the trace after the step was "
                                                "folded into the snapshot and were left out");
  w.write_chunk(notes);
  w.close();
  return a;
}

void remove_ring(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(dir + "/" + name);
    }
    ::closedir(d);
    for (const auto& n : names) ::unlink(n.c_str());
  }
  ::rmdir(dir.c_str());
}

}  // namespace streamrace::trace
