// The optimizer of one model part. Every copy of a part (Chimera and DualPipe keep two, on
// different ranks) keeps its own state, as each device of a real run does, and is updated from
// the copies' summed gradients, so the copies stay equal, as one model's part would.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "harness/optimizer.h"
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
    states_.resize(copies_.size());
    if (o_.kind == OptimizerOptions::Kind::kAdamW)
      for (std::size_t c = 0; c < copies_.size(); ++c)
        for (const Param<T>* p : copies_[c]) {
          states_[c].m.emplace_back(p->value.data.size(), T(0));
          states_[c].v.emplace_back(p->value.data.size(), T(0));
        }
  }

  std::size_t copies() const { return copies_.size(); }

  // The bytes copy c's state holds (AdamW's two moments; nothing for SGD).
  std::size_t state_bytes(std::size_t c) const {
    std::size_t b = 0;
    for (const auto& m : states_.at(c).m) b += m.size() * sizeof(T);
    for (const auto& v : states_.at(c).v) b += v.size() * sizeof(T);
    return b;
  }

  // One optimizer step from the copies' summed gradients, plus `remote[k]` for parameter k
  // when given (the gradients of copies held by another process).
  void step(const std::vector<AlignedVector<T>>* remote = nullptr) {
    ++t_;
    for (std::size_t k = 0; k < copies_.front().size(); ++k) {
      const T* g = summed_gradient(k, remote);
      const std::size_t n = copies_.front()[k]->value.data.size();
      for (std::size_t c = 0; c < copies_.size(); ++c) {
        T* p = copies_[c][k]->value.data.data();
        if (o_.kind == OptimizerOptions::Kind::kSgd)
          sgd_update(p, g, n, o_.lr);
        else if (o_.kind == OptimizerOptions::Kind::kAdamW)
          adamw_update(p, g, states_[c].m[k].data(), states_[c].v[k].data(), n,
                       {o_.lr, o_.weight_decay, o_.beta1, o_.beta2, o_.eps, t_});
      }
    }
  }

 private:
  struct State {
    std::vector<AlignedVector<T>> m, v;  // per parameter
  };

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
  std::vector<State> states_;  // per copy
  AlignedVector<T> sum_;
  long t_ = 0;
};

}  // namespace ppbench::cpu
