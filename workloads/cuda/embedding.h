// Token embedding as cpu::Embedding: ids [batch, seq] (int32) -> rows of a [vocab, hidden] table.
// The ids get no gradient: I returns a shape-only tensor of their shape (no memory) and keeps dy;
// W scatter-adds dy into the f32 table gradient with atomics (a token seen twice gets both rows;
// the order of the additions, hence the last bits, is not deterministic). Ids are trusted: they
// are checked where they are generated, on the host, not per launch.
#pragma once

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

class Embedding final : public Layer {
 public:
  // table ~ U(-1, 1) drawn as cpu::Embedding(vocab, hidden, seed) draws it.
  Embedding(DeviceArena& params, std::int64_t vocab, std::int64_t hidden, DType dtype,
            std::uint64_t seed);
  std::string name() const override { return "embedding"; }
  DTensor forward(Context& ctx, const DTensor& ids, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override { return {&table}; }

  Param table;  // [vocab, hidden]

 private:
  std::int64_t vocab_;
  std::int64_t hidden_;
  DType dtype_;
};

}  // namespace ppbench::cuda
