#pragma once
// matmul on one rank's pieces: (..., m, k) x (..., k, n) -> (..., m, n), the batch dims
// broadcast (numpy). float/double go to CBLAS (OpenBLAS) sgemm/dgemm; integers, which BLAS
// lacks, use a tiled i-k-j loop that wraps like integer add.
#include <cblas.h>

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

// c (m, n) = a (m, k) b (k, n) for integers: i-k-j so the inner loop streams a row of b into a
// row of c (vectorized axpy), tiled over k and n so a b tile (~128 KiB) stays in cache while
// every row of a passes over it.
template <Element T>
void int_gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kKb = 64, kNb = 2048 / static_cast<int64_t>(sizeof(T));
  fill_n(c, m * n, T{0});
  for (int64_t p0 = 0; p0 < k; p0 += kKb) {
    const int64_t pe = std::min(k, p0 + kKb);
    for (int64_t j0 = 0; j0 < n; j0 += kNb) {
      const int64_t jn = std::min(n, j0 + kNb) - j0;
      for (int64_t i = 0; i < m; ++i) {
        T* crow = c + i * n + j0;
        for (int64_t p = p0; p < pe; ++p) {
          map2([av = a[i * k + p]](T cv, T bv) { return wrap_add(cv, wrap_mul(av, bv)); }, crow, b + p * n + j0,
               crow, jn);
        }
      }
    }
  }
}

// c (m, n) = a (m, k) b (k, n), all dense row-major, every size > 0.
template <Element T>
void gemm_2d(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), 1.0f, a,
                blas_int(k), b, blas_int(n), 0.0f, c, blas_int(n));
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(m), blas_int(n), blas_int(k), 1.0, a,
                blas_int(k), b, blas_int(n), 0.0, c, blas_int(n));
  } else {
    int_gemm(a, b, c, m, n, k);
  }
}

inline Shape batch_of(const Shape& s) { return Shape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 2)); }

}  // namespace detail

// out = a @ b. a is (..., m, k), b is (..., k, n), out is (..., m, n) with out's batch dims the
// numpy broadcast of a's and b's (either may be 2-d or have fewer batch dims). k == 0 gives
// zeros. Integer products and sums wrap.
template <Element T>
void matmul(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape) {
  SPSD_CHECK(a_shape.ndim() >= 2 && b_shape.ndim() >= 2, "matmul", "needs matrices (2 or more axes): a is ", a_shape,
             ", b is ", b_shape);
  const int64_t m = a_shape[a_shape.ndim() - 2], k = a_shape[a_shape.ndim() - 1], n = b_shape[b_shape.ndim() - 1];
  SPSD_CHECK(b_shape[b_shape.ndim() - 2] == k, "matmul", "inner dimensions differ: a is ", a_shape, ", b is ",
             b_shape);
  const Shape batch_a = detail::batch_of(a_shape), batch_b = detail::batch_of(b_shape);
  std::vector<int64_t> want = detail::broadcast_shape("matmul", batch_a, batch_b).dims();
  want.insert(want.end(), {m, n});
  SPSD_CHECK(Shape(want) == out_shape, "matmul", "output shape ", out_shape, " should be ", Shape(want), " for a ",
             a_shape, " and b ", b_shape);

  const int64_t total = out_shape.numel();
  if (total == 0) return;
  if (k == 0) {  // an empty sum; BLAS would also reject lda = 0
    detail::fill_n(out, total, T{0});
    return;
  }
  const int64_t batches = total / (m * n);
  // b shared by every batch and a dense over them: one (batches*m, k) x (k, n) product.
  if (batch_b.numel() == 1 && batch_a.numel() == batches && batches * m <= INT_MAX) {
    detail::gemm_2d(a, b, out, batches * m, n, k);
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
    detail::gemm_2d(a + od.offset(0), b + od.offset(1), out + i * m * n, m, n, k);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_GEMM_INSTANCES(prefix, T) \
  prefix template void matmul<T>(const T*, const Shape&, const T*, const Shape&, T*, const Shape&);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_GEMM_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
