// StringTable: see string_table.h.
#include "tracer/string_table.h"

namespace streamrace::tracer {

uint32_t StringTable::intern(std::string_view s) {
  std::lock_guard lock(mu_);
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  uint32_t id = next_++;
  ids_.emplace(std::string(s), id);
  pending_.emplace_back(id, std::string(s));
  return id;
}

std::vector<std::pair<uint32_t, std::string>> StringTable::take_pending() {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint32_t, std::string>> out;
  out.swap(pending_);
  return out;
}

}  // namespace streamrace::tracer
