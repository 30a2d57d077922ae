// kernels_to_confirm: see precise_kernels.h.
#include "cli/precise_kernels.h"

#include "tracer/precise/kernel_selection.h"

namespace streamrace::cli {

std::set<std::string> kernels_to_confirm(std::span<const analysis::Finding> findings) {
  std::set<std::string> out;
  for (const analysis::Finding& f : findings) {
    if (f.confidence != analysis::Confidence::kPossible) continue;
    for (const analysis::Access* a : {&f.earlier, &f.later}) {
      if (a->op_kind != "kernel" || a->op.empty() || tracer::precise::is_nccl_kernel(a->op)) continue;
      out.insert(a->op);
    }
  }
  return out;
}

}  // namespace streamrace::cli
