#pragma once
// Loop building blocks shared by the cpu kernels: fixed-width block loops that the compiler
// vectorizes, and integer arithmetic that wraps instead of overflowing.
//
// Why blocks: GCC 12+ at -O2 (meson's debugoptimized) uses the "very cheap" vectorizer cost
// model, which skips a loop whose trip count is unknown or that needs a runtime alias check,
// i.e. every plain `for (i < n) out[i] = a[i] + b[i]`. A block of kBlock<T> elements (a
// compile-time count) marked ivdep vectorizes at -O2 and -O3 alike; the tail runs scalar.
// Aliasing rule for every driver here: out may be exactly an input (in place), but must not
// partially overlap one.
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/reduce_op.hpp"

// SPSD_IVDEP: no loop-carried dependence (the aliasing rule above), so no runtime alias check
// (which in-place calls would fail, falling back to scalar code at -O3). SPSD_UNROLL: full
// unroll of a fixed-count loop over locals, so fold's accumulators become vector registers.
#if defined(__clang__)
#define SPSD_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#define SPSD_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define SPSD_IVDEP _Pragma("GCC ivdep")
#define SPSD_UNROLL _Pragma("GCC unroll 64")
#else
#define SPSD_IVDEP
#define SPSD_UNROLL
#endif

// SPSD_FLATTEN: inline everything the driver calls (the element function f and what it calls)
// into its loop. GCC at -O2 leaves a large f (a lambda around vector_math.hpp's erf, say) as a
// call, and a call in a loop body stops its vectorization.
#if defined(__GNUC__)
#define SPSD_FLATTEN __attribute__((flatten))
#else
#define SPSD_FLATTEN
#endif

namespace spsd::kernel::cpu::detail {

// Elements per block: one 64-byte cache line (4 SSE, 2 AVX or 1 AVX-512 vector).
template <class T>
inline constexpr int64_t kBlock = 64 / static_cast<int64_t>(sizeof(T));

// An element as the kernels compute it: a 16-bit float loads as float (exactly), anything else
// as itself. The drivers below call f on loaded values and round f's result to T once.
template <class T>
inline compute_t<T> load(T v) {
  return static_cast<compute_t<T>>(v);
}

// An element function with a cheaper form on part of its domain: `full` everywhere, and `fast`
// where `in_fast` holds of the same arguments, with fast == full bit for bit there (full selects
// fast's expression there). A branch-free full computes every case for every element; map1 and
// map2 run a block with fast alone when all its elements are in fast's part (gelu's erf without
// its tail for typical activations), so the results are the same either way. Called plainly,
// it is full.
template <class Fast, class Full, class InFast>
struct TwoRegimes {
  Fast fast;
  Full full;
  InFast in_fast;
  template <class... X>
  [[gnu::always_inline]] auto operator()(X... x) const {
    return full(x...);
  }
};
template <class F>
inline constexpr bool kIsTwoRegimes = false;
template <class Fast, class Full, class InFast>
inline constexpr bool kIsTwoRegimes<TwoRegimes<Fast, Full, InFast>> = true;

// out[i] = f(x[i]) for i < n.
template <class T, class F>
SPSD_FLATTEN inline void map1(F f, const T* x, T* out, int64_t n) {
  constexpr int64_t W = kBlock<T>;
  int64_t i = 0;
  if constexpr (kIsTwoRegimes<F>) {
    for (; i + W <= n; i += W) {
      int all = 1;
      SPSD_IVDEP
      for (int64_t j = 0; j < W; ++j) all &= static_cast<int>(f.in_fast(load(x[i + j])));
      if (all) {
        SPSD_IVDEP
        for (int64_t j = 0; j < W; ++j) out[i + j] = static_cast<T>(f.fast(load(x[i + j])));
      } else {
        SPSD_IVDEP
        for (int64_t j = 0; j < W; ++j) out[i + j] = static_cast<T>(f.full(load(x[i + j])));
      }
    }
  } else {
    SPSD_IVDEP
    for (; i + W <= n; i += W) {
      SPSD_IVDEP
      for (int64_t j = 0; j < W; ++j) out[i + j] = static_cast<T>(f(load(x[i + j])));
    }
  }
  for (; i < n; ++i) out[i] = static_cast<T>(f(load(x[i])));
}

// out[i] = f(a[i], b[i]) for i < n.
template <class T, class F>
SPSD_FLATTEN inline void map2(F f, const T* a, const T* b, T* out, int64_t n) {
  constexpr int64_t W = kBlock<T>;
  int64_t i = 0;
  if constexpr (kIsTwoRegimes<F>) {  // as map1's
    for (; i + W <= n; i += W) {
      int all = 1;
      SPSD_IVDEP
      for (int64_t j = 0; j < W; ++j) all &= static_cast<int>(f.in_fast(load(a[i + j]), load(b[i + j])));
      if (all) {
        SPSD_IVDEP
        for (int64_t j = 0; j < W; ++j) out[i + j] = static_cast<T>(f.fast(load(a[i + j]), load(b[i + j])));
      } else {
        SPSD_IVDEP
        for (int64_t j = 0; j < W; ++j) out[i + j] = static_cast<T>(f.full(load(a[i + j]), load(b[i + j])));
      }
    }
  } else {
    SPSD_IVDEP
    for (; i + W <= n; i += W) {
      SPSD_IVDEP
      for (int64_t j = 0; j < W; ++j) out[i + j] = static_cast<T>(f(load(a[i + j]), load(b[i + j])));
    }
  }
  for (; i < n; ++i) out[i] = static_cast<T>(f(load(a[i]), load(b[i])));
}

// f(i) for i < n, in blocks of kBlock<T> marked ivdep: a loop body over several arrays (the
// caller's lambda) that vectorizes at -O2. f must not carry a dependence from one i to another.
template <class T, class F>
SPSD_FLATTEN inline void for_each_index(int64_t n, F f) {
  constexpr int64_t W = kBlock<T>;
  int64_t i = 0;
  SPSD_IVDEP
  for (; i + W <= n; i += W) {
    SPSD_IVDEP
    for (int64_t j = 0; j < W; ++j) f(i + j);
  }
  for (; i < n; ++i) f(i);
}

// The sum of f(i) for i < n in C, with kBlock<T> accumulators as fold_map2 (vectorized, no
// reassociation needed): for a summand reading several arrays at i.
template <class T, class C, class F>
SPSD_FLATTEN inline C sum_index(int64_t n, F f) {
  constexpr int64_t W = kBlock<T>;
  C r = 0;
  int64_t i = 0;
  if (n >= W) {
    C acc[W];
    SPSD_UNROLL
    for (int64_t j = 0; j < W; ++j) acc[j] = 0;
    for (; i + W <= n; i += W) {
      SPSD_UNROLL
      for (int64_t j = 0; j < W; ++j) acc[j] += f(i + j);
    }
    for (int64_t j = 0; j < W; ++j) r += acc[j];
  }
  for (; i < n; ++i) r += f(i);
  return r;
}

// The 16-bit kernels that accumulate (reductions, softmax, GEMM) widen their inputs to float
// once, run the float kernel, and narrow its output once: float accumulation, one rounding.
template <class T>
std::vector<float> widen(const T* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]);
  return out;
}
template <class T>
void narrow(const float* x, int64_t n, T* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(x[i]);
}

// out[i] = value for i < n.
template <class T>
inline void fill_n(T* out, int64_t n, T value) {
  constexpr int64_t W = kBlock<T>;
  int64_t i = 0;
  SPSD_IVDEP
  for (; i + W <= n; i += W) {
    SPSD_IVDEP
    for (int64_t j = 0; j < W; ++j) out[i + j] = value;
  }
  for (; i < n; ++i) out[i] = value;
}

// f-reduction of g(a[i], b[i]) over i < n, starting from identity (which must be f's identity):
// a dot product with f = +, g = *. kBlock<T> independent accumulators make the loop vectorize
// without -ffast-math reassociation, and give float sums a smaller error than one long running sum.
// The accumulators are compute_t<T>: a 16-bit row folds in float.
template <class T, class F, class G>
SPSD_FLATTEN inline compute_t<T> fold_map2(F f, G g, const T* a, const T* b, int64_t n, compute_t<T> identity) {
  using C = compute_t<T>;
  constexpr int64_t W = kBlock<T>;
  C r = identity;
  int64_t i = 0;
  if (n >= W) {
    C acc[W];
    SPSD_UNROLL
    for (int64_t j = 0; j < W; ++j) acc[j] = identity;
    for (; i + W <= n; i += W) {
      SPSD_UNROLL
      for (int64_t j = 0; j < W; ++j) acc[j] = f(acc[j], g(load(a[i + j]), load(b[i + j])));
    }
    for (int64_t j = 0; j < W; ++j) r = f(r, acc[j]);
  }
  for (; i < n; ++i) r = f(r, g(load(a[i]), load(b[i])));
  return r;
}

// f-reduction of g(x[i]) over i < n: fold_map2 with one input (read once: the second operand
// is the same load).
template <class T, class F, class G>
inline compute_t<T> fold_map(F f, G g, const T* x, int64_t n, compute_t<T> identity) {
  return fold_map2(f, [g](compute_t<T> v, compute_t<T>) { return g(v); }, x, x, n, identity);
}

// max and min as generic functions: they apply to scalars and, through GCC/Clang vector
// extensions, to whole Lines, lane by lane. (x < y ? y : x keeps x when y is NaN, as the
// reductions across ranks do.)
struct MaxOf {
  template <class V>
  V operator()(V x, V y) const { return x < y ? y : x; }
};
struct MinOf {
  template <class V>
  V operator()(V x, V y) const { return y < x ? y : x; }
};

#if defined(__GNUC__) && !defined(__clang__)  // clang vectorizes the plain fold itself
// 16 bytes of T as a vector-extension value: the SSE2 baseline width, so it lives in one
// register on every x86-64 (a wider type would be passed in memory without AVX).
template <class T>
using Lanes [[gnu::vector_size(16)]] = T;
#endif

template <class T, class F>
inline compute_t<T> fold(F f, const T* x, int64_t n, compute_t<T> identity) {
#if defined(__GNUC__) && !defined(__clang__)  // clang vectorizes the plain fold itself
  // GCC does not vectorize fold_map's accumulators for a compare-and-select f such as MaxOf
  // at -O2 (it does for +), so an f that accepts Lanes folds a cache line at a time in K
  // Lanes accumulators: lane j of accumulator k takes the same elements in the same order as
  // fold_map's acc[k * L + j], so the result is the same.
  if constexpr (std::is_arithmetic_v<T> && std::is_invocable_r_v<Lanes<T>, F, Lanes<T>, Lanes<T>>) {
    constexpr int64_t W = kBlock<T>, L = 16 / static_cast<int64_t>(sizeof(T)), K = W / L;
    if (n >= W) {
      Lanes<T> acc[K];
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < L; ++j) acc[k][j] = identity;
      int64_t i = 0;
      for (; i + W <= n; i += W) {
        SPSD_UNROLL
        for (int64_t k = 0; k < K; ++k) {
          Lanes<T> v;
          __builtin_memcpy(&v, x + i + k * L, sizeof v);
          acc[k] = f(acc[k], v);
        }
      }
      T r = identity;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < L; ++j) r = f(r, acc[k][j]);
      for (; i < n; ++i) r = f(r, x[i]);
      return r;
    }
  }
#endif
  return fold_map(f, [](compute_t<T> v) { return v; }, x, n, identity);
}

// Integer +, -, *, negation modulo 2^bits (through the unsigned type): signed overflow is
// undefined in C++, and wrapping is what P(sum) over integers and MPI do. Floats pass through.
template <Element T>
constexpr T wrap_add(T a, T b) { return wrapping_add(a, b); }

template <Element T>
constexpr T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}

template <Element T>
constexpr T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <Element T>
constexpr T wrap_neg(T a) { return wrap_sub(T{0}, a); }

// Odometer over an index space (row-major order) that keeps one running element offset per
// operand, so general strided kernels pay O(1) amortized per step instead of O(ndim).
// strides[o][d] is operand o's stride along dim d (0 where the operand broadcasts).
template <int N>
class Odometer {
 public:
  Odometer(std::vector<int64_t> dims, std::array<std::vector<int64_t>, N> strides)
      : dims_(std::move(dims)), strides_(std::move(strides)), idx_(dims_.size(), 0) {}

  int64_t offset(int o) const { return offset_[o]; }

  void next() {
    for (int64_t d = static_cast<int64_t>(dims_.size()) - 1; d >= 0; --d) {
      if (++idx_[d] < dims_[d]) {
        for (int o = 0; o < N; ++o) offset_[o] += strides_[o][d];
        return;
      }
      idx_[d] = 0;
      for (int o = 0; o < N; ++o) offset_[o] -= strides_[o][d] * (dims_[d] - 1);
    }
  }

 private:
  std::vector<int64_t> dims_;
  std::array<std::vector<int64_t>, N> strides_;
  std::vector<int64_t> idx_;
  std::array<int64_t, N> offset_{};
};

}  // namespace spsd::kernel::cpu::detail
