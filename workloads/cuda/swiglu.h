// SwiGLU feed-forward (Llama) as cpu::SwiGLU: y = (silu(x Wg^T) * (x Wu^T)) Wd^T, no biases, gate
// and up fused in one [2 ffn, hidden] projection (rows gate | up). F keeps x (in gate_up), the
// pre-activations gu and a = silu(gate) * up (in down); I frees gu.
#pragma once

#include <memory>

#include "workloads/cuda/layer.h"
#include "workloads/cuda/linear.h"

namespace ppbench::cuda {

class SwiGLU final : public Layer {
 public:
  SwiGLU(DeviceArena& params, std::int64_t hidden, std::int64_t ffn, DType dtype,
         std::uint64_t seed);
  std::string name() const override { return "swiglu"; }
  DTensor forward(Context& ctx, const DTensor& x, Saved& saved) override;
  DTensor backward_input(Context& ctx, const DTensor& dy, Saved& saved) override;
  void backward_weight(Context& ctx, Saved& saved) override;
  std::vector<Param*> params() override;

  Linear& gate_up() { return *gate_up_; }
  Linear& down() { return *down_; }

 private:
  std::int64_t ffn_;
  std::unique_ptr<Linear> gate_up_;
  std::unique_ptr<Linear> down_;
};

}  // namespace ppbench::cuda
