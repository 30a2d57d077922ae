// LaunchCorpus: see launch_corpus.h.
#include "tracer/launch_corpus.h"

#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include "tracer/cuda_call_table.h"

namespace streamrace::tracer {

namespace {
bool parse_count(const std::string& s, uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) return false;
  out = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}
}  // namespace

std::unique_ptr<LaunchCorpus> LaunchCorpus::open(const std::string& spec, std::string* why) {
  // PATH may hold ':' itself only before the last two fields: take numbers from the right.
  std::string path = spec;
  uint64_t skip = 0, count = 20000;
  std::vector<std::string> tail;
  for (int i = 0; i < 2; ++i) {
    const size_t colon = path.rfind(':');
    if (colon == std::string::npos) break;
    uint64_t v = 0;
    if (!parse_count(path.substr(colon + 1), v)) break;
    tail.insert(tail.begin(), path.substr(colon + 1));
    path.resize(colon);
  }
  if (tail.size() >= 1) parse_count(tail[0], skip);
  if (tail.size() == 2) parse_count(tail[1], count);
  if (path.empty()) {
    if (why) *why = "launch_corpus: no file named in '" + spec + "' (PATH[:SKIP[:COUNT]])";
    return nullptr;
  }
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    if (why) *why = "launch_corpus: cannot write " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  std::fputs("streamrace-launch-corpus 1\n", f);
  return std::unique_ptr<LaunchCorpus>(new LaunchCorpus(f, skip, count));
}

LaunchCorpus::~LaunchCorpus() {
  if (f_ != nullptr) std::fclose(f_);
}

void LaunchCorpus::add(uint64_t func, const char* name, std::span<const ParamSlot> layout, const CudaCall& call,
                       std::span<const uint64_t> live_words, const AllocationTable& allocs) {
  std::lock_guard lock(mu_);
  if (f_ == nullptr || seen_++ < skip_) return;
  if (seen_ > skip_ + count_) {
    std::fclose(f_);
    f_ = nullptr;
    return;
  }
  auto [it, fresh] = ids_.try_emplace(func, uint32_t(ids_.size()));
  if (fresh) {
    std::fprintf(f_, "func %u %" PRIx64 " %zu", it->second, func, layout.size());
    for (const ParamSlot& s : layout) std::fprintf(f_, " %u:%u", s.offset, s.size);
    std::fprintf(f_, " %s\n", name != nullptr && *name ? name : "?");
  }
  for (uint64_t w : live_words) {
    auto a = allocs.find(w);
    if (!a || !allocs_written_.insert(a->base).second) continue;
    std::fprintf(f_, "alloc %" PRIx64 " %" PRIx64 " %u\n", a->base, a->bytes, unsigned(a->kind));
  }
  std::fprintf(f_, "launch %u %zu %u %u %u %u %u %u ", it->second, live_words.size(), call.grid[0], call.grid[1], call.grid[2],
               call.block[0], call.block[1], call.block[2]);
  for (size_t i = 0; i < layout.size(); ++i) {
    const uint8_t* base = call.packed ? static_cast<const uint8_t*>(call.packed) + layout[i].offset
                                      : static_cast<const uint8_t*>(call.args[i]);
    for (uint32_t b = 0; b < layout[i].size; ++b) std::fprintf(f_, "%02x", base ? base[b] : 0);
  }
  std::fputc('\n', f_);
  if (seen_ == skip_ + count_) finish_locked(allocs);
}

void LaunchCorpus::finish(const AllocationTable& allocs) {
  std::lock_guard lock(mu_);
  finish_locked(allocs);
}

void LaunchCorpus::finish_locked(const AllocationTable& allocs) {
  if (f_ == nullptr) return;
  std::fprintf(f_, "table %zu\n", allocs.size());
  allocs.for_each([&](const LiveAllocation& a) {
    std::fprintf(f_, "alloc %" PRIx64 " %" PRIx64 " %u\n", a.base, a.bytes, unsigned(a.kind));
  });
  std::fclose(f_);
  f_ = nullptr;
}

}  // namespace streamrace::tracer
