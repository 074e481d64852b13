#pragma once
// Global ops that only backward rules need: each is a plain op (infer, 1-d table, local kernel)
// taking the dispatch path, so gradients get their layouts from signatures like any result.
//
//   unary_grad<K>(saved, g)    f'(.) * g per element, saved = x or y (whichever f' is cheaper from)
//       S(d), S(d) -> S(d);  B, P(sum) -> P(sum) (linear in g);  B, B -> B
//   mask_eq(x, m)              1 where x == m (m broadcasts), else 0: where max/min were reached
//       numpy-broadcast splits (as add);  B, B -> B
//   expand(g, shape)           g broadcast to shape (the gradient of a reduction)
//       numpy-broadcast splits;  P(op) -> P(op) (copying commutes with reducing);  B -> B
//   embedding_grad(g (..., E), indices (...), V)  -> (V, E): rows of g added at their index
//       S(i), S(i) -> P(sum) (data parallel: each rank adds its rows);  S(last), B -> S(1);
//       P(sum), B -> P(sum);  B, B -> B
//   pick_grad(g (...), labels (...), C)  -> (..., C): g[r] at [r, labels[r]], 0 elsewhere
//       S(d), S(d) -> S(d) for every axis d of g;  P(sum), B -> P(sum);  B, B -> B
// Each kernel runs where the pieces live (kernel/any_device.hpp): cpu loops, or CUDA kernels on
// the rank's compute stream, with no host copy.
#include <string_view>

#include "spsd/kernel/any_device.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd::detail::grad_ops {

using kernel::cpu::UnaryOp;

inline const Sbp* const kPartials[] = {&sbp::partial_sum, &sbp::partial_max, &sbp::partial_min};

constexpr std::string_view unary_grad_name(UnaryOp k) {
  switch (k) {
    case UnaryOp::kRelu: return "relu_grad";
    case UnaryOp::kGelu: return "gelu_grad";
    case UnaryOp::kExp: return "exp_grad";
    case UnaryOp::kLog: return "log_grad";
    case UnaryOp::kTanh: return "tanh_grad";
    case UnaryOp::kSigmoid: return "sigmoid_grad";
    case UnaryOp::kSqrt: return "sqrt_grad";
    case UnaryOp::kAbs: return "abs_grad";
    case UnaryOp::kNeg: return "neg_grad";
    case UnaryOp::kRsqrt: return "rsqrt_grad";
    case UnaryOp::kErf: return "erf_grad";
    case UnaryOp::kSilu: return "silu_grad";
    case UnaryOp::kGeluTanh: return "gelu_tanh_grad";
  }
  return "unary_grad";
}

template <UnaryOp K>
struct UnaryGradDef {
  static constexpr std::string_view name = unary_grad_name(K);

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(in[0].shape == in[1].shape && in[0].dtype == in[1].dtype && is_floating(in[0].dtype), name,
               "needs a saved value and a gradient of one floating type and shape, got ", in[0].to_string(), " and ",
               in[1].to_string());
    return in[1];
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d) t.push_back(uniform_signature(2, sbp::split(d)));
    t.push_back({{sbp::broadcast, sbp::partial_sum}, sbp::partial_sum});
    t.push_back(uniform_signature(2, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (FloatingElement<T>)
      kernel::unary_grad<T>(k.target, K, k.in<T>(0), k.in<T>(1), k.out_as<T>(), k.out_shape.numel());
  }
};

struct MaskEqDef {
  static constexpr std::string_view name = "mask_eq";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) {
    SPSD_CHECK(in[0].dtype == in[1].dtype, name, "dtypes differ: ", in[0].to_string(), " and ", in[1].to_string());
    return {broadcast_shapes(name, in[0].shape, in[1].shape), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t = broadcast_split_signatures(in, infer(in, attrs).shape);
    t.push_back(uniform_signature(2, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::equal_mask<T>(k.target, k.in<T>(0), k.inputs[0].shape, k.in<T>(1), k.inputs[1].shape, k.out_as<T>(),
                          k.out_shape);
  }
};

struct ExpandDef {
  static constexpr std::string_view name = "expand";

  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const Shape to(attrs);
    SPSD_CHECK(broadcast_shapes(name, in[0].shape, to) == to, name, "cannot expand ", in[0].shape, " to ", to);
    return {to, in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    std::vector<Signature> t = broadcast_split_signatures(in, Shape(attrs));
    for (const Sbp* p : kPartials) t.push_back(uniform_signature(1, *p));
    t.push_back(uniform_signature(1, sbp::broadcast));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::broadcast_to<T>(k.target, k.in<T>(0), k.inputs[0].shape, k.out_as<T>(), k.out_shape);
  }
};

struct EmbeddingGradDef {
  static constexpr std::string_view name = "embedding_grad";

  // attrs = [V]
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    const Shape &g = in[0].shape, &idx = in[1].shape;
    SPSD_CHECK(attrs.size() == 1 && g.ndim() == idx.ndim() + 1, name, "needs g (..., E) over indices (...), got ", g,
               " and ", idx);
    for (int64_t d = 0; d < idx.ndim(); ++d) SPSD_CHECK(g[d] == idx[d], name, "g ", g, " does not match indices ", idx);
    return {Shape{attrs[0], g[g.ndim() - 1]}, in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    const int64_t ni = in[1].shape.ndim();
    std::vector<Signature> t;
    for (int64_t i = 0; i < ni; ++i) t.push_back({{sbp::split(i), sbp::split(i)}, P});
    t.push_back({{sbp::split(ni), B}, sbp::split(1)});
    t.push_back({{P, B}, P});
    t.push_back(uniform_signature(2, B));
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::embedding_grad<T>(k.target, k.in<T>(0), k.in<int64_t>(1), k.inputs[1].shape.numel(), k.out_box.begin[0],
                              k.out_shape[0], k.out_shape[1], k.out_as<T>());
  }

  static void input_domains(std::span<ValidationInput> in, const OpAttrs& attrs) {
    in[1].domain = InputDomain::kIndex;
    in[1].bound = attrs[0];
  }
};

struct PickGradDef {
  static constexpr std::string_view name = "pick_grad";

  // attrs = [C]
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(attrs.size() == 1 && in[0].shape == in[1].shape, name, "needs g (...) and labels (...), got ",
               in[0].shape, " and ", in[1].shape);
    std::vector<int64_t> dims = in[0].shape.dims();
    dims.push_back(attrs[0]);
    return {Shape(std::move(dims)), in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d) t.push_back(uniform_signature(2, sbp::split(d)));
    t.insert(t.end(), {{{P, B}, P}, uniform_signature(2, B)});
    return t;
  }

  template <Element T>
  static void kernel(const KernelArgs& k) {
    kernel::pick_grad<T>(k.target, k.in<T>(0), k.in<int64_t>(1), k.inputs[0].shape.numel(), k.attrs[0],
                         k.out_as<T>());
  }

  static void input_domains(std::span<ValidationInput> in, const OpAttrs& attrs) {
    in[1].domain = InputDomain::kIndex;
    in[1].bound = attrs[0];
  }
};

}  // namespace spsd::detail::grad_ops

namespace spsd::detail {

template <kernel::cpu::UnaryOp K, Element T>
GlobalTensor<T> unary_grad(const GlobalTensor<T>& saved, const GlobalTensor<T>& g) {
  return call_op<grad_ops::UnaryGradDef<K>>({}, {}, saved, g);
}
template <Element T>
GlobalTensor<T> mask_eq(const GlobalTensor<T>& x, const GlobalTensor<T>& m) {
  return call_op<grad_ops::MaskEqDef>({}, {}, x, m);
}
template <Element T>
GlobalTensor<T> expand(const GlobalTensor<T>& g, const Shape& shape) {
  return g.shape() == shape ? g : call_op<grad_ops::ExpandDef>(shape.dims(), {}, g);
}
template <Element T>
GlobalTensor<T> embedding_grad(const GlobalTensor<T>& g, const GlobalTensor<int64_t>& indices, int64_t rows) {
  const InputRef refs[] = {input_ref(g), input_ref(indices)};
  return run_op<grad_ops::EmbeddingGradDef, T>(refs, {rows});
}
template <Element T>
GlobalTensor<T> pick_grad(const GlobalTensor<T>& g, const GlobalTensor<int64_t>& labels, int64_t classes) {
  const InputRef refs[] = {input_ref(g), input_ref(labels)};
  return run_op<grad_ops::PickGradDef, T>(refs, {classes});
}

}  // namespace spsd::detail
