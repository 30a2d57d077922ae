// Fingerprint-keyed merge of findings.
#include "report/finding_merge.h"

#include <algorithm>
#include <unordered_map>

namespace streamrace::report {

namespace {

void merge_into(analysis::Finding& f, const analysis::Finding& o) {
  f.occurrences += o.occurrences;
  f.ranks.insert(f.ranks.end(), o.ranks.begin(), o.ranks.end());
  std::sort(f.ranks.begin(), f.ranks.end());
  f.ranks.erase(std::unique(f.ranks.begin(), f.ranks.end()), f.ranks.end());
  for (const auto& w : o.where) {
    auto same = std::find_if(f.where.begin(), f.where.end(),
                             [&](const analysis::Occurrence& x) { return x.trace == w.trace && x.rank == w.rank; });
    if (same == f.where.end()) {
      f.where.push_back(w);
    } else {
      same->count += w.count;
      same->first_seq = std::min(same->first_seq, w.first_seq);
      same->last_seq = std::max(same->last_seq, w.last_seq);
    }
  }
}

}  // namespace

void merge_findings(std::vector<analysis::Finding>& into, const std::vector<analysis::Finding>& more) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < into.size(); ++i) index.emplace(into[i].fingerprint, i);
  for (const auto& f : more) {
    auto it = index.find(f.fingerprint);
    if (it == index.end()) {
      index.emplace(f.fingerprint, into.size());
      into.push_back(f);
    } else {
      merge_into(into[it->second], f);
    }
  }
}

void sort_findings(std::vector<analysis::Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const analysis::Finding& a, const analysis::Finding& b) {
    if (a.confidence != b.confidence) return a.confidence == analysis::Confidence::kCertain;
    if (a.occurrences != b.occurrences) return a.occurrences > b.occurrences;
    return a.fingerprint < b.fingerprint;
  });
}

}  // namespace streamrace::report
