#pragma once
// matmul on one rank's pieces: (..., m, k) x (..., k, n) -> (..., m, n), the batch dims
// broadcast (numpy); either operand may be stored transposed (its last two axes swapped), which
// the gemm reads in place (backward's g b^T and a^T g need no transposed copy). float/double go
// to CBLAS (OpenBLAS) sgemm/dgemm with CblasTrans, bfloat16/float16 through sgemm on widened
// copies; integers, which BLAS lacks, use a tiled i-k-j
// loop (a dot-product loop when b is transposed) that wraps like integer add.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

namespace detail {

// CBLAS takes int sizes; a bigger one is an error, not a silent truncation.
inline int blas_int(int64_t v) {
  SPSD_CHECK(v <= INT_MAX, "matmul", "dimension ", v, " exceeds the BLAS int range");
  return static_cast<int>(v);
}

// c (m, n) = op(a) (m, k) op(b) (k, n) for integers. b as stored: i-k-j so the inner loop
// streams a row of b into a row of c (vectorized axpy), tiled over k and n so a b tile
// (~128 KiB) stays in cache while every row of a passes over it; a transposed a only changes
// where a(i, p) is read. b transposed: c(i, j) is the dot product of two rows read in place.
template <Element T>
void int_gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  const int64_t ai = trans_a ? 1 : k, ap = trans_a ? m : 1;  // a(i, p) = a[i * ai + p * ap]
  if (trans_b) {                                              // b(p, j) = b[j * k + p]
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc{0};
        for (int64_t p = 0; p < k; ++p) acc = wrap_add(acc, wrap_mul(a[i * ai + p * ap], b[j * k + p]));
        c[i * n + j] = acc;
      }
    return;
  }
  constexpr int64_t kKb = 64, kNb = 2048 / static_cast<int64_t>(sizeof(T));
  fill_n(c, m * n, T{0});
  for (int64_t p0 = 0; p0 < k; p0 += kKb) {
    const int64_t pe = std::min(k, p0 + kKb);
    for (int64_t j0 = 0; j0 < n; j0 += kNb) {
      const int64_t jn = std::min(n, j0 + kNb) - j0;
      for (int64_t i = 0; i < m; ++i) {
        T* crow = c + i * n + j0;
        for (int64_t p = p0; p < pe; ++p) {
          map2([av = a[i * ai + p * ap]](T cv, T bv) { return wrap_add(cv, wrap_mul(av, bv)); }, crow, b + p * n + j0,
               crow, jn);
        }
      }
    }
  }
}

// CBLAS sgemm/dgemm, row-major, alpha 1, beta 0 (src/kernel/blas.cpp). Out of line so that no
// public header includes cblas.h: OpenBLAS's declares a global `bfloat16` typedef, which would
// make spsd::bfloat16 ambiguous in programs that say `using namespace spsd`.
void blas_gemm(const float* a, const float* b, float* c, int m, int n, int k, int lda, int ldb, bool trans_a,
               bool trans_b);
void blas_gemm(const double* a, const double* b, double* c, int m, int n, int k, int lda, int ldb, bool trans_a,
               bool trans_b);

// c = alpha op(a) op(b) + beta c with leading dimensions (row strides) lda, ldb, ldc: the fused
// kernels' tiles (kernel/cpu/attention.hpp), which scale and accumulate in the GEMM itself.
void blas_gemm_ex(const float* a, const float* b, float* c, int m, int n, int k, int lda, int ldb, int ldc,
                  bool trans_a, bool trans_b, float alpha, float beta);
void blas_gemm_ex(const double* a, const double* b, double* c, int m, int n, int k, int lda, int ldb, int ldc,
                  bool trans_a, bool trans_b, double alpha, double beta);

// c (m, n) = op(a) op(b), all dense row-major, every size > 0; a stored (k, m) when trans_a,
// b stored (n, k) when trans_b.
template <Element T>
void gemm_2d(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    blas_gemm(a, b, c, blas_int(m), blas_int(n), blas_int(k), blas_int(trans_a ? m : k), blas_int(trans_b ? k : n),
              trans_a, trans_b);
  } else {
    int_gemm(a, b, c, m, n, k, trans_a, trans_b);
  }
}

inline Shape batch_of(const Shape& s) { return Shape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 2)); }

// The product's sizes, checked: op(a) is (..., m, k), op(b) (..., k, n), out (..., m, n) with
// the batch dims broadcast. Shared by the cpu and cuda kernels (one set of messages).
struct GemmDims {
  int64_t m, n, k;
  Shape batch_a, batch_b;
};
inline GemmDims gemm_dims(const Shape& a, const Shape& b, const Shape& out, bool trans_a, bool trans_b) {
  const char* an = trans_a ? "a (transposed)" : "a";
  const char* bn = trans_b ? "b (transposed)" : "b";
  SPSD_CHECK(a.ndim() >= 2 && b.ndim() >= 2, "matmul", "needs matrices (2 or more axes): ", an, " is ", a, ", ", bn,
             " is ", b);
  const int64_t ra = a.ndim(), rb = b.ndim();
  const int64_t m = a[trans_a ? ra - 1 : ra - 2], k = a[trans_a ? ra - 2 : ra - 1];
  const int64_t kb = b[trans_b ? rb - 1 : rb - 2], n = b[trans_b ? rb - 2 : rb - 1];
  SPSD_CHECK(kb == k, "matmul", "inner dimensions differ: ", an, " is ", a, ", ", bn, " is ", b);
  GemmDims d{m, n, k, batch_of(a), batch_of(b)};
  std::vector<int64_t> want = broadcast_shape("matmul", d.batch_a, d.batch_b).dims();
  want.insert(want.end(), {m, n});
  SPSD_CHECK(Shape(want) == out, "matmul", "output shape ", out, " should be ", Shape(want), " for ", an, " ", a,
             " and ", bn, " ", b);
  return d;
}

}  // namespace detail

// out = op(a) @ op(b), op(x) = x, or x with its last two axes swapped when trans_x (read in
// place, never copied). op(a) is (..., m, k), op(b) is (..., k, n), out is (..., m, n) with
// out's batch dims the numpy broadcast of a's and b's (either may be 2-d or have fewer batch
// dims). k == 0 gives zeros. Integer products and sums wrap.
template <Element T>
void matmul(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape,
            bool trans_a = false, bool trans_b = false) {
  const auto [m, n, k, batch_a, batch_b] = detail::gemm_dims(a_shape, b_shape, out_shape, trans_a, trans_b);
  const int64_t total = out_shape.numel();
  if (total == 0) return;
  if (k == 0) {  // an empty sum; BLAS would also reject lda = 0
    detail::fill_n(out, total, T{0});
    return;
  }
  if constexpr (is_half_v<T>) {
    // Debian's OpenBLAS 0.3.21 exports no sbgemm (cblas.h declares it, the library lacks it):
    // widen both operands to float, sgemm (float accumulation), round each output once.
    const std::vector<float> af = detail::widen(a, a_shape.numel()), bf = detail::widen(b, b_shape.numel());
    std::vector<float> of(static_cast<size_t>(total));
    matmul<float>(af.data(), a_shape, bf.data(), b_shape, of.data(), out_shape, trans_a, trans_b);
    detail::narrow(of.data(), total, out);
  } else {
    const int64_t batches = total / (m * n);
    // b shared by every batch and a dense (untransposed) over them: one (batches*m, k) x (k, n).
    if (!trans_a && batch_b.numel() == 1 && batch_a.numel() == batches && batches * m <= INT_MAX) {
      detail::gemm_2d(a, b, out, batches * m, n, k, false, trans_b);
      return;
    }
    const int64_t r = out_shape.ndim() - 2;
    std::vector<int64_t> sa = detail::broadcast_strides(batch_a, r), sb = detail::broadcast_strides(batch_b, r);
    for (int64_t& s : sa) s *= m * k;
    for (int64_t& s : sb) s *= k * n;
    std::vector<int64_t> out_batch(out_shape.dims().begin(), out_shape.dims().end() - 2);
    auto c = detail::collapse<2>(out_batch, {sa, sb});
    detail::Odometer<2> od(c.dims, c.strides);
    for (int64_t i = 0; i < batches; ++i, od.next())
      detail::gemm_2d(a + od.offset(0), b + od.offset(1), out + i * m * n, m, n, k, trans_a, trans_b);
  }
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_GEMM_INSTANCES(prefix, T) \
  prefix template void matmul<T>(const T*, const Shape&, const T*, const Shape&, T*, const Shape&, bool, bool);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_GEMM_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
