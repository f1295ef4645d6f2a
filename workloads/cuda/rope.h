// Rotary position embedding on [batch, seq, heads * head_dim], rotate-half layout, as
// cpu::RotaryEmbedding: element i of a head pairs with i + head_dim/2, rotated by
// pos * theta^(-2i/head_dim). No parameters, nothing saved; I applies the inverse rotation.
#pragma once

#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

// Rotates x into y (may alias); inverse applies the transpose.
void rope_rotate(Context& ctx, const DTensor& x, const DTensor& y, std::int64_t heads,
                 std::int64_t head_dim, double theta, bool inverse);

class RotaryEmbedding final : public Layer {
 public:
  RotaryEmbedding(std::int64_t heads, std::int64_t head_dim, double theta = 10000.0);
  std::string name() const override { return "rope"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;

 private:
  std::int64_t heads_;
  std::int64_t head_dim_;
  double theta_;
};

}  // namespace ppbench::cuda
