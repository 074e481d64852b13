// note_nonfinite: one grid-stride pass, 16-byte packs when aligned; each block ORs its threads'
// findings and one thread writes the flag, so a clean tensor writes nothing at all.
#include "common.cuh"

#include <cmath>

#include "spsd/kernel/cuda/nonfinite.hpp"

namespace spsd::kernel::cuda {

namespace detail {

template <class T>
__global__ void note_nonfinite_kernel(const T* x, int64_t n, bool packs, float* flag) {
  bool found = false;
  int64_t done = 0;
  if (packs) {
    constexpr int k = Pack<T>::kSize;
    const int64_t count = n / k;
    for (int64_t p = thread_index(); p < count; p += thread_count()) {
      const Pack<T> v = reinterpret_cast<const Pack<T>*>(x)[p];
#pragma unroll
      for (int j = 0; j < k; ++j) found |= !isfinite(widen(v.v[j]));
    }
    done = count * k;
  }
  for (int64_t i = done + thread_index(); i < n; i += thread_count()) found |= !isfinite(widen(x[i]));
  if (__syncthreads_or(found) && threadIdx.x == 0) *flag = 1.0f;  // every thread reaches the barrier
}

}  // namespace detail

template <FloatingElement T>
void note_nonfinite(const T* x, int64_t n, float* flag, void* stream) {
  if (n == 0) return;
  const bool packs = detail::aligned_for_packs(x);
  const int64_t items = packs ? n / detail::Pack<T>::kSize + 1 : n;
  detail::note_nonfinite_kernel<<<detail::blocks_for(items), detail::kThreads, 0, detail::as_stream(stream)>>>(
      x, n, packs, flag);
  detail::check_launch("note_nonfinite");
}

#define SPSD_INSTANTIATE(T) template void note_nonfinite<T>(const T*, int64_t, float*, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
