// cuBLAS matrix ranges: see blas_accesses.h.
#include "tracer/blas_accesses.h"

namespace streamrace::tracer {

uint32_t cuda_data_type_bytes(int type) {
  // cudaDataType_t (library_types.h): the real types and their complex counterparts.
  switch (type) {
    case 2: case 14: return 2;    // CUDA_R_16F, CUDA_R_16BF
    case 0: case 10: return 4;    // CUDA_R_32F, CUDA_R_32I
    case 1: return 8;             // CUDA_R_64F
    case 3: case 8: return 1;     // CUDA_R_8I, CUDA_R_8U
    case 28: case 29: return 1;   // CUDA_R_8F_E4M3, CUDA_R_8F_E5M2
    case 6: case 15: return 4;    // CUDA_C_16F, CUDA_C_16BF
    case 4: return 8;             // CUDA_C_32F
    case 5: return 16;            // CUDA_C_64F
    default: return 0;
  }
}

bool append_matrix_access(const MatrixLayout& m, trace::AccessDir dir, std::vector<trace::CallAccessEntry>& out) {
  if (m.rows == 0 || m.cols == 0 || m.batch <= 0) return true;
  if (m.elem_bytes == 0 || m.ptr == 0) return false;
  const uint64_t inner = m.row_major ? m.cols : m.rows;
  const uint64_t outer = m.row_major ? m.rows : m.cols;
  if (m.ld <= 0 || uint64_t(m.ld) < inner || m.batch_stride < 0) return false;
  const bool contiguous = uint64_t(m.ld) == inner || outer == 1;
  const uint64_t one = ((outer - 1) * uint64_t(m.ld) + inner) * m.elem_bytes;  // one matrix's span
  uint64_t bytes = one;
  bool exact = contiguous;
  if (m.batch > 1 && m.batch_stride != 0) {
    const uint64_t stride = uint64_t(m.batch_stride) * m.elem_bytes;
    bytes = (uint64_t(m.batch) - 1) * stride + one;
    exact = contiguous && stride == one;  // batches back to back
  }
  trace::CallAccessEntry e{m.ptr, bytes, uint64_t(dir)};
  if (!exact) e.info |= trace::kCallAccessHull;
  out.push_back(e);
  return true;
}

bool gemm_accesses(const MatrixLayout& a, const MatrixLayout& b, const MatrixLayout& c, bool c_read,
                   const MatrixLayout& d, std::vector<trace::CallAccessEntry>& out) {
  out.clear();
  using trace::AccessDir;
  bool ok = append_matrix_access(a, AccessDir::kRead, out) && append_matrix_access(b, AccessDir::kRead, out);
  const bool same = c.ptr == d.ptr && c.rows == d.rows && c.cols == d.cols && c.ld == d.ld &&
                    c.elem_bytes == d.elem_bytes && c.row_major == d.row_major && c.batch == d.batch &&
                    c.batch_stride == d.batch_stride;
  if (ok && c_read && !same) ok = append_matrix_access(c, AccessDir::kRead, out);
  if (ok) ok = append_matrix_access(d, c_read && same ? AccessDir::kReadWrite : AccessDir::kWrite, out);
  if (!ok) out.clear();
  return ok;
}

bool gemm_ex_accesses(const GemmExArgs& g, bool c_read, std::vector<trace::CallAccessEntry>& out) {
  out.clear();
  if (g.m < 0 || g.n < 0 || g.k < 0) return false;
  auto layout = [&](uint64_t ptr, int type, uint64_t rows, uint64_t cols, int64_t ld, int64_t stride) {
    MatrixLayout l;
    l.ptr = ptr;
    l.rows = rows;
    l.cols = cols;
    l.ld = ld;
    l.elem_bytes = cuda_data_type_bytes(type);
    l.batch = g.batch;
    l.batch_stride = stride;
    return l;
  };
  const uint64_t m = uint64_t(g.m), n = uint64_t(g.n), k = uint64_t(g.k);
  const MatrixLayout a = g.trans_a ? layout(g.a, g.a_type, k, m, g.lda, g.stride_a) : layout(g.a, g.a_type, m, k, g.lda, g.stride_a);
  const MatrixLayout b = g.trans_b ? layout(g.b, g.b_type, n, k, g.ldb, g.stride_b) : layout(g.b, g.b_type, k, n, g.ldb, g.stride_b);
  const MatrixLayout c = layout(g.c, g.c_type, m, n, g.ldc, g.stride_c);
  return gemm_accesses(a, b, c, c_read, c, out);
}

}  // namespace streamrace::tracer
