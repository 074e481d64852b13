#pragma once
// convert<To>(v): one element from any element type to any other, as cast() defines it. The cpu
// loop and the CUDA kernel both inline this, so both sides convert alike, bit for bit.
//   floating -> floating   to nearest (even); a 16-bit type goes through float (exact), and
//                          double -> 16-bit rounds to float first (two roundings, as PyTorch)
//   floating -> integer    truncates toward zero, saturates at the type's range, NaN gives 0
//                          (C++ leaves those undefined; CUDA's conversion instructions do this)
//   integer -> floating    to nearest; int -> 16-bit through float
//   integer -> integer     modulo 2^bits (C++20)
//   any -> bool            nonzero is true (NaN too, as C++ and torch); bool -> any: 1 or 0
#include <cstdint>
#include <type_traits>

#include "spsd/core/config.hpp"
#include "spsd/core/dtype.hpp"

namespace spsd::kernel {

// v as To, by the rules above.
template <Element To, Element From>
SPSD_HOST_DEVICE inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<compute_t<From>>(v) != compute_t<From>(0);
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
    // The limits by hand: numeric_limits is not callable from device code without nvcc's
    // --expt-relaxed-constexpr. To is int32_t or int64_t.
    using U = std::make_unsigned_t<To>;
    constexpr To kMax = static_cast<To>(static_cast<U>(~U{0}) >> 1), kMin = static_cast<To>(-kMax - 1);
    constexpr double kLimit = static_cast<double>(uint64_t{1} << (8 * sizeof(To) - 1));  // 2^(bits-1), exact
    const double d = static_cast<double>(static_cast<compute_t<From>>(v));
    if (!(d == d)) return To{0};
    if (d >= kLimit) return kMax;
    if (d < -kLimit) return kMin;
    return static_cast<To>(d);
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(static_cast<compute_t<From>>(v)));
  } else {
    return static_cast<To>(static_cast<compute_t<From>>(v));
  }
}

}  // namespace spsd::kernel
