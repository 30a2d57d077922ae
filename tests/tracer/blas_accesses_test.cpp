// The byte ranges of a cuBLAS matrix multiply from its arguments (tracer/blas_accesses.h).
#include "tracer/blas_accesses.h"

#include <gtest/gtest.h>

namespace streamrace::tracer {
namespace {

using trace::AccessDir;
using trace::CallAccessEntry;
using trace::kCallAccessHull;

MatrixLayout bf16(uint64_t ptr, uint64_t rows, uint64_t cols, int64_t ld) {
  MatrixLayout m;
  m.ptr = ptr;
  m.rows = rows;
  m.cols = cols;
  m.ld = ld;
  m.elem_bytes = cuda_data_type_bytes(14);  // CUDA_R_16BF
  return m;
}

uint64_t dir(AccessDir d, bool hull = false) { return uint64_t(d) | (hull ? kCallAccessHull : 0); }

bool same(const std::vector<CallAccessEntry>& got, const std::vector<CallAccessEntry>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].addr != want[i].addr || got[i].bytes != want[i].bytes || got[i].info != want[i].info) return false;
  return true;
}

TEST(BlasAccesses, ElementSizesOfTheModelledTypes) {
  EXPECT_EQ(cuda_data_type_bytes(0), 4u);   // CUDA_R_32F
  EXPECT_EQ(cuda_data_type_bytes(2), 2u);   // CUDA_R_16F
  EXPECT_EQ(cuda_data_type_bytes(14), 2u);  // CUDA_R_16BF
  EXPECT_EQ(cuda_data_type_bytes(1), 8u);   // CUDA_R_64F
  EXPECT_EQ(cuda_data_type_bytes(28), 1u);  // CUDA_R_8F_E4M3
  EXPECT_EQ(cuda_data_type_bytes(5), 16u);  // CUDA_C_64F
  EXPECT_EQ(cuda_data_type_bytes(999), 0u);
}

TEST(BlasAccesses, AContiguousMatrixIsOneExactRange) {
  std::vector<CallAccessEntry> out;
  ASSERT_TRUE(append_matrix_access(bf16(0x1000, 64, 32, 64), AccessDir::kRead, out));
  EXPECT_TRUE(same(out, {{0x1000, 64 * 32 * 2, dir(AccessDir::kRead)}}));
}

TEST(BlasAccesses, AStridedMatrixIsItsHullMarkedNotExact) {
  std::vector<CallAccessEntry> out;
  // 64 rows of a 100-row column-major buffer, 32 columns: the last column ends at 31*100+64.
  ASSERT_TRUE(append_matrix_access(bf16(0x1000, 64, 32, 100), AccessDir::kWrite, out));
  EXPECT_TRUE(same(out, {{0x1000, (31 * 100 + 64) * 2, dir(AccessDir::kWrite, true)}}));
  out.clear();
  // One column is contiguous whatever its leading dimension.
  ASSERT_TRUE(append_matrix_access(bf16(0x1000, 64, 1, 100), AccessDir::kRead, out));
  EXPECT_TRUE(same(out, {{0x1000, 128, dir(AccessDir::kRead)}}));
}

TEST(BlasAccesses, RowMajorUsesTheColumnsAsTheInnerSize) {
  std::vector<CallAccessEntry> out;
  MatrixLayout m = bf16(0x1000, 8, 16, 16);
  m.row_major = true;
  ASSERT_TRUE(append_matrix_access(m, AccessDir::kRead, out));
  EXPECT_TRUE(same(out, {{0x1000, 8 * 16 * 2, dir(AccessDir::kRead)}}));
  m.ld = 8;  // below the row's 16 elements: not a layout
  out.clear();
  EXPECT_FALSE(append_matrix_access(m, AccessDir::kRead, out));
  EXPECT_TRUE(out.empty());
}

TEST(BlasAccesses, BatchesBackToBackAreOneExactRangeOthersAHull) {
  std::vector<CallAccessEntry> out;
  MatrixLayout m = bf16(0x1000, 16, 16, 16);
  m.batch = 4;
  m.batch_stride = 256;
  ASSERT_TRUE(append_matrix_access(m, AccessDir::kRead, out));
  EXPECT_TRUE(same(out, {{0x1000, 4 * 256 * 2, dir(AccessDir::kRead)}}));
  out.clear();
  m.batch_stride = 512;  // gaps between the batches
  ASSERT_TRUE(append_matrix_access(m, AccessDir::kRead, out));
  EXPECT_TRUE(same(out, {{0x1000, (3 * 512 + 256) * 2, dir(AccessDir::kRead, true)}}));
  out.clear();
  m.batch_stride = 0;  // one matrix broadcast to every batch
  ASSERT_TRUE(append_matrix_access(m, AccessDir::kRead, out));
  EXPECT_TRUE(same(out, {{0x1000, 256 * 2, dir(AccessDir::kRead)}}));
  m.batch_stride = -256;
  out.clear();
  EXPECT_FALSE(append_matrix_access(m, AccessDir::kRead, out));
}

TEST(BlasAccesses, UnknownElementsOrNullPointersAreNotModelled) {
  std::vector<CallAccessEntry> out;
  MatrixLayout m = bf16(0x1000, 4, 4, 4);
  m.elem_bytes = 0;
  EXPECT_FALSE(append_matrix_access(m, AccessDir::kRead, out));
  EXPECT_FALSE(append_matrix_access(bf16(0, 4, 4, 4), AccessDir::kRead, out));
  EXPECT_TRUE(append_matrix_access(bf16(0, 0, 4, 4), AccessDir::kRead, out));  // no element: nothing to read
  EXPECT_TRUE(out.empty());
}

TEST(BlasAccesses, GemmReadsAAndBAndWritesDReadingCOnlyWithBeta) {
  const MatrixLayout a = bf16(0x10000, 64, 32, 64), b = bf16(0x20000, 32, 16, 32), c = bf16(0x30000, 64, 16, 64);
  std::vector<CallAccessEntry> out;
  ASSERT_TRUE(gemm_accesses(a, b, c, /*c_read=*/false, c, out));
  EXPECT_TRUE(same(out, {{0x10000, 4096, dir(AccessDir::kRead)},
                         {0x20000, 1024, dir(AccessDir::kRead)},
                         {0x30000, 2048, dir(AccessDir::kWrite)}}));
  ASSERT_TRUE(gemm_accesses(a, b, c, /*c_read=*/true, c, out));  // C += A B: read and write
  EXPECT_TRUE(same(out, {{0x10000, 4096, dir(AccessDir::kRead)},
                         {0x20000, 1024, dir(AccessDir::kRead)},
                         {0x30000, 2048, dir(AccessDir::kReadWrite)}}));
  const MatrixLayout d = bf16(0x40000, 64, 16, 64);  // D apart from C
  ASSERT_TRUE(gemm_accesses(a, b, c, /*c_read=*/true, d, out));
  EXPECT_TRUE(same(out, {{0x10000, 4096, dir(AccessDir::kRead)},
                         {0x20000, 1024, dir(AccessDir::kRead)},
                         {0x30000, 2048, dir(AccessDir::kRead)},
                         {0x40000, 2048, dir(AccessDir::kWrite)}}));
  MatrixLayout bad = b;
  bad.ld = 8;
  EXPECT_FALSE(gemm_accesses(a, bad, c, true, c, out));
  EXPECT_TRUE(out.empty());
}

GemmExArgs bf16_gemm(int64_t m, int64_t n, int64_t k) {
  GemmExArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = 0x10000;
  g.b = 0x20000;
  g.c = 0x30000;
  g.a_type = g.b_type = g.c_type = 14;  // CUDA_R_16BF
  return g;
}

TEST(BlasAccesses, GemmExStoresATransposedOperandAsItsTranspose) {
  // m 64, n 16, k 32. Not transposed: A is 64 x 32 (lda 64), B 32 x 16 (ldb 32).
  GemmExArgs g = bf16_gemm(64, 16, 32);
  g.lda = 64;
  g.ldb = 32;
  g.ldc = 64;
  std::vector<CallAccessEntry> out;
  ASSERT_TRUE(gemm_ex_accesses(g, false, out));
  EXPECT_TRUE(same(out, {{0x10000, 64 * 32 * 2, dir(AccessDir::kRead)},
                         {0x20000, 32 * 16 * 2, dir(AccessDir::kRead)},
                         {0x30000, 64 * 16 * 2, dir(AccessDir::kWrite)}}));
  // Transposed (as PyTorch's x @ W.T): A stored 32 x 64 (lda 32), B stored 16 x 32 (ldb 16).
  g.trans_a = g.trans_b = true;
  g.lda = 32;
  g.ldb = 16;
  ASSERT_TRUE(gemm_ex_accesses(g, true, out));
  EXPECT_TRUE(same(out, {{0x10000, 32 * 64 * 2, dir(AccessDir::kRead)},
                         {0x20000, 16 * 32 * 2, dir(AccessDir::kRead)},
                         {0x30000, 64 * 16 * 2, dir(AccessDir::kReadWrite)}}));
  // A transposed operand with the untransposed leading dimension (below its rows) is no layout.
  g.lda = 16;
  EXPECT_FALSE(gemm_ex_accesses(g, true, out));
  EXPECT_TRUE(out.empty());
}

TEST(BlasAccesses, GemmExBatchesFollowTheirStrides) {
  GemmExArgs g = bf16_gemm(16, 16, 16);
  g.lda = g.ldb = g.ldc = 16;
  g.batch = 8;
  g.stride_a = 256;  // back to back
  g.stride_b = 0;    // one B for every batch
  g.stride_c = 512;  // every other slot
  std::vector<CallAccessEntry> out;
  ASSERT_TRUE(gemm_ex_accesses(g, false, out));
  EXPECT_TRUE(same(out, {{0x10000, 8 * 256 * 2, dir(AccessDir::kRead)},
                         {0x20000, 256 * 2, dir(AccessDir::kRead)},
                         {0x30000, (7 * 512 + 256) * 2, dir(AccessDir::kWrite, true)}}));
  g.k = -1;
  EXPECT_FALSE(gemm_ex_accesses(g, false, out));
}

}  // namespace
}  // namespace streamrace::tracer
