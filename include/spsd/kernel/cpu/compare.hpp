#pragma once
// The cpu kernels of the comparison and mask ops: compare (bool out, numpy broadcasting),
// compare_scalar, where, masked_fill, and argmax/argmin's extreme_keys. Elements compare as
// compute_t<T> (a 16-bit value widens exactly to float, so nothing rounds).
#include <array>
#include <cstdint>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/compare_ops.hpp"
#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

namespace detail {

// Calls f(i, offsets) for each output index i (row-major) of out_shape, offsets[o] the element
// of operand o (numpy-broadcast to out_shape) that i reads: flat when no operand broadcasts,
// else an odometer over the collapsed index space.
template <int N, class F>
void for_each_broadcast(std::string_view op, const Shape& out_shape, const std::array<Shape, N>& shapes, F f) {
  Shape joined = shapes[0];
  for (int o = 1; o < N; ++o) joined = broadcast_shape(op, joined, shapes[o]);
  SPSD_CHECK(broadcast_shape(op, joined, out_shape) == out_shape, op, "output shape ", out_shape,
             " is not the broadcast of the operands' shapes");
  const int64_t n = out_shape.numel();
  if (n == 0) return;
  bool flat = true;
  for (int o = 0; o < N; ++o) flat = flat && shapes[o].numel() == n;
  std::array<int64_t, N> off{};
  if (flat) {
    for (int64_t i = 0; i < n; ++i) {
      off.fill(i);
      f(i, off);
    }
    return;
  }
  std::array<std::vector<int64_t>, N> strides;
  for (int o = 0; o < N; ++o) strides[o] = broadcast_strides(shapes[o], out_shape.ndim());
  const Collapsed<N> c = collapse<N>(out_shape.dims(), strides);
  Odometer<N> od(c.dims, c.strides);
  for (int64_t i = 0; i < n; ++i, od.next()) {
    for (int o = 0; o < N; ++o) off[o] = od.offset(o);
    f(i, off);
  }
}

}  // namespace detail

// out = a op b (bool) with numpy broadcasting; out_shape must be the broadcast of the shapes.
template <Element T>
void compare(CompareOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, bool* out,
             const Shape& out_shape) {
  with_compare(op, [&](auto f) {
    detail::for_each_broadcast<2>(to_string(op), out_shape, {a_shape, b_shape}, [&](int64_t i, const auto& o) {
      out[i] = f(detail::load(a[o[0]]), detail::load(b[o[1]]));
    });
  });
}

// out[i] = a[i] op s for i < n (s op a[i]: pass mirrored(op)).
template <Element T>
void compare_scalar(CompareOp op, const T* a, compute_t<T> s, bool* out, int64_t n) {
  with_compare(op, [&](auto f) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(detail::load(a[i]), s);
  });
}

// out = cond ? a : b, all three numpy-broadcast to out_shape.
template <Element T>
void where(const bool* cond, const Shape& cond_shape, const T* a, const Shape& a_shape, const T* b,
           const Shape& b_shape, T* out, const Shape& out_shape) {
  detail::for_each_broadcast<3>("where", out_shape, {cond_shape, a_shape, b_shape}, [&](int64_t i, const auto& o) {
    out[i] = cond[o[0]] ? a[o[1]] : b[o[2]];
  });
}

// out = mask ? value : x, mask broadcast to x's shape (out's); value rounds once to T.
template <Element T>
void masked_fill(const T* x, const Shape& x_shape, const bool* mask, const Shape& mask_shape, compute_t<T> value,
                 T* out) {
  const T v = static_cast<T>(value);
  detail::for_each_broadcast<2>("masked_fill", x_shape, {x_shape, mask_shape}, [&](int64_t i, const auto& o) {
    out[i] = mask[o[1]] ? v : x[o[0]];
  });
}

// keys[i] = extreme_key(x[i], m[...], offset + j, n) (compare_ops.hpp), j the index of element
// i along axis; x's shape is (outer, len, inner) around the axis, m's (outer, 1, inner).
template <Element T>
void extreme_keys(const T* x, const T* m, int64_t outer, int64_t len, int64_t inner, int64_t offset, int64_t n,
                  int64_t* keys) {
  for (int64_t p = 0; p < outer; ++p)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t q = 0; q < inner; ++q) {
        const int64_t i = (p * len + j) * inner + q;
        keys[i] = extreme_key(detail::load(x[i]), detail::load(m[p * inner + q]), offset + j, n);
      }
}

// Compiled into the library (core/instances.hpp): compare and where for bool too.
#define SPSD_CPU_COMPARE_INSTANCES(prefix, T)                                                                     \
  prefix template void compare<T>(CompareOp, const T*, const Shape&, const T*, const Shape&, bool*, const Shape&); \
  prefix template void compare_scalar<T>(CompareOp, const T*, compute_t<T>, bool*, int64_t);                      \
  prefix template void where<T>(const bool*, const Shape&, const T*, const Shape&, const T*, const Shape&, T*,     \
                                const Shape&);                                                                    \
  prefix template void masked_fill<T>(const T*, const Shape&, const bool*, const Shape&, compute_t<T>, T*);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_COMPARE_INSTANCES, extern)
SPSD_CPU_COMPARE_INSTANCES(extern, bool)
#define SPSD_CPU_EXTREME_KEYS_INSTANCES(prefix, T) \
  prefix template void extreme_keys<T>(const T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t*);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_EXTREME_KEYS_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
