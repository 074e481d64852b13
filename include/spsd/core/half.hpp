#pragma once
// bfloat16 and float16: the 16-bit floating-point element types, as 2-byte value types.
//
// Both store raw bits and convert through float: to float exactly (every 16-bit value is a
// float), from float by round to nearest, ties to even, with NaN kept NaN (quieted, sign kept)
// and overflow going to infinity. The conversions are plain integer code, the same on the host
// and in CUDA kernels (SPSD_HOST_DEVICE), so a kernel's rounding matches the cpu's bit for bit.
//
// Narrowing is explicit, as for C++23's std::bfloat16_t/std::float16_t: `bfloat16 h{x}` or
// `static_cast<bfloat16>(x)` rounds; `float f = h` is implicit and exact. The types have no
// arithmetic of their own: `a + b` converts both to float and gives a float, so a kernel that
// keeps a running sum must say where it rounds (the library's kernels compute in float and
// round once per output, docs/precision.md). A double converts through float (two roundings,
// as in PyTorch).
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <type_traits>

#include "spsd/core/config.hpp"

namespace spsd {

namespace detail {

SPSD_HOST_DEVICE inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

SPSD_HOST_DEVICE inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// float -> bfloat16 bits: the upper half of the float, rounded to nearest even on the lower.
SPSD_HOST_DEVICE inline uint16_t bfloat16_bits_from(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet
  u += 0x7fffu + ((u >> 16) & 1u);  // a carry out of the mantissa bumps the exponent (max -> inf)
  return static_cast<uint16_t>(u >> 16);
}

SPSD_HOST_DEVICE inline float float_from_bfloat16_bits(uint16_t h) { return bits_to_float(uint32_t{h} << 16); }

// float -> IEEE binary16 bits, round to nearest even, integer arithmetic only (no dependence
// on the floating-point environment).
SPSD_HOST_DEVICE inline uint16_t float16_bits_from(float x) {
  uint32_t f = float_to_bits(x);
  const uint32_t sign = (f >> 16) & 0x8000u;
  f &= 0x7fffffffu;
  if (f >= 0x47800000u) {  // |x| >= 2^16, inf or NaN: all beyond the largest half (65504)
    const uint32_t nan = f > 0x7f800000u ? 0x0200u | ((f >> 13) & 0x3ffu) : 0u;
    return static_cast<uint16_t>(sign | 0x7c00u | nan);
  }
  if (f < 0x38800000u) {  // |x| < 2^-14: a subnormal half (or zero)
    const int shift = 113 - static_cast<int>(f >> 23) + 13;  // 113 = 127 - 14
    if (shift >= 25) return static_cast<uint16_t>(sign);      // below half the least subnormal
    const uint32_t mant = (f & 0x7fffffu) | 0x800000u;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent, round on the 13 dropped bits; a carry may reach inf (65520+).
  f += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + ((f >> 13) & 1u);
  return static_cast<uint16_t>(sign | (f >> 13));
}

SPSD_HOST_DEVICE inline float float_from_float16_bits(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    return bits_to_float(sign | float_to_bits(static_cast<float>(mant) * 5.9604644775390625e-8f));
  }
  return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

struct FromBits {};

}  // namespace detail

// bfloat16: 8 exponent bits and 7 mantissa bits, the high half of a float32.
struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  // f rounded to nearest even (NaN stays NaN, overflow goes to infinity).
  SPSD_HOST_DEVICE explicit bfloat16(float f) : bits(detail::bfloat16_bits_from(f)) {}
  // Any other arithmetic type goes through float (a double rounds twice, as in PyTorch).
  template <class A>
    requires(std::is_arithmetic_v<A> && !std::is_same_v<A, float>)
  SPSD_HOST_DEVICE explicit bfloat16(A v) : bfloat16(static_cast<float>(v)) {}
  SPSD_HOST_DEVICE constexpr bfloat16(detail::FromBits, uint16_t b) : bits(b) {}

  // The value as float, exactly.
  SPSD_HOST_DEVICE operator float() const { return detail::float_from_bfloat16_bits(bits); }

  // The value with these bits.
  SPSD_HOST_DEVICE static constexpr bfloat16 from_bits(uint16_t b) { return {detail::FromBits{}, b}; }
};

// float16: IEEE binary16, 5 exponent bits and 10 mantissa bits.
struct float16 {
  uint16_t bits = 0;

  float16() = default;
  // f rounded to nearest even (NaN stays NaN; from 65520 up, overflow goes to infinity).
  SPSD_HOST_DEVICE explicit float16(float f) : bits(detail::float16_bits_from(f)) {}
  // Any other arithmetic type goes through float (a double rounds twice, as in PyTorch).
  template <class A>
    requires(std::is_arithmetic_v<A> && !std::is_same_v<A, float>)
  SPSD_HOST_DEVICE explicit float16(A v) : float16(static_cast<float>(v)) {}
  // The value with these bits (from_bits' form).
  SPSD_HOST_DEVICE constexpr float16(detail::FromBits, uint16_t b) : bits(b) {}

  // The value as float, exactly.
  SPSD_HOST_DEVICE operator float() const { return detail::float_from_float16_bits(bits); }

  // The value with these bits.
  SPSD_HOST_DEVICE static constexpr float16 from_bits(uint16_t b) { return {detail::FromBits{}, b}; }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2);
static_assert(std::is_trivially_copyable_v<bfloat16> && std::is_trivially_copyable_v<float16>);

// The value, as float prints it.
inline std::ostream& operator<<(std::ostream& os, bfloat16 h) { return os << static_cast<float>(h); }
inline std::ostream& operator<<(std::ostream& os, float16 h) { return os << static_cast<float>(h); }

// True for bfloat16 and float16: the element types that compute in float and round once.
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

}  // namespace spsd

// numeric_limits, so generic code (reduction identities, infinities, epsilons) takes the types
// as it takes float.
template <>
class std::numeric_limits<spsd::bfloat16> {
  using T = spsd::bfloat16;

 public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false;
  static constexpr bool has_infinity = true, has_quiet_NaN = true, has_signaling_NaN = true;
  static constexpr bool is_iec559 = false, is_bounded = true, is_modulo = false;
  static constexpr int digits = 8, digits10 = 2, max_digits10 = 4, radix = 2;
  static constexpr int min_exponent = -125, min_exponent10 = -37, max_exponent = 128, max_exponent10 = 38;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr T min() noexcept { return T::from_bits(0x0080); }
  static constexpr T lowest() noexcept { return T::from_bits(0xff7f); }
  static constexpr T max() noexcept { return T::from_bits(0x7f7f); }
  static constexpr T epsilon() noexcept { return T::from_bits(0x3c00); }  // 2^-7
  static constexpr T round_error() noexcept { return T::from_bits(0x3f00); }
  static constexpr T infinity() noexcept { return T::from_bits(0x7f80); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7fc0); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7fa0); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
};

template <>
class std::numeric_limits<spsd::float16> {
  using T = spsd::float16;

 public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, is_exact = false;
  static constexpr bool has_infinity = true, has_quiet_NaN = true, has_signaling_NaN = true;
  static constexpr bool is_iec559 = true, is_bounded = true, is_modulo = false;
  static constexpr int digits = 11, digits10 = 3, max_digits10 = 5, radix = 2;
  static constexpr int min_exponent = -13, min_exponent10 = -4, max_exponent = 16, max_exponent10 = 4;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr T min() noexcept { return T::from_bits(0x0400); }
  static constexpr T lowest() noexcept { return T::from_bits(0xfbff); }
  static constexpr T max() noexcept { return T::from_bits(0x7bff); }  // 65504
  static constexpr T epsilon() noexcept { return T::from_bits(0x1400); }  // 2^-10
  static constexpr T round_error() noexcept { return T::from_bits(0x3800); }
  static constexpr T infinity() noexcept { return T::from_bits(0x7c00); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7e00); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7d00); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
};
