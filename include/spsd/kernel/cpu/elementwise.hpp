#pragma once
// Element-wise cpu kernels: unary functions, binary ops with numpy broadcasting, their scalar
// forms, and fill. Each entry point switches on the op once and runs a tight templated loop
// (loop.hpp) with the op inlined: no per-element dispatch.
#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <type_traits>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cpu/isa.hpp"
#include "spsd/kernel/cpu/loop.hpp"
#include "spsd/kernel/cpu/vector_math.hpp"
#include "spsd/kernel/derivative.hpp"
#include "spsd/kernel/elementwise_ops.hpp"

namespace spsd::kernel::cpu {

namespace detail {

template <Element T>
[[noreturn, gnu::cold]] inline void throw_division_by_zero() {
  ::spsd::detail::throw_error("div", "integer division by zero (", dtype_of<T>, ")");
}

// x / y; integers throw on y == 0 and wrap INT_MIN / -1 (which traps on x86) to INT_MIN.
template <Element T>
inline T checked_div(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if (y == 0) [[unlikely]] throw_division_by_zero<T>();
    return y == T(-1) ? wrap_neg(x) : static_cast<T>(x / y);
  } else {
    return x / y;
  }
}

// Calls body(f) with f the scalar function of op on compute_t<T> values (float for the 16-bit
// types): one switch, then body's loop inlines f. max/min behave as std::max/std::min (a NaN
// in the second operand is not propagated).
template <Element T, class Body>
void with_binary_fn(BinaryOp op, Body&& body) {
  using C = compute_t<T>;
  switch (op) {
    case BinaryOp::kAdd: return body([](C x, C y) { return wrap_add(x, y); });
    case BinaryOp::kSub: return body([](C x, C y) { return wrap_sub(x, y); });
    case BinaryOp::kMul: return body([](C x, C y) { return wrap_mul(x, y); });
    case BinaryOp::kDiv: return body([](C x, C y) { return checked_div(x, y); });
    case BinaryOp::kMax: return body([](C x, C y) { return x < y ? y : x; });
    case BinaryOp::kMin: return body([](C x, C y) { return y < x ? y : x; });
    case BinaryOp::kPow:
      if constexpr (std::is_floating_point_v<C>) return body([](C x, C y) { return std::pow(x, y); });
      ::spsd::detail::throw_error("pow", "is not defined for ", dtype_of<T>, " tensors");
  }
  ::spsd::detail::throw_error("binary", "invalid op value ", static_cast<int>(op));
}

template <Element T, class Body>
void with_unary_fn(UnaryOp op, Body&& body) {
  SPSD_CHECK(unary_supports(op, dtype_of<T>), "unary", to_string(op), " is not defined for ", dtype_of<T>,
             " tensors");
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case UnaryOp::kNeg: return body([](T x) { return wrap_neg(x); });
      case UnaryOp::kRelu: return body([](T x) { return x < 0 ? T(0) : x; });
      case UnaryOp::kAbs: return body([](T x) { return x < 0 ? wrap_neg(x) : x; });
      default: break;
    }
  } else {  // on compute_t<T>: float for the 16-bit types
    using C = compute_t<T>;
    switch (op) {
      case UnaryOp::kNeg: return body([](C x) { return -x; });
      case UnaryOp::kRelu: return body([](C x) { return x < C(0) ? C(0) : x; });  // relu(NaN) = NaN
      case UnaryOp::kGelu:
        if constexpr (std::is_same_v<C, float>)  // erf's first case alone where it covers a block
          return body(TwoRegimes{[](C x) { return gelu_exact(x, ErfSmall{}); }, [](C x) { return gelu_exact(x); },
                                 [](C x) { return erf_small_covers(gelu_erf_argument(x)); }});
        else return body([](C x) { return gelu_exact(x); });
      case UnaryOp::kGeluTanh: return body([](C x) { return gelu_tanh(x); });
      case UnaryOp::kErf:
        if constexpr (std::is_same_v<C, float>)
          return body(TwoRegimes{[](C x) { return erf_small_float(x); }, [](C x) { return verf(x); },
                                 [](C x) { return erf_small_covers(x); }});
        else return body([](C x) { return verf(x); });
      case UnaryOp::kSilu: return body([](C x) { return silu_of(x); });
      case UnaryOp::kRsqrt: return body([](C x) { return C(1) / std::sqrt(x); });
      case UnaryOp::kExp: return body([](C x) { return vexp(x); });
      case UnaryOp::kLog: return body([](C x) { return std::log(x); });
      case UnaryOp::kTanh: return body([](C x) { return vtanh(x); });
      case UnaryOp::kSigmoid: return body([](C x) { return sigmoid_of(x); });
      case UnaryOp::kSqrt: return body([](C x) { return std::sqrt(x); });
      case UnaryOp::kAbs: return body([](C x) { return std::abs(x); });
    }
  }
  ::spsd::detail::throw_error("unary", "invalid op value ", static_cast<int>(op));
}

// The strided general case: rows of the last collapsed dim, each row a contiguous or
// broadcast (stride 0) run for a and b; the row kernel is chosen once, outside the loop.
template <Element T, class F>
void binary_broadcast(F f, const T* a, const std::vector<int64_t>& sa, const T* b, const std::vector<int64_t>& sb,
                      T* out, const std::vector<int64_t>& dims) {
  using C = compute_t<T>;
  const int64_t r = static_cast<int64_t>(dims.size());
  if (r == 0) {
    out[0] = static_cast<T>(f(load(a[0]), load(b[0])));
    return;
  }
  const int64_t n = dims.back(), ia = sa.back(), ib = sb.back();
  std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
  int64_t rows = 1;
  for (int64_t d : outer) rows *= d;
  Odometer<2> od(outer, {std::vector<int64_t>(sa.begin(), sa.end() - 1), std::vector<int64_t>(sb.begin(), sb.end() - 1)});
  auto each_row = [&](auto row) {
    for (int64_t i = 0; i < rows; ++i, od.next()) row(a + od.offset(0), b + od.offset(1), out + i * n);
  };
  if (ia != 0 && ib != 0) {
    each_row([&](const T* pa, const T* pb, T* po) { map2(f, pa, pb, po, n); });
  } else if (ia != 0) {
    each_row([&](const T* pa, const T* pb, T* po) { map1([f, s = load(*pb)](C x) { return f(x, s); }, pa, po, n); });
  } else if (ib != 0) {
    each_row([&](const T* pa, const T* pb, T* po) { map1([f, s = load(*pa)](C y) { return f(s, y); }, pb, po, n); });
  } else {
    each_row([&](const T* pa, const T* pb, T* po) { fill_n(po, n, static_cast<T>(f(load(*pa), load(*pb)))); });
  }
}

// out = f(a, b) with numpy broadcasting, f inlined: flat when the shapes agree or one operand
// is a single element, rows of a contiguous map2 otherwise (after collapsing dims).
template <Element T, class F>
void broadcast_map(std::string_view name, F f, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape,
                   T* out, const Shape& out_shape) {
  SPSD_CHECK(broadcast_shape(name, a_shape, b_shape) == out_shape, name, "output shape ", out_shape,
             " is not the broadcast of ", a_shape, " and ", b_shape);
  const int64_t n = out_shape.numel(), na = a_shape.numel(), nb = b_shape.numel();
  if (n == 0) return;
  if (na == n && nb == n) {  // equal shapes (up to leading 1s): one flat loop
    map2(f, a, b, out, n);
  } else if (nb == 1) {
    map1([f, s = load(*b)](compute_t<T> x) { return f(x, s); }, a, out, n);
  } else if (na == 1) {
    map1([f, s = load(*a)](compute_t<T> y) { return f(s, y); }, b, out, n);
  } else {  // (m, n) + (n) becomes rows of a contiguous map2; anything else collapses first
    const int64_t r = out_shape.ndim();
    auto c = collapse<2>(out_shape.dims(), {broadcast_strides(a_shape, r), broadcast_strides(b_shape, r)});
    binary_broadcast(f, a, c.strides[0], b, c.strides[1], out, c.dims);
  }
}

}  // namespace detail

// out[i] = op(x[i]) for i < n. out may be x. Integer T supports neg, relu and abs only
// (unary_supports); other ops throw spsd::Error even when n == 0, so every rank agrees.
// Floating types run the copy of the loop for the CPU's instruction set (isa.hpp).
template <Element T>
void unary(UnaryOp op, const T* x, T* out, int64_t n) {
  detail::with_unary_fn<T>(op, [&](auto f) {
    if constexpr (std::is_floating_point_v<compute_t<T>>) detail::with_isa([&] { detail::map1(f, x, out, n); });
    else detail::map1(f, x, out, n);
  });
}

// out = a op b with numpy broadcasting; out_shape must be the broadcast of a_shape and b_shape.
// Integer add/sub/mul wrap; integer division by zero throws spsd::Error. out may be a or b
// when that input has out's shape (in place).
template <Element T>
void binary(BinaryOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
            const Shape& out_shape) {
  detail::with_binary_fn<T>(op, [&](auto f) { detail::broadcast_map(to_string(op), f, a, a_shape, b, b_shape, out, out_shape); });
}

// out = 1 where a == b, else 0, with numpy broadcasting (where a max/min reduction was reached:
// backward's mask_eq).
template <Element T>
void equal_mask(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape) {
  using C = compute_t<T>;
  detail::broadcast_map("mask_eq", [](C x, C y) { return x == y ? C(1) : C(0); }, a, a_shape, b, b_shape, out,
                        out_shape);
}

// out[i] = f'(saved[i]) * g[i] for i < n, f = op, saved = x or y (kernel/derivative.hpp),
// computed in compute_t<T>, by the copy of the loop for the CPU's instruction set (isa.hpp).
template <FloatingElement T>
void unary_grad(UnaryOp op, const T* saved, const T* g, T* out, int64_t n) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<C, float>) {
    if (op == UnaryOp::kGelu) {  // erf's first case alone where it covers a block, as gelu's forward
      const detail::TwoRegimes f{[](C s, C dy) { return gelu_derivative(s, ErfSmall{}) * dy; },
                                 DerivativeTimes<UnaryOp::kGelu>{},
                                 [](C s, C) { return erf_small_covers(gelu_erf_argument(s)); }};
      return detail::with_isa([&] { detail::map2(f, saved, g, out, n); });
    }
  }
  with_derivative(op, [&](auto f) { detail::with_isa([&] { detail::map2(f, saved, g, out, n); }); });
}

// out[i] = a[i] op s, or s op a[i] when scalar_first (rsub, rdiv: 1 / x), s in compute_t<T>
// (a 16-bit tensor's scalar is not rounded to 16 bits first). An integer divisor
// s == 0 throws even when n == 0 (it does not depend on the data, so every rank agrees).
template <Element T>
void binary_scalar(BinaryOp op, const T* a, compute_t<T> s, T* out, int64_t n, bool scalar_first) {
  if constexpr (std::is_integral_v<T>) {
    if (op == BinaryOp::kDiv && !scalar_first && s == 0) detail::throw_division_by_zero<T>();
  }
  using C = compute_t<T>;
  detail::with_binary_fn<T>(op, [&](auto f) {
    if (scalar_first) {
      detail::map1([f, s](C x) { return f(s, x); }, a, out, n);
    } else {
      detail::map1([f, s](C x) { return f(x, s); }, a, out, n);
    }
  });
}

// out[i] = value for i < n.
template <Element T>
void fill(T* out, int64_t n, T value) {
  detail::fill_n(out, n, value);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_ELEMENTWISE_INSTANCES(prefix, T)                                                       \
  prefix template void unary<T>(UnaryOp, const T*, T*, int64_t);                                        \
  prefix template void binary<T>(BinaryOp, const T*, const Shape&, const T*, const Shape&, T*, const Shape&); \
  prefix template void binary_scalar<T>(BinaryOp, const T*, compute_t<T>, T*, int64_t, bool);           \
  prefix template void fill<T>(T*, int64_t, T);                                                         \
  prefix template void equal_mask<T>(const T*, const Shape&, const T*, const Shape&, T*, const Shape&);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_ELEMENTWISE_INSTANCES, extern)
#define SPSD_CPU_UNARY_GRAD_INSTANCES(prefix, T) \
  prefix template void unary_grad<T>(UnaryOp, const T*, const T*, T*, int64_t);
SPSD_FOR_EACH_FLOATING(SPSD_CPU_UNARY_GRAD_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
