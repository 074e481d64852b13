#include "box_copy.hpp"

#include <cstring>
#include <vector>

#include "spsd/core/config.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/runtime/device.hpp"
#if SPSD_HAVE_CUDA
#include "spsd/kernel/cuda/copy.hpp"
#endif

namespace spsd::detail {

void copy_region(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, int64_t elem,
                 DeviceType device) {
  if (region.empty()) return;
  if (device != DeviceType::kCPU) {
#if SPSD_HAVE_CUDA
    kernel::cuda::copy_box(src, src_box, dst, dst_box, region, elem, stream_for(device));
    return;
#endif
  }
  const int64_t d = region.ndim();
  if (d == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  Shape s = src_box.shape(), t = dst_box.shape(), r = region.shape();
  // Trailing axes that the region spans fully in both buffers merge into one run.
  int64_t q = d - 1, run = r[d - 1];
  while (q > 0 && r[q] == s[q] && r[q] == t[q]) run *= r[--q];
  std::vector<int64_t> ss = contiguous_strides(s), ts = contiguous_strides(t), idx(q, 0);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  for (;;) {
    int64_t so = 0, to_off = 0;
    for (int64_t k = 0; k < q; ++k) {
      so += (region.begin[k] + idx[k] - src_box.begin[k]) * ss[k];
      to_off += (region.begin[k] + idx[k] - dst_box.begin[k]) * ts[k];
    }
    so += (region.begin[q] - src_box.begin[q]) * ss[q];
    to_off += (region.begin[q] - dst_box.begin[q]) * ts[q];
    std::memcpy(to + to_off * elem, from + so * elem, run * elem);
    int64_t k = q - 1;
    while (k >= 0 && ++idx[k] == r[k]) idx[k--] = 0;
    if (k < 0) return;
  }
}

int64_t contiguous_offset(const Box& region, const Box& box) {
  Shape r = region.shape(), b = box.shape();
  if (r.numel() == 0) return 0;
  int64_t d = region.ndim(), k = 0;
  while (k < d && r[k] == 1) ++k;  // leading axes of extent 1
  for (int64_t j = k + 1; j < d; ++j)
    if (r[j] != b[j]) return -1;  // after the first longer axis, every axis must be full
  std::vector<int64_t> strides = contiguous_strides(b);
  int64_t offset = 0;
  for (int64_t j = 0; j < d; ++j) offset += (region.begin[j] - box.begin[j]) * strides[j];
  return offset;
}

void fill_identity(void* dst, int64_t n, DType dtype, ReduceOp op, DeviceType device) {
  if (device != DeviceType::kCPU) {
#if SPSD_HAVE_CUDA
    kernel::cuda::fill_identity(dst, n, dtype, op, stream_for(device));
    return;
#endif
  }
  visit_dtype(dtype, [&]<class T>() {
    T* p = static_cast<T*>(dst);
    std::fill(p, p + n, reduce_identity<T>(op));
  });
}

}  // namespace spsd::detail
