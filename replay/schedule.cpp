// Schedule IR: construction helpers, validation and the JSON form ("streamrace-schedule").
#include "replay/schedule.h"

#include <numeric>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace streamrace::replay {

NLOHMANN_JSON_SERIALIZE_ENUM(StreamKind, {{StreamKind::kLegacyDefault, "legacy-default"},
                                          {StreamKind::kBlocking, "blocking"},
                                          {StreamKind::kNonBlocking, "non-blocking"}})

NLOHMANN_JSON_SERIALIZE_ENUM(ActionKind, {{ActionKind::kProduce, "produce"},
                                          {ActionKind::kCompute, "compute"},
                                          {ActionKind::kCopy, "copy"},
                                          {ActionKind::kCopyBack, "copy-back"},
                                          {ActionKind::kDivide, "divide"},
                                          {ActionKind::kCollective, "collective"},
                                          {ActionKind::kMemset, "memset"},
                                          {ActionKind::kSpin, "spin"},
                                          {ActionKind::kEventRecord, "event-record"},
                                          {ActionKind::kStreamWait, "stream-wait"},
                                          {ActionKind::kStreamSync, "stream-sync"},
                                          {ActionKind::kEventSync, "event-sync"},
                                          {ActionKind::kDeviceSync, "device-sync"},
                                          {ActionKind::kAlloc, "alloc"},
                                          {ActionKind::kFree, "free"}})

NLOHMANN_JSON_SERIALIZE_ENUM(CollectiveKind, {{CollectiveKind::kAllReduce, "all-reduce"},
                                              {CollectiveKind::kReduceScatter, "reduce-scatter"},
                                              {CollectiveKind::kAllGather, "all-gather"}})

const char* to_string(ActionKind k) {
  switch (k) {
    case ActionKind::kProduce: return "produce";
    case ActionKind::kCompute: return "compute";
    case ActionKind::kCopy: return "copy";
    case ActionKind::kCopyBack: return "copy-back";
    case ActionKind::kDivide: return "divide";
    case ActionKind::kCollective: return "collective";
    case ActionKind::kMemset: return "memset";
    case ActionKind::kSpin: return "spin";
    case ActionKind::kEventRecord: return "event-record";
    case ActionKind::kStreamWait: return "stream-wait";
    case ActionKind::kStreamSync: return "stream-sync";
    case ActionKind::kEventSync: return "event-sync";
    case ActionKind::kDeviceSync: return "device-sync";
    case ActionKind::kAlloc: return "alloc";
    case ActionKind::kFree: return "free";
  }
  return "?";
}

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all-reduce";
    case CollectiveKind::kReduceScatter: return "reduce-scatter";
    case CollectiveKind::kAllGather: return "all-gather";
  }
  return "?";
}

const char* to_string(StreamKind k) {
  switch (k) {
    case StreamKind::kLegacyDefault: return "legacy-default";
    case StreamKind::kBlocking: return "blocking";
    case StreamKind::kNonBlocking: return "non-blocking";
  }
  return "?";
}

bool is_device_op(ActionKind k) {
  switch (k) {
    case ActionKind::kProduce:
    case ActionKind::kCompute:
    case ActionKind::kCopy:
    case ActionKind::kCopyBack:
    case ActionKind::kDivide:
    case ActionKind::kCollective:
    case ActionKind::kMemset:
    case ActionKind::kSpin:
      return true;
    default:
      return false;
  }
}

bool touches_memory(ActionKind k) { return is_device_op(k) && k != ActionKind::kSpin; }

bool is_host_sync(ActionKind k) {
  return k == ActionKind::kStreamSync || k == ActionKind::kEventSync || k == ActionKind::kDeviceSync;
}

bool is_lifetime(ActionKind k) { return k == ActionKind::kAlloc || k == ActionKind::kFree; }

uint32_t dtype_bytes(const std::string& dtype) {
  if (dtype == "fp32" || dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "fp16" || dtype == "float16" || dtype == "bf16" || dtype == "bfloat16") return 2;
  if (dtype == "fp64" || dtype == "float64" || dtype == "int64") return 8;
  if (dtype == "int8" || dtype == "uint8") return 1;
  return 0;
}

uint32_t Schedule::add_stream(std::string n, StreamKind kind, uint64_t handle) {
  streams.push_back(Stream{std::move(n), kind, handle});
  return uint32_t(streams.size() - 1);
}

uint32_t Schedule::add_event(std::string n) {
  events.push_back(std::move(n));
  return uint32_t(events.size() - 1);
}

uint32_t Schedule::add_buffer(std::string n, uint64_t bytes, std::string role, uint64_t address, std::string alloc) {
  buffers.push_back(Buffer{std::move(n), bytes, address, std::move(role), std::move(alloc)});
  return uint32_t(buffers.size() - 1);
}

uint32_t Schedule::find_stream(const std::string& n) const {
  for (uint32_t i = 0; i < streams.size(); ++i)
    if (streams[i].name == n) return i;
  return kNone;
}

uint32_t Schedule::find_buffer(const std::string& n) const {
  for (uint32_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].name == n) return i;
  return kNone;
}

uint64_t Schedule::cell_bytes() const {
  uint64_t g = elem_bytes ? elem_bytes : 1;
  for (const auto& b : buffers) g = std::gcd(g, b.bytes);
  for (const auto& a : actions) {
    for (const auto* list : {&a.reads, &a.writes})
      for (const auto& r : *list) g = std::gcd(g, std::gcd(r.offset, r.bytes));
  }
  return g ? g : 1;
}

std::vector<uint8_t> Schedule::live_at_start() const {
  std::vector<uint8_t> live(buffers.size(), 1), seen(buffers.size(), 0);
  for (const auto& a : actions) {
    if (!is_lifetime(a.kind) || a.buffer >= buffers.size() || seen[a.buffer]) continue;
    seen[a.buffer] = 1;
    live[a.buffer] = a.kind != ActionKind::kAlloc;
  }
  return live;
}

std::vector<uint8_t> Schedule::live_at_end() const {
  std::vector<uint8_t> live = live_at_start();
  for (const auto& a : actions)
    if (is_lifetime(a.kind) && a.buffer < buffers.size()) live[a.buffer] = a.kind == ActionKind::kAlloc;
  return live;
}

std::vector<std::string> Schedule::validate() const {
  std::vector<std::string> errs;
  if (world < 1) errs.push_back(fmt::format("world size {} is not positive", world));
  if (rank < 0 || rank >= world) errs.push_back(fmt::format("rank {} is outside world size {}", rank, world));
  if (elem_bytes == 0) errs.push_back("element size is 0");
  auto check_range = [&](size_t i, const ByteRange& r, const char* what) {
    if (r.buffer >= buffers.size()) {
      errs.push_back(fmt::format("action {} ({}): {} range names buffer {} of {}", i, actions[i].label, what, r.buffer,
                                 buffers.size()));
      return;
    }
    if (r.end() > buffers[r.buffer].bytes || r.end() < r.offset)
      errs.push_back(fmt::format("action {} ({}): {} range [{}, {}) is outside buffer {} ({} bytes)", i,
                                 actions[i].label, what, r.offset, r.end(), buffers[r.buffer].name,
                                 buffers[r.buffer].bytes));
  };
  std::vector<uint8_t> live = live_at_start();
  std::vector<size_t> freed_at(buffers.size(), SIZE_MAX);  // the action that last freed a buffer
  auto check_live = [&](size_t i, const ByteRange& r, const char* what) {
    if (r.buffer >= buffers.size() || live[r.buffer]) return;
    if (freed_at[r.buffer] != SIZE_MAX)
      errs.push_back(fmt::format("action {} ({}): {} range uses buffer {} after its free (action {})", i,
                                 actions[i].label, what, buffers[r.buffer].name, freed_at[r.buffer]));
    else
      errs.push_back(fmt::format("action {} ({}): {} range uses buffer {} before its allocation", i, actions[i].label,
                                 what, buffers[r.buffer].name));
  };
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto& a = actions[i];
    if (is_lifetime(a.kind)) {
      if (a.buffer >= buffers.size()) {
        errs.push_back(fmt::format("action {} ({}): {} names buffer {} of {}", i, a.label, to_string(a.kind), a.buffer,
                                   buffers.size()));
        continue;
      }
      const Buffer& b = buffers[a.buffer];
      if (b.alloc != "device" && b.alloc != "managed" && b.alloc != "pinned-host")
        errs.push_back(fmt::format("action {} ({}): {} of buffer {} allocated as \"{}\" (alloc and free actions model "
                                   "device, managed and pinned-host memory)",
                                   i, a.label, to_string(a.kind), b.name, b.alloc));
      if (a.kind == ActionKind::kAlloc && live[a.buffer])
        errs.push_back(fmt::format("action {} ({}): allocates buffer {}, which is live", i, a.label, b.name));
      if (a.kind == ActionKind::kFree && !live[a.buffer])
        errs.push_back(fmt::format("action {} ({}): frees buffer {}, which is not allocated", i, a.label, b.name));
      live[a.buffer] = a.kind == ActionKind::kAlloc;
      if (a.kind == ActionKind::kFree) freed_at[a.buffer] = i;
      continue;
    }
    for (const auto& r : a.reads) check_live(i, r, "read");
    for (const auto& r : a.writes) check_live(i, r, "write");
    bool needs_stream = is_device_op(a.kind) || a.kind == ActionKind::kEventRecord ||
                        a.kind == ActionKind::kStreamWait || a.kind == ActionKind::kStreamSync;
    if (needs_stream && a.stream >= streams.size())
      errs.push_back(fmt::format("action {} ({}): no stream {}", i, a.label, a.stream));
    bool needs_event = a.kind == ActionKind::kEventRecord || a.kind == ActionKind::kStreamWait ||
                       a.kind == ActionKind::kEventSync;
    if (needs_event && a.event >= events.size())
      errs.push_back(fmt::format("action {} ({}): no event {}", i, a.label, a.event));
    for (const auto& r : a.reads) check_range(i, r, "read");
    for (const auto& r : a.writes) check_range(i, r, "write");
    auto need = [&](size_t nr, size_t nw) {
      if (a.reads.size() != nr || a.writes.size() != nw)
        errs.push_back(fmt::format("action {} ({}): a {} needs {} read and {} write ranges, has {} and {}", i, a.label,
                                   to_string(a.kind), nr, nw, a.reads.size(), a.writes.size()));
    };
    switch (a.kind) {
      case ActionKind::kCopy:
      case ActionKind::kCopyBack:
        need(1, 1);
        if (a.reads.size() == 1 && a.writes.size() == 1 && a.reads[0].bytes != a.writes[0].bytes)
          errs.push_back(fmt::format("action {} ({}): copy of {} bytes into {} bytes", i, a.label, a.reads[0].bytes,
                                     a.writes[0].bytes));
        break;
      case ActionKind::kDivide:
        need(1, 1);
        if (a.divisor == 0) errs.push_back(fmt::format("action {} ({}): divide by 0", i, a.label));
        if (a.reads.size() == 1 && a.writes.size() == 1 && !(a.reads[0] == a.writes[0]))
          errs.push_back(fmt::format("action {} ({}): a divide is in place", i, a.label));
        break;
      case ActionKind::kProduce:
        if (a.writes.size() != 1)
          errs.push_back(fmt::format("action {} ({}): a produce writes one range", i, a.label));
        if (a.param >= params.size()) errs.push_back(fmt::format("action {} ({}): no parameter {}", i, a.label, a.param));
        break;
      case ActionKind::kMemset:
        need(0, 1);
        break;
      case ActionKind::kCollective: {
        need(1, 1);
        if (a.reads.size() != 1 || a.writes.size() != 1) break;
        uint64_t s = a.reads[0].bytes, r = a.writes[0].bytes;
        bool ok = a.collective == CollectiveKind::kAllReduce       ? s == r
                  : a.collective == CollectiveKind::kReduceScatter ? s == r * uint64_t(world)
                                                                   : r == s * uint64_t(world);
        if (!ok)
          errs.push_back(fmt::format("action {} ({}): {} with {} send bytes and {} receive bytes on {} ranks", i,
                                     a.label, to_string(a.collective), s, r, world));
        break;
      }
      default:
        break;
    }
  }
  for (size_t i = 0; i < expectations.size(); ++i) {
    const auto& e = expectations[i];
    if (e.range.buffer >= buffers.size() || e.range.end() > buffers[e.range.buffer].bytes)
      errs.push_back(fmt::format("expectation {} ({}) names a range outside its buffer", i, e.label));
    if (e.param >= params.size()) errs.push_back(fmt::format("expectation {} ({}) names no parameter", i, e.label));
    if (e.range.buffer < buffers.size() && !live[e.range.buffer])
      errs.push_back(fmt::format("expectation {} ({}) names buffer {}, which is not allocated when the program ends", i,
                                 e.label, buffers[e.range.buffer].name));
  }
  return errs;
}

// ---- JSON ------------------------------------------------------------------------------

static void to_json(nlohmann::json& j, const ByteRange& r) { j = {r.buffer, r.offset, r.bytes}; }
static void from_json(const nlohmann::json& j, ByteRange& r) {
  if (!j.is_array() || j.size() != 3) throw std::runtime_error("a byte range is [buffer, offset, bytes]");
  r.buffer = j[0].get<uint32_t>();
  r.offset = j[1].get<uint64_t>();
  r.bytes = j[2].get<uint64_t>();
}

static void to_json(nlohmann::json& j, const Site& s) {
  j = {{"file", s.file}, {"function", s.function}, {"line", s.line}};
  if (!s.python) j["python"] = false;
}
static void from_json(const nlohmann::json& j, Site& s) {
  s.file = j.at("file").get<std::string>();
  s.function = j.value("function", "");
  s.line = j.value("line", 0u);
  s.python = j.value("python", true);
}

static void to_json(nlohmann::json& j, const Action& a) {
  j = nlohmann::json::object();
  j["kind"] = a.kind;
  if (a.stream != kNone) j["stream"] = a.stream;
  if (a.event != kNone) j["event"] = a.event;
  if (a.buffer != kNone) j["buffer"] = a.buffer;
  j["label"] = a.label;
  if (!a.reads.empty()) j["reads"] = a.reads;
  if (!a.writes.empty()) j["writes"] = a.writes;
  if (!a.stack.empty()) j["stack"] = a.stack;
  if (a.kind == ActionKind::kCollective) j["collective"] = a.collective;
  if (a.kind == ActionKind::kDivide) j["divisor"] = a.divisor;
  if (a.kind == ActionKind::kMemset) j["fill"] = a.fill;
  if (a.kind == ActionKind::kSpin) j["spin_ns"] = a.spin_ns;
  if (a.param != kNone) {
    j["param"] = a.param;
    j["param_offset"] = a.param_offset;
  }
  if (a.flush >= 0) j["flush"] = a.flush;
  if (a.cost_ns) j["cost_ns"] = a.cost_ns;
  if (a.host_blocking) j["host_blocking"] = true;
  if (!a.api.empty()) j["api"] = a.api;
  if (a.source_seq != std::numeric_limits<uint64_t>::max()) j["source_seq"] = a.source_seq;
  if (!a.kernel_ptrs.empty()) j["kernel_ptrs"] = a.kernel_ptrs;
  if (!a.exact) j["exact"] = false;
}

static void from_json(const nlohmann::json& j, Action& a) {
  a.kind = j.at("kind").get<ActionKind>();
  if (j.contains("kind") && j["kind"].is_string() && to_string(a.kind) != j["kind"].get<std::string>())
    throw std::runtime_error("unknown action kind \"" + j["kind"].get<std::string>() + "\"");
  a.stream = j.value("stream", kNone);
  a.event = j.value("event", kNone);
  a.buffer = j.value("buffer", kNone);
  a.label = j.value("label", "");
  a.reads = j.value("reads", std::vector<ByteRange>{});
  a.writes = j.value("writes", std::vector<ByteRange>{});
  a.stack = j.value("stack", std::vector<Site>{});
  if (j.contains("collective")) {
    a.collective = j["collective"].get<CollectiveKind>();
    if (to_string(a.collective) != j["collective"].get<std::string>())
      throw std::runtime_error("unknown collective \"" + j["collective"].get<std::string>() + "\"");
  }
  a.divisor = j.value("divisor", uint64_t(1));
  a.fill = j.value("fill", uint64_t(0));
  a.spin_ns = j.value("spin_ns", uint64_t(0));
  a.param = j.value("param", kNone);
  a.param_offset = j.value("param_offset", uint64_t(0));
  a.flush = j.value("flush", -1);
  a.cost_ns = j.value("cost_ns", uint64_t(0));
  a.host_blocking = j.value("host_blocking", false);
  a.api = j.value("api", "");
  a.source_seq = j.value("source_seq", std::numeric_limits<uint64_t>::max());
  a.kernel_ptrs = j.value("kernel_ptrs", std::vector<uint64_t>{});
  a.exact = j.value("exact", true);
}

void to_json(nlohmann::json& j, const Schedule& s) {
  j = nlohmann::json::object();
  j["schema"] = "streamrace-schedule";
  j["version"] = 1;
  j["name"] = s.name;
  j["description"] = s.description;
  j["world"] = s.world;
  j["rank"] = s.rank;
  j["dtype"] = s.dtype;
  j["elem_bytes"] = s.elem_bytes;
  auto& streams = j["streams"] = nlohmann::json::array();
  for (const auto& st : s.streams) {
    nlohmann::json o = {{"name", st.name}, {"kind", st.kind}};
    if (st.handle) o["handle"] = st.handle;
    streams.push_back(o);
  }
  j["events"] = s.events;
  auto& buffers = j["buffers"] = nlohmann::json::array();
  for (const auto& b : s.buffers) {
    nlohmann::json o = {{"name", b.name}, {"bytes", b.bytes}, {"role", b.role}};
    if (b.address) o["address"] = b.address;
    if (b.alloc != "device") o["alloc"] = b.alloc;
    buffers.push_back(o);
  }
  auto& params = j["params"] = nlohmann::json::array();
  for (const auto& p : s.params) params.push_back({{"name", p.name}, {"elements", p.elements}});
  j["actions"] = s.actions;
  auto& ex = j["expectations"] = nlohmann::json::array();
  for (const auto& e : s.expectations)
    ex.push_back({{"range", e.range}, {"param", e.param}, {"param_offset", e.param_offset}, {"label", e.label}});
  j["meta"] = s.meta;
}

void from_json(const nlohmann::json& j, Schedule& s) {
  if (!j.is_object() || j.value("schema", "") != "streamrace-schedule")
    throw std::runtime_error("not a streamrace schedule (expected \"schema\": \"streamrace-schedule\")");
  if (j.value("version", 0) != 1)
    throw std::runtime_error("unsupported schedule version " + std::to_string(j.value("version", 0)));
  s = Schedule{};
  s.name = j.value("name", "");
  s.description = j.value("description", "");
  s.world = j.value("world", 1);
  s.rank = j.value("rank", 0);
  s.dtype = j.value("dtype", "fp32");
  s.elem_bytes = j.value("elem_bytes", dtype_bytes(s.dtype));
  for (const auto& o : j.at("streams")) {
    Stream st;
    st.name = o.at("name").get<std::string>();
    st.kind = o.at("kind").get<StreamKind>();
    if (to_string(st.kind) != o["kind"].get<std::string>())
      throw std::runtime_error("unknown stream kind \"" + o["kind"].get<std::string>() + "\"");
    st.handle = o.value("handle", uint64_t(0));
    s.streams.push_back(st);
  }
  s.events = j.value("events", std::vector<std::string>{});
  for (const auto& o : j.at("buffers"))
    s.buffers.push_back(Buffer{o.at("name").get<std::string>(), o.at("bytes").get<uint64_t>(),
                               o.value("address", uint64_t(0)), o.value("role", ""), o.value("alloc", "device")});
  for (const auto& o : j.value("params", nlohmann::json::array()))
    s.params.push_back(Param{o.at("name").get<std::string>(), o.at("elements").get<uint64_t>()});
  s.actions = j.at("actions").get<std::vector<Action>>();
  for (const auto& o : j.value("expectations", nlohmann::json::array())) {
    Expectation e;
    e.range = o.at("range").get<ByteRange>();
    e.param = o.at("param").get<uint32_t>();
    e.param_offset = o.value("param_offset", uint64_t(0));
    e.label = o.value("label", "");
    s.expectations.push_back(e);
  }
  s.meta = j.value("meta", std::map<std::string, std::string>{});
}

Schedule schedule_from_json_text(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("schedule JSON does not parse: ") + e.what());
  }
  Schedule s;
  try {
    s = j.get<Schedule>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("schedule JSON has the wrong shape: ") + e.what());
  }
  auto errs = s.validate();
  if (!errs.empty()) throw std::runtime_error("schedule is not well formed: " + errs.front());
  return s;
}

std::string schedule_to_json_text(const Schedule& s, int indent) {
  nlohmann::json j = s;
  return j.dump(indent);
}

}  // namespace streamrace::replay
