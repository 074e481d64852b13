// Random fills on the device: each thread computes the global row-major index of its box
// element and calls the same philox functions the host factories call (tensor/random.hpp is
// SPSD_HOST_DEVICE under nvcc). A 16-bit element draws the float value and rounds it once (a
// uniform float just below 1 may round to 1: rand's 16-bit values lie in [0, 1]).
#include "box_index.cuh"
#include "common.cuh"

#include "spsd/kernel/cuda/random.hpp"
#include "spsd/tensor/random.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// idx maps the box's local row-major index to its global one: dims are the box's extents,
// strides the global strides; base is the global index of the box's first element.
template <class T, bool Normal>
__global__ void philox_fill_kernel(T* out, int64_t n, int64_t base, Strided<1> idx, uint64_t seed) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t off[1];
    idx.offsets(i, off);
    const uint64_t g = static_cast<uint64_t>(base + off[0]);
    out[i] = narrow<T>(Normal ? philox::normal<compute_t<T>>(seed, g) : philox::uniform<compute_t<T>>(seed, g));
  }
}

template <class T, bool Normal>
void philox_fill(const char* name, T* out, const Box& box, const Shape& global_shape, uint64_t seed, void* stream) {
  const BoxIndex b = box_index(name, box, global_shape);
  const int64_t n = box.numel();
  if (n == 0) return;
  philox_fill_kernel<T, Normal><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(out, n, b.base, b.idx, seed);
  check_launch(name);
}

}  // namespace detail

template <FloatingElement T>
void fill_uniform(T* out, const Box& box, const Shape& global_shape, uint64_t seed, void* stream) {
  detail::philox_fill<T, false>("rand", out, box, global_shape, seed, stream);
}

template <FloatingElement T>
void fill_normal(T* out, const Box& box, const Shape& global_shape, uint64_t seed, void* stream) {
  detail::philox_fill<T, true>("randn", out, box, global_shape, seed, stream);
}

#define SPSD_INSTANTIATE(T)                                                              \
  template void fill_uniform<T>(T*, const Box&, const Shape&, uint64_t, void*);         \
  template void fill_normal<T>(T*, const Box&, const Shape&, uint64_t, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
