// Element type conversion on the device: one grid-stride kernel per (From, To) pair, moving
// Vec<_, K> groups (K = 16 bytes over the larger element size) when both pointers allow, the
// rest (and unaligned pieces) one element per step. Each element converts by kernel/convert.hpp,
// the cpu's code, so both sides convert bit for bit alike.
#include "common.cuh"

#include "spsd/kernel/convert.hpp"
#include "spsd/kernel/cuda/cast.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// Elements per group: 16 bytes of the wider type.
template <class From, class To>
constexpr int kGroup = static_cast<int>(16 / std::max(sizeof(From), sizeof(To)));

template <class From, class To, int K = kGroup<From, To>>
__global__ void cast_kernel(const From* x, To* out, int64_t n, bool vectors) {
  int64_t done = 0;
  if (vectors) {
    const int64_t groups = n / K;
    for (int64_t p = thread_index(); p < groups; p += thread_count()) {
      const Vec<From, K> in = reinterpret_cast<const Vec<From, K>*>(x)[p];
      Vec<To, K> r;
#pragma unroll
      for (int j = 0; j < K; ++j) r.v[j] = ::spsd::kernel::convert<To>(in.v[j]);
      reinterpret_cast<Vec<To, K>*>(out)[p] = r;
    }
    done = groups * K;
  }
  for (int64_t i = done + thread_index(); i < n; i += thread_count()) out[i] = ::spsd::kernel::convert<To>(x[i]);
}

}  // namespace detail

template <Element From, Element To>
void cast(const From* x, To* out, int64_t n, void* stream) {
  if (n == 0) return;
  if constexpr (std::is_same_v<From, To>) {
    detail::check_cuda(cudaMemcpyAsync(out, x, static_cast<size_t>(n) * sizeof(To), cudaMemcpyDeviceToDevice,
                                       detail::as_stream(stream)),
                       "cast", "cudaMemcpyAsync");
  } else {
    constexpr int k = detail::kGroup<From, To>;
    const bool vectors = detail::aligned_to(x, k * sizeof(From)) && detail::aligned_to(out, k * sizeof(To));
    const int64_t items = vectors ? n / k + 1 : n;
    detail::cast_kernel<From, To><<<detail::blocks_for(items), detail::kThreads, 0, detail::as_stream(stream)>>>(
        x, out, n, vectors);
    detail::check_launch("cast");
  }
}

#define SPSD_INSTANTIATE_PAIR(From, To) template void cast<From, To>(const From*, To*, int64_t, void*);
#define SPSD_INSTANTIATE(From) SPSD_CUDA_FOR_EACH_ELEMENT_WITH(SPSD_INSTANTIATE_PAIR, From)
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE
// bool to and from every type (not in the element lists: no arithmetic on bool).
SPSD_CUDA_FOR_EACH_ELEMENT_WITH(SPSD_INSTANTIATE_PAIR, bool)
#define SPSD_INSTANTIATE(From) SPSD_INSTANTIATE_PAIR(From, bool)
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
SPSD_INSTANTIATE(bool)
#undef SPSD_INSTANTIATE
#undef SPSD_INSTANTIATE_PAIR

}  // namespace spsd::kernel::cuda
