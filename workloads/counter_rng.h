// The random numbers of every model: parameters and synthetic data are a pure function of
// (key, element index), drawn with Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel
// Random Numbers: As Easy as 1, 2, 3", SC'11; the generator of Random123 and cuRAND). Being
// counter-based, any element can be drawn on its own: the CPU backend fills a tensor in a loop,
// the CUDA backend fills the same tensor on the device with one thread per element, in its own
// layout, and both hold the same values bit for bit (the GPU fills billions of parameters in
// milliseconds instead of drawing them on the host).
//
// Bit-exact on host and device by construction: integer arithmetic only, up to one final
// floating-point operation (a product, or an exact conversion), so that no compiler can
// contract or reorder anything; the result is then rounded once to the tensor's type.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define PPBENCH_HOST_DEVICE __host__ __device__
#else
#define PPBENCH_HOST_DEVICE
#endif

namespace ppbench {

struct Philox4x32 {
  std::uint32_t v[4];
};

// Ten rounds of the Philox4x32 bijection of `counter` under `key` (Random123's philox4x32_R
// with R = 10): each round multiplies two words by fixed odd constants and mixes the high and
// low halves with the other words and the key, which is bumped by the Weyl constants between
// rounds.
PPBENCH_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 c, std::uint32_t k0,
                                                    std::uint32_t k1) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k0 += kW0, k1 += kW1;
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c.v[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c.v[2];
    c = {{static_cast<std::uint32_t>(p1 >> 32) ^ c.v[1] ^ k0, static_cast<std::uint32_t>(p1),
          static_cast<std::uint32_t>(p0 >> 32) ^ c.v[3] ^ k1, static_cast<std::uint32_t>(p0)}};
  }
  return c;
}

// 64 random bits of element `index` of the stream `key`. One Philox block serves two elements:
// the counter is index / 2, and the element takes the block's first or second pair of words.
PPBENCH_HOST_DEVICE inline std::uint64_t draw_bits(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t block = index >> 1;
  const Philox4x32 r = philox4x32_10(
      {{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}},
      static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
  const int w = (index & 1) ? 2 : 0;
  return (static_cast<std::uint64_t>(r.v[w]) << 32) | r.v[w + 1];
}

// Uniform in [0, 1) on a grid of 2^-53: exact in double.
PPBENCH_HOST_DEVICE inline double draw_unit(std::uint64_t key, std::uint64_t index) {
  return static_cast<double>(draw_bits(key, index) >> 11) * 0x1.0p-53;
}

// Uniform in [-1, 1) on a grid of 2^-52: k * 2^-52 - 1 is exact in double for every k < 2^53.
PPBENCH_HOST_DEVICE inline double draw_symmetric(std::uint64_t key, std::uint64_t index) {
  return static_cast<double>(draw_bits(key, index) >> 11) * 0x1.0p-52 - 1.0;
}

// Uniform in [-a, a): one rounded product, so host and device agree.
PPBENCH_HOST_DEVICE inline double draw_symmetric(std::uint64_t key, std::uint64_t index, double a) {
  return a * draw_symmetric(key, index);
}

// Uniform integer in [0, n), n < 2^32 (token ids, class labels): the high 32 bits scaled by n
// in integers (multiply-shift), never n itself.
PPBENCH_HOST_DEVICE inline std::int32_t draw_below(std::uint64_t key, std::uint64_t index,
                                                   std::uint32_t n) {
  return static_cast<std::int32_t>((draw_bits(key, index) >> 32) * n >> 32);
}

// x (1 + relative xi), xi uniform in [-1, 1) of element `index` of the stream `key`: with
// `relative` the unit roundoff of a working precision, a perturbation as large as rounding x to
// it. The tests judge a low-precision result by how far such perturbations move the float64
// reference (single_device_step's ReferencePerturbation, tests/common/reference_spread.h).
PPBENCH_HOST_DEVICE inline double perturb_relative(double x, double relative, std::uint64_t key,
                                                   std::uint64_t index) {
  return x * (1.0 + relative * draw_symmetric(key, index));
}

// splitmix64: independent child keys from one key, so that every layer's parameters depend only
// on (run seed, layer position, tensor) and two runs build identical models.
PPBENCH_HOST_DEVICE inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t k) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (k + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// perturb_relative over a tensor: to[i] = from[i] (1 + relative xi_i), the xi drawn from stream
// `stream` of `key`, so that each tensor of a run (a parameter, an input) gets its own draws.
// `to` may be `from`'s own storage.
template <class Values>
void perturb_values(const Values& from, double* to, double relative, std::uint64_t key,
                    std::uint64_t stream) {
  const std::uint64_t k = derive_seed(key, stream);
  for (std::size_t i = 0; i < from.size(); ++i)
    to[i] = perturb_relative(static_cast<double>(from[i]), relative, k, i);
}

// The key of a layer's parameter tensor: slot 0 its weight (or table), slot 1 its bias.
PPBENCH_HOST_DEVICE inline std::uint64_t param_key(std::uint64_t layer_seed, int slot) {
  return derive_seed(layer_seed, 0x5eed0000u + static_cast<std::uint64_t>(slot));
}

}  // namespace ppbench
