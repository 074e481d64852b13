// The comparison and mask kernels on the device: one grid-stride kernel per op, the operands'
// offsets from a by-value Strided index space (flat when nothing broadcasts), the predicate a
// functor chosen once on the host (kernel/compare_ops.hpp, the cpu's).
#include "common.cuh"  // first: its pragma covers the cpu headers below

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cuda/compare.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// The index space of N operands broadcast to out_shape (shapes checked on the host); ndim 0
// with flat set when every operand has out's size.
template <int N>
Strided<N> broadcast_space(std::string_view op, const Shape& out_shape, const std::array<Shape, N>& shapes, bool& flat) {
  Shape joined = shapes[0];
  for (int o = 1; o < N; ++o) joined = cpu::detail::broadcast_shape(op, joined, shapes[o]);
  SPSD_CHECK(cpu::detail::broadcast_shape(op, joined, out_shape) == out_shape, op, "output shape ", out_shape,
             " is not the broadcast of the operands' shapes");
  flat = true;
  for (int o = 0; o < N; ++o) flat = flat && shapes[o].numel() == out_shape.numel();
  if (flat) return Strided<N>{};
  std::array<std::vector<int64_t>, N> strides;
  for (int o = 0; o < N; ++o) strides[o] = cpu::detail::broadcast_strides(shapes[o], out_shape.ndim());
  const auto c = cpu::detail::collapse<N>(out_shape.dims(), strides);
  return make_strided<N>(op.data(), c.dims, c.strides);
}

template <int N>
__device__ inline void offsets_of(const Strided<N>& idx, bool flat, int64_t i, int64_t (&off)[N]) {
  if (flat) {
    for (int o = 0; o < N; ++o) off[o] = i;
  } else {
    idx.offsets(i, off);
  }
}

template <class T, class F>
__global__ void compare_kernel(F f, const T* a, const T* b, bool* out, int64_t n, Strided<2> idx, bool flat) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t off[2];
    offsets_of(idx, flat, i, off);
    out[i] = f(widen(a[off[0]]), widen(b[off[1]]));
  }
}

template <class T, class F>
__global__ void compare_scalar_kernel(F f, const T* a, compute_t<T> s, bool* out, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) out[i] = f(widen(a[i]), s);
}

template <class T>
__global__ void where_kernel(const bool* cond, const T* a, const T* b, T* out, int64_t n, Strided<3> idx, bool flat) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t off[3];
    offsets_of(idx, flat, i, off);
    out[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

template <class T>
__global__ void masked_fill_kernel(const T* x, const bool* mask, T value, T* out, int64_t n, Strided<2> idx, bool flat) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t off[2];
    offsets_of(idx, flat, i, off);
    out[i] = mask[off[1]] ? value : x[off[0]];
  }
}

template <class T>
__global__ void extreme_keys_kernel(const T* x, const T* m, int64_t len, int64_t inner, int64_t offset, int64_t n,
                                    int64_t* keys, int64_t total) {
  for (int64_t i = thread_index(); i < total; i += thread_count()) {
    const int64_t q = i % inner, j = (i / inner) % len, p = i / (inner * len);
    keys[i] = extreme_key(widen(x[i]), widen(m[p * inner + q]), offset + j, n);
  }
}

}  // namespace detail

template <Element T>
void compare(CompareOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, bool* out,
             const Shape& out_shape, void* stream) {
  bool flat = false;
  const detail::Strided<2> idx = detail::broadcast_space<2>(to_string(op), out_shape, {a_shape, b_shape}, flat);
  const int64_t n = out_shape.numel();
  if (n == 0) return;
  with_compare(op, [&](auto f) {
    detail::compare_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(f, a, b, out, n,
                                                                                                      idx, flat);
  });
  detail::check_launch(to_string(op).data());
}

template <Element T>
void compare_scalar(CompareOp op, const T* a, compute_t<T> s, bool* out, int64_t n, void* stream) {
  if (n == 0) return;
  with_compare(op, [&](auto f) {
    detail::compare_scalar_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(f, a, s,
                                                                                                            out, n);
  });
  detail::check_launch(to_string(op).data());
}

template <Element T>
void where(const bool* cond, const Shape& cond_shape, const T* a, const Shape& a_shape, const T* b,
           const Shape& b_shape, T* out, const Shape& out_shape, void* stream) {
  bool flat = false;
  const detail::Strided<3> idx = detail::broadcast_space<3>("where", out_shape, {cond_shape, a_shape, b_shape}, flat);
  const int64_t n = out_shape.numel();
  if (n == 0) return;
  detail::where_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(cond, a, b, out, n,
                                                                                                 idx, flat);
  detail::check_launch("where");
}

template <Element T>
void masked_fill(const T* x, const Shape& x_shape, const bool* mask, const Shape& mask_shape, compute_t<T> value,
                 T* out, void* stream) {
  bool flat = false;
  const detail::Strided<2> idx = detail::broadcast_space<2>("masked_fill", x_shape, {x_shape, mask_shape}, flat);
  const int64_t n = x_shape.numel();
  if (n == 0) return;
  detail::masked_fill_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(
      x, mask, static_cast<T>(value), out, n, idx, flat);
  detail::check_launch("masked_fill");
}

template <Element T>
void extreme_keys(const T* x, const T* m, int64_t outer, int64_t len, int64_t inner, int64_t offset, int64_t n,
                  int64_t* keys, void* stream) {
  const int64_t total = outer * len * inner;
  if (total == 0) return;
  detail::extreme_keys_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(
      x, m, len, inner, offset, n, keys, total);
  detail::check_launch("extreme_keys");
}

#define SPSD_INSTANTIATE(T)                                                                                       \
  template void compare<T>(CompareOp, const T*, const Shape&, const T*, const Shape&, bool*, const Shape&, void*); \
  template void compare_scalar<T>(CompareOp, const T*, compute_t<T>, bool*, int64_t, void*);                       \
  template void where<T>(const bool*, const Shape&, const T*, const Shape&, const T*, const Shape&, T*,            \
                         const Shape&, void*);                                                                    \
  template void masked_fill<T>(const T*, const Shape&, const bool*, const Shape&, compute_t<T>, T*, void*);
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
SPSD_INSTANTIATE(bool)
#undef SPSD_INSTANTIATE
#define SPSD_INSTANTIATE(T) \
  template void extreme_keys<T>(const T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t*, void*);
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
