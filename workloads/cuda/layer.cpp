#include "workloads/cuda/layer.h"

namespace ppbench::cuda {

Param make_param(DeviceArena& arena, std::string name, Shape shape, DType dtype) {
  Param p;
  p.name = std::move(name);
  p.value = DTensor(arena, shape, dtype, "parameter");
  p.grad = DTensor(arena, std::move(shape), DType::kF32, "parameter gradient");
  zero(p.value);
  zero(p.grad);
  // The zeroing ran on the default stream, which the ranks' non-blocking streams do not wait for.
  CUDA_CHECK(cudaStreamSynchronize(nullptr));
  return p;
}

}  // namespace ppbench::cuda
