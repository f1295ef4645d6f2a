// Token embedding: ids [batch, seq] (integer values stored in T) -> rows of a [vocab, hidden]
// table, [batch, seq, hidden]. The ids get no gradient: I returns zeros of their shape and keeps
// dy; W scatter-adds dy into the rows of the used tokens (a token seen twice gets both rows).
#pragma once

#include "workloads/cpu/layer.h"

namespace ppbench::cpu {

template <typename T>
class Embedding final : public Layer<T> {
 public:
  // table ~ U(-1, 1) (the scale is immaterial for a benchmark; it only has to be fixed).
  Embedding(std::int64_t vocab, std::int64_t hidden, std::uint64_t seed);
  std::string name() const override { return "embedding"; }

  Tensor<T> forward(const Tensor<T>& ids, Saved<T>& saved) override;
  Tensor<T> backward_input(const Tensor<T>& dy, Saved<T>& saved) override;
  void backward_weight(Saved<T>& saved) override;
  std::vector<Param<T>*> params() override { return {&table}; }

  Param<T> table;  // [vocab, hidden]

 private:
  std::int64_t vocab_;
  std::int64_t hidden_;
};

}  // namespace ppbench::cpu
