#pragma once
// dropout(x, p, seed): each element kept with probability 1 - p and scaled by 1 / (1 - p),
// the others 0. The mask depends only on (seed, the element's global row-major index)
// (kernel/cpu/dropout.hpp, Philox like randn), so the same elements drop whatever the layout,
// the mesh or the number of ranks, and on cpu and cuda alike.
//
// Every layout is local: each rank draws its piece's mask from the global indices. 1-d table
//     S(d) -> S(d) for every d;  P(sum) -> P(sum);  P(max) -> P(max);  P(min) -> P(min);  B -> B
// (every piece of a partial has the whole shape and takes the same mask; a mask of 0 or a
// positive scale commutes with the sum, the max and the min). 0 bytes communicated.
//
// p must lie in [0, 1); p == 0 returns x itself (no copy, no node: nothing is dropped).
// Backward: g * mask / (1 - p), which is dropout(g, p, seed) itself: the rule regenerates the
// mask from (seed, index) instead of keeping it, so forward stores nothing (a saved mask would
// cost a tensor the size of x per layer until backward; the regeneration is one Philox call
// per element, the forward's cost). The seed is the op's scalar operand, so a new seed per
// step adds no resolution cache entry.
#include <bit>
#include <cmath>
#include <string>

#include "spsd/core/instances.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

struct DropoutDef {
  static constexpr std::string_view name = "dropout";

  // attrs = [the bits of p]; the scalar is the seed.
  static double p_of(const OpAttrs& attrs) { return std::bit_cast<double>(attrs[0]); }

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(is_floating(in[0].dtype), name, "is defined for floating tensors only, x is ", in[0].dtype,
               " of shape ", in[0].shape);
    const double p = attrs.size() == 1 ? p_of(attrs) : -1;
    SPSD_CHECK(p >= 0 && p < 1, name, "p must lie in [0, 1), got p = ", p);
    return in[0];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d) t.push_back(uniform_signature(1, sbp::split(d)));
    for (const Sbp& partial : {sbp::partial_sum, sbp::partial_max, sbp::partial_min})
      t.push_back(uniform_signature(1, partial));
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }

  static std::string attrs_text(const OpAttrs& attrs) { return "p=" + std::to_string(p_of(attrs)); }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>) {
      const double p = p_of(k.attrs);
      kernel::dropout<T>(k.target, k.in<T>(0), k.out_as<T>(), k.out_box, k.out_global.shape,
                         static_cast<uint64_t>(k.scalar.i), kernel::cpu::dropout_threshold(p), 1.0 / (1.0 - p));
    }
  }
};

}  // namespace detail

// Keeps each element with probability 1 - p, scaled by 1 / (1 - p); the mask follows seed.
template <Element T>
GlobalTensor<T> dropout(const GlobalTensor<T>& x, double p, uint64_t seed) {
  const OpAttrs attrs = {std::bit_cast<int64_t>(p)};
  // Checked here too: p == 0 returns before the op would.
  detail::DropoutDef::infer(std::array{TensorMeta{x.shape(), dtype_of<T>}}, attrs);
  if (p == 0) return x;
  detail::check_not_capturing("dropout", "each call takes a new seed, and a replay would repeat the captured mask; "
                              "compile with dropout 0 or leave the step eager");
  return call_op<detail::DropoutDef>(attrs, Scalar::of(static_cast<int64_t>(seed)), x);
}

// Compiled into the library (core/instances.hpp).
#define SPSD_DROPOUT_INSTANCES(prefix, T) prefix template GlobalTensor<T> dropout<T>(const GlobalTensor<T>&, double, uint64_t);
SPSD_FOR_EACH_ELEMENT(SPSD_DROPOUT_INSTANCES, extern)

}  // namespace spsd
