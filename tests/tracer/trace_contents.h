// Test helper: reads a whole trace file into memory, records in file order, with the
// string and stack definitions resolved, so tests can assert exact records.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <algorithm>
#include <vector>

#include "traceformat/trace_file.h"

namespace streamrace::tracer::testing {

struct RecordCopy {
  trace::RecordKind kind;
  std::vector<uint8_t> body;
  template <trace::FixedRecord T>
  T as() const {
    T out{};
    std::memcpy(&out, body.data(), body.size() < sizeof(T) ? body.size() : sizeof(T));
    return out;
  }
  // The words after T; of a kernel launch, its pointer arguments (not the arguments' hash).
  template <typename T>
  std::vector<uint64_t> tail_words() const {
    size_t n = (body.size() - sizeof(T)) / 8;
    if constexpr (std::is_same_v<T, trace::KernelLaunchHead>) n = std::min<size_t>(n, as<T>().nptrs);
    std::vector<uint64_t> out(n);
    if (!out.empty()) std::memcpy(out.data(), body.data() + sizeof(T), out.size() * 8);
    return out;
  }
};

struct TraceContents {
  trace::TraceHeader header;
  trace::ReadStats stats;
  std::vector<RecordCopy> records;  // excluding StringDef and StackDef
  std::map<uint32_t, std::string> strings;
  std::map<uint32_t, std::vector<trace::StackFrame>> stacks;
  bool defs_before_use = true;  // every string/stack id was defined before a record used it

  std::vector<RecordCopy> of(trace::RecordKind k) const {
    std::vector<RecordCopy> out;
    for (auto& r : records)
      if (r.kind == k) out.push_back(r);
    return out;
  }
  // The text of every Notice, in file order.
  std::vector<std::string> notice_texts() const {
    std::vector<std::string> out;
    for (auto& r : records)
      if (r.kind == trace::RecordKind::kNotice) out.emplace_back(r.body.begin() + sizeof(trace::NoticeHead), r.body.end());
    return out;
  }
  std::string str(uint32_t id) const {
    auto it = strings.find(id);
    return it == strings.end() ? "<undefined " + std::to_string(id) + ">" : it->second;
  }
};

inline TraceContents read_trace(const std::string& path) {
  TraceContents c;
  trace::TraceReader reader(path);
  c.header = reader.header();
  reader.for_each([&](const trace::RecordView& v) {
    if (v.kind == trace::RecordKind::kStringDef) {
      auto h = v.as<trace::StringDefHead>();
      auto t = v.tail<trace::StringDefHead>();
      c.strings[h.id] = std::string(reinterpret_cast<const char*>(t.data()), t.size());
      return;
    }
    if (v.kind == trace::RecordKind::kStackDef) {
      auto h = v.as<trace::StackDefHead>();
      auto t = v.tail<trace::StackDefHead>();
      std::vector<trace::StackFrame> frames(h.nframes);
      std::memcpy(frames.data(), t.data(), std::min(t.size(), frames.size() * sizeof(trace::StackFrame)));
      for (auto& f : frames) {
        if (f.file_id && !c.strings.count(f.file_id)) c.defs_before_use = false;
        if (f.function_id && !c.strings.count(f.function_id)) c.defs_before_use = false;
      }
      c.stacks[h.id] = frames;
      return;
    }
    RecordCopy r{v.kind, {v.body.begin(), v.body.end()}};
    // Every call record starts with CallInfo right after nothing else: check its ids.
    if (v.kind != trace::RecordKind::kNotice && v.kind != trace::RecordKind::kOpTiming &&
        v.kind != trace::RecordKind::kKernelAccess && v.body.size() >= sizeof(trace::CallInfo)) {
      trace::CallInfo ci;
      std::memcpy(&ci, v.body.data(), sizeof ci);
      if (ci.api_id && !c.strings.count(ci.api_id)) c.defs_before_use = false;
      if (ci.stack_id && !c.stacks.count(ci.stack_id)) c.defs_before_use = false;
    }
    c.records.push_back(std::move(r));
  });
  c.stats = reader.stats();
  return c;
}

}  // namespace streamrace::tracer::testing
