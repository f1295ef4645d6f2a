// The optimizer state of one model part, and its step. Every copy of a part (Chimera and
// DualPipe keep two, on different ranks) is updated from the copies' summed gradients with the
// same state, so the copies stay equal, as one model's part would.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "harness/backends/optimizer.h"
#include "workloads/cpu/optimizer.h"
#include "workloads/cpu/tensor.h"

namespace ppbench::cpu {

template <typename T>
class PartOptimizer {
 public:
  // `copies[c]`: copy c's parameters, in the same order for every copy.
  PartOptimizer(const OptimizerOptions& o, std::vector<std::vector<Param<T>*>> copies)
      : o_(o), copies_(std::move(copies)) {
    if (copies_.empty()) throw std::logic_error("a part without parameters' copies");
    if (o_.kind == OptimizerOptions::Kind::kAdamW)
      for (const Param<T>* p : copies_.front()) {
        m_.emplace_back(p->value.data.size(), T(0));
        v_.emplace_back(p->value.data.size(), T(0));
      }
  }

  std::size_t copies() const { return copies_.size(); }

  // One optimizer step from the copies' summed gradients, plus `remote[k]` for parameter k
  // when given (the gradients of copies held by another process).
  void step(const std::vector<AlignedVector<T>>* remote = nullptr) {
    ++t_;
    for (std::size_t k = 0; k < copies_.front().size(); ++k) {
      const T* g = summed_gradient(k, remote);
      T* p = copies_.front()[k]->value.data.data();
      const std::size_t n = copies_.front()[k]->value.data.size();
      if (o_.kind == OptimizerOptions::Kind::kSgd)
        sgd_update(p, g, n, o_.lr);
      else if (o_.kind == OptimizerOptions::Kind::kAdamW)
        adamw_update(p, g, m_[k].data(), v_[k].data(), n,
                     {o_.lr, o_.weight_decay, o_.beta1, o_.beta2, o_.eps, t_});
      for (std::size_t c = 1; c < copies_.size(); ++c)
        std::copy_n(p, n, copies_[c][k]->value.data.data());
    }
  }

 private:
  // Parameter k's gradient summed over the copies (the first copy's own buffer when alone).
  const T* summed_gradient(std::size_t k, const std::vector<AlignedVector<T>>* remote) {
    const auto& first = copies_.front()[k]->grad.data;
    if (copies_.size() == 1 && remote == nullptr) return first.data();
    sum_.assign(first.begin(), first.end());
    auto add = [this](const T* g) {
      for (std::size_t i = 0; i < sum_.size(); ++i) sum_[i] += g[i];
    };
    for (std::size_t c = 1; c < copies_.size(); ++c) add(copies_[c][k]->grad.data.data());
    if (remote != nullptr) add(remote->at(k).data());
    return sum_.data();
  }

  OptimizerOptions o_;
  std::vector<std::vector<Param<T>*>> copies_;
  std::vector<AlignedVector<T>> m_, v_;
  AlignedVector<T> sum_;
  long t_ = 0;
};

}  // namespace ppbench::cpu
