#include "workloads/cuda/kernel_util.cuh"
#include "workloads/cuda/optimizer.h"

namespace ppbench::cuda {

namespace {

// `master`, where there is one (bf16 p), is the f32 value stepped; p is then its rounding.
template <typename T>
__global__ void sgd_kernel(T* __restrict__ p, float* __restrict__ master,
                           const float* __restrict__ g, std::int64_t n, float lr) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float x = (master != nullptr ? master[i] : to_f(p[i])) - lr * g[i];
    if (master != nullptr) master[i] = x;
    p[i] = from_f<T>(x);
  }
}

__global__ void adamw_begin_kernel(AdamWCounter* c, double beta1, double beta2, double lr) {
  const std::int64_t t = ++c->t;
  const double td = static_cast<double>(t);
  c->step = static_cast<float>(lr / (1 - pow(beta1, td)));
  c->root = static_cast<float>(sqrt(1 - pow(beta2, td)));
}

// `x` is the f32 value stepped: the master copy where there is one, else p itself (f32).
template <typename T>
__global__ void adamw_kernel(T* __restrict__ p, float* __restrict__ master,
                             const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, std::int64_t n, float decay, float b1, float b2,
                             float eps, const AdamWCounter* __restrict__ c) {
  const float step = c->step, root = c->root;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float x = master != nullptr ? master[i] : to_f(p[i]);
    const float gi = g[i];
    x *= decay;
    const float mi = b1 * m[i] + (1 - b1) * gi;
    const float vi = b2 * v[i] + (1 - b2) * gi * gi;
    x -= step * mi / (sqrtf(vi) / root + eps);
    m[i] = mi;
    v[i] = vi;
    if (master != nullptr) master[i] = x;
    p[i] = from_f<T>(x);
  }
}

template <typename T>
__global__ void widen_kernel(const T* __restrict__ p, float* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_f(p[i]);
}

void require_float_dtype(DType dtype, const char* what) {
  if (dtype != DType::kF32 && dtype != DType::kBF16)
    throw CudaError(std::string(what) + ": parameters must be f32 or bf16, not " +
                    dtype_name(dtype));
}

}  // namespace

void sgd_update(cudaStream_t stream, DType dtype, void* p, float* master, const float* g,
                std::int64_t n, double lr) {
  require_float_dtype(dtype, "sgd_update");
  if (dtype == DType::kBF16 && master == nullptr)
    throw CudaError("sgd_update: bf16 parameters need their f32 master copy");
  if (n == 0) return;
  const auto l = static_cast<float>(lr);
  if (dtype == DType::kBF16)
    sgd_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<bf16*>(p), master, g, n, l);
  else
    sgd_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<float*>(p), master, g, n, l);
  CUDA_CHECK_LAUNCH();
}

void adamw_begin_step(cudaStream_t stream, AdamWCounter* counter, double beta1, double beta2,
                      double lr) {
  adamw_begin_kernel<<<1, 1, 0, stream>>>(counter, beta1, beta2, lr);
  CUDA_CHECK_LAUNCH();
}

void adamw_update(cudaStream_t stream, DType dtype, void* p, float* master, const float* g,
                  float* m, float* v, std::int64_t n, const AdamWHyper& h,
                  const AdamWCounter* counter) {
  require_float_dtype(dtype, "adamw_update");
  if (dtype == DType::kBF16 && master == nullptr)
    throw CudaError("adamw_update: bf16 parameters need their f32 master copy");
  if (n == 0) return;
  // The scalars as the CPU kernel rounds them to its element type.
  const auto decay = static_cast<float>(1 - h.lr * h.weight_decay);
  const auto b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const auto eps = static_cast<float>(h.eps);
  if (dtype == DType::kBF16)
    adamw_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<bf16*>(p), master, g, m, v, n, decay,
                                                  b1, b2, eps, counter);
  else
    adamw_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<float*>(p), master, g, m, v, n, decay,
                                                  b1, b2, eps, counter);
  CUDA_CHECK_LAUNCH();
}

void widen_to_f32(cudaStream_t stream, DType dtype, const void* p, float* master, std::int64_t n) {
  require_float_dtype(dtype, "widen_to_f32");
  if (n == 0) return;
  if (dtype == DType::kBF16)
    widen_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const bf16*>(p), master, n);
  else
    widen_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const float*>(p), master, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ppbench::cuda
