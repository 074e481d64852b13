#pragma once
// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011): element g of a tensor
// draws from counter g under key seed, so a value depends only on (seed, global index, T),
// never on which rank computes it.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "spsd/core/config.hpp"

namespace spsd::philox {

// Four 32-bit words: a Philox-4x32 counter or the random words it gives.
struct Block {
  uint32_t v[4];
};

SPSD_HOST_DEVICE constexpr void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// Ten rounds of Philox-4x32 on counter (c0..c3) with key (k0, k1).
SPSD_HOST_DEVICE constexpr Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c.v[0], hi0, lo0);
    mulhilo(kM1, c.v[2], hi1, lo1);
    c = Block{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += kW0;
    k1 += kW1;
  }
  return c;
}

SPSD_HOST_DEVICE constexpr Block draw(uint64_t seed, uint64_t index) {
  return philox4x32_10(Block{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform in [0, 1): 24 random bits for float, 53 for double.
template <class T>
SPSD_HOST_DEVICE T uniform(uint64_t seed, uint64_t index) {
  Block b = draw(seed, index);
  if constexpr (sizeof(T) == 4) return static_cast<T>(b.v[0] >> 8) * (1.0f / 16777216.0f);
  else return static_cast<T>((static_cast<uint64_t>(b.v[0]) << 21) ^ (b.v[1] >> 11)) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller on the element's own two uniforms (u1 in (0, 1] so log is finite).
template <class T>
SPSD_HOST_DEVICE T normal(uint64_t seed, uint64_t index) {
  Block b = draw(seed, index);
  double u1 = (static_cast<double>((static_cast<uint64_t>(b.v[0]) << 21) ^ (b.v[1] >> 11)) + 1.0) / 9007199254740992.0;
  double u2 = static_cast<double>((static_cast<uint64_t>(b.v[2]) << 21) ^ (b.v[3] >> 11)) / 9007199254740992.0;
  return static_cast<T>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

}  // namespace spsd::philox
