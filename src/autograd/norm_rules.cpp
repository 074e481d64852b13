// Backward rules of layer_norm, rms_norm (op/normalization.hpp) and dropout (op/dropout.hpp),
// written with global ops like those of rules.cpp, and the explicit instantiations of
// autograd/norm_grad.hpp.
//
// Norms: while no mesh axis splits the last axis (in x or g), the fused ops of norm_grad.hpp
// (one kernel for dx, one for the weight's column sums; under a batch split the latter is
// P(sum)). A split last axis needs row sums across ranks: the composed formulas, with
// xhat = (x - mean) rstd recomputed by the forward's own partial statistics and the two row
// sums as P(sum) (..., 1) tensors, so the axis is never gathered (layer_norm: 4 all-reduces of
// R elements, the rows; rms_norm: 2; docs/operators.md):
//     dx = rstd (g w - mean(g w) - xhat mean(g w xhat))     (rms_norm: no mean(g w))
//     dweight = sum(g xhat) over the leading axes,  dbias = sum(g) over the leading axes.
// Dropout: dx = dropout(g, p, seed), the mask regenerated from (seed, index).
#include "norm_rules.hpp"

#include <bit>
#include <numeric>

#include "spsd/autograd/norm_grad.hpp"
#include "spsd/autograd/softmax_grad.hpp"
#include "spsd/op/cast.hpp"
#include "spsd/op/dropout.hpp"

namespace spsd::detail {

SPSD_FOR_EACH_FLOATING(SPSD_NORM_GRAD_INSTANCES, )

namespace {

// t summed over every axis but the last (a (C,) parameter's gradient).
template <FloatingElement T>
GlobalTensor<T> sum_leading(const GlobalTensor<T>& t) {
  std::vector<int64_t> axes(t.shape().ndim() - 1);
  std::iota(axes.begin(), axes.end(), int64_t{0});
  return axes.empty() ? t : spsd::sum(t, axes);
}

// The row mean of t along axis a, B on the mesh axes that split a: an all-reduce of the small
// (..., 1) tensor (left to the resolver, the next op could gather t instead).
template <FloatingElement T>
GlobalTensor<T> row_mean(const GlobalTensor<T>& t, int64_t a) {
  const auto inv_c = static_cast<compute_t<T>>(1.0 / static_cast<double>(t.shape()[a]));
  return spsd::mul(without_partials(spsd::sum(t, {a}, true), sbp::broadcast), inv_c);
}

// The split-axis gradients (dx, dweight) in T; the 16-bit types compute them in float.
template <bool Rms, FloatingElement T>
std::pair<GlobalTensor<T>, GlobalTensor<T>> split_norm_grads(const GlobalTensor<T>& x, const GlobalTensor<T>& w,
                                                             const GlobalTensor<T>& g, double eps) {
  if constexpr (is_half_v<T>) {
    const auto [dx, dw] = split_norm_grads<Rms>(spsd::cast<float>(x), spsd::cast<float>(w), spsd::cast<float>(g), eps);
    return {spsd::cast<T>(dx), spsd::cast<T>(dw)};
  } else {
    const int64_t a = x.shape().ndim() - 1;
    const auto [xc, rstd] = norm_statistics(without_partials(x, sbp::split(a)), a, eps, Rms);
    const GlobalTensor<T> xhat = spsd::mul(xc, rstd), gw = spsd::mul(g, w);
    GlobalTensor<T> inner = spsd::sub(gw, spsd::mul(xhat, row_mean(spsd::mul(gw, xhat), a)));
    if (!Rms) inner = spsd::sub(inner, row_mean(gw, a));
    return {spsd::mul(rstd, inner), sum_leading(spsd::mul(g, xhat))};
  }
}

template <bool Rms, FloatingElement T>
void norm_backward(const GradNode& node, const GlobalData& grad_out, GradList& grad_in) {
  const auto x = GlobalTensor<T>::from_data(node.inputs[0]), w = GlobalTensor<T>::from_data(node.inputs[1]);
  const auto g = GlobalTensor<T>::from_data(grad_out);
  const double eps = node.scalar.f;
  const int64_t a = x.shape().ndim() - 1;
  const auto wants = [&](size_t i) { return node.input_meta[i] != nullptr; };
  if (!Rms && wants(2)) grad_in[2] = sum_leading(g).data();
  if (!splits_axis(x.nd_sbp(), a) && !splits_axis(g.nd_sbp(), a)) {
    if (wants(0)) grad_in[0] = norm_grad_x<Rms>(x, w, g, eps).data();
    if (wants(1)) grad_in[1] = norm_grad_weight<Rms>(x, g, eps).data();
    return;
  }
  const auto [dx, dw] = split_norm_grads<Rms>(x, w, g, eps);
  if (wants(0)) grad_in[0] = dx.data();
  if (wants(1)) grad_in[1] = dw.data();
}

template <FloatingElement T>
void dropout_backward(const GradNode& node, const GlobalData& grad_out, GradList& grad_in) {
  const double p = DropoutDef::p_of(node.attrs);
  grad_in[0] = spsd::dropout(GlobalTensor<T>::from_data(grad_out), p, static_cast<uint64_t>(node.scalar.i)).data();
}

template <template <class> class F>
constexpr NamedBackward named(std::string_view op) {
  return {op, &F<float>::run, &F<double>::run, &F<bfloat16>::run, &F<float16>::run};
}
template <class T>
struct LayerNormRule {
  static void run(const GradNode& n, const GlobalData& g, GradList& in) { norm_backward<false, T>(n, g, in); }
};
template <class T>
struct RmsNormRule {
  static void run(const GradNode& n, const GlobalData& g, GradList& in) { norm_backward<true, T>(n, g, in); }
};
template <class T>
struct DropoutRule {
  static void run(const GradNode& n, const GlobalData& g, GradList& in) { dropout_backward<T>(n, g, in); }
};

}  // namespace

std::span<const NamedBackward> norm_backward_rules() {
  static const NamedBackward rules[] = {named<LayerNormRule>("layer_norm"), named<RmsNormRule>("rms_norm"),
                                        named<DropoutRule>("dropout")};
  return rules;
}

}  // namespace spsd::detail
