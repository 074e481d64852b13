// Gradient clipping (autograd/clip_grad.hpp), composed of global ops.
#include "spsd/autograd/clip_grad.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include "spsd/op/cast.hpp"
#include "spsd/op/compare.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/op/reduce.hpp"
#include "spsd/op/shape_ops.hpp"
#include "spsd/op/where.hpp"

namespace spsd {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// p's gradient in p's own layout; a gradient backward left in another (partial, under
// NoGradSync or without early reduction) is boxed and kept, so the optimizer's step finds it done.
template <FloatingElement T>
GlobalTensor<T> gradient_in_layout(const GlobalTensor<T>& p) {
  GlobalTensor<T> g = p.grad();
  if (g.placement() == p.placement() && g.nd_sbp() == p.nd_sbp()) return g;
  g = g.to_global(p.placement(), p.nd_sbp());
  p.autograd_meta()->grad = g.data();
  return g;
}

// sum |g|^p over every element (max |g| for p = inf) as a 0-d double: partial on the mesh
// axes g is split along, so nothing is communicated. 16-bit gradients are widened first.
template <FloatingElement T>
GlobalTensor<double> norm_part(const GlobalTensor<T>& g, double p) {
  if constexpr (is_half_v<T>) {
    return norm_part(cast<float>(g), p);
  } else {
    const GlobalTensor<T> a = spsd::abs(g);
    const GlobalTensor<T> r = p == kInf ? spsd::max(a) : p == 1 ? sum(a) : p == 2 ? sum(g * g) : sum(spsd::pow(a, T(p)));
    return cast<double>(r);
  }
}

// The parts of one placement, reduced into one number: one concat, one reduction, one item().
// Each part is first put in the layout partial on every mesh axis (from B a local step: the
// value kept on one rank for a sum, on all for a max), so that concat and the reduction stay
// partial and item() is the one collective.
double combine(const std::vector<GlobalTensor<double>>& parts, double p) {
  const Placement& placement = parts.front().placement();
  const NdSbp partial(std::vector<Sbp>(placement.mesh().ndim(), p == kInf ? sbp::partial_max : sbp::partial_sum));
  std::vector<GlobalTensor<double>> column;
  column.reserve(parts.size());
  for (const GlobalTensor<double>& part : parts) column.push_back(reshape(part.to_global(partial), Shape{1}));
  const GlobalTensor<double> all = column.size() == 1 ? column.front() : concat(column, 0);
  return (p == kInf ? spsd::max(all) : sum(all)).item();
}

template <FloatingElement T>
void check_params(std::string_view op, const std::vector<GlobalTensor<T>>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    SPSD_CHECK(params[i].defined(), op, "parameter ", i, " is an undefined tensor");
    SPSD_CHECK(params[i].requires_grad() && params[i].is_leaf(), op, "parameter ", i, " (", params[i].describe(),
               ") must be a leaf that requires grad");
  }
}

}  // namespace

template <FloatingElement T>
double clip_grad_norm_(const std::vector<GlobalTensor<T>>& params, double max_norm, double norm_type) {
  constexpr std::string_view op = "clip_grad_norm_";
  // Its scale is read on the host: inside a compiled step it replays as a whole.
  const detail::HostStep replayed(op, [=] { clip_grad_norm_(params, max_norm, norm_type); });
  SPSD_CHECK(max_norm >= 0, op, "max_norm must be >= 0, got ", max_norm);
  SPSD_CHECK(norm_type > 0, op, "norm_type must be > 0 (or infinity for the max norm), got ", norm_type);
  check_params(op, params);
  NoGradGuard no_grad;
  // Per placement, in the order their first parameter comes: the same on every rank.
  std::vector<std::pair<Placement, std::vector<GlobalTensor<double>>>> parts;
  std::vector<GlobalTensor<T>> grads(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].has_grad()) continue;
    grads[i] = gradient_in_layout(params[i]);
    if (grads[i].shape().numel() == 0) continue;
    auto it = std::find_if(parts.begin(), parts.end(), [&](const auto& e) { return e.first == params[i].placement(); });
    if (it == parts.end()) {
      parts.emplace_back(params[i].placement(), std::vector<GlobalTensor<double>>{});
      it = std::prev(parts.end());
    }
    it->second.push_back(norm_part(grads[i], norm_type));
  }
  double total = 0;
  for (const auto& [placement, of_placement] : parts) {
    const double v = combine(of_placement, norm_type);
    total = norm_type == kInf ? std::max(total, v) : total + v;
    if (std::isnan(v)) total = v;  // std::max would drop it
  }
  if (norm_type != kInf) total = std::pow(total, 1 / norm_type);
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1) return total;  // torch multiplies by min(coef, 1): here a no-op
  const auto scale = static_cast<compute_t<T>>(coef);
  for (size_t i = 0; i < params.size(); ++i)
    if (grads[i].defined()) params[i].autograd_meta()->grad = (grads[i] * scale).data();
  return total;
}

template <FloatingElement T>
void clip_grad_value_(const std::vector<GlobalTensor<T>>& params, double clip_value) {
  constexpr std::string_view op = "clip_grad_value_";
  const detail::HostStep replayed(op, [=] { clip_grad_value_(params, clip_value); });
  SPSD_CHECK(clip_value >= 0, op, "clip_value must be >= 0, got ", clip_value);
  check_params(op, params);
  NoGradGuard no_grad;
  const auto hi = static_cast<compute_t<T>>(clip_value);
  for (const GlobalTensor<T>& p : params) {
    if (!p.has_grad()) continue;
    const GlobalTensor<T> g = gradient_in_layout(p);
    const GlobalTensor<T> upper = masked_fill(g, g > hi, hi);
    p.autograd_meta()->grad = masked_fill(upper, upper < -hi, -hi).data();
  }
}

SPSD_FOR_EACH_FLOATING(SPSD_CLIP_GRAD_INSTANCES, )

}  // namespace spsd
