// The byte ranges a cuBLAS matrix multiply reads and writes, from its arguments: the matrices'
// pointers, element types, sizes, leading dimensions and batches (column- or row-major). Pure
// logic, no cuBLAS: tracer/cublas_interposer.cpp reads the call's arguments (and cuBLASLt's
// layout descriptors) and the handler attaches the ranges to the kernels the call launches
// (trace format 1.5, kKernelCallAccesses).
#pragma once

#include <cstdint>
#include <vector>

#include "traceformat/records.h"

namespace streamrace::tracer {

struct MatrixLayout {
  uint64_t ptr = 0;
  uint64_t rows = 0, cols = 0;  // as stored (before any transpose the operation applies)
  int64_t ld = 0;               // elements between columns (column-major) or rows (row-major)
  uint32_t elem_bytes = 0;
  bool row_major = false;
  int64_t batch = 1;
  int64_t batch_stride = 0;     // elements between batches
};

// Bytes of one element of a cudaDataType_t value; 0 for a type not modelled.
uint32_t cuda_data_type_bytes(int type);

// Appends the range one matrix occupies, with direction `dir`: exact when its elements are
// contiguous (ld equal to its inner size, or one column), else the hull, marked
// kCallAccessHull. Returns false when the layout cannot be modelled (a leading dimension below
// the inner size, a negative batch stride, an unknown element size); nothing is appended then.
// A matrix with no element appends nothing and returns true.
bool append_matrix_access(const MatrixLayout& m, trace::AccessDir dir, std::vector<trace::CallAccessEntry>& out);

// The matrices of C = alpha op(A) op(B) + beta C (or D = ... with D apart from C). `c_read`:
// beta may be non-zero. When C and D are one matrix, it is one read-and-write range. Returns
// false when any matrix cannot be modelled; `out` is then left empty.
bool gemm_accesses(const MatrixLayout& a, const MatrixLayout& b, const MatrixLayout& c, bool c_read,
                   const MatrixLayout& d, std::vector<trace::CallAccessEntry>& out);

// The matrices of cublasGemmEx / cublasGemmStridedBatchedEx (column-major): op(A) is m x k,
// op(B) k x n, C m x n; a transposed operand (CUBLAS_OP_T or _C) is stored as its transpose
// (A: k x m with lda >= k). Strides in elements, `batch` 1 for cublasGemmEx; types are
// cudaDataType_t values. C is read only with `c_read` (beta may be non-zero).
struct GemmExArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  uint64_t a = 0, b = 0, c = 0;
  int a_type = 0, b_type = 0, c_type = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
};
bool gemm_ex_accesses(const GemmExArgs& g, bool c_read, std::vector<trace::CallAccessEntry>& out);

}  // namespace streamrace::tracer
