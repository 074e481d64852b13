#pragma once
// Element-wise global ops: binary with numpy broadcasting (add, sub, mul, div, pow), their
// scalar forms, and unary functions (neg, relu, gelu, exp, log, tanh, sigmoid, sqrt, abs, rsqrt,
// erf, silu). Every op has S(d) -> S(d) (numpy-broadcast splits for binary ops) and B -> B.
// Partial rules follow from the math:
//   linear:      P(sum) + P(sum), P(sum) * B, P(sum) / B, -P(sum), P(sum) * s  -> P(sum)
//   monotone f:  f(P(max)) = P(max) for relu, exp, tanh, sigmoid, erf; -P(max) = P(min) (floats)
//                (not gelu or silu: not monotone; not rsqrt or log: undefined on the padding)
//   pow:         none (neither linear nor monotone in both operands)
//   shift:       P(max) + B = P(max), B - P(max) = P(min) (floats: adding to the identity
//                -inf-like padding stays below every real value)
#include <concepts>
#include <string_view>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

using kernel::cpu::BinaryOp;
using kernel::cpu::UnaryOp;

inline const Sbp& mirrored(const Sbp& s) { return s == sbp::partial_max ? sbp::partial_min : sbp::partial_max; }

// Integer division by zero is an error, but a data-dependent one (see run_op): the global
// index of the first zero among this rank's divisor elements, or -1. Integers only: floats
// divide by zero to inf or NaN, as IEEE says, and pay no agreement collective.
template <std::integral T>
int64_t first_zero_divisor(const kernel::Target& target, const LocalInput& divisor) {
  const int64_t i = kernel::first_zero<T>(target, divisor.as<T>(), divisor.shape.numel());
  return i < 0 ? -1 : divisor.global_index(i);
}

inline std::string zero_divisor_error(const Resolution& r, size_t divisor, int64_t index) {
  const Shape& shape = r.inputs[divisor].shape;
  std::vector<int64_t> at(shape.ndim());
  for (int64_t d = shape.ndim() - 1; d >= 0; --d) {
    at[d] = index % shape[d];
    index /= shape[d];
  }
  return concat("integer division by zero: the divisor (input ", divisor, ", ", shape, " ", r.inputs[divisor].dtype,
                " ", r.input_layouts[divisor], ") is 0 at ", join(at));
}

template <BinaryOp K>
struct BinaryDef {
  static constexpr std::string_view name = kernel::cpu::to_string(K);

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(in[0].dtype == in[1].dtype, name, "dtypes differ: ", in[0].dtype, " and ", in[1].dtype);
    SPSD_CHECK(kernel::cpu::binary_supports(K, in[0].dtype), name, "is not defined for ", in[0].dtype, " tensors");
    return {broadcast_shapes(name, in[0].shape, in[1].shape), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t = broadcast_split_signatures(in, infer(in, attrs).shape);
    const Sbp &P = sbp::partial_sum, &B = sbp::broadcast;
    if constexpr (K == BinaryOp::kAdd || K == BinaryOp::kSub) t.push_back({{P, P}, P});
    if constexpr (K == BinaryOp::kMul) t.insert(t.end(), {{{P, B}, P}, {{B, P}, P}});
    // (a0 + a1) / b == a0 / b + a1 / b holds only where division is exact-ish: not for integers.
    if constexpr (K == BinaryOp::kDiv) {
      if (is_floating(in[0].dtype)) t.push_back({{P, B}, P});
    }
    if constexpr (K == BinaryOp::kAdd || K == BinaryOp::kSub) {
      if (is_floating(in[0].dtype)) {
        for (const Sbp& M : {sbp::partial_max, sbp::partial_min}) {
          t.push_back({{M, B}, M});
          t.push_back({{B, M}, K == BinaryOp::kAdd ? M : mirrored(M)});
        }
      }
    }
    t.push_back(uniform_signature(2, B));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::binary<T>(k.target, K, k.in<T>(0), k.inputs[0].shape, k.in<T>(1), k.inputs[1].shape, k.out_as<T>(),
                           k.out_shape);
  }

  template <Element T>
    requires(K == BinaryOp::kDiv && std::is_integral_v<T>)
  static int64_t first_bad_element(const KernelArgs& k) {
    return first_zero_divisor<T>(k.target, k.inputs[1]);
  }
  static std::string bad_element_error(const Resolution& r, int64_t index) { return zero_divisor_error(r, 1, index); }

  // The validator's values: a nonzero divisor (an integer zero throws), a positive base of pow.
  static void input_domains(std::span<ValidationInput> in, const OpAttrs&) {
    if constexpr (K == BinaryOp::kDiv) in[1].domain = InputDomain::kNonzero;
    if constexpr (K == BinaryOp::kPow) in[0].domain = InputDomain::kPositive;
  }
};

// x op s (or s op x when ScalarFirst).
template <BinaryOp K, bool ScalarFirst>
struct ScalarDef {
  static constexpr std::string_view name = ScalarFirst ? (K == BinaryOp::kSub   ? "rsub_scalar"
                                                          : K == BinaryOp::kDiv ? "rdiv_scalar"
                                                                                : kernel::cpu::to_string(K))
                                                       : (K == BinaryOp::kAdd   ? "add_scalar"
                                                          : K == BinaryOp::kSub ? "sub_scalar"
                                                          : K == BinaryOp::kMul ? "mul_scalar"
                                                          : K == BinaryOp::kPow ? "pow_scalar"
                                                                                : "div_scalar");

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(kernel::cpu::binary_supports(K, in[0].dtype), name, "is not defined for ", in[0].dtype, " tensors");
    return in[0];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d) t.push_back(uniform_signature(1, sbp::split(d)));
    // Integer division truncates each partial separately, so only mul keeps P(sum) for integers.
    constexpr bool linear = K == BinaryOp::kMul || (K == BinaryOp::kDiv && !ScalarFirst);
    if constexpr (linear) {
      if (K == BinaryOp::kMul || is_floating(in[0].dtype)) t.push_back(uniform_signature(1, sbp::partial_sum));
    }
    if constexpr (K == BinaryOp::kAdd || K == BinaryOp::kSub) {
      if (is_floating(in[0].dtype)) {
        for (const Sbp& M : {sbp::partial_max, sbp::partial_min})
          t.push_back({{M}, K == BinaryOp::kSub && ScalarFirst ? mirrored(M) : M});
      }
    }
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::binary_scalar<T>(k.target, K, k.in<T>(0), k.scalar.as<compute_t<T>>(), k.out_as<T>(), k.out_shape.numel(), ScalarFirst);
  }

  // s / x: x is the divisor (x / 0 fails alike on every rank in the kernel: the scalar is the
  // same everywhere, which the consistency check compares).
  template <Element T>
    requires(K == BinaryOp::kDiv && ScalarFirst && std::is_integral_v<T>)
  static int64_t first_bad_element(const KernelArgs& k) {
    return first_zero_divisor<T>(k.target, k.inputs[0]);
  }
  static std::string bad_element_error(const Resolution& r, int64_t index) { return zero_divisor_error(r, 0, index); }

  static void input_domains(std::span<ValidationInput> in, const OpAttrs&) {
    if constexpr (K == BinaryOp::kDiv && ScalarFirst) in[0].domain = InputDomain::kNonzero;
    if constexpr (K == BinaryOp::kPow) in[0].domain = InputDomain::kPositive;
  }
};

template <UnaryOp K>
struct UnaryDef {
  static constexpr std::string_view name = kernel::cpu::to_string(K);

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(kernel::cpu::unary_supports(K, in[0].dtype), name, "is not defined for ", in[0].dtype, " tensors");
    return in[0];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d) t.push_back(uniform_signature(1, sbp::split(d)));
    if constexpr (K == UnaryOp::kNeg) {
      t.push_back(uniform_signature(1, sbp::partial_sum));
      if (is_floating(in[0].dtype))
        t.insert(t.end(), {{{sbp::partial_max}, sbp::partial_min}, {{sbp::partial_min}, sbp::partial_max}});
    }
    // Non-decreasing and defined everywhere (the identity padding included).
    constexpr bool monotone = K == UnaryOp::kRelu || K == UnaryOp::kExp || K == UnaryOp::kTanh ||
                              K == UnaryOp::kSigmoid || K == UnaryOp::kErf;
    if constexpr (monotone)
      t.insert(t.end(), {uniform_signature(1, sbp::partial_max), uniform_signature(1, sbp::partial_min)});
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::unary<T>(k.target, K, k.in<T>(0), k.out_as<T>(), k.out_shape.numel());
  }

  static void input_domains(std::span<ValidationInput> in, const OpAttrs&) {
    if constexpr (K == UnaryOp::kLog || K == UnaryOp::kSqrt || K == UnaryOp::kRsqrt) in[0].domain = InputDomain::kPositive;
  }
};

}  // namespace detail

// gelu's form: kNone is exact, x Phi(x) (torch's default); kTanh the tanh approximation
// (torch's approximate="tanh", GPT-2's), within ~1e-3 of it.
enum class GeluApproximation { kNone, kTanh };

// a + b, a - b, a * b, a / b element-wise with numpy broadcasting.
template <Element T>
GlobalTensor<T> add(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  return call_op<detail::BinaryDef<kernel::cpu::BinaryOp::kAdd>>({}, {}, a, b);
}
template <Element T>
GlobalTensor<T> sub(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  return call_op<detail::BinaryDef<kernel::cpu::BinaryOp::kSub>>({}, {}, a, b);
}
template <Element T>
GlobalTensor<T> mul(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  return call_op<detail::BinaryDef<kernel::cpu::BinaryOp::kMul>>({}, {}, a, b);
}
template <Element T>
GlobalTensor<T> div(const GlobalTensor<T>& a, const GlobalTensor<T>& b) {
  return call_op<detail::BinaryDef<kernel::cpu::BinaryOp::kDiv>>({}, {}, a, b);
}

// x ** e element-wise with numpy broadcasting; floating types only. Backward: d/dx = e x^(e-1),
// d/de = x^e log x (NaN for x < 0; 0 where x == 0 and e >= 0, as torch).
template <Element T>
GlobalTensor<T> pow(const GlobalTensor<T>& x, const GlobalTensor<T>& e) {
  return call_op<detail::BinaryDef<kernel::cpu::BinaryOp::kPow>>({}, {}, x, e);
}

// Scalar forms: x op s, and s op x for the non-commutative ones. The scalar is a compute_t<T>:
// float for a 16-bit tensor (x * 0.1 multiplies by the float 0.1, then rounds once).
template <Element T>
GlobalTensor<T> add(const GlobalTensor<T>& x, compute_t<T> s) {
  return call_op<detail::ScalarDef<kernel::cpu::BinaryOp::kAdd, false>>({}, Scalar::of<compute_t<T>>(s), x);
}
template <Element T>
GlobalTensor<T> sub(const GlobalTensor<T>& x, compute_t<T> s) {
  return call_op<detail::ScalarDef<kernel::cpu::BinaryOp::kSub, false>>({}, Scalar::of<compute_t<T>>(s), x);
}
template <Element T>
GlobalTensor<T> mul(const GlobalTensor<T>& x, compute_t<T> s) {
  return call_op<detail::ScalarDef<kernel::cpu::BinaryOp::kMul, false>>({}, Scalar::of<compute_t<T>>(s), x);
}
template <Element T>
GlobalTensor<T> div(const GlobalTensor<T>& x, compute_t<T> s) {
  return call_op<detail::ScalarDef<kernel::cpu::BinaryOp::kDiv, false>>({}, Scalar::of<compute_t<T>>(s), x);
}
template <Element T>
GlobalTensor<T> sub(compute_t<T> s, const GlobalTensor<T>& x) {
  return call_op<detail::ScalarDef<kernel::cpu::BinaryOp::kSub, true>>({}, Scalar::of<compute_t<T>>(s), x);
}
template <Element T>
GlobalTensor<T> div(compute_t<T> s, const GlobalTensor<T>& x) {
  return call_op<detail::ScalarDef<kernel::cpu::BinaryOp::kDiv, true>>({}, Scalar::of<compute_t<T>>(s), x);
}
template <Element T>
GlobalTensor<T> pow(const GlobalTensor<T>& x, compute_t<T> e) {
  return call_op<detail::ScalarDef<kernel::cpu::BinaryOp::kPow, false>>({}, Scalar::of<compute_t<T>>(e), x);
}

#define SPSD_UNARY_OP(fn, kind)                                             \
  template <Element T>                                                      \
  GlobalTensor<T> fn(const GlobalTensor<T>& x) {                            \
    return call_op<detail::UnaryDef<kernel::cpu::UnaryOp::kind>>({}, {}, x); \
  }
// The unary ops, elementwise, each fn(x) of x's shape and dtype: neg, relu, exp, log, tanh,
// sigmoid, sqrt, abs, rsqrt (1 / sqrt(x)), erf, silu (x * sigmoid(x)). Integer T takes neg, relu
// and abs only (spsd::Error for the others).
SPSD_UNARY_OP(neg, kNeg)
SPSD_UNARY_OP(relu, kRelu)
SPSD_UNARY_OP(exp, kExp)
SPSD_UNARY_OP(log, kLog)
SPSD_UNARY_OP(tanh, kTanh)
SPSD_UNARY_OP(sigmoid, kSigmoid)
SPSD_UNARY_OP(sqrt, kSqrt)
SPSD_UNARY_OP(abs, kAbs)
SPSD_UNARY_OP(rsqrt, kRsqrt)  // 1 / sqrt(x)
SPSD_UNARY_OP(erf, kErf)
SPSD_UNARY_OP(silu, kSilu)    // x * sigmoid(x)
#undef SPSD_UNARY_OP

// gelu(x) = x Phi(x) = x/2 (1 + erf(x / sqrt 2)), or the tanh form (op name "gelu_tanh").
template <Element T>
GlobalTensor<T> gelu(const GlobalTensor<T>& x, GeluApproximation approximate = GeluApproximation::kNone) {
  if (approximate == GeluApproximation::kTanh)
    return call_op<detail::UnaryDef<kernel::cpu::UnaryOp::kGeluTanh>>({}, {}, x);
  SPSD_CHECK(approximate == GeluApproximation::kNone, "gelu", "invalid approximation value ",
             static_cast<int>(approximate));
  return call_op<detail::UnaryDef<kernel::cpu::UnaryOp::kGelu>>({}, {}, x);
}

// The operators: add, sub, mul, div, neg and their scalar forms, as the functions above.
template <Element T>
GlobalTensor<T> operator+(const GlobalTensor<T>& a, const GlobalTensor<T>& b) { return add(a, b); }
template <Element T>
GlobalTensor<T> operator-(const GlobalTensor<T>& a, const GlobalTensor<T>& b) { return sub(a, b); }
template <Element T>
GlobalTensor<T> operator*(const GlobalTensor<T>& a, const GlobalTensor<T>& b) { return mul(a, b); }
template <Element T>
GlobalTensor<T> operator/(const GlobalTensor<T>& a, const GlobalTensor<T>& b) { return div(a, b); }
template <Element T>
GlobalTensor<T> operator-(const GlobalTensor<T>& x) { return neg(x); }
template <Element T>
GlobalTensor<T> operator+(const GlobalTensor<T>& x, compute_t<T> s) { return add(x, s); }
template <Element T>
GlobalTensor<T> operator+(compute_t<T> s, const GlobalTensor<T>& x) { return add(x, s); }
template <Element T>
GlobalTensor<T> operator-(const GlobalTensor<T>& x, compute_t<T> s) { return sub(x, s); }
template <Element T>
GlobalTensor<T> operator-(compute_t<T> s, const GlobalTensor<T>& x) { return sub(s, x); }
template <Element T>
GlobalTensor<T> operator*(const GlobalTensor<T>& x, compute_t<T> s) { return mul(x, s); }
template <Element T>
GlobalTensor<T> operator*(compute_t<T> s, const GlobalTensor<T>& x) { return mul(x, s); }
template <Element T>
GlobalTensor<T> operator/(const GlobalTensor<T>& x, compute_t<T> s) { return div(x, s); }
template <Element T>
GlobalTensor<T> operator/(compute_t<T> s, const GlobalTensor<T>& x) { return div(s, x); }

// Compiled into the library (core/instances.hpp).
#define SPSD_ELEMENTWISE_INSTANCES(prefix, T)                                                      \
  prefix template GlobalTensor<T> add<T>(const GlobalTensor<T>&, const GlobalTensor<T>&);          \
  prefix template GlobalTensor<T> sub<T>(const GlobalTensor<T>&, const GlobalTensor<T>&);          \
  prefix template GlobalTensor<T> mul<T>(const GlobalTensor<T>&, const GlobalTensor<T>&);          \
  prefix template GlobalTensor<T> div<T>(const GlobalTensor<T>&, const GlobalTensor<T>&);          \
  prefix template GlobalTensor<T> add<T>(const GlobalTensor<T>&, compute_t<T>);         \
  prefix template GlobalTensor<T> sub<T>(const GlobalTensor<T>&, compute_t<T>);         \
  prefix template GlobalTensor<T> mul<T>(const GlobalTensor<T>&, compute_t<T>);         \
  prefix template GlobalTensor<T> div<T>(const GlobalTensor<T>&, compute_t<T>);         \
  prefix template GlobalTensor<T> sub<T>(compute_t<T>, const GlobalTensor<T>&);         \
  prefix template GlobalTensor<T> div<T>(compute_t<T>, const GlobalTensor<T>&);         \
  prefix template GlobalTensor<T> neg<T>(const GlobalTensor<T>&);                                  \
  prefix template GlobalTensor<T> relu<T>(const GlobalTensor<T>&);                                 \
  prefix template GlobalTensor<T> gelu<T>(const GlobalTensor<T>&, GeluApproximation);              \
  prefix template GlobalTensor<T> rsqrt<T>(const GlobalTensor<T>&);                                \
  prefix template GlobalTensor<T> erf<T>(const GlobalTensor<T>&);                                  \
  prefix template GlobalTensor<T> silu<T>(const GlobalTensor<T>&);                                 \
  prefix template GlobalTensor<T> pow<T>(const GlobalTensor<T>&, const GlobalTensor<T>&);          \
  prefix template GlobalTensor<T> pow<T>(const GlobalTensor<T>&, compute_t<T>);                    \
  prefix template GlobalTensor<T> exp<T>(const GlobalTensor<T>&);                                  \
  prefix template GlobalTensor<T> log<T>(const GlobalTensor<T>&);                                  \
  prefix template GlobalTensor<T> tanh<T>(const GlobalTensor<T>&);                                 \
  prefix template GlobalTensor<T> sigmoid<T>(const GlobalTensor<T>&);                              \
  prefix template GlobalTensor<T> sqrt<T>(const GlobalTensor<T>&);                                 \
  prefix template GlobalTensor<T> abs<T>(const GlobalTensor<T>&);
SPSD_FOR_EACH_ELEMENT(SPSD_ELEMENTWISE_INSTANCES, extern)

}  // namespace spsd
