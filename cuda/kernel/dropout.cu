// dropout on the device: each thread maps its box element to the global row-major index (as
// the random fills do) and keeps it by kernel::cpu::dropout_keeps, the same host-device code.
#include "box_index.cuh"
#include "common.cuh"

#include "spsd/kernel/cpu/dropout.hpp"
#include "spsd/kernel/cuda/dropout.hpp"

namespace spsd::kernel::cuda {

namespace detail {

template <class T, class C = compute_t<T>>
__global__ void dropout_kernel(const T* x, T* out, int64_t n, int64_t base, Strided<1> idx, uint64_t seed,
                               uint64_t threshold, C scale) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t off[1];
    idx.offsets(i, off);
    const bool keep = cpu::dropout_keeps(seed, static_cast<uint64_t>(base + off[0]), threshold);
    out[i] = keep ? narrow<T>(widen(x[i]) * scale) : narrow<T>(C(0));
  }
}

}  // namespace detail

template <FloatingElement T>
void dropout(const T* x, T* out, const Box& box, const Shape& global_shape, uint64_t seed, uint64_t threshold,
             double scale, void* stream) {
  const detail::BoxIndex b = detail::box_index("dropout", box, global_shape);
  const int64_t n = box.numel();
  if (n == 0) return;
  detail::dropout_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(
      x, out, n, b.base, b.idx, seed, threshold, static_cast<compute_t<T>>(scale));
  detail::check_launch("dropout");
}

#define SPSD_INSTANTIATE(T) \
  template void dropout<T>(const T*, T*, const Box&, const Shape&, uint64_t, uint64_t, double, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
