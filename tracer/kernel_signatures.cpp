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
