// What Linear and Conv2d keep between their passes. Their W is dW = x^T dy (layer.h), so F keeps
// the GEMM's input x, I adds its output gradient dy, and W reads both and empties Saved.
#pragma once

#include "workloads/cpu/tensor.h"

namespace ppbench::cpu::gemm_saved {

enum Slot { kX, kDY, kSlots };

// F's tail: x for I's shape check and for W.
template <typename T>
void keep_input(Saved<T>& saved, const Tensor<T>& x) {
  saved.clear();
  saved.in_shape = x.shape;
  saved.t.resize(kSlots);
  saved.t[kX] = x;
}

}  // namespace ppbench::cpu::gemm_saved
