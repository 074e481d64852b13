// Fused optimizer updates on the device: one grid-stride kernel per parameter piece, running
// the per-element code of kernel/cpu/optim.hpp (SPSD_HOST_DEVICE) with the flags as template
// arguments, as the cpu loops do. The argument struct travels by value (kernel parameters).
#include "common.cuh"

#include "spsd/kernel/cuda/optim.hpp"

namespace spsd::kernel::cuda {

namespace detail {

template <bool kWeightDecay, bool kMomentum, bool kNesterov, class T>
__global__ void sgd_step_kernel(T* p, const T* g, T* buf, int64_t n, SgdStep<T> s) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    if constexpr (kMomentum) {
      cpu::detail::sgd_update<kWeightDecay, true, kNesterov>(p[i], g[i], buf[i], s);
    } else {
      T unused{};
      cpu::detail::sgd_update<kWeightDecay, false, false>(p[i], g[i], unused, s);
    }
  }
}

template <bool kL2, bool kDecoupled, class T>
__global__ void adam_step_kernel(T* p, const T* g, T* m, T* v, int64_t n, AdamStep<T> s) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    cpu::detail::adam_update<kL2, kDecoupled>(p[i], g[i], m[i], v[i], s);
}

}  // namespace detail

template <std::floating_point T>
void sgd_step(T* p, const T* g, T* momentum_buf, int64_t n, const SgdStep<T>& s, void* stream) {
  if (n == 0) return;
  cpu::detail::with_flags(
      [&](auto decay, auto momentum, auto nesterov) {
        detail::sgd_step_kernel<decltype(decay)::value, decltype(momentum)::value, decltype(nesterov)::value>
            <<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(p, g, momentum_buf, n, s);
      },
      s.has_weight_decay, s.has_momentum, s.nesterov && s.has_momentum);
  detail::check_launch("sgd_step");
}

template <std::floating_point T>
void adam_step(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<T>& s, void* stream) {
  if (n == 0) return;
  cpu::detail::with_flags(
      [&](auto l2, auto decoupled) {
        detail::adam_step_kernel<decltype(l2)::value, decltype(decoupled)::value>
            <<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(p, g, m, v, n, s);
      },
      s.l2, s.decoupled);
  detail::check_launch("adam_step");
}

#define SPSD_INSTANTIATE(T)                                                              \
  template void sgd_step<T>(T*, const T*, T*, int64_t, const SgdStep<T>&, void*);       \
  template void adam_step<T>(T*, const T*, T*, T*, int64_t, const AdamStep<T>&, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
