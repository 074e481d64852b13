// Fused optimizer updates on the device: one grid-stride kernel per parameter piece, running
// the per-element code of kernel/cpu/optim.hpp (SPSD_HOST_DEVICE) with the flags as template
// arguments, as the cpu loops do; 16-bit parameters and state update in float. The argument struct travels by value (kernel parameters).
#include "common.cuh"

#include "spsd/kernel/cuda/optim.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// Each element loads into C = compute_t<T> (float for a 16-bit parameter and its state), runs the
// cpu's update there and stores every array it changed, rounded once.
template <bool kWeightDecay, bool kMomentum, bool kNesterov, class T, class C = compute_t<T>>
__global__ void sgd_step_kernel(T* p, const T* g, T* buf, int64_t n, SgdStep<C> s) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    C pi = widen(p[i]);
    if constexpr (kMomentum) {
      C bi = widen(buf[i]);
      cpu::detail::sgd_update<kWeightDecay, true, kNesterov>(pi, widen(g[i]), bi, s);
      buf[i] = narrow<T>(bi);
    } else {
      C unused{};
      cpu::detail::sgd_update<kWeightDecay, false, false>(pi, widen(g[i]), unused, s);
    }
    p[i] = narrow<T>(pi);
  }
}

template <bool kL2, bool kDecoupled, class T, class C = compute_t<T>>
__global__ void adam_step_kernel(T* p, const T* g, T* m, T* v, int64_t n, AdamStep<C> s) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    C pi = widen(p[i]), mi = widen(m[i]), vi = widen(v[i]);
    cpu::detail::adam_update<kL2, kDecoupled>(pi, widen(g[i]), mi, vi, s);
    p[i] = narrow<T>(pi);
    m[i] = narrow<T>(mi);
    v[i] = narrow<T>(vi);
  }
}

}  // namespace detail

template <FloatingElement T>
void sgd_step(T* p, const T* g, T* momentum_buf, int64_t n, const SgdStep<compute_t<T>>& s, void* stream) {
  if (n == 0) return;
  cpu::detail::with_flags(
      [&](auto decay, auto momentum, auto nesterov) {
        detail::sgd_step_kernel<decltype(decay)::value, decltype(momentum)::value, decltype(nesterov)::value>
            <<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(p, g, momentum_buf, n, s);
      },
      s.has_weight_decay, s.has_momentum, s.nesterov && s.has_momentum);
  detail::check_launch("sgd_step");
}

template <FloatingElement T>
void adam_step(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<compute_t<T>>& s, void* stream) {
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
  template void sgd_step<T>(T*, const T*, T*, int64_t, const SgdStep<compute_t<T>>&, void*); \
  template void adam_step<T>(T*, const T*, T*, T*, int64_t, const AdamStep<compute_t<T>>&, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
