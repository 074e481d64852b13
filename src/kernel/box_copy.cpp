// Box copies and identity fills on either memory space (kernel/box_copy.hpp).
#include "spsd/kernel/box_copy.hpp"

#include <algorithm>
#include <vector>

#include "spsd/core/config.hpp"
#include "spsd/kernel/cpu/permute.hpp"
#include "spsd/runtime/device.hpp"
#if SPSD_HAVE_CUDA
#include "spsd/kernel/cuda/copy.hpp"
#endif

namespace spsd::kernel {

void copy_box(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, int64_t elem,
              DeviceType device) {
  if (region.empty()) return;
#if SPSD_HAVE_CUDA
  if (device != DeviceType::kCPU) return cuda::copy_box(src, src_box, dst, dst_box, region, elem, detail::stream_for(device));
#endif
  const int64_t d = region.ndim();
  std::vector<int64_t> src_begin(d), dst_begin(d);
  for (int64_t k = 0; k < d; ++k) {
    src_begin[k] = region.begin[k] - src_box.begin[k];
    dst_begin[k] = region.begin[k] - dst_box.begin[k];
  }
  cpu::copy_dense_box(src, src_box.shape(), src_begin, dst, dst_box.shape(), dst_begin, region.shape(), elem);
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
#if SPSD_HAVE_CUDA
  if (device != DeviceType::kCPU) return cuda::fill_identity(dst, n, dtype, op, detail::stream_for(device));
#endif
  (void)device;
  visit_dtype(dtype, [&]<class T>() {
    T* p = static_cast<T*>(dst);
    std::fill(p, p + n, reduce_identity<T>(op));
  });
}

}  // namespace spsd::kernel
