#pragma once
// Index kernels for vocabulary/class-parallel layers: each rank holds a contiguous range of
// rows (embedding) or classes (cross-entropy) and contributes zeros for indices it does not
// hold, so the per-rank results sum to the full answer: P(sum).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "spsd/core/dtype.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

// out (n, dim): out[i] = weight row indices[i] - row_begin when this rank holds that row
// (row_begin <= indices[i] < row_begin + rows), else zeros. weight is (rows, dim). The caller
// checks indices against the whole vocabulary.
template <Element T>
void embedding(const T* weight, int64_t row_begin, int64_t rows, int64_t dim, const int64_t* indices, int64_t n,
               T* out) {
  if (dim == 0) return;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = indices[i] - row_begin;
    T* o = out + i * dim;
    if (row >= 0 && row < rows) {
      std::memcpy(o, weight + row * dim, static_cast<size_t>(dim) * sizeof(T));
    } else {
      detail::fill_n(o, dim, T{0});
    }
  }
}

// out[i] = x[i, labels[i] - c_begin] when this rank holds class labels[i]
// (c_begin <= labels[i] < c_begin + c), else 0. x is (n, c): classes [c_begin, c_begin + c).
template <Element T>
void pick(const T* x, int64_t n, int64_t c_begin, int64_t c, const int64_t* labels, T* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = labels[i] - c_begin;
    out[i] = (j >= 0 && j < c) ? x[i * c + j] : T{0};
  }
}

// Rows i of out (n rows of width elements) whose index lies outside [0, bound) become NaN
// (0 for integers): the documented result of an out-of-range index.
template <Element T>
void mark_out_of_range(const int64_t* indices, int64_t n, int64_t bound, int64_t width, T* out) {
  for (int64_t i = 0; i < n; ++i)
    if (indices[i] < 0 || indices[i] >= bound) std::fill_n(out + i * width, width, std::numeric_limits<T>::quiet_NaN());
}

// The gradients of embedding and pick, as this rank's pieces (backward's embedding_grad and
// pick_grad, autograd/grad_ops.hpp):
// out (rows, dim) = zeros, then row indices[i] - row_begin += g row i for every i whose row this
// rank holds. Indices outside the rank's rows (another rank's, or out of range) add nothing.
template <Element T>
void embedding_grad(const T* g, const int64_t* indices, int64_t n, int64_t row_begin, int64_t rows, int64_t dim,
                    T* out) {
  if constexpr (is_half_v<T>) {  // rows accumulate in float, each rounded once
    const std::vector<float> gf = detail::widen(g, n * dim);
    std::vector<float> of(static_cast<size_t>(rows * dim));
    embedding_grad<float>(gf.data(), indices, n, row_begin, rows, dim, of.data());
    detail::narrow(of.data(), rows * dim, out);
  } else {
    detail::fill_n(out, rows * dim, T{0});
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = indices[i] - row_begin;
      if (r < 0 || r >= rows) continue;
      detail::map2([](T a, T b) { return detail::wrap_add(a, b); }, out + r * dim, g + i * dim, out + r * dim, dim);
    }
  }
}

// out (n, c) = g[i] at [i, labels[i]], 0 elsewhere; labels outside [0, c) leave their row zero.
template <Element T>
void pick_grad(const T* g, const int64_t* labels, int64_t n, int64_t c, T* out) {
  detail::fill_n(out, n * c, T{0});
  for (int64_t i = 0; i < n; ++i)
    if (labels[i] >= 0 && labels[i] < c) out[i * c + labels[i]] = g[i];
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_INDEX_INSTANCES(prefix, T)                                                                 \
  prefix template void embedding<T>(const T*, int64_t, int64_t, int64_t, const int64_t*, int64_t, T*);        \
  prefix template void pick<T>(const T*, int64_t, int64_t, int64_t, const int64_t*, T*);                      \
  prefix template void mark_out_of_range<T>(const int64_t*, int64_t, int64_t, int64_t, T*);                  \
  prefix template void embedding_grad<T>(const T*, const int64_t*, int64_t, int64_t, int64_t, int64_t, T*);   \
  prefix template void pick_grad<T>(const T*, const int64_t*, int64_t, int64_t, T*);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_INDEX_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
