// Element-wise CUDA kernels. One grid-stride kernel per access pattern (map, binary with
// broadcasting, fill), the op a device functor chosen once on the host: one switch per call,
// no per-element dispatch, and few instantiations (scalar forms reuse the map kernel).
// The functors run on compute_t<T> (float for the 16-bit types): the kernels widen each loaded
// element and round the result once on store (common.cuh's widen/narrow).
#include "common.cuh"  // first: its pragma covers the cpu headers below

#include <cstdint>
#include <string_view>

#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/derivative.hpp"
#include "spsd/kernel/cuda/elementwise.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// ---- unary functors (integers: neg, relu, abs only; see unary_supports) ----
struct Neg {
  template <class T>
  __device__ T operator()(T x) const { return wrap_neg(x); }
};
struct Relu {  // relu(NaN) = NaN, as on the cpu
  template <class T>
  __device__ T operator()(T x) const { return x < T(0) ? T(0) : x; }
};
struct Abs {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x < 0 ? wrap_neg(x) : x;
    else return fabs(x);
  }
};
// Forward formulas shared with the cpu (kernel/derivative.hpp), so both sides round the same
// expression.
struct Gelu {  // exact: x Phi(x)
  template <class T>
  __device__ T operator()(T x) const { return gelu_exact(x); }
};
struct GeluTanh {
  template <class T>
  __device__ T operator()(T x) const { return gelu_tanh(x); }
};
struct Erf {
  template <class T>
  __device__ T operator()(T x) const { return erf(x); }
};
struct Silu {
  template <class T>
  __device__ T operator()(T x) const { return silu_of(x); }
};
struct Rsqrt {  // 1 / sqrt(x) as the cpu computes it (not the approximate rsqrt instruction)
  template <class T>
  __device__ T operator()(T x) const { return T(1) / sqrt(x); }
};
struct Exp {
  template <class T>
  __device__ T operator()(T x) const { return exp(x); }
};
struct Log {
  template <class T>
  __device__ T operator()(T x) const { return log(x); }
};
struct Tanh {
  template <class T>
  __device__ T operator()(T x) const { return tanh(x); }
};
struct Sigmoid {  // exp(-x) = inf gives 1 / inf = 0: no NaN
  template <class T>
  __device__ T operator()(T x) const { return sigmoid_of(x); }
};
struct Sqrt {
  template <class T>
  __device__ T operator()(T x) const { return sqrt(x); }
};

// ---- binary functors (add and max/min are common.cuh's AddOf, MaxOf, MinOf) ----
struct SubOf {
  template <class T>
  __device__ T operator()(T x, T y) const { return wrap_sub(x, y); }
};
struct MulOf {
  template <class T>
  __device__ T operator()(T x, T y) const { return wrap_mul(x, y); }
};
// Integer division truncates; x / -1 wraps (INT_MIN / -1 = INT_MIN, as the cpu). Callers rule
// out a zero divisor; should one slip through, it gives 0 rather than the hardware's garbage.
struct DivOf {
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      if (y == 0) return T{0};
      return y == T(-1) ? wrap_neg(x) : static_cast<T>(x / y);
    } else {
      return x / y;
    }
  }
};

struct PowOf {  // floating types only (binary_supports checks first)
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) return pow(x, y);
    else return T{0};
  }
};

// x op s (or s op x when first): a binary functor bound to a host scalar; C = compute_t<T>.
template <class F, class C>
struct BoundScalar {
  F f;
  C s;
  bool first;
  __device__ C operator()(C x) const { return first ? f(s, x) : f(x, s); }
};

template <class C>
struct ScaleBy {
  C factor;
  __device__ C operator()(C x) const { return wrap_mul(x, factor); }
};

// ---- kernels ----
template <class T, class F>
__global__ void map_kernel(F f, const T* x, T* out, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) out[i] = narrow<T>(f(widen(x[i])));
}


template <class T, class F>
__global__ void map_packs_kernel(F f, const T* x, T* out, int64_t n) {
  constexpr int k = Pack<T>::kSize;
  const int64_t packs = n / k;
  for (int64_t p = thread_index(); p < packs; p += thread_count()) {
    const Pack<T> in = reinterpret_cast<const Pack<T>*>(x)[p];
    Pack<T> r;
#pragma unroll
    for (int j = 0; j < k; ++j) r.v[j] = narrow<T>(f(widen(in.v[j])));
    reinterpret_cast<Pack<T>*>(out)[p] = r;
  }
  for (int64_t i = packs * k + thread_index(); i < n; i += thread_count()) out[i] = narrow<T>(f(widen(x[i])));
}

template <class T, class F>
__global__ void binary_packs_kernel(F f, const T* a, const T* b, T* out, int64_t n) {
  constexpr int k = Pack<T>::kSize;
  const int64_t packs = n / k;
  for (int64_t p = thread_index(); p < packs; p += thread_count()) {
    const Pack<T> x = reinterpret_cast<const Pack<T>*>(a)[p], y = reinterpret_cast<const Pack<T>*>(b)[p];
    Pack<T> r;
#pragma unroll
    for (int j = 0; j < k; ++j) r.v[j] = narrow<T>(f(widen(x.v[j]), widen(y.v[j])));
    reinterpret_cast<Pack<T>*>(out)[p] = r;
  }
  for (int64_t i = packs * k + thread_index(); i < n; i += thread_count())
    out[i] = narrow<T>(f(widen(a[i]), widen(b[i])));
}

template <class T>
__global__ void fill_kernel(T* out, int64_t n, T value) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) out[i] = value;
}

// out[i] = f(a[ia], b[ib]). With idx.ndim == 0 the operands are flat: ia = i * step_a (step 0
// for a one-element operand); else idx holds the collapsed broadcast strides. The branch is
// uniform over the grid, so one kernel serves all patterns.
template <class T, class F>
__global__ void binary_kernel(F f, const T* a, int64_t step_a, const T* b, int64_t step_b, T* out, int64_t n,
                              Strided<2> idx) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t off[2] = {i * step_a, i * step_b};
    if (idx.ndim > 0) idx.offsets(i, off);
    out[i] = narrow<T>(f(widen(a[off[0]]), widen(b[off[1]])));
  }
}

template <class T, class F>
void launch_map(const char* name, F f, const T* x, T* out, int64_t n, void* stream) {
  if (n == 0) return;
  if (aligned_for_packs(x) && aligned_for_packs(out))
    map_packs_kernel<<<blocks_for(n / Pack<T>::kSize + 1), kThreads, 0, as_stream(stream)>>>(f, x, out, n);
  else
    map_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(f, x, out, n);
  check_launch(name);
}

// Calls body(f) with f the device functor of op; unsupported integer ops throw first.
template <class T, class Body>
void with_unary_fn(UnaryOp op, Body&& body) {
  SPSD_CHECK(cpu::unary_supports(op, dtype_of<T>), "unary", to_string(op), " is not defined for ", dtype_of<T>,
             " tensors");
  switch (op) {
    case UnaryOp::kNeg: return body(Neg{});
    case UnaryOp::kRelu: return body(Relu{});
    case UnaryOp::kAbs: return body(Abs{});
    default: break;
  }
  if constexpr (std::is_floating_point_v<compute_t<T>>) {
    switch (op) {
      case UnaryOp::kGelu: return body(Gelu{});
      case UnaryOp::kGeluTanh: return body(GeluTanh{});
      case UnaryOp::kErf: return body(Erf{});
      case UnaryOp::kSilu: return body(Silu{});
      case UnaryOp::kRsqrt: return body(Rsqrt{});
      case UnaryOp::kExp: return body(Exp{});
      case UnaryOp::kLog: return body(Log{});
      case UnaryOp::kTanh: return body(Tanh{});
      case UnaryOp::kSigmoid: return body(Sigmoid{});
      case UnaryOp::kSqrt: return body(Sqrt{});
      default: break;
    }
  }
  ::spsd::detail::throw_error("unary", "invalid op value ", static_cast<int>(op));
}

template <class T, class Body>
void with_binary_fn(BinaryOp op, Body&& body) {
  SPSD_CHECK(cpu::binary_supports(op, dtype_of<T>), to_string(op), "is not defined for ", dtype_of<T>, " tensors");
  switch (op) {
    case BinaryOp::kAdd: return body(AddOf{});
    case BinaryOp::kSub: return body(SubOf{});
    case BinaryOp::kMul: return body(MulOf{});
    case BinaryOp::kDiv: return body(DivOf{});
    case BinaryOp::kMax: return body(MaxOf{});
    case BinaryOp::kMin: return body(MinOf{});
    case BinaryOp::kPow: return body(PowOf{});
  }
  ::spsd::detail::throw_error("binary", "invalid op value ", static_cast<int>(op));
}

}  // namespace detail

template <Element T>
void unary(UnaryOp op, const T* x, T* out, int64_t n, void* stream) {
  detail::with_unary_fn<T>(op, [&](auto f) { detail::launch_map(to_string(op).data(), f, x, out, n, stream); });
}

namespace detail {

// out = f(a, b) with numpy broadcasting (shapes checked on the host): the packed flat kernel
// when the operands are dense, aligned and of out's size, else binary_kernel.
template <class T, class F>
void launch_broadcast_map(std::string_view name, F f, const T* a, const Shape& a_shape, const T* b,
                          const Shape& b_shape, T* out, const Shape& out_shape, void* stream) {
  SPSD_CHECK(cpu::detail::broadcast_shape(name, a_shape, b_shape) == out_shape, name, "output shape ", out_shape,
             " is not the broadcast of ", a_shape, " and ", b_shape);
  const int64_t n = out_shape.numel(), na = a_shape.numel(), nb = b_shape.numel();
  if (n == 0) return;
  Strided<2> idx;  // ndim 0: flat
  int64_t step_a = na == 1 ? 0 : 1, step_b = nb == 1 ? 0 : 1;
  if ((na != n && na != 1) || (nb != n && nb != 1)) {  // a real broadcast: collapsed strides
    const int64_t r = out_shape.ndim();
    auto c = cpu::detail::collapse<2>(out_shape.dims(), {cpu::detail::broadcast_strides(a_shape, r),
                                                         cpu::detail::broadcast_strides(b_shape, r)});
    idx = make_strided<2>(name.data(), c.dims, c.strides);
  }
  const bool packs = idx.ndim == 0 && step_a == 1 && step_b == 1 && aligned_for_packs(a) && aligned_for_packs(b) &&
                     aligned_for_packs(out);
  if (packs)
    binary_packs_kernel<<<blocks_for(n / Pack<T>::kSize + 1), kThreads, 0, as_stream(stream)>>>(f, a, b, out, n);
  else
    binary_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(f, a, step_a, b, step_b, out, n, idx);
  check_launch(name.data());
}

struct EqualAsOne {
  template <class T>
  __device__ T operator()(T x, T y) const { return x == y ? T(1) : T(0); }
};

}  // namespace detail

template <Element T>
void binary(BinaryOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
            const Shape& out_shape, void* stream) {
  detail::with_binary_fn<T>(op, [&](auto f) {
    detail::launch_broadcast_map(to_string(op), f, a, a_shape, b, b_shape, out, out_shape, stream);
  });
}

template <Element T>
void equal_mask(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape,
                void* stream) {
  detail::launch_broadcast_map("mask_eq", detail::EqualAsOne{}, a, a_shape, b, b_shape, out, out_shape, stream);
}

template <Element T>
void unary_grad(UnaryOp op, const T* saved, const T* g, T* out, int64_t n, void* stream) {
  const Shape flat{n};
  with_derivative(op, [&](auto f) { detail::launch_broadcast_map("unary_grad", f, saved, flat, g, flat, out, flat, stream); });
}

template <Element T>
void binary_scalar(BinaryOp op, const T* a, compute_t<T> s, T* out, int64_t n, bool scalar_first, void* stream) {
  if constexpr (std::is_integral_v<T>) {
    SPSD_CHECK(!(op == BinaryOp::kDiv && !scalar_first && s == 0), "div", "integer division by zero (",
               dtype_of<T>, ")");
  }
  detail::with_binary_fn<T>(op, [&](auto f) {
    using C = compute_t<T>;
    detail::launch_map(to_string(op).data(), detail::BoundScalar<decltype(f), C>{f, s, scalar_first},
                       a, out, n, stream);
  });
}

template <Element T>
void fill(T* out, int64_t n, T value, void* stream) {
  if (n == 0) return;
  detail::fill_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(out, n, value);
  detail::check_launch("fill");
}

template <Element T>
void scale(T* x, int64_t n, compute_t<T> factor, void* stream) {
  detail::launch_map("scale", detail::ScaleBy<compute_t<T>>{factor}, x, x, n, stream);
}

#define SPSD_INSTANTIATE(T)                                                                                  \
  template void unary<T>(UnaryOp, const T*, T*, int64_t, void*);                                             \
  template void binary<T>(BinaryOp, const T*, const Shape&, const T*, const Shape&, T*, const Shape&, void*); \
  template void binary_scalar<T>(BinaryOp, const T*, compute_t<T>, T*, int64_t, bool, void*);                           \
  template void fill<T>(T*, int64_t, T, void*);                                                              \
  template void scale<T>(T*, int64_t, compute_t<T>, void*);                                                             \
  template void equal_mask<T>(const T*, const Shape&, const T*, const Shape&, T*, const Shape&, void*);
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE
// bool moves and fills (a partial layout's filler, factories) but does no arithmetic.
template void fill<bool>(bool*, int64_t, bool, void*);
#define SPSD_INSTANTIATE(T) template void unary_grad<T>(UnaryOp, const T*, const T*, T*, int64_t, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
