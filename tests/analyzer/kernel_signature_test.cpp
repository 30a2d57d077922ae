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
