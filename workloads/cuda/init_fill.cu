#include "workloads/cuda/init_fill.h"
#include "workloads/cuda/kernel_util.cuh"

namespace ppbench::cuda {

namespace {

constexpr int kThreads = 256;

int fill_blocks(std::int64_t n) {
  // A grid-stride loop: enough blocks to fill the GPU, no grid-size limit to hit.
  return static_cast<int>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535));
}

// value[i] for the element stored at i; `rows` x `cols` is the stored shape and `transposed` says
// that the canonical (CPU) layout is its transpose.
template <typename T>
__global__ void fill_param_kernel(T* value, std::int64_t rows, std::int64_t cols, bool transposed,
                                  std::uint64_t key, double a) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t canonical = transposed ? (i % cols) * rows + i / cols : i;
    value[i] = from_f<T>(
        static_cast<float>(draw_symmetric(key, static_cast<std::uint64_t>(canonical), a)));
  }
}

template <typename T>
__global__ void fill_features_kernel(T* x, std::int64_t n, DataKeys keys) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] = from_f<T>(static_cast<float>(data_feature(keys, static_cast<std::uint64_t>(i))));
}

// kind 0: tokens, 1: next-token targets, 2: labels.
__global__ void fill_ids_kernel(std::int32_t* out, std::int64_t n, DataKeys keys, std::int64_t seq,
                                std::uint32_t range, int kind) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / seq, pos = i % seq;
    out[i] = kind == 0   ? data_token(keys, row, pos, seq, range)
             : kind == 1 ? data_next_token(keys, row, pos, seq, range)
                         : data_label(keys, i, range);
  }
}

void finish() {
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

}  // namespace

void fill_param(const Param& p, std::uint64_t key, double a) {
  const DTensor& v = p.value;
  require(!p.transposed || v.shape().size() == 2, "fill_param: a transposed parameter must be 2-D");
  if (v.numel() == 0) return;
  const std::int64_t rows = v.rows(), cols = v.cols();
  if (v.dtype() == DType::kBF16)
    fill_param_kernel<<<fill_blocks(v.numel()), kThreads>>>(v.as<bf16>(), rows, cols, p.transposed,
                                                            key, a);
  else if (v.dtype() == DType::kF32)
    fill_param_kernel<<<fill_blocks(v.numel()), kThreads>>>(v.as<float>(), rows, cols, p.transposed,
                                                            key, a);
  else
    require(false, "fill_param: parameters are bf16 or f32");
  finish();
}

void fill_features(const DTensor& x, const DataKeys& keys) {
  if (x.numel() == 0) return;
  if (x.dtype() == DType::kBF16)
    fill_features_kernel<<<fill_blocks(x.numel()), kThreads>>>(x.as<bf16>(), x.numel(), keys);
  else if (x.dtype() == DType::kF32)
    fill_features_kernel<<<fill_blocks(x.numel()), kThreads>>>(x.as<float>(), x.numel(), keys);
  else
    require(false, "fill_features: features are bf16 or f32");
  finish();
}

namespace {
void fill_ids(const DTensor& out, const DataKeys& keys, std::int64_t seq, std::uint32_t range,
              int kind) {
  require(out.dtype() == DType::kI32, "synthetic ids and targets are int32");
  require(seq > 0 && range > 0, "synthetic ids: sizes must be positive");
  if (out.numel() == 0) return;
  fill_ids_kernel<<<fill_blocks(out.numel()), kThreads>>>(out.as<std::int32_t>(), out.numel(), keys,
                                                          seq, range, kind);
  finish();
}
}  // namespace

void fill_tokens(const DTensor& ids, const DataKeys& keys, std::uint32_t vocab) {
  fill_ids(ids, keys, ids.cols(), vocab, 0);
}
void fill_next_tokens(const DTensor& targets, const DataKeys& keys, std::int64_t seq,
                      std::uint32_t vocab) {
  fill_ids(targets, keys, seq, vocab, 1);
}
void fill_labels(const DTensor& targets, const DataKeys& keys, std::uint32_t classes) {
  fill_ids(targets, keys, 1, classes, 2);
}

}  // namespace ppbench::cuda
