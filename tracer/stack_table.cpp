// StackTable: see stack_table.h.
#include "tracer/stack_table.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>

namespace streamrace::tracer {

uint64_t hash_words(std::span<const uint64_t> words, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (uint64_t w : words) {
    h ^= w;
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

namespace {
static_assert(sizeof(trace::StackFrame) % sizeof(uint64_t) == 0);
std::span<const uint64_t> as_words(std::span<const trace::StackFrame> frames) {
  return {reinterpret_cast<const uint64_t*>(frames.data()), frames.size_bytes() / sizeof(uint64_t)};
}
}  // namespace

uint32_t StackTable::intern_native(std::span<const uint64_t> pcs) {
  return intern(hash_words(pcs, 1), true, pcs);
}

uint32_t StackTable::intern_frames(std::span<const trace::StackFrame> frames) {
  auto words = as_words(frames);
  return intern(hash_words(words, 2), false, words);
}

uint64_t StackTable::next_uid() {
  static std::atomic<uint64_t> n{1};
  return n.fetch_add(1);
}

uint32_t StackTable::intern(uint64_t hash, bool native, std::span<const uint64_t> words) {
  // A thread makes the same calls from the same few stacks over and over: its own map of the
  // stacks it interned answers those without the table's lock.
  struct Front {
    uint64_t table = 0;
    std::unordered_map<uint64_t, std::pair<uint32_t, std::vector<uint64_t>>> ids;  // hash -> id, content
  };
  thread_local Front front;
  if (front.table != uid_ || front.ids.size() >= 4096) {
    front.ids.clear();
    front.table = uid_;
  }
  const uint64_t key = hash ^ (native ? 0x5bd1e995u : 0u);
  if (auto it = front.ids.find(key);
      it != front.ids.end() && std::equal(words.begin(), words.end(), it->second.second.begin(), it->second.second.end()))
    return it->second.first;
  const uint32_t id = intern_shared(hash, native, words);
  front.ids[key] = {id, std::vector<uint64_t>(words.begin(), words.end())};
  return id;
}

uint32_t StackTable::intern_shared(uint64_t hash, bool native, std::span<const uint64_t> words) {
  std::lock_guard lock(mu_);
  auto it = by_hash_.find(hash);
  if (it != by_hash_.end() && it->second.native == native && it->second.words.size() == words.size() &&
      std::equal(words.begin(), words.end(), it->second.words.begin()))
    return it->second.id;
  uint32_t id = next_++;
  PendingStack p;
  p.id = id;
  if (native) {
    p.pcs.assign(words.begin(), words.end());
  } else {
    p.frames.resize(words.size() * sizeof(uint64_t) / sizeof(trace::StackFrame));
    std::memcpy(p.frames.data(), words.data(), words.size_bytes());
  }
  pending_.push_back(std::move(p));
  if (it == by_hash_.end()) by_hash_.emplace(hash, Entry{id, native, {words.begin(), words.end()}});
  return id;
}

std::vector<PendingStack> StackTable::take_pending(StringTable& strings) {
  std::vector<PendingStack> out;
  {
    std::lock_guard lock(mu_);
    out.swap(pending_);
  }
  for (auto& p : out) {
    if (p.pcs.empty()) continue;
    p.frames.reserve(p.pcs.size());
    for (size_t i = 0; i < p.pcs.size(); ++i) p.frames.push_back(symbolize_native_pc(p.pcs[i], strings, true));
  }
  return out;
}

trace::StackFrame symbolize_native_pc(uint64_t pc, StringTable& strings, bool is_return_address) {
  trace::StackFrame f{};
  f.kind = trace::FrameKind::kNative;
  // A return address points after the call; look up the call instruction itself.
  uint64_t lookup = is_return_address && pc > 0 ? pc - 1 : pc;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(lookup), &info) != 0 && info.dli_fname != nullptr) {
    f.file_id = strings.intern(info.dli_fname[0] ? info.dli_fname : "<main>");
    f.pc = lookup - reinterpret_cast<uint64_t>(info.dli_fbase);
    if (info.dli_sname != nullptr) {
      int status = 0;
      char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      f.function_id = strings.intern(status == 0 && demangled ? demangled : info.dli_sname);
      std::free(demangled);
    }
  } else {
    f.file_id = strings.intern("<unknown>");
    f.pc = lookup;
  }
  return f;
}

}  // namespace streamrace::tracer
