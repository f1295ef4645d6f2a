// Element types of device tensors. Activations and parameters are bf16 or fp32; gradients of
// parameters, norm statistics and losses are always fp32 (accumulation precision), ids int32.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace ppbench::cuda {

enum class DType { kBF16, kF32, kI32 };

inline std::size_t dtype_size(DType t) { return t == DType::kBF16 ? 2 : 4; }
inline std::string dtype_name(DType t) {
  switch (t) {
    case DType::kBF16:
      return "bf16";
    case DType::kF32:
      return "f32";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

// Host-side bf16 rounding (round to nearest even, NaN kept quiet), so that tests and uploads
// need no CUDA header and agree bit for bit with __float2bfloat16_rn.
inline std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float bf16_bits_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

}  // namespace ppbench::cuda
