// The optimizer's element-wise updates over a parameter's buffer (Eigen arrays, vectorised).
#pragma once

#include <cstddef>

namespace ppbench::cpu {

// p -= lr * g
template <typename T>
void sgd_update(T* p, const T* g, std::size_t n, double lr);

// PyTorch's AdamW at step t (from 1): p -= lr * wd * p; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
struct AdamWStep {
  double lr, weight_decay, beta1, beta2, eps;
  long t;
};
template <typename T>
void adamw_update(T* p, const T* g, T* m, T* v, std::size_t n, const AdamWStep& s);

}  // namespace ppbench::cpu
