// Kernel argument signatures: see kernel_signatures.h.
#include "tracer/kernel_signatures.h"

#include <algorithm>

namespace streamrace::tracer {

namespace {
const KernelSignature kSignatures[] = {
    // PyTorch's cat (aten/src/ATen/native/cuda/Shape.cu, every CatArrayBatchedCopy variant):
    // parameter 1 is a CatArrInputTensorMetadata passed by value, whose first member is
    // `const T* input[batch_size]`; the kernel reads `inputs.input[blockIdx.y]` only, and the
    // host sets grid.y to the number of inputs in the batch (getCatGrid*). The struct is a
    // local that the host fills only up to that count: the later slots are uninitialised.
    // The parameters after it are a TensorSizeStride<IndexType, 4> (sizes and strides of the
    // output, filled up to its rank), the concatenation dimension and its stride: no pointers.
    {"CatArrayBatchedCopy", 1, SignatureCount::kGridY, 2,
     "PyTorch Shape.cu: inputs.input[blockIdx.y], grid.y = inputs in the batch; then "
     "TensorSizeStride os, int concatDim, IndexType dimStride"},
};
}  // namespace

const KernelSignature* signature_for(std::string_view kernel_name) {
  for (const auto& s : kSignatures)
    if (kernel_name.find(s.name_part) != std::string_view::npos) return &s;
  return nullptr;
}

uint32_t pointer_alignment(std::string_view name) {
  // Mangled (`vectorized_elementwise_kernelILi8E`) or demangled (`vectorized_elementwise_kernel<8, `).
  constexpr std::string_view kKernel = "vectorized_elementwise_kernel";
  const size_t at = name.find(kKernel);
  if (at == std::string_view::npos) return 1;
  std::string_view rest = name.substr(at + kKernel.size());
  if (rest.rfind("ILi", 0) == 0) rest.remove_prefix(3);
  else if (rest.rfind("<", 0) == 0) rest.remove_prefix(1);
  else return 1;
  uint32_t vec = 0;
  size_t i = 0;
  while (i < rest.size() && i < 3 && rest[i] >= '0' && rest[i] <= '9') vec = vec * 10 + uint32_t(rest[i++] - '0');
  if (i == 0 || i >= rest.size() || (rest[i] != 'E' && rest[i] != ',')) return 1;
  return vec >= 1 && vec <= 64 && (vec & (vec - 1)) == 0 ? vec : 1;
}

uint32_t pointer_words(const KernelSignature* sig, uint32_t param, uint32_t param_words, const uint32_t grid[3]) {
  if (sig == nullptr) return param_words;
  if (sig->scalars_from != 0 && param >= sig->scalars_from) return 0;
  if (sig->param != param) return param_words;
  switch (sig->count) {
    case SignatureCount::kGridY: return std::min(param_words, grid[1]);
  }
  return param_words;
}

}  // namespace streamrace::tracer
