// Confirmation: see confirmation.h.
#include "analyzer/confirmation.h"

#include <fmt/format.h>

#include <utility>

namespace streamrace::analysis {

namespace {

std::string site_key(const Access& a) { return a.op + "\x1f" + site_of(a); }

bool same_sites(const Finding& x, const Finding& y) {
  const std::string xe = site_key(x.earlier), xl = site_key(x.later);
  const std::string ye = site_key(y.earlier), yl = site_key(y.later);
  return (xe == ye && xl == yl) || (xe == yl && xl == ye);
}

}  // namespace

const char* to_string(ConfirmOutcome o) {
  switch (o) {
    case ConfirmOutcome::kConfirmed: return "confirmed";
    case ConfirmOutcome::kGone: return "gone";
    case ConfirmOutcome::kStillPossible: return "still possible";
  }
  return "?";
}

// Why a finding the confirming run does not report is still undecided; empty when every
// kernel behind it was measured there (so its absence means the measured ranges are apart).
std::string undecided_reason(const Finding& f, const std::set<std::string>& measured,
                             const std::set<std::string>& measured_nodes) {
  std::string why;
  for (const Access* a : {&f.earlier, &f.later}) {
    if (a->exact || a->op_kind != "kernel") continue;
    std::string r;
    if (a->graph_launch) {
      if (!measured_nodes.count(a->op))
        r = a->op + " ran as a kernel node of a CUDA graph, and no such node was measured in the confirming run";
    } else if (!measured.count(a->op)) {
      r = a->op + " had no measured launch in the confirming run";
    }
    if (r.empty() || why.find(r) != std::string::npos) continue;
    why += why.empty() ? "" : "; ";
    why += r;
  }
  return why;
}

std::vector<Confirmation> confirm_findings(const std::vector<Finding>& first, const std::vector<Finding>& second,
                                           const std::set<std::string>& patched, const std::set<std::string>& measured,
                                           const std::set<std::string>& measured_nodes) {
  std::vector<Confirmation> out;
  for (const Finding& f : first) {
    if (f.confidence != Confidence::kPossible) continue;
    Confirmation c;
    c.before = f;
    // Prefer a certain match: one pair of sites can race on several byte ranges.
    for (const Finding& g : second) {
      if (!same_sites(f, g)) continue;
      if (!c.after || (g.confidence == Confidence::kCertain && c.after->confidence != Confidence::kCertain)) c.after = g;
    }
    if (c.after) {
      c.outcome = c.after->confidence == Confidence::kCertain ? ConfirmOutcome::kConfirmed : ConfirmOutcome::kStillPossible;
    } else if (std::string why = undecided_reason(f, measured, measured_nodes); !why.empty()) {
      // Not reported again, but not because measured ranges were found apart.
      c.outcome = ConfirmOutcome::kStillPossible;
      c.reason = "not decided: " + why;
      out.push_back(std::move(c));
      continue;
    }
    if (c.outcome == ConfirmOutcome::kStillPossible) {
      for (const Access* a : {&c.after->earlier, &c.after->later}) {
        if (a->exact || a->op_kind != "kernel") continue;
        c.reason += c.reason.empty() ? "" : "; ";
        c.reason += patched.count(a->op)
                        ? a->op + " was measured, but not this access of " + std::to_string(a->bytes) +
                              " bytes exactly: its intervals overflowed the device-side budget, its measured hull "
                              "spans a tensor it has no pointer to, or it reaches this memory by bulk tensor copies "
                              "(TMA), which precise mode cannot see"
                        : a->op + " was not patched (not selected; NCCL's kernels never are)";
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string confirmation_summary(const std::vector<Confirmation>& c) {
  size_t confirmed = 0, gone = 0, still = 0;
  for (const auto& e : c) {
    switch (e.outcome) {
      case ConfirmOutcome::kConfirmed: ++confirmed; break;
      case ConfirmOutcome::kGone: ++gone; break;
      case ConfirmOutcome::kStillPossible: ++still; break;
    }
  }
  return fmt::format("{} possible finding{} checked in precise mode: {} confirmed (certain), {} gone, {} still possible",
                     c.size(), c.size() == 1 ? "" : "s", confirmed, gone, still);
}

}  // namespace streamrace::analysis
