// Learned kernel access signatures: see access_signatures.h and docs/signatures.md.
#include "analyzer/access_signatures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "traceformat/input_file.h"

namespace streamrace::analysis {

using json = nlohmann::json;
using trace::AccessDir;

namespace {
constexpr std::string_view kFormat = "streamrace-signatures";
// Version 2 names each key's hash function ("args_hash_function"); every key of a version 1
// file is of trace format 1.4's hash.
constexpr uint32_t kVersion = 2;

const char* hash_function_name(trace::ArgsHashKind k) {
  return k == trace::ArgsHashKind::kMix64 ? "mix64" : "xxh3";
}

const char* dir_name(AccessDir d) {
  switch (d) {
    case AccessDir::kRead: return "read";
    case AccessDir::kWrite: return "write";
    case AccessDir::kReadWrite: return "read and write";
  }
  return "read and write";
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDull;
}
}  // namespace

size_t SignatureBook::Hash::operator()(const SignatureKeyView& k) const {
  uint64_t h = std::hash<std::string_view>{}(k.kernel);
  for (uint32_t v : k.grid) h = mix(h, v);
  for (uint32_t v : k.block) h = mix(h, v);
  h = mix(h, k.pointers);
  h = mix(h, k.any_args);
  h = mix(h, uint64_t(k.hash_kind));
  return size_t(mix(h, k.args_hash));
}

void SignatureBook::canonicalise(std::vector<SignatureInterval>& v) {
  std::sort(v.begin(), v.end(), [](const SignatureInterval& a, const SignatureInterval& b) {
    return std::tie(a.pointer, a.offset, a.bytes, a.dir) < std::tie(b.pointer, b.offset, b.bytes, b.dir);
  });
  size_t kept = 0;
  for (const SignatureInterval& s : v) {
    if (kept > 0) {
      SignatureInterval& last = v[kept - 1];
      if (last.pointer == s.pointer && last.dir == s.dir && s.offset <= last.offset + last.bytes) {
        last.bytes = std::max(last.offset + last.bytes, s.offset + s.bytes) - last.offset;
        continue;
      }
    }
    v[kept++] = s;
  }
  v.resize(kept);
}

void SignatureBook::add(const SignatureKey& key, const LearnedSignature& sig) {
  auto [it, inserted] = map_.try_emplace(key, sig);
  if (inserted) return;
  LearnedSignature& mine = it->second;
  if (mine.intervals != sig.intervals) {
    mine.conflicting = true;
  } else {
    mine.seen += sig.seen;
  }
  mine.conflicting |= sig.conflicting;
  mine.hashes_differ |= sig.hashes_differ || sig.first_hash != mine.first_hash;
}

void SignatureBook::observe(const SignatureKey& key, std::vector<SignatureInterval> intervals) {
  canonicalise(intervals);
  SignatureKey shape = key;
  shape.any_args = true;
  shape.args_hash = 0;
  add(shape, LearnedSignature{intervals, 1, false, key.args_hash, false});
  add(key, LearnedSignature{std::move(intervals), 1, false, 0, false});
}

void SignatureBook::merge(const SignatureBook& other) {
  for (const auto& [key, sig] : other.map_) add(key, sig);
}

const LearnedSignature* SignatureBook::trusted_entry(const SignatureKeyView& key) const {
  auto it = map_.find(key);
  if (it == map_.end() || it->second.conflicting || it->second.seen < kMinSeen) return nullptr;
  if (key.any_args && !it->second.hashes_differ) return nullptr;
  return &it->second;
}

const LearnedSignature* SignatureBook::trusted(const SignatureKeyView& key) const {
  if (const LearnedSignature* own = trusted_entry(key)) return own;
  SignatureKeyView shape = key;
  shape.any_args = true;
  shape.args_hash = 0;
  return trusted_entry(shape);
}

size_t SignatureBook::size() const {
  size_t n = 0;
  for (const auto& e : map_) n += !e.first.any_args;
  return n;
}

size_t SignatureBook::size(trace::ArgsHashKind kind) const {
  size_t n = 0;
  for (const auto& e : map_) n += !e.first.any_args && e.first.hash_kind == kind;
  return n;
}

size_t SignatureBook::trusted_count() const {
  size_t n = 0;
  for (const auto& [key, sig] : map_) n += !key.any_args && trusted(view(key)) != nullptr;
  return n;
}

std::string SignatureBook::to_json_text() const {
  // Sorted, so that a file's bytes depend only on what it holds.
  std::vector<const std::pair<const SignatureKey, LearnedSignature>*> entries;
  for (const auto& e : map_) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) {
    const SignatureKey &x = a->first, &y = b->first;
    return std::tie(x.kernel, x.grid, x.block, x.pointers, x.hash_kind, x.any_args, x.args_hash) <
           std::tie(y.kernel, y.grid, y.block, y.pointers, y.hash_kind, y.any_args, y.args_hash);
  });
  json list = json::array();
  for (const auto* e : entries) {
    const SignatureKey& k = e->first;
    const LearnedSignature& s = e->second;
    json iv = json::array();
    for (const SignatureInterval& i : s.intervals)
      iv.push_back(json{{"pointer", i.pointer}, {"offset", i.offset}, {"bytes", i.bytes}, {"access", dir_name(i.dir)}});
    json o{{"kernel", k.kernel},
           {"grid", k.grid},
           {"block", k.block},
           {"pointers", k.pointers},
           {"args_hash_function", hash_function_name(k.hash_kind)},
           {"args_hash", k.any_args ? std::string("any") : fmt::format("{:#018x}", k.args_hash)},
           {"seen", s.seen},
           {"conflicting", s.conflicting}};
    if (k.any_args) {
      o["first_args_hash"] = fmt::format("{:#018x}", s.first_hash);
      o["args_hashes_differ"] = s.hashes_differ;
    }
    o["intervals"] = std::move(iv);
    list.push_back(std::move(o));
  }
  return json{{"format", kFormat}, {"version", kVersion}, {"signatures", std::move(list)}}.dump(1) + "\n";
}

SignatureBook SignatureBook::from_json_text(std::string_view text, const std::string& path) {
  auto bad = [&](const std::string& what) { return trace::InputFileError(path + ": not a signature file: " + what); };
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) throw bad("not JSON");
  if (!doc.is_object() || doc.value("format", std::string()) != kFormat)
    throw bad(fmt::format("\"format\" is not \"{}\"", kFormat));
  if (!doc.contains("version") || !doc["version"].is_number_unsigned() || doc["version"].get<uint64_t>() < 1 ||
      doc["version"].get<uint64_t>() > kVersion)
    throw bad(fmt::format("\"version\" is not 1 or {} (this streamrace reads versions 1 and {})", kVersion, kVersion));
  const uint64_t version = doc["version"].get<uint64_t>();
  if (!doc.contains("signatures") || !doc["signatures"].is_array()) throw bad("\"signatures\" is not a list");
  SignatureBook book;
  size_t index = 0;
  for (const json& e : doc["signatures"]) {
    auto where = [&](const std::string& what) { return bad(fmt::format("signature {}: {}", index, what)); };
    auto u64 = [&](const json& o, const char* field) -> uint64_t {
      if (!o.is_object() || !o.contains(field) || !o[field].is_number_unsigned())
        throw where(fmt::format("\"{}\" is not a non-negative integer", field));
      return o[field].get<uint64_t>();
    };
    auto u32 = [&](const json& o, const char* field) -> uint32_t {
      const uint64_t v = u64(o, field);
      if (v > UINT32_MAX) throw where(fmt::format("\"{}\" {} is out of range", field, v));
      return uint32_t(v);
    };
    auto dims = [&](const char* field) {
      std::array<uint32_t, 3> out{};
      if (!e.contains(field) || !e[field].is_array() || e[field].size() != 3) throw where(fmt::format("\"{}\" is not 3 integers", field));
      for (size_t i = 0; i < 3; ++i) {
        const json& v = e[field][i];
        if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) throw where(fmt::format("\"{}\" is not 3 integers", field));
        out[i] = uint32_t(v.get<uint64_t>());
      }
      return out;
    };
    if (!e.is_object()) throw where("not an object");
    SignatureKey key;
    if (!e.contains("kernel") || !e["kernel"].is_string() || e["kernel"].get<std::string>().empty())
      throw where("\"kernel\" is not a name");
    key.kernel = e["kernel"].get<std::string>();
    key.grid = dims("grid");
    key.block = dims("block");
    key.pointers = u32(e, "pointers");
    key.hash_kind = trace::ArgsHashKind::kMix64;
    if (version >= 2) {
      const std::string f = e.contains("args_hash_function") && e["args_hash_function"].is_string()
                                ? e["args_hash_function"].get<std::string>()
                                : std::string();
      if (f == "xxh3") key.hash_kind = trace::ArgsHashKind::kXxh3;
      else if (f != "mix64") throw where("\"args_hash_function\" is not \"xxh3\" or \"mix64\"");
    }
    auto hex = [&](const char* field) -> uint64_t {
      if (!e.contains(field) || !e[field].is_string()) throw where(fmt::format("\"{}\" is not a hex string", field));
      const std::string h = e[field].get<std::string>();
      errno = 0;
      char* end = nullptr;
      const uint64_t v = std::strtoull(h.c_str(), &end, 16);
      if (h.size() < 3 || h.compare(0, 2, "0x") != 0 || errno != 0 || end != h.c_str() + h.size())
        throw where(fmt::format("\"{}\" \"{}\" is not a hex string", field, h));
      return v;
    };
    LearnedSignature sig;
    if (e.contains("args_hash") && e["args_hash"] == "any") {
      key.any_args = true;
      sig.first_hash = hex("first_args_hash");
      if (!e.contains("args_hashes_differ") || !e["args_hashes_differ"].is_boolean())
        throw where("\"args_hashes_differ\" is not true or false");
      sig.hashes_differ = e["args_hashes_differ"].get<bool>();
    } else {
      key.args_hash = hex("args_hash");
    }
    sig.seen = u32(e, "seen");
    if (sig.seen == 0) throw where("\"seen\" is 0");
    if (e.contains("conflicting")) {
      if (!e["conflicting"].is_boolean()) throw where("\"conflicting\" is not true or false");
      sig.conflicting = e["conflicting"].get<bool>();
    }
    if (!e.contains("intervals") || !e["intervals"].is_array()) throw where("\"intervals\" is not a list");
    for (const json& i : e["intervals"]) {
      SignatureInterval si;
      si.pointer = u32(i, "pointer");
      if (si.pointer >= key.pointers) throw where(fmt::format("interval pointer {} of {} pointers", si.pointer, key.pointers));
      si.offset = u64(i, "offset");
      si.bytes = u64(i, "bytes");
      if (si.bytes == 0 || si.offset + si.bytes < si.offset) throw where("an interval is empty or wraps around");
      const std::string a = i.value("access", std::string());
      if (a == "read") si.dir = AccessDir::kRead;
      else if (a == "write") si.dir = AccessDir::kWrite;
      else if (a == "read and write") si.dir = AccessDir::kReadWrite;
      else throw where(fmt::format("\"access\" \"{}\" is not read, write or read and write", a));
      sig.intervals.push_back(si);
    }
    canonicalise(sig.intervals);
    book.add(key, sig);
    ++index;
  }
  return book;
}

SignatureBook SignatureBook::load(const std::string& path) { return from_json_text(trace::read_input_file(path), path); }

void SignatureBook::save(const std::string& path) const {
  // Written whole beside the target, then renamed over it: a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << to_json_text();
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("{}: cannot write the signature file ({})", path, std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot write the signature file ({})", path, ec.message()));
}

}  // namespace streamrace::analysis
