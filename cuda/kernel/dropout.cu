// dropout on the device: each thread maps its box element to the global row-major index (as
// the random fills do) and keeps it by kernel::cpu::dropout_keeps, the same host-device code.
#include "common.cuh"

#include "spsd/kernel/cpu/broadcasting.hpp"
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
  const int64_t n = box.numel();
  if (n == 0) return;
  const std::vector<int64_t> gs = contiguous_strides(global_shape), extent = box.shape().dims();
  int64_t base = 0;
  for (int64_t d = 0; d < box.ndim(); ++d) base += box.begin[d] * gs[d];
  const auto c = cpu::detail::collapse<1>(extent, {gs});  // a box spanning whole inner axes merges them
  const detail::Strided<1> idx = detail::make_strided<1>("dropout", c.dims, c.strides);
  detail::dropout_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(
      x, out, n, base, idx, seed, threshold, static_cast<compute_t<T>>(scale));
  detail::check_launch("dropout");
}

#define SPSD_INSTANTIATE(T) \
  template void dropout<T>(const T*, T*, const Box&, const Shape&, uint64_t, uint64_t, double, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
