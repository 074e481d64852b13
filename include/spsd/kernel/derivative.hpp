#pragma once
// f'(.) of the unary ops, as backward's unary_grad kernels use it: one definition that the cpu
// loops and the CUDA kernels both inline, so both sides round the same expression.
//
// f' is written in terms of the value backward saved: the output y where f' is cheaper from it
// (exp, tanh, sigmoid, sqrt, relu: f' = y, 1 - y^2, y (1 - y), 1 / (2 y), [y > 0]), else the
// input x (gelu, log, abs, neg).
#include <cmath>

#include "spsd/core/error.hpp"
#include "spsd/kernel/elementwise_ops.hpp"

#if defined(__CUDACC__)
#define SPSD_HOST_DEVICE __host__ __device__
#else
#define SPSD_HOST_DEVICE
#endif

namespace spsd::kernel {

using cpu::UnaryOp;

// Which value f' reads: true for the output y, false for the input x.
constexpr bool derivative_reads_output(UnaryOp k) {
  return k == UnaryOp::kExp || k == UnaryOp::kTanh || k == UnaryOp::kSigmoid || k == UnaryOp::kSqrt ||
         k == UnaryOp::kRelu;
}

// tanh on whichever side compiles the caller.
template <class T>
SPSD_HOST_DEVICE inline T portable_tanh(T x) {
#if defined(__CUDA_ARCH__)
  return tanh(x);  // CUDA's float and double overloads
#else
  return std::tanh(x);
#endif
}

// d f / d x at the saved value s (x or y, see derivative_reads_output).
template <UnaryOp K, class T>
SPSD_HOST_DEVICE inline T derivative(T s) {
  if constexpr (K == UnaryOp::kRelu) return s > T(0) ? T(1) : T(0);
  else if constexpr (K == UnaryOp::kExp) return s;
  else if constexpr (K == UnaryOp::kLog) return T(1) / s;
  else if constexpr (K == UnaryOp::kTanh) return T(1) - s * s;
  else if constexpr (K == UnaryOp::kSigmoid) return s * (T(1) - s);
  else if constexpr (K == UnaryOp::kSqrt) return T(0.5) / s;
  else if constexpr (K == UnaryOp::kAbs) return s > T(0) ? T(1) : s < T(0) ? T(-1) : T(0);
  else if constexpr (K == UnaryOp::kNeg) return T(-1);
  else {  // gelu, tanh form (cpu::detail::gelu_tanh)
    constexpr T c = T(0.7978845608028654), a = T(0.044715);
    const T t = portable_tanh(c * (s + a * s * s * s));
    return T(0.5) * (T(1) + t) + T(0.5) * s * (T(1) - t * t) * c * (T(1) + T(3) * a * s * s);
  }
}

// (s, g) -> f'(s) * g: the element function of unary_grad.
template <UnaryOp K>
struct DerivativeTimes {
  template <class T>
  SPSD_HOST_DEVICE T operator()(T s, T g) const { return derivative<K>(s) * g; }
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
  }
  ::spsd::detail::throw_error("unary_grad", "invalid op value ", static_cast<int>(op));
}

}  // namespace spsd::kernel
