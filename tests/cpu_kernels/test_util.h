// Helpers shared by the CPU kernel tests: random tensors and central finite differences of the
// scalar loss L = sum(F(x) * R) with a fixed random R.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "workloads/cpu/layer.h"

namespace ppbench::cpu::testing {

template <typename T = double>
Tensor<T> random_tensor(std::vector<std::int64_t> shape, std::uint64_t seed, double lo = -1.0,
                        double hi = 1.0) {
  Tensor<T> x(std::move(shape));
  Rng rng(seed);
  rng.fill(x, lo, hi);
  return x;
}

// Token ids in [0, vocab), stored as values of T.
template <typename T = double>
Tensor<T> random_ids(std::vector<std::int64_t> shape, std::int64_t vocab, std::uint64_t seed) {
  Tensor<T> x(std::move(shape));
  Rng rng(seed);
  for (T& v : x.data) v = static_cast<T>(std::floor(rng.uniform() * static_cast<double>(vocab)));
  return x;
}

template <typename T>
Tensor<T> cast(const Tensor<double>& x) {
  Tensor<T> y(x.shape);
  for (std::size_t i = 0; i < x.data.size(); ++i) y.data[i] = static_cast<T>(x.data[i]);
  return y;
}

inline double dot(const Tensor<double>& a, const Tensor<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.data.size(); ++i) s += a.data[i] * b.data[i];
  return s;
}

// max |a - b| / max |b|: a norm-wise relative error that tiny entries cannot blow up. Infinity
// where the sizes differ: an empty or truncated gradient must fail, not score 0.
template <typename A, typename B>
double rel_error(const A& a, const B& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Moves every parameter off its initial value (norm gammas start at exactly 1, betas at 0),
// so the tests see generic parameters.
inline void perturb_params(Layer<double>& layer, std::uint64_t seed) {
  Rng rng(seed);
  for (Param<double>* p : layer.params())
    for (double& v : p->value.data) v += rng.uniform(-0.5, 0.5);
}

struct GradErrors {
  double input = 0;   // relative error of I's dx against finite differences
  double params = 0;  // worst relative error of W's gradients over all parameters
};

// Analytic gradients from F, I, W against central differences of L = sum(F(x) * R).
inline GradErrors check_gradients(Layer<double>& layer, const Tensor<double>& x,
                                  bool check_input = true, double eps = 1e-5) {
  Saved<double> saved;
  Tensor<double> y = layer.forward(x, saved);
  const Tensor<double> r = random_tensor(y.shape, 777);
  layer.zero_grad();
  const Tensor<double> dx = layer.backward_input(r, saved);
  layer.backward_weight(saved);
  EXPECT_EQ(dx.shape, x.shape) << "backward_input's dx has another shape than its input";

  auto loss = [&] {
    Saved<double> s;
    return dot(layer.forward(x, s), r);
  };
  GradErrors e;
  Tensor<double> xp = x;
  if (check_input) {
    std::vector<double> num(x.data.size());
    for (std::size_t i = 0; i < x.data.size(); ++i) {
      const double v = xp.data[i];
      Saved<double> s;
      xp.data[i] = v + eps;
      const double lp = dot(layer.forward(xp, s), r);
      xp.data[i] = v - eps;
      const double lm = dot(layer.forward(xp, s), r);
      xp.data[i] = v;
      num[i] = (lp - lm) / (2 * eps);
    }
    e.input = rel_error(dx.data, num);
  }
  for (Param<double>* p : layer.params()) {
    std::vector<double> num(p->value.data.size());
    for (std::size_t i = 0; i < num.size(); ++i) {
      const double v = p->value.data[i];
      p->value.data[i] = v + eps;
      const double lp = loss();
      p->value.data[i] = v - eps;
      const double lm = loss();
      p->value.data[i] = v;
      num[i] = (lp - lm) / (2 * eps);
    }
    e.params = std::max(e.params, rel_error(p->grad.data, num));
  }
  return e;
}

}  // namespace ppbench::cpu::testing
