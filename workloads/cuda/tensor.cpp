#include "workloads/cuda/tensor.h"

#include <cstdint>

#include <cuda_runtime_api.h>

namespace ppbench::cuda {

std::string shape_text(const Shape& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

DTensor::DTensor(DeviceArena& arena, Shape shape, DType dtype, const char* what)
    : shape_(std::move(shape)), dtype_(dtype) {
  for (std::int64_t d : shape_) require(d >= 0, std::string(what) + ": negative dimension");
  const auto bytes = static_cast<std::size_t>(numel()) * dtype_size(dtype_);
  void* p = arena.allocate(bytes, what);
  block_ = std::make_shared<Block>(&arena, p);
}

DTensor DTensor::shape_only(Shape shape, DType dtype) {
  DTensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

DTensor DTensor::reshaped(Shape shape) const {
  require(shape_numel(shape) == numel(),
          "reshape " + shape_text(shape_) + " -> " + shape_text(shape) + " changes the size");
  DTensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void upload(const DTensor& dst, const std::vector<float>& host) {
  require(static_cast<std::int64_t>(host.size()) == dst.numel(),
          "upload: " + std::to_string(host.size()) + " values for " + shape_text(dst.shape()));
  if (host.empty()) return;
  const auto n = host.size();
  switch (dst.dtype()) {
    case DType::kF32:
      CUDA_CHECK(cudaMemcpy(dst.data(), host.data(), n * 4, cudaMemcpyHostToDevice));
      break;
    case DType::kBF16: {
      std::vector<std::uint16_t> b(n);
      for (std::size_t i = 0; i < n; ++i) b[i] = float_to_bf16_bits(host[i]);
      CUDA_CHECK(cudaMemcpy(dst.data(), b.data(), n * 2, cudaMemcpyHostToDevice));
      break;
    }
    case DType::kI32: {
      std::vector<std::int32_t> b(n);
      for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::int32_t>(host[i]);
      CUDA_CHECK(cudaMemcpy(dst.data(), b.data(), n * 4, cudaMemcpyHostToDevice));
      break;
    }
  }
  // A pageable host-to-device cudaMemcpy may return before its DMA lands, and the ranks' streams
  // are non-blocking (no implicit order with the default stream the copy ran on): wait for it,
  // so that a kernel on any stream sees the values.
  CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

std::vector<float> download(const DTensor& src) {
  const auto n = static_cast<std::size_t>(src.numel());
  std::vector<float> out(n);
  if (n == 0 || src.empty()) return out;
  CUDA_CHECK(cudaDeviceSynchronize());
  switch (src.dtype()) {
    case DType::kF32:
      CUDA_CHECK(cudaMemcpy(out.data(), src.data(), n * 4, cudaMemcpyDeviceToHost));
      break;
    case DType::kBF16: {
      std::vector<std::uint16_t> b(n);
      CUDA_CHECK(cudaMemcpy(b.data(), src.data(), n * 2, cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_bits_to_float(b[i]);
      break;
    }
    case DType::kI32: {
      std::vector<std::int32_t> b(n);
      CUDA_CHECK(cudaMemcpy(b.data(), src.data(), n * 4, cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(b[i]);
      break;
    }
  }
  return out;
}

void zero(const DTensor& t, void* stream) {
  if (t.empty() || t.bytes() == 0) return;
  CUDA_CHECK(cudaMemsetAsync(t.data(), 0, static_cast<std::size_t>(t.bytes()),
                             static_cast<cudaStream_t>(stream)));
}

std::vector<float> download_cpu_layout(const Param& p, const DTensor& t) {
  std::vector<float> v = download(t);
  if (!p.transposed) return v;
  require(t.shape().size() == 2, "download_cpu_layout: " + p.name + " is transposed but not 2-D");
  const std::int64_t rows = t.dim(0), cols = t.dim(1);
  std::vector<float> out(v.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(c * rows + r)] = v[static_cast<std::size_t>(r * cols + c)];
  return out;
}

}  // namespace ppbench::cuda
