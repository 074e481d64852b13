#pragma once
// f'(.) of the unary ops, as backward's unary_grad kernels use it: one definition that the cpu
// loops and the CUDA kernels both inline, so both sides round the same expression.
//
// f' is written in terms of the value backward saved: the output y where f' is cheaper from it
// (exp, tanh, sigmoid, sqrt, relu, rsqrt: f' = y, 1 - y^2, y (1 - y), 1 / (2 y), [y > 0],
// -y^3 / 2), else the input x (gelu, gelu_tanh, erf, silu, log, abs, neg).
#include <cmath>

#include "spsd/core/error.hpp"
#include "spsd/kernel/elementwise_ops.hpp"
#if !defined(__CUDA_ARCH__)
#include "spsd/kernel/cpu/vector_math.hpp"
#endif

#if defined(__CUDACC__)
#define SPSD_HOST_DEVICE __host__ __device__
#else
#define SPSD_HOST_DEVICE
#endif

// On the host: inlined into the cpu kernels' loops, which then vectorize (a call left in a loop
// body stops that).
#if defined(__CUDA_ARCH__)
#define SPSD_MATH_INLINE
#else
#define SPSD_MATH_INLINE __attribute__((always_inline))
#endif

namespace spsd::kernel {

using cpu::UnaryOp;

// Which value f' reads: true for the output y, false for the input x.
constexpr bool derivative_reads_output(UnaryOp k) {
  return k == UnaryOp::kExp || k == UnaryOp::kTanh || k == UnaryOp::kSigmoid || k == UnaryOp::kSqrt ||
         k == UnaryOp::kRelu || k == UnaryOp::kRsqrt;
}

// portable_tanh, _exp, _erf: the function on whichever side compiles the caller (CUDA's float
// and double overloads on the device; on the host kernel/cpu/vector_math.hpp's vectorizable
// float forms, <cmath>'s for double).
#if defined(__CUDA_ARCH__)
#define SPSD_PORTABLE_MATH(fn) \
  template <class T>           \
  SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T portable_##fn(T x) { return fn(x); }
#else
#define SPSD_PORTABLE_MATH(fn) \
  template <class T>           \
  SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T portable_##fn(T x) { return cpu::v##fn(x); }
#endif
SPSD_PORTABLE_MATH(tanh)
SPSD_PORTABLE_MATH(exp)
SPSD_PORTABLE_MATH(erf)
#undef SPSD_PORTABLE_MATH

// The forward functions the cpu and CUDA kernels share (both round the same expression).
// gelu(x) = x Phi(x) = x/2 (1 + erf(x / sqrt 2)): exact, torch's default. gelu_erf_argument(x)
// is the x / sqrt 2 it hands erf.
template <class T>
SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T gelu_erf_argument(T x) {
  return x * T(0.7071067811865476);
}

// portable_erf as a function object: the Erf of gelu_exact and gelu_derivative, which the cpu
// loops replace by erf's first case on blocks that only need it (cpu/vector_math.hpp).
struct PortableErf {
  // portable_erf(x).
  template <class T>
  SPSD_HOST_DEVICE SPSD_MATH_INLINE T operator()(T x) const {
    return portable_erf(x);
  }
};

// gelu(x), with erf computed by Erf.
template <class T, class Erf = PortableErf>
SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T gelu_exact(T x, Erf erf = {}) {
  return T(0.5) * x * (T(1) + erf(gelu_erf_argument(x)));
}
// gelu'(x) = Phi(x) + x phi(x).
template <class T, class Erf = PortableErf>
SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T gelu_derivative(T x, Erf erf = {}) {
  return T(0.5) * (T(1) + erf(gelu_erf_argument(x))) +
         x * T(0.3989422804014327) * portable_exp(T(-0.5) * x * x);  // 1 / sqrt(2 pi)
}
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the tanh approximation (Hendrycks & Gimpel;
// GPT-2, torch's approximate="tanh"); max error ~1e-3 vs the exact form.
template <class T>
SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T gelu_tanh(T x) {
  return T(0.5) * x * (T(1) + portable_tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
}
// exp(-x) overflows to inf for very negative x, giving 1 / inf = 0: no NaN.
template <class T>
SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T sigmoid_of(T x) {
  return T(1) / (T(1) + portable_exp(-x));
}
template <class T>
SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T silu_of(T x) {
  return x * sigmoid_of(x);
}

// d f / d x at the saved value s (x or y, see derivative_reads_output).
template <UnaryOp K, class T>
SPSD_HOST_DEVICE SPSD_MATH_INLINE inline T derivative(T s) {
  if constexpr (K == UnaryOp::kRelu) return s > T(0) ? T(1) : T(0);
  else if constexpr (K == UnaryOp::kExp) return s;
  else if constexpr (K == UnaryOp::kLog) return T(1) / s;
  else if constexpr (K == UnaryOp::kTanh) return T(1) - s * s;
  else if constexpr (K == UnaryOp::kSigmoid) return s * (T(1) - s);
  else if constexpr (K == UnaryOp::kSqrt) return T(0.5) / s;
  else if constexpr (K == UnaryOp::kAbs) return s > T(0) ? T(1) : s < T(0) ? T(-1) : T(0);
  else if constexpr (K == UnaryOp::kNeg) return T(-1);
  else if constexpr (K == UnaryOp::kRsqrt) return T(-0.5) * s * s * s;
  else if constexpr (K == UnaryOp::kErf) return T(1.1283791670955126) * portable_exp(-s * s);  // 2 / sqrt(pi)
  else if constexpr (K == UnaryOp::kSilu) {
    const T sg = sigmoid_of(s);
    return sg * (T(1) + s * (T(1) - sg));
  } else if constexpr (K == UnaryOp::kGelu) {
    return gelu_derivative(s);
  } else {  // gelu_tanh
    constexpr T c = T(0.7978845608028654), a = T(0.044715);
    const T t = portable_tanh(c * (s + a * s * s * s));
    return T(0.5) * (T(1) + t) + T(0.5) * s * (T(1) - t * t) * c * (T(1) + T(3) * a * s * s);
  }
}

// (s, g) -> f'(s) * g: the element function of unary_grad.
template <UnaryOp K>
struct DerivativeTimes {
  // f'(s) * g, in T.
  template <class T>
  SPSD_HOST_DEVICE SPSD_MATH_INLINE T operator()(T s, T g) const { return derivative<K>(s) * g; }
};

// Calls body(DerivativeTimes<op>{}): one switch, then body's loop inlines the function.
template <class Body>
void with_derivative(UnaryOp op, Body&& body) {
  switch (op) {
    case UnaryOp::kNeg: return body(DerivativeTimes<UnaryOp::kNeg>{});
    case UnaryOp::kRelu: return body(DerivativeTimes<UnaryOp::kRelu>{});
    case UnaryOp::kGelu: return body(DerivativeTimes<UnaryOp::kGelu>{});
    case UnaryOp::kExp: return body(DerivativeTimes<UnaryOp::kExp>{});
    case UnaryOp::kLog: return body(DerivativeTimes<UnaryOp::kLog>{});
    case UnaryOp::kTanh: return body(DerivativeTimes<UnaryOp::kTanh>{});
    case UnaryOp::kSigmoid: return body(DerivativeTimes<UnaryOp::kSigmoid>{});
    case UnaryOp::kSqrt: return body(DerivativeTimes<UnaryOp::kSqrt>{});
    case UnaryOp::kAbs: return body(DerivativeTimes<UnaryOp::kAbs>{});
    case UnaryOp::kRsqrt: return body(DerivativeTimes<UnaryOp::kRsqrt>{});
    case UnaryOp::kErf: return body(DerivativeTimes<UnaryOp::kErf>{});
    case UnaryOp::kSilu: return body(DerivativeTimes<UnaryOp::kSilu>{});
    case UnaryOp::kGeluTanh: return body(DerivativeTimes<UnaryOp::kGeluTanh>{});
  }
  ::spsd::detail::throw_error("unary_grad", "invalid op value ", static_cast<int>(op));
}

}  // namespace spsd::kernel
