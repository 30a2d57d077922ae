// The known gradient values every replay executor (CPU simulator, GPU executor) writes and
// checks. Rank r's gradient of element e of parameter p in step s is world * base(p, e, r, s);
// DeepSpeed divides by world before it reduces, so the reduced (averaged) gradient is exactly
// sum over ranks of base(p, e, r, s). Bases stay below 2^17, so every value and sum is exact
// in float32 for up to 16 ranks and in the simulator's integer cells.
#pragma once

#include <cstdint>

namespace streamrace::replay {

inline constexpr uint64_t kGradientBaseModulus = 100003;

constexpr uint64_t gradient_base(uint64_t param, uint64_t elem, uint64_t rank, uint64_t step) {
  return 1 + (param * 4099 + elem * 3 + rank * 1031 + step * 7919) % kGradientBaseModulus;
}

constexpr uint64_t gradient_value(uint64_t param, uint64_t elem, uint64_t rank, uint64_t step, uint64_t world) {
  return world * gradient_base(param, elem, rank, step);
}

constexpr uint64_t reduced_gradient(uint64_t param, uint64_t elem, uint64_t step, uint64_t world) {
  uint64_t sum = 0;
  for (uint64_t r = 0; r < world; ++r) sum += gradient_base(param, elem, r, step);
  return sum;
}

}  // namespace streamrace::replay
