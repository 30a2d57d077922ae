// Findings: names, fingerprints, the missing-edge explanation, and the JSON schema
// ("streamrace-findings", documented in docs/json-report.md).
#include "analyzer/finding.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

namespace streamrace::analysis {

using nlohmann::json;

const char* to_string(Confidence c) { return c == Confidence::kCertain ? "certain" : "possible"; }

const char* to_string(RaceKind k) {
  switch (k) {
    case RaceKind::kWriteAfterRead: return "write-after-read";
    case RaceKind::kWriteAfterWrite: return "write-after-write";
    case RaceKind::kReadAfterWrite: return "read-after-write";
    case RaceKind::kUseAfterReuse: return "use-after-reuse";
    case RaceKind::kHostWriteDuringCopy: return "host-write-during-copy";
    case RaceKind::kHostReadDuringCopy: return "host-read-during-copy";
  }
  return "race";
}

const char* short_name(RaceKind k) {
  switch (k) {
    case RaceKind::kWriteAfterRead: return "WAR";
    case RaceKind::kWriteAfterWrite: return "WAW";
    case RaceKind::kReadAfterWrite: return "RAW";
    case RaceKind::kUseAfterReuse: return "UAR";
    case RaceKind::kHostWriteDuringCopy: return "HWC";
    case RaceKind::kHostReadDuringCopy: return "HRC";
  }
  return "RACE";
}

namespace {

std::string basename_of(const std::string& path) {
  auto p = path.find_last_of('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h ^= 0xff;  // field separator
  h *= 0x100000001b3ull;
  return h;
}

uint64_t hash_site(uint64_t h, const Access& a) {
  h = fnv1a(h, a.op_kind);
  h = fnv1a(h, a.op);
  h = fnv1a(h, a.direction);
  bool any_python = false;
  for (const auto& f : a.stack) any_python |= f.python;
  int taken = 0;
  for (const auto& f : a.stack) {
    if (any_python && !f.python) continue;
    h = fnv1a(h, basename_of(f.file));
    h = fnv1a(h, f.function);
    h = fnv1a(h, any_python ? std::to_string(f.line) : std::string());
    if (++taken == 4) break;
  }
  return h;
}

template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

}  // namespace

std::string fingerprint_of(const Finding& f) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, to_string(f.kind));
  h = fnv1a(h, to_string(f.confidence));
  h = hash_site(h, f.earlier);
  if (f.kind == RaceKind::kHostWriteDuringCopy || f.kind == RaceKind::kHostReadDuringCopy) {
    // The host side is grouped by kind of access, not by stack (see TraceAnalysis::on_host_access).
    h = fnv1a(h, f.later.op_kind);
    h = fnv1a(h, f.later.op);
    h = fnv1a(h, f.later.direction);
  } else {
    h = hash_site(h, f.later);
  }
  return fmt::format("{:016x}", h);
}

std::string site_of(const Access& a) {
  // The first Python frame outside PyTorch's own package: the line a user can change.
  const Frame* pick = nullptr;
  const Frame* first_python = nullptr;
  for (const auto& f : a.stack) {
    if (!f.python) continue;
    if (!first_python) first_python = &f;
    if (f.file.find("/torch/") == std::string::npos) {
      pick = &f;
      break;
    }
  }
  if (!pick) pick = first_python;
  // Native stacks: the first frame outside the CUDA libraries and the tools' own (the
  // driver, the runtime, CUPTI, the Compute Sanitizer), else the innermost frame.
  if (!pick) {
    for (const auto& f : a.stack) {
      const std::string base = basename_of(f.file);
      if (base.rfind("libcuda.so", 0) == 0 || base.rfind("libcudart", 0) == 0 || base.rfind("libcupti", 0) == 0 ||
          base.rfind("libsanitizer", 0) == 0)
        continue;
      pick = &f;
      break;
    }
  }
  if (!pick && !a.stack.empty()) pick = &a.stack.front();
  if (!pick) return "<no stack>";
  std::string where = basename_of(pick->file);
  if (pick->line) where += fmt::format(":{}", pick->line);
  if (!pick->function.empty()) where += " in " + pick->function;
  return where;
}

void describe_missing_edge(Finding& f, uint32_t seen_clock, uint32_t earlier_clock) {
  const Access& e = f.earlier;
  const Access& l = f.later;
  if (f.kind == RaceKind::kHostWriteDuringCopy || f.kind == RaceKind::kHostReadDuringCopy) {
    const bool device_writes = e.direction != "read";  // the copy writes host memory: a device-to-host destination
    const std::string what = device_writes ? "its destination, which the copy writes" : "its source, which the copy reads";
    const std::string sync = seen_clock == 0
                                 ? fmt::format("the host never synchronised with {}", e.stream_label)
                                 : fmt::format("the host had synchronised with {} only up to its operation #{}; the copy "
                                               "is operation #{} there, issued after that point",
                                               e.stream_label, seen_clock, earlier_clock);
    f.missing_edge = fmt::format(
        "{} ({}) is asynchronous: it returns before the copy is done, and the host {} {} ({} at {}) while the copy "
        "may still be in flight: {}. No cudaStreamSynchronize, cudaEventSynchronize (or successful query) or "
        "cudaDeviceSynchronize ordered the host after the copy first.",
        e.op, site_of(e), l.direction == "read" ? "read" : l.direction == "write" ? "wrote" : "touched", what, l.op,
        site_of(l), sync);
    f.fix = fmt::format(
        "Wait for the copy before the host touches the buffer again: synchronise with {} (cudaStreamSynchronize), "
        "or record an event right after {} at {} and cudaEventSynchronize it, before the {} at {}. PyTorch: torch.cuda.current_stream().synchronize() "
        "or ev = torch.cuda.Event(); ev.record() after the .to(..., non_blocking=True), then ev.synchronize() before "
        "reusing the pinned tensor; or give each in-flight copy its own pinned buffer.",
        e.stream_label, e.op, site_of(e), l.op, site_of(l));
    if (f.confidence == Confidence::kPossible)
      f.fix += l.direction == "read or write"
                   ? " The fault did not say whether the host read or wrote: check that it writes the buffer before "
                     "changing the code."
                   : " The host access is known only by its page (the fault gave no exact address): check that it "
                     "touches the copy's bytes before changing the code.";
    return;
  }
  if (seen_clock == 0) {
    f.missing_edge = fmt::format(
        "{} never waited for {}: no event recorded there was waited on and no host synchronisation ordered the two, "
        "so {} ({}) can run while {} ({}) is still in flight.",
        l.stream_label, e.stream_label, l.op, l.direction, e.op, e.direction);
  } else {
    f.missing_edge = fmt::format(
        "{} had waited for {} only up to its operation #{}; {} is operation #{} there, issued after that point, and "
        "nothing orders it before {}.",
        l.stream_label, e.stream_label, seen_clock, e.op, earlier_clock, l.op);
  }
  f.fix = fmt::format(
      "Record an event on {} right after {} ({}) and make {} wait on it right before {} ({}). CUDA: "
      "cudaEventRecord(ev, A); cudaStreamWaitEvent(B, ev). PyTorch: ev = torch.cuda.Event(); ev.record(A); "
      "B.wait_event(ev). B.wait_stream(A) also works but orders B behind everything queued on A, which costs "
      "overlap.",
      e.stream_label, e.op, site_of(e), l.stream_label, l.op, site_of(l));
  // CUDA graph nodes: an edge between two nodes of one launch belongs inside the capture
  // (the labels name the capture streams); against anything else it goes around the launch.
  const bool e_node = e.graph_launch.has_value(), l_node = l.graph_launch.has_value();
  const bool same_launch = e_node && l_node && e.graph_launch->seq == l.graph_launch->seq;
  if (same_launch && e.graph_launch->built) {
    f.fix = fmt::format(
        "Both are nodes of one CUDA graph launch with no path between them. Give the graph the edge: make the node "
        "of {} ({}) a dependency of the node of {} ({}). CUDA: cudaGraphAddDependencies(graph, &from, &to, 1), or "
        "name the earlier node in the later one's dependencies when adding it.",
        e.op, site_of(e), l.op, site_of(l));
  } else if (same_launch) {
    f.fix = fmt::format(
        "Both are nodes of one CUDA graph launch with no path between them. Inside the capture, record an event on "
        "{} right after {} ({}) and make {} wait on it right before {} ({}), so the graph gets the edge. CUDA: "
        "cudaEventRecord(ev, A); cudaStreamWaitEvent(B, ev) while capturing. PyTorch: ev.record(A); B.wait_event(ev) "
        "inside the torch.cuda.graph block.",
        e.stream_label, e.op, site_of(e), l.stream_label, l.op, site_of(l));
  } else if (e_node || l_node) {
    auto launch_site = [](const GraphLaunchSite& g) {
      Access a;
      a.stack = g.stack;
      return site_of(a);
    };
    auto made = [](const GraphLaunchSite& g) { return g.built ? "added" : "captured"; };
    const std::string after =
        e_node ? fmt::format("{} right after the graph launch ({} at {}, whose node {} {} at {} is the earlier access)",
                             e.graph_launch->stream_label, e.graph_launch->api, launch_site(*e.graph_launch), e.op,
                             made(*e.graph_launch), site_of(e))
               : fmt::format("{} right after {} ({})", e.stream_label, e.op, site_of(e));
    const std::string before =
        l_node ? fmt::format("{} wait on it right before the graph launch ({} at {}, whose node {} {} at {} is the later access)",
                             l.graph_launch->stream_label, l.graph_launch->api, launch_site(*l.graph_launch), l.op,
                             made(*l.graph_launch), site_of(l))
               : fmt::format("{} wait on it right before {} ({})", l.stream_label, l.op, site_of(l));
    f.fix = fmt::format(
        "Record an event on {} and make {}. A graph node cannot be ordered on its own from outside the graph: the "
        "event goes around its launch. CUDA: cudaEventRecord(ev, A); cudaStreamWaitEvent(B, ev). PyTorch: "
        "ev = torch.cuda.Event(); ev.record(A); B.wait_event(ev) (or B.wait_stream(A)).",
        after, before);
  }
  if (f.kind == RaceKind::kUseAfterReuse) {
    // PyTorch often frees a tensor with the GIL released (no Python frames can be taken then).
    const std::string freed = !f.released ? std::string("an unknown call")
                              : f.released->stack.empty()
                                  ? fmt::format("call #{} (no stack: the free ran without Python's GIL)", f.released->seq)
                                  : site_of(*f.released);
    f.missing_edge = fmt::format(
        "The allocator handed these addresses to a new tensor ({} on {}) while {} ({}) on {}, which used the tensor "
        "that had them before, may still run: that tensor was freed at {} and nothing ordered {}'s work before "
        "the free.",
        l.op, l.stream_label, e.op, e.direction, e.stream_label, freed, e.stream_label);
    f.fix = fmt::format(
        "Tell the allocator about the other stream before freeing: tensor.record_stream({}) after {} ({}), or keep "
        "the tensor alive until {} has been made to wait for {} (ev.record({}); {}.wait_event(ev)) before the "
        "free at {}.",
        e.stream_label, e.op, site_of(e), l.stream_label, e.stream_label, e.stream_label, l.stream_label, freed);
    if (f.confidence == Confidence::kPossible)
      f.fix += " One access's extent is known only from a kernel's pointer argument outside any live block: "
               "confirm with precise mode (streamrace run --precise) before changing the code.";
    return;
  }
  if (e.op_kind == "free" || l.op_kind == "free")
    f.fix += " The memory was released in stream order on one stream while another still used it: free it on the "
             "stream that used it last, or make the freeing stream wait first (PyTorch: tensor.record_stream(B)).";
  if (f.confidence == Confidence::kPossible)
    f.fix += " A kernel's accesses are known here only from its pointer arguments (extent and direction unknown): "
             "confirm with precise mode (streamrace run --precise) before changing the code.";
}

// ---------------------------------------------------------------------------------------
// JSON

void to_json(json& j, const Frame& f) {
  j = json{{"file", f.file}, {"function", f.function}, {"line", f.line}, {"python", f.python}};
  if (f.pc) j["pc"] = f.pc;
}

void from_json(const json& j, Frame& f) {
  f.file = get_or<std::string>(j, "file", "");
  f.function = get_or<std::string>(j, "function", "");
  f.line = get_or<uint32_t>(j, "line", 0);
  f.python = get_or<bool>(j, "python", false);
  f.pc = get_or<uint64_t>(j, "pc", 0);
}

void to_json(json& j, const Access& a) {
  j = json{{"op", a.op},
           {"op_kind", a.op_kind},
           {"direction", a.direction},
           {"exact", a.exact},
           {"stream", fmt::format("{:#x}", a.stream)},
           {"stream_label", a.stream_label},
           {"addr", fmt::format("{:#x}", a.addr)},
           {"bytes", a.bytes},
           {"allocation", {{"base", fmt::format("{:#x}", a.alloc_base)}, {"bytes", a.alloc_bytes}, {"kind", a.alloc_kind}}},
           {"seq", a.seq},
           {"thread", a.thread},
           {"stack", a.stack}};
  if (a.by_signature) j["by_signature"] = true;
  if (a.by_library_call) j["by_library_call"] = true;
  if (a.graph_launch) {
    const GraphLaunchSite& g = *a.graph_launch;
    j["graph_launch"] = json{{"api", g.api},
                             {"seq", g.seq},
                             {"graph_exec", fmt::format("{:#x}", g.graph_exec)},
                             {"stream", fmt::format("{:#x}", g.stream)},
                             {"stream_label", g.stream_label},
                             {"thread", g.thread},
                             {"stack", g.stack}};
  }
}

namespace {
uint64_t hex_or_number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number()) return it->get<uint64_t>();
  return std::stoull(it->get<std::string>(), nullptr, 0);
}
}  // namespace

void from_json(const json& j, Access& a) {
  a.op = get_or<std::string>(j, "op", "");
  a.op_kind = get_or<std::string>(j, "op_kind", "");
  a.direction = get_or<std::string>(j, "direction", "");
  a.exact = get_or<bool>(j, "exact", true);
  a.by_signature = get_or<bool>(j, "by_signature", false);
  a.by_library_call = get_or<bool>(j, "by_library_call", false);
  a.stream = hex_or_number(j, "stream");
  a.stream_label = get_or<std::string>(j, "stream_label", "");
  a.addr = hex_or_number(j, "addr");
  a.bytes = get_or<uint64_t>(j, "bytes", 0);
  if (j.contains("allocation")) {
    const json& al = j.at("allocation");
    a.alloc_base = hex_or_number(al, "base");
    a.alloc_bytes = get_or<uint64_t>(al, "bytes", 0);
    a.alloc_kind = get_or<std::string>(al, "kind", "");
  }
  a.seq = get_or<uint64_t>(j, "seq", 0);
  a.thread = get_or<uint32_t>(j, "thread", 0);
  if (j.contains("stack")) a.stack = j.at("stack").get<std::vector<Frame>>();
  if (auto it = j.find("graph_launch"); it != j.end() && it->is_object()) {
    GraphLaunchSite g;
    g.api = get_or<std::string>(*it, "api", "");
    g.seq = get_or<uint64_t>(*it, "seq", 0);
    g.graph_exec = hex_or_number(*it, "graph_exec");
    g.stream = hex_or_number(*it, "stream");
    g.stream_label = get_or<std::string>(*it, "stream_label", "");
    g.thread = get_or<uint32_t>(*it, "thread", 0);
    if (it->contains("stack")) g.stack = it->at("stack").get<std::vector<Frame>>();
    a.graph_launch = std::move(g);
  }
}

void to_json(json& j, const Finding& f) {
  json where = json::array();
  for (const auto& o : f.where)
    where.push_back({{"trace", o.trace}, {"rank", o.rank}, {"count", o.count}, {"first_seq", o.first_seq},
                     {"last_seq", o.last_seq}});
  j = json{{"fingerprint", f.fingerprint},
           {"kind", to_string(f.kind)},
           {"confidence", to_string(f.confidence)},
           {"mode", f.mode},
           {"accesses", {f.earlier, f.later}},
           {"overlap", {{"addr", fmt::format("{:#x}", f.overlap_addr)}, {"bytes", f.overlap_bytes}}},
           {"missing_edge", f.missing_edge},
           {"fix", {{"text", f.fix},
                    {"record_event_on", fmt::format("{:#x}", f.fix_edit.record_stream)},
                    {"after_seq", f.fix_edit.after_seq},
                    {"wait_on", fmt::format("{:#x}", f.fix_edit.wait_stream)},
                    {"before_seq", f.fix_edit.before_seq}}},
           {"occurrences", f.occurrences},
           {"ranks", f.ranks},
           {"where", where}};
  if (f.released) j["released"] = *f.released;
}

void from_json(const json& j, Finding& f) {
  f.fingerprint = j.at("fingerprint").get<std::string>();
  std::string kind = j.at("kind").get<std::string>();
  if (kind == "write-after-read") f.kind = RaceKind::kWriteAfterRead;
  else if (kind == "write-after-write") f.kind = RaceKind::kWriteAfterWrite;
  else if (kind == "read-after-write") f.kind = RaceKind::kReadAfterWrite;
  else if (kind == "use-after-reuse") f.kind = RaceKind::kUseAfterReuse;
  else if (kind == "host-write-during-copy") f.kind = RaceKind::kHostWriteDuringCopy;
  else if (kind == "host-read-during-copy") f.kind = RaceKind::kHostReadDuringCopy;
  else throw std::runtime_error("unknown finding kind '" + kind + "'");
  std::string conf = j.at("confidence").get<std::string>();
  if (conf != "certain" && conf != "possible") throw std::runtime_error("unknown confidence '" + conf + "'");
  f.confidence = conf == "certain" ? Confidence::kCertain : Confidence::kPossible;
  f.mode = get_or<std::string>(j, "mode", "default");
  const json& acc = j.at("accesses");
  if (!acc.is_array() || acc.size() != 2) throw std::runtime_error("'accesses' must hold two accesses");
  f.earlier = acc[0].get<Access>();
  f.later = acc[1].get<Access>();
  if (j.contains("overlap")) {
    f.overlap_addr = hex_or_number(j.at("overlap"), "addr");
    f.overlap_bytes = get_or<uint64_t>(j.at("overlap"), "bytes", 0);
  }
  f.missing_edge = get_or<std::string>(j, "missing_edge", "");
  if (j.contains("fix")) {
    const json& fx = j.at("fix");
    f.fix = get_or<std::string>(fx, "text", "");
    f.fix_edit.record_stream = hex_or_number(fx, "record_event_on");
    f.fix_edit.after_seq = get_or<uint64_t>(fx, "after_seq", 0);
    f.fix_edit.wait_stream = hex_or_number(fx, "wait_on");
    f.fix_edit.before_seq = get_or<uint64_t>(fx, "before_seq", 0);
  }
  f.released.reset();
  if (j.contains("released") && !j.at("released").is_null()) f.released = j.at("released").get<Access>();
  f.occurrences = get_or<uint64_t>(j, "occurrences", 1);
  f.ranks = get_or<std::vector<int>>(j, "ranks", {});
  f.where.clear();
  if (j.contains("where"))
    for (const auto& o : j.at("where"))
      f.where.push_back(Occurrence{get_or<std::string>(o, "trace", ""), get_or<int>(o, "rank", -1),
                                   get_or<uint64_t>(o, "count", 0), get_or<uint64_t>(o, "first_seq", 0),
                                   get_or<uint64_t>(o, "last_seq", 0), {}});
}

void to_json(json& j, const Notice& n) { j = json{{"level", n.level}, {"trace", n.trace}, {"text", n.text}}; }

void from_json(const json& j, Notice& n) {
  n.level = get_or<std::string>(j, "level", "info");
  n.trace = get_or<std::string>(j, "trace", "");
  n.text = get_or<std::string>(j, "text", "");
}

void to_json(json& j, const TraceSummary& t) {
  j = json{{"path", t.path},         {"host", t.host},         {"pid", t.pid},
           {"rank", t.rank},         {"capture_status", t.capture_status},
           {"mode", t.mode},         {"records", t.records},   {"accesses", t.accesses},
           {"complete", t.complete}, {"truncated", t.truncated}};
  if (!t.capture.empty()) j["capture"] = t.capture;  // only windowed traces carry it
  if (t.dropped_records != 0) j["dropped_records"] = t.dropped_records;  // only traces the tracer dropped records of
  if (t.missing_records != 0) j["missing_records"] = t.missing_records;  // only traces with call records missing
}

void from_json(const json& j, TraceSummary& t) {
  t.path = get_or<std::string>(j, "path", "");
  t.host = get_or<std::string>(j, "host", "");
  t.pid = get_or<int64_t>(j, "pid", 0);
  t.rank = get_or<int>(j, "rank", -1);
  t.capture_status = get_or<std::string>(j, "capture_status", "");
  t.mode = get_or<std::string>(j, "mode", "");
  t.records = get_or<uint64_t>(j, "records", 0);
  t.accesses = get_or<uint64_t>(j, "accesses", 0);
  t.complete = get_or<bool>(j, "complete", false);
  t.truncated = get_or<bool>(j, "truncated", false);
  t.capture = get_or<std::string>(j, "capture", "");
  t.dropped_records = get_or<uint64_t>(j, "dropped_records", 0);
  t.missing_records = get_or<uint64_t>(j, "missing_records", 0);
}

void to_json(json& j, const AnalysisResult& r) {
  uint64_t certain = 0, possible = 0;
  for (const auto& f : r.findings) (f.confidence == Confidence::kCertain ? certain : possible)++;
  j = json{{"schema", "streamrace-findings"},
           {"version", 1},
           {"summary", {{"findings", r.findings.size()}, {"certain", certain}, {"possible", possible},
                        {"traces", r.traces.size()}, {"records", r.records}, {"accesses", r.accesses},
                        {"unanalysed_graph_launches", r.unanalysed_graph_launches}}},
           {"findings", r.findings},
           {"notices", r.notices},
           {"traces", r.traces}};
  if (r.shard.count)
    j["shard"] = {{"index", r.shard.index}, {"count", r.shard.count}, {"of_traces", r.shard.of_traces}};
}

AnalysisResult result_from_json(const json& j) {
  if (!j.is_object() || j.value("schema", "") != "streamrace-findings")
    throw std::runtime_error("not a streamrace findings document (expected \"schema\": \"streamrace-findings\")");
  if (j.value("version", 0) != 1)
    throw std::runtime_error("unsupported findings document version " + std::to_string(j.value("version", 0)));
  if (!j.contains("findings") || !j.at("findings").is_array())
    throw std::runtime_error("findings document has no \"findings\" array");
  AnalysisResult r;
  try {
    r.findings = j.at("findings").get<std::vector<Finding>>();
    if (j.contains("notices")) r.notices = j.at("notices").get<std::vector<Notice>>();
    if (j.contains("traces")) r.traces = j.at("traces").get<std::vector<TraceSummary>>();
    if (j.contains("shard")) {
      const json& sh = j.at("shard");
      r.shard.index = get_or<uint32_t>(sh, "index", 0);
      r.shard.count = get_or<uint32_t>(sh, "count", 0);
      r.shard.of_traces = get_or<uint64_t>(sh, "of_traces", 0);
      if (r.shard.count == 0 || r.shard.index >= r.shard.count)
        throw std::runtime_error("shard " + std::to_string(r.shard.index) + "/" + std::to_string(r.shard.count) +
                                 " is not a shard (need 0 <= index < count)");
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed finding: ") + e.what());
  }
  if (j.contains("summary")) {
    r.records = j.at("summary").value("records", uint64_t(0));
    r.accesses = j.at("summary").value("accesses", uint64_t(0));
    r.unanalysed_graph_launches = j.at("summary").value("unanalysed_graph_launches", uint64_t(0));
  }
  return r;
}

}  // namespace streamrace::analysis
