// CallIndex: the fix editor's one-pass index of a trace (see call_index.h).
#include "replay/call_index.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace streamrace::replay {

using namespace streamrace::trace;

CallIndex CallIndex::read(const std::string& path) {
  CallIndex index(path);
  CallStream stream(path);
  stream.for_each([&](const RecordView& r) { index.record(r); });
  index.end(stream);
  return index;
}

uint8_t CallIndex::stream_code(uint64_t seq, uint64_t stream) {
  if (last_code_ && stream == last_stream_) return last_code_;
  uint8_t code;
  if (auto it = code_of_stream_.find(stream); it != code_of_stream_.end()) {
    code = it->second;
  } else if (stream_table_.size() < kTableCodes) {
    if (!wide_ && stream_table_.size() == kNibbleCodes) widen();
    stream_table_.push_back(stream);
    code = uint8_t(stream_table_.size());
    code_of_stream_.emplace(stream, code);
  } else {
    overflow_.emplace(seq, stream);
    return kOverflow;
  }
  last_stream_ = stream;
  last_code_ = code;
  return code;
}

void CallIndex::widen() {
  std::vector<std::unique_ptr<uint8_t[]>> wide;
  for (size_t i = 0; i < ncodes_; ++i) {
    if (i % kBlockBytes == 0) wide.push_back(std::make_unique<uint8_t[]>(kBlockBytes));
    wide.back()[i % kBlockBytes] = code_at(i);
  }
  code_blocks_.swap(wide);
  wide_ = true;
}

void CallIndex::record(const RecordView& r) {
  if (keep_limit_ && !kept_dropped_) {
    const uint16_t head[2] = {uint16_t(r.kind), uint16_t(r.body.size())};
    const size_t bytes = sizeof(head) + r.body.size();
    if (kept_bytes_ + bytes > keep_limit_ || r.body.size() > 0xFFFF) {
      std::vector<KeptBlock>().swap(kept_);
      kept_bytes_ = 0;
      kept_dropped_ = true;
    } else {
      if (kept_.empty() || kept_.back().used + bytes > kKeptBlockBytes)
        kept_.push_back(KeptBlock{std::unique_ptr<uint8_t[]>(new uint8_t[kKeptBlockBytes]), 0});
      KeptBlock& b = kept_.back();
      std::memcpy(b.bytes.get() + b.used, head, sizeof(head));
      if (!r.body.empty()) std::memcpy(b.bytes.get() + b.used + sizeof(head), r.body.data(), r.body.size());
      b.used += bytes;
      kept_bytes_ += bytes;
    }
  }
  switch (r.kind) {
    case RecordKind::kStringDef: {
      auto h = r.as<StringDefHead>();
      max_string_ = std::max(max_string_, h.id);
      auto t = r.tail<StringDefHead>();
      if (t.size() >= std::strlen(kFixApiPrefix) &&
          std::memcmp(t.data(), kFixApiPrefix, std::strlen(kFixApiPrefix)) == 0)
        fix_strings_.emplace_back(std::string(reinterpret_cast<const char*>(t.data()), t.size()), h.id);
      return;
    }
    case RecordKind::kStreamCreate:
      if (r.body.size() >= sizeof(StreamCreate)) {
        const StreamCreate c = r.as<StreamCreate>();
        created_streams_.emplace_back(c.stream, c.call.seq);
      }
      break;
    case RecordKind::kEventCreate: note_event(r.as<EventCreate>().event); break;
    case RecordKind::kEventRecord: note_event(r.as<EventRecord>().event); break;
    case RecordKind::kStreamWaitEvent: note_event(r.as<StreamWaitEvent>().event); break;
    default:
      break;
  }
  if (!has_call_info(r.kind) || record_fixed_size(r.kind) == 0) return;
  uint64_t seq;
  std::memcpy(&seq, r.body.data(), sizeof(seq));
  uint8_t code = 0;
  switch (r.kind) {
    case RecordKind::kKernelLaunch:
    case RecordKind::kMemcpy:
    case RecordKind::kMemset:
    case RecordKind::kNcclCall: {
      // The accessing calls all carry their stream right after the call's common fields.
      static_assert(offsetof(KernelLaunchHead, stream) == sizeof(CallInfo));
      static_assert(offsetof(Memcpy, stream) == sizeof(CallInfo));
      static_assert(offsetof(Memset, stream) == sizeof(CallInfo));
      static_assert(offsetof(NcclCall, stream) == sizeof(CallInfo));
      if (r.body.size() < sizeof(CallInfo) + sizeof(uint64_t)) break;
      uint64_t stream;
      std::memcpy(&stream, r.body.data() + sizeof(CallInfo), sizeof(stream));
      code = stream_code(seq, stream);
      break;
    }
    default:
      break;
  }
  // CallStream hands calls out in increasing seq order (repeats are left out).
  if (runs_.empty() || seq != last_seq_ + 1) runs_.push_back(Run{seq, ncodes_});
  push_code(code);
  last_seq_ = seq;
  ++ncalls_;
}

void CallIndex::end(const CallStream& stream) {
  header_ = stream.header();
  for (const auto& w : stream.warnings()) warnings_.push_back(path_ + ": " + w);
  if (stream.stats().seq_gaps) warnings_.push_back(path_ + ": the edited trace numbers calls densely");
  std::sort(created_streams_.begin(), created_streams_.end());
  std::sort(high_events_.begin(), high_events_.end());
  high_events_.erase(std::unique(high_events_.begin(), high_events_.end()), high_events_.end());
  runs_.shrink_to_fit();
}

void CallIndex::for_each_record(const std::function<void(const RecordView&)>& fn) const {
  for (const KeptBlock& b : kept_)
    for (size_t at = 0; at < b.used;) {
      uint16_t head[2];
      std::memcpy(head, b.bytes.get() + at, sizeof(head));
      at += sizeof(head);
      fn(RecordView{RecordKind(head[0]), std::span<const uint8_t>(b.bytes.get() + at, head[1])});
      at += head[1];
    }
}

std::optional<size_t> CallIndex::code_index(uint64_t seq) const {
  auto it = std::upper_bound(runs_.begin(), runs_.end(), seq, [](uint64_t s, const Run& r) { return s < r.first_seq; });
  if (it == runs_.begin()) return std::nullopt;
  const Run& run = *std::prev(it);
  const size_t end = it == runs_.end() ? ncodes_ : it->first_code;
  if (seq - run.first_seq >= end - run.first_code) return std::nullopt;
  return run.first_code + size_t(seq - run.first_seq);
}

bool CallIndex::is_call(uint64_t seq) const { return code_index(seq).has_value(); }

std::optional<uint64_t> CallIndex::stream_of_call(uint64_t seq) const {
  auto at = code_index(seq);
  if (!at) return std::nullopt;
  const uint8_t code = code_at(*at);
  if (code == 0) return std::nullopt;
  if (code == kOverflow) return overflow_.at(seq);
  return stream_table_[code - 1];
}

bool CallIndex::has_stream(uint64_t handle) const {
  if (is_legacy_stream(handle) || is_per_thread_stream(handle)) return true;
  auto it = std::lower_bound(created_streams_.begin(), created_streams_.end(), std::make_pair(handle, uint64_t(0)));
  return it != created_streams_.end() && it->first == handle;
}

bool CallIndex::created_between(uint64_t handle, uint64_t after, uint64_t before) const {
  auto it = std::upper_bound(created_streams_.begin(), created_streams_.end(), std::make_pair(handle, after));
  return it != created_streams_.end() && it->first == handle && it->second < before;
}

void CallIndex::note_event(uint64_t event) {
  if (event < kFixEventBase) return;
  if (event < kFixEventRange) {
    last_fix_event_ = std::max(last_fix_event_, event);
    return;
  }
  if (high_events_.empty() || high_events_.back() != event) high_events_.push_back(event);
}

uint64_t CallIndex::first_fix_event() const {
  // Continue after the fix events a previous round inserted.
  return last_fix_event_ ? last_fix_event_ + 1 : kFixEventBase;
}

bool CallIndex::fix_event_used(uint64_t event) const {
  // Nothing the trace uses lies between first_fix_event() and kFixEventRange.
  return std::binary_search(high_events_.begin(), high_events_.end(), event);
}

}  // namespace streamrace::replay
