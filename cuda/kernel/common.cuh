#pragma once
// Shared by the CUDA kernel translation units: error checks, launch geometry, wrapping integer
// arithmetic, by-value index spaces for strided kernels, and the explicit-instantiation lists.

// The cpu headers (included for enums and host-side shape logic) use "#pragma GCC unroll",
// which the CUDA front end does not know; the host compiler still sees it.
#pragma nv_diag_suppress 1675

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/half.hpp"
#include "spsd/core/reduce_op.hpp"

namespace spsd::kernel::cuda::detail {

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Throws spsd::Error "kernel: CUDA error during what: <cuda message>" unless err is success.
inline void check_cuda(cudaError_t err, const char* kernel, const char* what) {
  if (err != cudaSuccess) [[unlikely]] {
    cudaGetLastError();  // clear a non-sticky error so the next call starts clean
    ::spsd::detail::throw_error(kernel, "CUDA error during ", what, ": ", cudaGetErrorName(err), " (",
                                cudaGetErrorString(err), ")");
  }
}

// After a <<<>>> launch: configuration errors surface here, asynchronous faults later.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel, "kernel launch"); }

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: one item per thread up to a cap (the loop covers
// the rest), so huge n never exceeds the grid limit and small n launches few blocks.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, kMaxBlocks));
}

// A grid dimension of n blocks, at most cap (the kernels loop over the rest).
inline unsigned grid_dim(int64_t n, int64_t cap) { return static_cast<unsigned>(std::clamp<int64_t>(n, 1, cap)); }

__device__ inline int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t thread_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// A kernel loads an element as compute_t<T> (a 16-bit float widens exactly to float), computes
// and accumulates in that type, and rounds once when it stores (core/half.hpp's round to nearest
// even, the cpu's conversion bit for bit). For float, double and the integers both are no-ops.
template <class T>
__device__ __forceinline__ compute_t<T> widen(T x) { return static_cast<compute_t<T>>(x); }
template <class T>
__device__ __forceinline__ T narrow(compute_t<T> v) { return static_cast<T>(v); }

// 16 bytes of elements, loaded and stored as one access: the flat element-wise kernels move a pack per
// thread and step, the last n % size elements one by one (and the dense row reductions load them). An add of 256 MiB operands ran at 0.80
// of copy bandwidth on an H100 with one 4-byte element per thread (docs/benchmarks.md, GPU).
// Vec<T, K>: K elements as one aligned access (cast moves K = 16 / the larger element size).
template <class T, int K>
struct alignas(K * sizeof(T)) Vec {
  static constexpr int kSize = K;
  T v[K];
};
template <class T>
using Pack = Vec<T, 16 / sizeof(T)>;

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
inline bool aligned_for_packs(const void* p) { return aligned_to(p, 16); }

// Integer +, -, *, negation modulo 2^bits through the unsigned type (cpu loop.hpp's wrap_*);
// floats pass through.
template <class T>
__device__ inline T wrap_add(T a, T b) { return ::spsd::wrapping_add(a, b); }  // core/reduce_op.hpp
template <class T>
__device__ inline T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <class T>
__device__ inline T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
// Floats negate (0 - x would turn -0.0 into +0.0, unlike the cpu's -x).
template <class T>
__device__ inline T wrap_neg(T a) {
  if constexpr (std::is_integral_v<T>) return wrap_sub(T{0}, a);
  else return -a;
}

// The binary functions of ReduceOp and of element-wise maximum/minimum, exactly the cpu's
// (x < y ? y : x keeps x when y is NaN).
struct AddOf {
  template <class T>
  __device__ T operator()(T x, T y) const { return wrap_add(x, y); }
};
struct MaxOf {
  template <class T>
  __device__ T operator()(T x, T y) const { return x < y ? y : x; }
};
struct MinOf {
  template <class T>
  __device__ T operator()(T x, T y) const { return y < x ? y : x; }
};

// An index space of up to kMaxDims dims with N operands' element strides, passed to kernels
// by value (no device allocation). Host code collapses dims first, so real tensors fit.
constexpr int kMaxDims = 16;

template <int N>
struct Strided {
  int ndim = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // Each operand's element offset of row-major linear index i (innermost dim fastest).
  __device__ void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int o = 0; o < N; ++o) off[o] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t q = i / dims[d], r = i - q * dims[d];
      for (int o = 0; o < N; ++o) off[o] += r * strides[o][d];
      i = q;
    }
  }
};

template <int N>
Strided<N> make_strided(const char* kernel, const std::vector<int64_t>& dims,
                        const std::array<std::vector<int64_t>, N>& strides) {
  SPSD_CHECK(dims.size() <= static_cast<size_t>(kMaxDims), kernel, "the CUDA kernels take at most ", kMaxDims,
             " non-mergeable dims, got ", dims.size());
  Strided<N> s;
  s.ndim = static_cast<int>(dims.size());
  for (int d = 0; d < s.ndim; ++d) {
    s.dims[d] = dims[d];
    for (int o = 0; o < N; ++o) s.strides[o][d] = strides[o][d];
  }
  return s;
}

}  // namespace spsd::kernel::cuda::detail

// X(T) for every element type the kernels are instantiated for (the names resolve inside
// namespace spsd::kernel::cuda, where the instantiations are).
#define SPSD_CUDA_FOR_EACH_HALF(X) X(bfloat16) X(float16)
#define SPSD_CUDA_FOR_EACH_FLOATING(X) X(float) X(double) SPSD_CUDA_FOR_EACH_HALF(X)
#define SPSD_CUDA_FOR_EACH_ELEMENT(X) SPSD_CUDA_FOR_EACH_FLOATING(X) X(int32_t) X(int64_t)
// X(A, T) for every element type T: the list again, for pairs (the preprocessor does not expand a
// macro inside its own expansion, so SPSD_CUDA_FOR_EACH_ELEMENT cannot nest).
#define SPSD_CUDA_FOR_EACH_ELEMENT_WITH(X, A) \
  X(A, float) X(A, double) X(A, bfloat16) X(A, float16) X(A, int32_t) X(A, int64_t)
