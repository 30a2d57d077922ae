// Imports PyTorch CUDA-sanitizer (CSAN, TORCH_CUDA_SANITIZER=1) logs: each "CSAN detected a
// possible data race" report becomes a Finding with both Python stacks, so `check` can gate
// on sanitizer runs the same way as on streamrace traces.
//
// Mapping, and why:
// - confidence is always "possible" and the accesses are not exact: CSAN derives reads and
//   writes from operator schemas (view ops such as aten::slice count as writes), keys tensors
//   by their start pointer and does not know byte ranges. Its happens-before reasoning is
//   sound, but what it calls a write may not touch memory at all.
// - the later access is CSAN's "Access by stream", the earlier its "Previous access";
//   op is the ATen operator ("aten::slice.Tensor"), op_kind "aten", mode "csan".
// - stacks are innermost first, as everywhere in streamrace; torch/cuda/_sanitizer.py frames
//   (CSAN's own dispatch hook) are dropped.
// - the fingerprint is analysis::fingerprint_of, so the same report from several ranks,
//   steps or logs merges into one finding.
// - a rank is taken from a launcher prefix on the report's lines ("[rank1]:", "[default1]:").
#pragma once

#include <istream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/finding.h"

namespace streamrace::report {

// A report that starts but cannot be read. The message is "FILE:LINE: what was expected".
class CsanLogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CsanLog {
  std::vector<analysis::Finding> findings;  // one per report, not yet merged
  std::vector<analysis::Notice> notices;    // reports of kinds not imported, and the like
  size_t reports = 0;
};

// `name` is the file name used in messages and Occurrence::trace.
CsanLog read_csan_log(std::istream& in, const std::string& name);

// True when `text` holds the start of a CSAN race report.
bool mentions_csan_report(std::string_view text);

}  // namespace streamrace::report
