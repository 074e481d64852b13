#pragma once
// Data movement between dense layouts: permute (axis transposition), copy_region (a box of one
// tensor into a box of another: slice, concat, and, dtype-erased, boxing's pack and unpack), and
// broadcast_to (numpy broadcasting made explicit: backward's expand).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

namespace detail {

// out (rows, cols) dense = in[i + j * ld] (in's rows are its stride-1 axis): tiles of
// kTile x kTile so the kTile input lines a tile reads stay in L1 while out is written in order.
template <Element T>
void transpose_2d(const T* in, int64_t ld, T* out, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t ie = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t je = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < ie; ++i)
        for (int64_t j = j0; j < je; ++j) out[i * cols + j] = in[i + j * ld];
    }
  }
}

}  // namespace detail

namespace detail {

// A permute as the output's dims (in output order) with their input strides, after dropping
// extents of 1 and merging axes adjacent in both orders; shared with the CUDA kernel. Throws
// unless perm is a permutation of x_shape's axes.
struct PermutePlan {
  std::vector<int64_t> dims, strides;
};
inline PermutePlan plan_permute(const Shape& x_shape, std::span<const int64_t> perm) {
  const int64_t r = x_shape.ndim();
  std::vector<bool> seen(r, false);
  bool ok = static_cast<int64_t>(perm.size()) == r;
  for (int64_t i = 0; ok && i < r; ++i) {
    ok = perm[i] >= 0 && perm[i] < r && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  SPSD_CHECK(ok, "permute", "perm ", ::spsd::detail::join({perm.begin(), perm.end()}),
             " is not a permutation of the axes of ", x_shape);
  const std::vector<int64_t> xs = contiguous_strides(x_shape);
  PermutePlan p;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t d = x_shape[perm[i]], s = xs[perm[i]];
    if (d == 1) continue;
    if (!p.dims.empty() && p.strides.back() == s * d) {
      p.dims.back() *= d;
      p.strides.back() = s;
    } else {
      p.dims.push_back(d);
      p.strides.push_back(s);
    }
  }
  return p;
}

// Throws unless the extent box fits at src_begin in src_shape and at dst_begin in dst_shape.
inline void check_copy_region(const Shape& src_shape, std::span<const int64_t> src_begin, const Shape& dst_shape,
                              std::span<const int64_t> dst_begin, const Shape& extent) {
  const int64_t r = extent.ndim();
  SPSD_CHECK(src_shape.ndim() == r && dst_shape.ndim() == r && static_cast<int64_t>(src_begin.size()) == r &&
                 static_cast<int64_t>(dst_begin.size()) == r,
             "copy_region", "ranks differ: src ", src_shape, ", dst ", dst_shape, ", extent ", extent);
  for (int64_t d = 0; d < r; ++d) {
    SPSD_CHECK(src_begin[d] >= 0 && src_begin[d] + extent[d] <= src_shape[d] && dst_begin[d] >= 0 &&
                   dst_begin[d] + extent[d] <= dst_shape[d],
               "copy_region", "box of extent ", extent, " at ", ::spsd::detail::join({src_begin.begin(), src_begin.end()}),
               " in ", src_shape, " -> at ", ::spsd::detail::join({dst_begin.begin(), dst_begin.end()}), " in ",
               dst_shape, " is out of bounds");
  }
}

}  // namespace detail

// out = x with axes reordered: out.shape[i] = x_shape[perm[i]], out dense. Axes that stay
// neighbours are merged first, so (b, m, n) -> (b, n, m) is a batch of 2-d transposes and a
// perm that keeps the last axis copies contiguous runs. spsd::Error unless perm is a
// permutation of x's axes.
template <Element T>
void permute(const T* x, const Shape& x_shape, std::span<const int64_t> perm, T* out) {
  const auto [dims, strides] = detail::plan_permute(x_shape, perm);
  const int64_t n = x_shape.numel();
  if (n == 0) return;
  const int64_t k = static_cast<int64_t>(dims.size());
  if (k <= 1) {  // identity after merging (k == 1 means one dim of stride 1)
    std::memcpy(out, x, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  const int64_t last = dims[k - 1], s_last = strides[k - 1];
  if (s_last == 1) {  // the last axis stays last: copy contiguous runs
    std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
    detail::Odometer<1> od(outer, {std::vector<int64_t>(strides.begin(), strides.end() - 1)});
    for (int64_t o = 0, runs = n / last; o < runs; ++o, od.next())
      std::memcpy(out + o * last, x + od.offset(0), static_cast<size_t>(last) * sizeof(T));
    return;
  }
  if (strides[k - 2] == 1) {  // the last two out axes are a 2-d transpose of the input's last axis
    const int64_t rows = dims[k - 2], tile = rows * last;
    std::vector<int64_t> outer(dims.begin(), dims.end() - 2);
    detail::Odometer<1> od(outer, {std::vector<int64_t>(strides.begin(), strides.end() - 2)});
    for (int64_t o = 0, count = n / tile; o < count; ++o, od.next())
      detail::transpose_2d(x + od.offset(0), s_last, out + o * tile, rows, last);
    return;
  }
  // General: a strided gather along the last out axis.
  std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
  detail::Odometer<1> od(outer, {std::vector<int64_t>(strides.begin(), strides.end() - 1)});
  for (int64_t o = 0, runs = n / last; o < runs; ++o, od.next()) {
    const T* src = x + od.offset(0);
    T* dst = out + o * last;
    for (int64_t j = 0; j < last; ++j) dst[j] = src[j * s_last];
  }
}

// dst[dst_begin + i] = src[src_begin + i] for every index i of the extent box, both buffers
// dense with their shapes, elem bytes per element; unchecked. One memcpy per contiguous run: the
// last axis, extended over the trailing axes the box spans completely in both buffers. The one
// strided box copy on the host: copy_region below and boxing's pack and unpack
// (kernel/box_copy.hpp) both run it. src and dst must not overlap.
inline void copy_dense_box(const void* src, const Shape& src_shape, std::span<const int64_t> src_begin, void* dst,
                           const Shape& dst_shape, std::span<const int64_t> dst_begin, const Shape& extent,
                           int64_t elem) {
  const int64_t r = extent.ndim();
  if (extent.numel() == 0) return;
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  if (r == 0) {
    std::memcpy(to, from, static_cast<size_t>(elem));
    return;
  }
  const std::vector<int64_t> ss = contiguous_strides(src_shape), ds = contiguous_strides(dst_shape);
  int64_t so = 0, dof = 0;
  for (int64_t d = 0; d < r; ++d) {
    so += src_begin[d] * ss[d];
    dof += dst_begin[d] * ds[d];
  }
  int64_t k = r - 1, run = extent[k];  // run covers axes k..r-1
  while (k > 0 && extent[k] == src_shape[k] && extent[k] == dst_shape[k]) run *= extent[--k];
  std::vector<int64_t> outer(extent.dims().begin(), extent.dims().begin() + k);
  detail::Odometer<2> od(outer, {std::vector<int64_t>(ss.begin(), ss.begin() + k),
                                 std::vector<int64_t>(ds.begin(), ds.begin() + k)});
  const int64_t runs = extent.numel() / run;
  for (int64_t i = 0; i < runs; ++i, od.next())
    std::memcpy(to + (dof + od.offset(1)) * elem, from + (so + od.offset(0)) * elem, static_cast<size_t>(run * elem));
}

// copy_dense_box of T elements, bounds checked (spsd::Error for a box that does not fit).
template <Element T>
void copy_region(const T* src, const Shape& src_shape, std::span<const int64_t> src_begin, T* dst,
                 const Shape& dst_shape, std::span<const int64_t> dst_begin, const Shape& extent) {
  detail::check_copy_region(src_shape, src_begin, dst_shape, dst_begin, extent);
  copy_dense_box(src, src_shape, src_begin, dst, dst_shape, dst_begin, extent, static_cast<int64_t>(sizeof(T)));
}

// out (out_shape, dense) = x broadcast numpy-style (x_shape must broadcast to out_shape, which
// the op checked). Row by row of the output's last axis: a row is a copy, or a fill where the
// last axis is stretched.
template <Element T>
void broadcast_to(const T* x, const Shape& x_shape, T* out, const Shape& out_shape) {
  const int64_t r = out_shape.ndim(), n = r ? out_shape[r - 1] : 1;
  if (out_shape.numel() == 0) return;
  const std::vector<int64_t> strides = detail::broadcast_strides(x_shape, r);
  const int64_t step = r ? strides[r - 1] : 0;
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (int64_t row = 0, rows = out_shape.numel() / n; row < rows; ++row) {
    int64_t offset = 0;
    for (int64_t d = 0; d + 1 < r; ++d) offset += idx[d] * strides[d];
    T* o = out + row * n;
    if (step == 0) detail::fill_n(o, n, x[offset]);
    else std::memcpy(o, x + offset, static_cast<size_t>(n) * sizeof(T));
    for (int64_t d = r - 2; d >= 0 && ++idx[d] == out_shape[d]; --d) idx[d] = 0;
  }
}

// Compiled into the library (core/instances.hpp).
#define SPSD_CPU_PERMUTE_INSTANCES(prefix, T)                                                        \
  prefix template void permute<T>(const T*, const Shape&, std::span<const int64_t>, T*);                \
  prefix template void copy_region<T>(const T*, const Shape&, std::span<const int64_t>, T*, const Shape&, \
                                      std::span<const int64_t>, const Shape&);                              \
  prefix template void broadcast_to<T>(const T*, const Shape&, T*, const Shape&);
SPSD_FOR_EACH_ELEMENT(SPSD_CPU_PERMUTE_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
