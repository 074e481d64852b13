#pragma once
// Fused optimizer updates (autograd/optim.hpp): one pass over a parameter's piece, its
// gradient and its state, instead of a chain of element-wise ops with a temporary each.
//
// The per-element formulas (sgd_update, adam_update) are SPSD_HOST_DEVICE: the cuda kernels
// (kernel/cuda/optim.hpp) run the same code. Each keeps the order of operations of the
// element-wise formulation it replaced, every term rounded to T, so the result is that one's
// up to contraction into fused multiply-adds (which the compiler may do here and not across
// separate ops): within a few ulps per step.
//
// bfloat16/float16 parameters (and their state, which has the parameter's dtype) load into
// float, update in float with float scalars, and round once per stored value.
//
// Aliasing: p, g and the state arrays are distinct, non-overlapping arrays of n elements.
#include <cmath>
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "spsd/core/config.hpp"
#include "spsd/core/instances.hpp"
#include "spsd/kernel/cpu/loop.hpp"

namespace spsd::kernel::cpu {

// SGD with PyTorch's semantics (no dampening), every scalar already in T:
//   d = g + weight_decay * p                          (has_weight_decay)
//   buf = momentum * buf + d;  d = nesterov ? d + momentum * buf : buf   (has_momentum)
//   p = p - lr * d
template <std::floating_point T>
struct SgdStep {
  T lr, momentum, weight_decay;
  bool has_momentum, has_weight_decay, nesterov;
};

// Adam and AdamW with the bias corrections folded into the step size and eps (Kingma & Ba,
// end of section 2): with c1 = 1 - beta1^t, c2 = 1 - beta2^t,
//   step_size = lr * sqrt(c2) / c1,  eps = eps * sqrt(c2)      (computed in double, then T)
//   g' = g + weight_decay * p                         (l2: Adam's weight decay)
//   m = beta1 * m + (1 - beta1) * g';  v = beta2 * v + (1 - beta2) * g' * g'
//   p = decay * p - step_size * m / (sqrt(v) + eps)   (decoupled: AdamW's decay = 1 - lr * wd)
template <std::floating_point T>
struct AdamStep {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, eps;
  T weight_decay;  // the L2 coefficient (used when l2)
  T decay;         // the decoupled factor (used when decoupled)
  bool l2, decoupled;
};

namespace detail {

// One element of sgd_step; buf is unused without momentum.
template <bool kWeightDecay, bool kMomentum, bool kNesterov, class T>
SPSD_HOST_DEVICE inline void sgd_update(T& p, T g, T& buf, const SgdStep<T>& s) {
  T d = g;
  if constexpr (kWeightDecay) d = d + p * s.weight_decay;
  if constexpr (kMomentum) {
    buf = buf * s.momentum + d;
    d = kNesterov ? d + buf * s.momentum : buf;
  }
  p = p - d * s.lr;
}

// One element of adam_step.
template <bool kL2, bool kDecoupled, class T>
SPSD_HOST_DEVICE inline void adam_update(T& p, T g, T& m, T& v, const AdamStep<T>& s) {
  if constexpr (kL2) g = g + p * s.weight_decay;
  m = m * s.beta1 + g * s.one_minus_beta1;
  v = v * s.beta2 + g * g * s.one_minus_beta2;
  const T decayed = kDecoupled ? p * s.decay : p;
  p = decayed - m * s.step_size / (std::sqrt(v) + s.eps);
}

// body(std::bool_constant<f0>{}, ...) for the runtime flags: the flags become template
// arguments, so the element loop has no branch.
template <class Body>
inline decltype(auto) with_flags(Body&& body) {
  return body();
}
template <class Body, class... Flags>
inline decltype(auto) with_flags(Body&& body, bool flag, Flags... rest) {
  const auto bound = [&](auto first) {
    return with_flags([&](auto... tail) { return body(first, tail...); }, rest...);
  };
  return flag ? bound(std::true_type{}) : bound(std::false_type{});
}

}  // namespace detail

// p[i] and, with momentum, momentum_buf[i] updated in place for i < n (momentum_buf may be
// null without momentum). A fresh buffer starts at zero: then buf = g exactly, PyTorch's first step.
template <FloatingElement T>
void sgd_step(T* p, const T* g, T* momentum_buf, int64_t n, const SgdStep<compute_t<T>>& s) {
  using C = compute_t<T>;
  detail::with_flags(
      [&](auto decay, auto momentum, auto nesterov) {
        if constexpr (decltype(momentum)::value) {
          detail::for_each_index<T>(n, [&](int64_t i) {
            C pi = detail::load(p[i]), bi = detail::load(momentum_buf[i]);
            detail::sgd_update<decltype(decay)::value, true, decltype(nesterov)::value>(pi, detail::load(g[i]), bi, s);
            p[i] = static_cast<T>(pi);
            momentum_buf[i] = static_cast<T>(bi);
          });
        } else {  // nesterov needs momentum: the flag is off here
          detail::for_each_index<T>(n, [&](int64_t i) {
            C pi = detail::load(p[i]), unused{};
            detail::sgd_update<decltype(decay)::value, false, false>(pi, detail::load(g[i]), unused, s);
            p[i] = static_cast<T>(pi);
          });
        }
      },
      s.has_weight_decay, s.has_momentum, s.nesterov && s.has_momentum);
}

// p[i], m[i] (first moment) and v[i] (second moment) updated in place for i < n.
template <FloatingElement T>
void adam_step(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<compute_t<T>>& s) {
  using C = compute_t<T>;
  detail::with_flags(
      [&](auto l2, auto decoupled) {
        detail::for_each_index<T>(n, [&](int64_t i) {
          C pi = detail::load(p[i]), mi = detail::load(m[i]), vi = detail::load(v[i]);
          detail::adam_update<decltype(l2)::value, decltype(decoupled)::value>(pi, detail::load(g[i]), mi, vi, s);
          p[i] = static_cast<T>(pi);
          m[i] = static_cast<T>(mi);
          v[i] = static_cast<T>(vi);
        });
      },
      s.l2, s.decoupled);
}

#define SPSD_CPU_OPTIM_INSTANCES(prefix, T)                                                      \
  prefix template void sgd_step<T>(T*, const T*, T*, int64_t, const SgdStep<compute_t<T>>&); \
  prefix template void adam_step<T>(T*, const T*, T*, T*, int64_t, const AdamStep<compute_t<T>>&);
SPSD_FOR_EACH_FLOATING(SPSD_CPU_OPTIM_INSTANCES, extern)

}  // namespace spsd::kernel::cpu
