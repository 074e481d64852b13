#pragma once
// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_, over global
// parameters of any layouts and placements.
//
// clip_grad_norm_(params, max_norm, norm_type) returns the norm of all the gradients together
// (as if concatenated into one vector) and, where it exceeds max_norm, scales every gradient by
// max_norm / (norm + 1e-6) (torch's formula; a NaN or inf norm scales too, as torch does).
// The norm never gathers a gradient: each gradient is first boxed into its parameter's layout
// (a partial gradient is reduced: what the optimizer's step() would do, and it then finds it
// done), each parameter's sum of |g|^p (max |g| for the inf norm) is one reduction over all its
// axes whose result is partial on the split mesh axes, the results on one placement are summed
// (max) as partial values, and each placement then costs one collective of one element
// (item()). Sums are in double (16-bit gradients are widened to float first). Every rank gets
// the same norm; it equals one process's up to the summation order.
//
// clip_grad_value_(params, clip_value) clamps every gradient element into [-clip_value,
// clip_value] (NaN stays NaN, as torch.clamp).
//
// Both are collective over the world (every rank calls them with the same parameters), skip
// parameters without a gradient, and replace each gradient by the clipped one (what grad()
// returns from then on, for every copy of the parameter).
#include <vector>

#include "spsd/autograd/node.hpp"
#include "spsd/core/instances.hpp"

namespace spsd {

// Scales the gradients so that their total norm_type-norm (infinity: the max norm) is at most
// max_norm, and returns that norm before clipping (above). Error: max_norm < 0, norm_type <= 0,
// or a parameter that is undefined or not a leaf that requires grad.
template <FloatingElement T>
double clip_grad_norm_(const std::vector<GlobalTensor<T>>& params, double max_norm, double norm_type = 2);

// Clamps every gradient element into [-clip_value, clip_value] (above). Error: clip_value < 0,
// or a parameter that is undefined or not a leaf that requires grad.
template <FloatingElement T>
void clip_grad_value_(const std::vector<GlobalTensor<T>>& params, double clip_value);

// Compiled into the library (core/instances.hpp).
#define SPSD_CLIP_GRAD_INSTANCES(prefix, T)                                                         \
  prefix template double clip_grad_norm_<T>(const std::vector<GlobalTensor<T>>&, double, double); \
  prefix template void clip_grad_value_<T>(const std::vector<GlobalTensor<T>>&, double);
SPSD_FOR_EACH_FLOATING(SPSD_CLIP_GRAD_INSTANCES, extern)

}  // namespace spsd
