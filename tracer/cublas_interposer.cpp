// cuBLAS interposition: libstreamrace.so exports cuBLAS's matrix-multiply entry points that
// PyTorch and most frameworks call (cublasGemmEx, cublasGemmStridedBatchedEx, cublasLtMatmul),
// reads which bytes of which matrices the call reads and writes from its arguments, and lets
// the handler attach those ranges to the kernels the call launches (thread_state().blas_*,
// trace format 1.5 kKernelCallAccesses). cuBLAS's sm90 GEMMs move their matrices by TMA, which
// neither the default tier (pointer arguments inside tensor maps) nor precise mode (no
// instrumentation point) can bound; the call's arguments do, exactly.
//
// Only the outermost call of a thread is read (cublasGemmEx may call cublasLtMatmul inside).
// A call whose layout is not modelled (an element type or matrix order not known here) attaches
// nothing: its kernels keep the default tier's accesses. The real function is found in the
// loaded library's own handle (loaded_library.h).
#include <cublasLt.h>
#include <cublas_api.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "tracer/blas_accesses.h"
#include "tracer/loaded_library.h"
#include "tracer/thread_state.h"

namespace streamrace::tracer {
namespace {

void* cublas_handle() {
  alignas(void*) static void* handle = nullptr;
  static const char* const kNames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  return cached_library(handle, kNames, 3, "libcublas.so");
}

void* cublaslt_handle() {
  alignas(void*) static void* handle = nullptr;
  static const char* const kNames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  return cached_library(handle, kNames, 3, "libcublasLt.so");
}

template <typename F>
F real(std::atomic<F>& cache, void* (*library)(), const char* name) {
  F fn = cache.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<F>(real_symbol_in(library(), name));
    cache.store(fn, std::memory_order_release);
  }
  return fn;
}

// The calling thread's outermost cuBLAS call: its ranges are what the handler attaches to
// each kernel launched before the scope ends.
class BlasScope {
 public:
  BlasScope() : ts_(thread_state()), outer_(ts_.blas_depth++ == 0) {}
  ~BlasScope() {
    if (--ts_.blas_depth == 0) {
      ts_.blas_accesses = nullptr;
      ts_.blas_access_count = 0;
    }
  }
  bool outer() const { return outer_; }
  void attach(const std::vector<trace::CallAccessEntry>& ranges) {
    if (!outer_ || ranges.empty()) return;
    ts_.blas_accesses = ranges.data();
    ts_.blas_access_count = uint32_t(ranges.size());
  }

 private:
  TracerThreadState& ts_;
  bool outer_;
};

std::vector<trace::CallAccessEntry>& ranges_buffer() {
  thread_local std::vector<trace::CallAccessEntry> ranges;
  return ranges;
}

// Whether a floating-point host scalar of `bytes` bytes may be non-zero (+0.0 and -0.0 are zero).
bool host_scalar_nonzero(const void* p, int bytes) {
  if (p == nullptr) return true;
  uint64_t v = 0;
  std::memcpy(&v, p, size_t(bytes));
  const uint64_t sign = uint64_t(1) << (bytes * 8 - 1);
  return (v & ~sign) != 0;
}
// The bytes of alpha and beta for a cublasComputeType_t (cublasGemmEx's scale type).
int compute_scalar_bytes(int compute) {
  switch (compute) {
    case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC: return 2;
    case CUBLAS_COMPUTE_64F: case CUBLAS_COMPUTE_64F_PEDANTIC: return 8;
    default: return 4;  // the 32F family (and 32I, handled apart)
  }
}

bool beta_may_be_nonzero(cublasHandle_t handle, const void* beta, int compute) {
  static std::atomic<decltype(&cublasGetPointerMode_v2)> get_mode_real{nullptr};
  auto get_mode = real(get_mode_real, cublas_handle, "cublasGetPointerMode_v2");
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_DEVICE;
  if (!get_mode || get_mode(handle, &mode) != CUBLAS_STATUS_SUCCESS || mode != CUBLAS_POINTER_MODE_HOST) return true;
  if (compute == CUBLAS_COMPUTE_32I || compute == CUBLAS_COMPUTE_32I_PEDANTIC) {
    int32_t v = 1;
    if (beta) std::memcpy(&v, beta, sizeof v);
    return beta == nullptr || v != 0;
  }
  return host_scalar_nonzero(beta, compute_scalar_bytes(compute));
}

MatrixLayout col_major(const void* p, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  MatrixLayout m;
  m.ptr = reinterpret_cast<uint64_t>(p);
  m.rows = rows;
  m.cols = cols;
  m.ld = ld;
  m.elem_bytes = cuda_data_type_bytes(int(type));
  return m;
}

void gemm_ex_ranges(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const void* A, cudaDataType at, int lda, long long sa, const void* B, cudaDataType bt, int ldb,
                    long long sb, const void* beta, const void* C, cudaDataType ct, int ldc, long long sc, int batch,
                    int compute, BlasScope& scope) {
  if (!scope.outer()) return;
  GemmExArgs g;
  g.trans_a = ta != CUBLAS_OP_N;
  g.trans_b = tb != CUBLAS_OP_N;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = reinterpret_cast<uint64_t>(A);
  g.b = reinterpret_cast<uint64_t>(B);
  g.c = reinterpret_cast<uint64_t>(C);
  g.a_type = int(at);
  g.b_type = int(bt);
  g.c_type = int(ct);
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.stride_a = sa;
  g.stride_b = sb;
  g.stride_c = sc;
  g.batch = batch;
  std::vector<trace::CallAccessEntry>& out = ranges_buffer();
  if (gemm_ex_accesses(g, beta_may_be_nonzero(handle, beta, compute), out)) scope.attach(out);
}

template <typename T>
bool lt_attr(cublasStatus_t (*get)(void*, int, void*, size_t, size_t*), void* desc, int attr, T& v) {
  size_t written = 0;
  return get(desc, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS && written == sizeof v;
}

using LtGet = cublasStatus_t (*)(void*, int, void*, size_t, size_t*);

bool lt_layout(LtGet get, cublasLtMatrixLayout_t desc, const void* p, MatrixLayout& m) {
  int32_t type = -1, order = CUBLASLT_ORDER_COL, batch = 1;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0, stride = 0;
  if (desc == nullptr || !lt_attr(get, desc, CUBLASLT_MATRIX_LAYOUT_TYPE, type) ||
      !lt_attr(get, desc, CUBLASLT_MATRIX_LAYOUT_ROWS, rows) || !lt_attr(get, desc, CUBLASLT_MATRIX_LAYOUT_COLS, cols) ||
      !lt_attr(get, desc, CUBLASLT_MATRIX_LAYOUT_LD, ld))
    return false;
  lt_attr(get, desc, CUBLASLT_MATRIX_LAYOUT_ORDER, order);
  lt_attr(get, desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
  lt_attr(get, desc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
  if (order != CUBLASLT_ORDER_COL && order != CUBLASLT_ORDER_ROW) return false;  // tiled orders: not modelled
  m = col_major(p, cudaDataType(type), rows, cols, ld);
  m.row_major = order == CUBLASLT_ORDER_ROW;
  m.batch = batch;
  m.batch_stride = stride;
  return true;
}

void lt_ranges(cublasLtMatmulDesc_t op, const void* A, cublasLtMatrixLayout_t ad, const void* B,
               cublasLtMatrixLayout_t bd, const void* beta, const void* C, cublasLtMatrixLayout_t cd, void* D,
               cublasLtMatrixLayout_t dd, BlasScope& scope) {
  if (!scope.outer()) return;
  static std::atomic<LtGet> layout_real{nullptr}, desc_real{nullptr};
  LtGet layout_get = real(layout_real, cublaslt_handle, "cublasLtMatrixLayoutGetAttribute");
  LtGet desc_get = real(desc_real, cublaslt_handle, "cublasLtMatmulDescGetAttribute");
  if (!layout_get || !desc_get) return;
  MatrixLayout a, b, c, d;
  if (!lt_layout(layout_get, ad, A, a) || !lt_layout(layout_get, bd, B, b) || !lt_layout(layout_get, dd, D, d)) return;
  const bool have_c = C != nullptr && lt_layout(layout_get, cd, C, c);
  int32_t mode = CUBLASLT_POINTER_MODE_HOST, scale = CUDA_R_32F;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  lt_attr(desc_get, op, CUBLASLT_MATMUL_DESC_POINTER_MODE, mode);
  lt_attr(desc_get, op, CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale);
  lt_attr(desc_get, op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  bool c_read = have_c;
  if (have_c && mode == CUBLASLT_POINTER_MODE_HOST) {
    const uint32_t bytes = cuda_data_type_bytes(scale);
    c_read = bytes == 0 || bytes > 8 || host_scalar_nonzero(beta, int(bytes));
  }
  std::vector<trace::CallAccessEntry>& out = ranges_buffer();
  if (!gemm_accesses(a, b, have_c ? c : d, c_read, d, out)) return;
  // The bias epilogues read one element per row of D (of D's type unless the descriptor says).
  const bool bias_read = (epilogue & CUBLASLT_EPILOGUE_BIAS) != 0 &&
                         (epilogue & (CUBLASLT_EPILOGUE_BGRADA | CUBLASLT_EPILOGUE_BGRADB)) == 0;
  if (bias_read) {
    void* bias = nullptr;
    int32_t bias_type = -1;
    lt_attr(desc_get, op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    lt_attr(desc_get, op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
    if (bias != nullptr && d.batch <= 1) {
      MatrixLayout v = col_major(bias, cudaDataType(bias_type >= 0 ? bias_type : 0), d.rows, 1, 1);
      if (bias_type < 0) v.elem_bytes = d.elem_bytes;
      v.ld = int64_t(v.rows);
      if (!append_matrix_access(v, trace::AccessDir::kRead, out)) return;
    } else if (bias != nullptr) {
      return;  // a batched bias: not modelled, the kernels keep the default tier's accesses
    }
  }
  scope.attach(out);
}

// The real functions, looked up once.
// (Spelt out: in C++ the headers overload these names.)
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long, const void*,
                                                  cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                  long long, int, cublasComputeType_t, cublasGemmAlgo_t);
std::atomic<GemmExFn> g_gemm_ex{nullptr};
std::atomic<GemmStridedBatchedExFn> g_gemm_sb_ex{nullptr};
std::atomic<decltype(&cublasLtMatmul)> g_lt_matmul{nullptr};

}  // namespace
}  // namespace streamrace::tracer

using namespace streamrace::tracer;
#define SR_EXPORT extern "C" __attribute__((visibility("default")))

SR_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                      int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                      const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                      cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                      cublasGemmAlgo_t algo) {
  auto fn = real(g_gemm_ex, cublas_handle, "cublasGemmEx");
  if (!fn) return CUBLAS_STATUS_NOT_INITIALIZED;
  BlasScope scope;
  gemm_ex_ranges(handle, transa, transb, m, n, k, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1,
                 int(computeType), scope);
  return fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, computeType,
            algo);
}

SR_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                    cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                                    const void* A, cudaDataType Atype, int lda, long long strideA,
                                                    const void* B, cudaDataType Btype, int ldb, long long strideB,
                                                    const void* beta, void* C, cudaDataType Ctype, int ldc,
                                                    long long strideC, int batchCount,
                                                    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  auto fn = real(g_gemm_sb_ex, cublas_handle, "cublasGemmStridedBatchedEx");
  if (!fn) return CUBLAS_STATUS_NOT_INITIALIZED;
  BlasScope scope;
  gemm_ex_ranges(handle, transa, transb, m, n, k, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
                 strideC, batchCount, int(computeType), scope);
  return fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype,
            ldc, strideC, batchCount, computeType, algo);
}

SR_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                        const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                                        cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                                        cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                        const cublasLtMatmulAlgo_t* algo, void* workspace,
                                        size_t workspaceSizeInBytes, cudaStream_t stream) {
  auto fn = real(g_lt_matmul, cublaslt_handle, "cublasLtMatmul");
  if (!fn) return CUBLAS_STATUS_NOT_INITIALIZED;
  BlasScope scope;
  lt_ranges(computeDesc, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, scope);
  return fn(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
            workspaceSizeInBytes, stream);
}
