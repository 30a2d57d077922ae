// StringTable: interns the strings records refer to (API and kernel names, source files,
// modules) and remembers which ones the flusher has not yet written as StringDef records.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace streamrace::tracer {

class StringTable {
 public:
  // Returns the id of `s` (1, 2, ...; 0 means "none"). Thread-safe.
  uint32_t intern(std::string_view s);
  // Moves out the strings interned since the last call, in id order.
  std::vector<std::pair<uint32_t, std::string>> take_pending();

 private:
  // Looked up by string_view: a known string costs no allocation.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::mutex mu_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
  std::vector<std::pair<uint32_t, std::string>> pending_;
  uint32_t next_ = 1;
};

}  // namespace streamrace::tracer
