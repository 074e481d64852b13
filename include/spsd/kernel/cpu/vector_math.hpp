#pragma once
// exp, erf and tanh of float written so that the compiler vectorizes the loops that call them
// (loop.hpp's blocks, with SSE2, the x86-64 baseline, and no -march): no branch, no libm call,
// only multiplies, adds, compares, fabs/copysign and integer bit operations; both sides of a
// case are computed and one is selected by a bit mask. libm's expf, erff and tanhf are scalar calls, which kept
// gelu, its gradient, silu and softmax at a fraction of memory bandwidth.
//
// Accuracy against the exact function (test/unit/test_vector_math.cpp checks it on every float
// of a dense sweep of the whole range): exp within 1 ulp (subnormal results included), erf
// within 3 ulp, tanh within 2 ulp. NaN in gives NaN out; exp(inf) = inf, exp(-inf) = 0,
// erf(+-inf) = +-1, tanh(+-inf) = +-1, erf(-0) = -0, but tanh(-0) = +0. double (and anything
// but float) goes to <cmath> as before: these are for float and the 16-bit types, which
// compute in float.
//
// The polynomials were fitted for this file (least squares on Chebyshev nodes against double
// precision references, coefficients rounded to float and checked in float arithmetic):
//   exp:  Cody and Waite's reduction x = n ln2 + r, |r| <= ln2/2, then Cephes' expf polynomial
//         for e^r, scaled by 2^n in two steps (2^(n/2) twice) so that subnormal results round once.
//   erf:  |x| < 1.5: x + x P(x^2); 1.5 <= |x| (clamped to 4, where erf is 1 in float):
//         1 - exp(Q(u)), u = (|x| - 2.75) / 1.25 in [-1, 1], Q ~ log(erfc) (as N. Juffa's erff;
//         from 1.5 on erfc < 0.034, so Q's rounding errors stay below an ulp of erf).
//   tanh: |x| < 0.625: x + x^3 P(x^2); else 1 - 2 / (exp(2|x|) + 1), the sign put back.
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace spsd::kernel::cpu {

namespace vector_math {

// Horner's rule, c0 + c1 x + c2 x^2 + ..., unrolled at compile time: the coefficients are
// arguments, not an array (a table in memory, or a loop over one, stops the caller's loop
// from vectorizing).
template <class... Cs>
[[gnu::always_inline]] inline float poly(float x, float c0, Cs... cs) {
  if constexpr (sizeof...(cs) == 0) return c0;
  else return poly(x, cs...) * x + c0;
}


// c ? a : b as bit operations: a conditional expression on computed values lets GCC turn the
// function into branches (jump threading on the compared value), which stops vectorization.
[[gnu::always_inline]] inline float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

}  // namespace vector_math

// exp(x) within 1 ulp, branch-free so that loops over it vectorize (docs/operators.md).
[[gnu::always_inline]] inline float exp_float(float x) {
  using namespace vector_math;
  // Outside [-104, 89] the result is 0 or inf anyway; the clamps keep 2^n in range. A NaN
  // fails both comparisons and stays NaN.
  x = select(x > 89.0f, 89.0f, x);
  x = select(x < -104.0f, -104.0f, x);
  // n = round(x / ln2) by the 1.5 * 2^23 trick: its low bits hold n.
  constexpr float kShift = 12582912.0f;
  const float shifted = x * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  const int32_t ni = static_cast<int32_t>(std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kShift));
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // ln2 in two parts: n * the first is exact
  const float p = poly(r, 5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f, 8.3334519073e-3f, 1.3981999507e-3f,
                       1.9875691500e-4f) *
                      (r * r) +
                  r + 1.0f;
  const int32_t half = ni >> 1;  // 2^n = 2^half 2^(n - half), each a normal float
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(half + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(ni - half + 127) << 23);
  return p * s1 * s2;
}

// erf(x) where erf_small_covers(x): erf_float's first case, so exactly its value there. The
// loops of gelu and erf run it alone on a block whose elements are all covered (loop.hpp,
// TwoRegimes): typical activations skip the tail's exp.
[[gnu::always_inline]] inline bool erf_small_covers(float x) { return std::fabs(x) < 1.5f; }
[[gnu::always_inline]] inline float erf_small_float(float x) {
  using namespace vector_math;
  return x + x * poly(x * x, 1.28379166e-1f, -3.76126349e-1f, 1.12837285e-1f, -2.68632136e-2f, 5.21703484e-3f,
                      -8.45571922e-4f, 1.13153874e-4f, -1.13444430e-5f, 6.22312257e-7f);
}
// erf_small_float as a function object (gelu_exact's and gelu_derivative's Erf).
struct ErfSmall {
  // erf_small_float(x).
  [[gnu::always_inline]] float operator()(float x) const { return erf_small_float(x); }
};

// erf(x) within 3 ulp, branch-free.
[[gnu::always_inline]] inline float erf_float(float x) {
  using namespace vector_math;
  const float t = std::fabs(x);
  const float small = erf_small_float(x);
  const float tc = select(t > 4.0f, 4.0f, t);  // keeps a NaN
  const float q = poly((tc - 2.75f) * (1.0f / 1.25f), -9.20414066e+0f, -7.28316975e+0f, -1.48638558e+0f,
                       -1.74482670e-2f, 4.16263053e-3f, -9.76752024e-4f, 2.19698326e-4f, -4.81820061e-5f,
                       8.41261681e-6f);
  const float large = std::copysign(1.0f - exp_float(q), x);
  return select(erf_small_covers(x), small, large);  // a NaN takes `large`, NaN too
}

// tanh(x) within 2 ulp, branch-free (tanh(-0) is +0).
[[gnu::always_inline]] inline float tanh_float(float x) {
  using namespace vector_math;
  const float t = std::fabs(x), s = x * x;
  const float small = x + x * s * poly(s, -3.33333343e-1f, 1.33333027e-1f, -5.39591163e-2f, 2.17678975e-2f,
                                       -8.34098551e-3f, 2.28973641e-3f);
  const float large = std::copysign(1.0f - 2.0f / (exp_float(2.0f * t) + 1.0f), x);
  return select(t < 0.625f, small, large);
}

// The functions by type: the vectorizable float forms for float, <cmath> for anything else.
template <class T>
[[gnu::always_inline]] inline T vexp(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_float(x);
  else return std::exp(x);
}
template <class T>
[[gnu::always_inline]] inline T verf(T x) {
  if constexpr (std::is_same_v<T, float>) return erf_float(x);
  else return std::erf(x);
}
template <class T>
[[gnu::always_inline]] inline T vtanh(T x) {
  if constexpr (std::is_same_v<T, float>) return tanh_float(x);
  else return std::tanh(x);
}

}  // namespace spsd::kernel::cpu
