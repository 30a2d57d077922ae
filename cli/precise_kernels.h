// `streamrace run --precise=auto`: which kernels to patch, chosen from an earlier run's
// findings. Lives in cli/ because it joins the analyzer's findings with the tracer's kernel
// selection; tracer/ never includes analyzer/ code.
#pragma once

#include <set>
#include <span>
#include <string>

#include "analyzer/finding.h"

namespace streamrace::cli {

// Kernel names of the kernel accesses in `possible` findings: the launches whose exact
// ranges would decide those findings. NCCL kernels are left out (never patched).
std::set<std::string> kernels_to_confirm(std::span<const analysis::Finding> findings);

}  // namespace streamrace::cli
