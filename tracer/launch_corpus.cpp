// LaunchCorpus: see launch_corpus.h.
#include "tracer/launch_corpus.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
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
  uint64_t numbers[2];
  int n = 0;
  for (; n < 2; ++n) {
    const size_t colon = path.rfind(':');
    if (colon == std::string::npos || !parse_count(path.substr(colon + 1), numbers[n])) break;
    path.resize(colon);
  }
  // Read from the right: one number is SKIP; two are SKIP then COUNT.
  const uint64_t skip = n == 2 ? numbers[1] : n == 1 ? numbers[0] : 0;
  const uint64_t count = n == 2 ? numbers[0] : 20000;
  if (path.empty()) {
    if (why) *why = "launch_corpus: no file named in '" + spec + "' (PATH[:SKIP[:COUNT]])";
    return nullptr;
  }
  for (size_t at; (at = path.find("%p")) != std::string::npos;) path.replace(at, 2, std::to_string(getpid()));
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (access(folder.c_str(), W_OK) != 0) {
    if (why) *why = "launch_corpus: cannot write " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<LaunchCorpus>(new LaunchCorpus(path, skip, count));
}

LaunchCorpus::~LaunchCorpus() {
  if (fd_ >= 0) close(fd_);
}

bool LaunchCorpus::ensure_open() {
  if (fd_ >= 0) return true;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    std::fprintf(stderr, "streamrace: launch_corpus: cannot write %s: %s\n", path_.c_str(), std::strerror(errno));
    done_ = true;
    return false;
  }
  put("streamrace-launch-corpus 1\n");
  return true;
}

void LaunchCorpus::put(const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "streamrace: launch_corpus: writing %s failed: %s\n", path_.c_str(), std::strerror(errno));
      done_ = true;
      return;
    }
    done += size_t(n);
  }
}

namespace {
void append_alloc(std::string& out, const LiveAllocation& a) {
  char line[80];
  std::snprintf(line, sizeof line, "alloc %" PRIx64 " %" PRIx64 " %u\n", a.base, a.bytes, unsigned(a.kind));
  out += line;
}
}  // namespace

void LaunchCorpus::add(uint64_t func, const char* name, std::span<const ParamSlot> layout, const CudaCall& call,
                       std::span<const uint64_t> live_words, const AllocationTable& allocs) {
  std::lock_guard lock(mu_);
  if (done_ || seen_++ < skip_ || !ensure_open() || done_) return;
  std::string out;
  char text[160];
  auto [it, fresh] = ids_.try_emplace(func, uint32_t(ids_.size()));
  if (fresh) {
    std::snprintf(text, sizeof text, "func %u %" PRIx64 " %zu", it->second, func, layout.size());
    out += text;
    for (const ParamSlot& s : layout) {
      std::snprintf(text, sizeof text, " %u:%u", s.offset, s.size);
      out += text;
    }
    out += ' ';
    out += name != nullptr && *name ? name : "?";
    out += '\n';
  }
  for (uint64_t w : live_words) {
    auto a = allocs.find(w);
    if (a && allocs_written_.insert(a->base).second) append_alloc(out, *a);
  }
  std::snprintf(text, sizeof text, "launch %u %zu %u %u %u %u %u %u ", it->second, live_words.size(), call.grid[0],
                call.grid[1], call.grid[2], call.block[0], call.block[1], call.block[2]);
  out += text;
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < layout.size(); ++i) {
    const uint8_t* base = call.packed ? static_cast<const uint8_t*>(call.packed) + layout[i].offset
                                      : static_cast<const uint8_t*>(call.args[i]);
    for (uint32_t b = 0; b < layout[i].size; ++b) {
      const uint8_t v = base ? base[b] : 0;
      out += kHex[v >> 4];
      out += kHex[v & 15];
    }
  }
  out += '\n';
  put(out);
  if (seen_ == skip_ + count_) finish_locked(allocs);
}

void LaunchCorpus::finish(const AllocationTable& allocs) {
  std::lock_guard lock(mu_);
  finish_locked(allocs);
}

void LaunchCorpus::finish_locked(const AllocationTable& allocs) {
  if (done_ || fd_ < 0) return;
  std::string out = "table " + std::to_string(allocs.size()) + "\n";
  allocs.for_each([&](const LiveAllocation& a) { append_alloc(out, a); });
  put(out);
  close(fd_);
  fd_ = -1;
  done_ = true;
}

}  // namespace streamrace::tracer
