// The default tier's reading of C++ kernel signatures: `T const*` parameters are reads.
#include "analyzer/kernel_signature.h"

#include <gtest/gtest.h>

namespace streamrace::analysis {
namespace {

using K = ParamKind;

TEST(KernelSignature, ClassifiesTopLevelParameters) {
  EXPECT_EQ(*kernel_params("read_range(float const*, int, float*)"),
            (std::vector<K>{K::kConstPointer, K::kScalar, K::kPointer}));
  EXPECT_EQ(*kernel_params("f(const double*, unsigned long, double* __restrict__, float const* __restrict__)"),
            (std::vector<K>{K::kConstPointer, K::kScalar, K::kPointer, K::kConstPointer}));
  EXPECT_EQ(*kernel_params("g(float* const, float const* const)"), (std::vector<K>{K::kPointer, K::kConstPointer}));
  EXPECT_EQ(*kernel_params("h(float const**, char)"), (std::vector<K>{K::kPointer, K::kScalar}));
  EXPECT_EQ(*kernel_params("k()"), std::vector<K>{});
  EXPECT_FALSE(kernel_params("raw_fill").has_value());
}

TEST(KernelSignature, TemplatesAndLambdasDoNotSplitParameters) {
  auto p = kernel_params(
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4, 4>)");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, std::vector<K>{K::kOther});
  EXPECT_EQ(*kernel_params("void embedding_backward_feature_kernel<c10::Half, float, long>(long const*, c10::Half "
                           "const*, c10::Half*, int, long, int)"),
            (std::vector<K>{K::kConstPointer, K::kConstPointer, K::kPointer, K::kScalar, K::kScalar, K::kScalar}));
}

TEST(KernelSignature, ReadOnlyPointersNeedAOneToOneMapping) {
  EXPECT_EQ(*read_only_pointers("consume(float const*, float*, int)", 2), (std::vector<bool>{true, false}));
  // One pointer not recorded (null or outside any allocation), or a duplicate folded: unknown.
  EXPECT_FALSE(read_only_pointers("consume(float const*, float*, int)", 1).has_value());
  // A struct by value may hold pointers (PyTorch's functor kernels): unknown.
  EXPECT_FALSE(read_only_pointers("k(Params, float const*)", 1).has_value());
  EXPECT_FALSE(read_only_pointers("vectorAdd", 3).has_value());
  EXPECT_FALSE(read_only_pointers("k(float const*)", 0).has_value());
}

}  // namespace
}  // namespace streamrace::analysis

// The rule in the analyzer, racy program and clean twin: a writer and a `const` reader of one
// buffer on unordered streams are a possible read-after-write; two `const` readers are clean.
#include "support/trace_test_support.h"

namespace streamrace {
namespace {

analysis::AnalysisResult two_kernels(const char* first, const char* second) {
  testing::TempDir dir;
  std::string path = dir.file("k.srace");
  {
    trace::TraceBuilder t(path, trace::TraceBuilder::default_header(0));
    uint64_t a = t.create_stream(), b = t.create_stream();
    uint64_t buf = t.alloc(4096);
    t.at("k.cu", 10, "main").kernel(a, first, {buf}, 0, trace::kKernelArgsScanned);
    t.at("k.cu", 20, "main").kernel(b, second, {buf}, 0, trace::kKernelArgsScanned);
  }
  return testing::analyze_files({path});
}

TEST(KernelSignatureRule, WriterThenConstReaderIsAPossibleReadAfterWrite) {
  auto r = two_kernels("produce(float*, int)", "consume(float const*, int)");
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].kind, analysis::RaceKind::kReadAfterWrite);
  EXPECT_EQ(r.findings[0].confidence, analysis::Confidence::kPossible);
  EXPECT_EQ(r.findings[0].earlier.direction, "read or write");
  EXPECT_EQ(r.findings[0].later.direction, "read");
  EXPECT_FALSE(r.findings[0].later.exact);
}

TEST(KernelSignatureRule, TwoConstReadersAreClean) {
  EXPECT_TRUE(two_kernels("consume(float const*, int)", "consume(float const*, int)").findings.empty());
}

TEST(KernelSignatureRule, ConstReaderThenWriterIsAPossibleWriteAfterRead) {
  auto r = two_kernels("consume(float const*, int)", "produce(float*, int)");
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].kind, analysis::RaceKind::kWriteAfterRead);
  EXPECT_EQ(r.findings[0].confidence, analysis::Confidence::kPossible);
}

}  // namespace
}  // namespace streamrace
