#include "workloads/counter_rng.h"
#include "workloads/cuda/embedding.h"
#include "workloads/cuda/init_fill.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

enum Slot { kIds, kDY, kSlots };

template <typename T>
__global__ void embedding_forward_kernel(const std::int32_t* __restrict__ ids,
                                         const T* __restrict__ table, T* __restrict__ y,
                                         std::int64_t n, std::int64_t hidden) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t tok = k / hidden, c = k % hidden;
    y[k] = table[static_cast<std::int64_t>(ids[tok]) * hidden + c];
  }
}

template <typename T>
__global__ void embedding_backward_kernel(const std::int32_t* __restrict__ ids,
                                          const T* __restrict__ dy, float* __restrict__ dtable,
                                          std::int64_t n, std::int64_t hidden) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t tok = k / hidden, c = k % hidden;
    atomicAdd(dtable + static_cast<std::int64_t>(ids[tok]) * hidden + c, to_f(dy[k]));
  }
}

}  // namespace

Embedding::Embedding(DeviceArena& params, std::int64_t vocab, std::int64_t hidden, DType dtype,
                     std::uint64_t seed)
    : vocab_(vocab), hidden_(hidden), dtype_(dtype) {
  require(vocab > 0 && hidden > 0, "embedding: sizes must be positive");
  table = make_param(params, "embedding", {vocab, hidden}, dtype);
  fill_param(table, param_key(seed, 0), 1.0);  // the CPU's values, same layout
}

DTensor Embedding::forward(Context& ctx, const DTensor& ids, Saved& saved) {
  require(ids.dtype() == DType::kI32, "embedding: ids must be int32");
  Shape shape = ids.shape();
  shape.push_back(hidden_);
  DTensor y(ctx.arena, shape, dtype_, "embedding output");
  const std::int64_t n = y.numel();
  if (n > 0) {
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      embedding_forward_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(
          ids.as<std::int32_t>(), table.value.as<T>(), y.as<T>(), n, hidden_);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
  saved.in_shape = ids.shape();
  saved.t.resize(kSlots);
  saved.t[kIds] = ids;
  return y;
}

DTensor Embedding::backward_input(Context& /*ctx*/, const DTensor& dy, Saved& saved) {
  require(dy.numel() == saved.t[kIds].numel() * hidden_ && dy.dtype() == dtype_,
          "embedding: bad output gradient");
  saved.t[kDY] = dy;
  return DTensor::shape_only(saved.in_shape, DType::kI32);
}

void Embedding::backward_weight(Context& ctx, Saved& saved) {
  const DTensor& ids = saved.t[kIds];
  const DTensor& dy = saved.t[kDY];
  const std::int64_t n = dy.numel();
  if (n > 0) {
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      embedding_backward_kernel<T><<<grid_for(n), 256, 0, ctx.stream>>>(
          ids.as<std::int32_t>(), dy.as<T>(), table.grad.as<float>(), n, hidden_);
    });
    CUDA_CHECK_LAUNCH();
  }
  saved.clear();
}

}  // namespace ppbench::cuda
