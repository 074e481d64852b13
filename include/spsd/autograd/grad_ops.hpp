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
//   pick_grad(g (N), labels (N), C)  -> (N, C): g[i] at [i, labels[i]], 0 elsewhere
//       S(0), S(0) -> S(0);  P(sum), B -> P(sum);  B, B -> B
// The kernels are cpu loops; on cuda placements run_op runs them on host copies (kHostKernelOnly).
#include <cmath>
#include <string_view>

#include "spsd/kernel/cpu/loop.hpp"
#include "spsd/op/broadcasting.hpp"
#include "spsd/op/dispatch.hpp"

namespace spsd::detail::grad_ops {

using kernel::cpu::UnaryOp;

inline const Sbp* const kPartials[] = {&sbp::partial_sum, &sbp::partial_max, &sbp::partial_min};

// Which value f' reads: the output y where that is cheaper (exp, tanh, sigmoid, sqrt, relu).
constexpr bool reads_output(UnaryOp k) {
  return k == UnaryOp::kExp || k == UnaryOp::kTanh || k == UnaryOp::kSigmoid || k == UnaryOp::kSqrt ||
         k == UnaryOp::kRelu;
}

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
  }
  return "unary_grad";
}

// d f / d x as a function of the saved value s (x or y, see reads_output).
template <UnaryOp K, std::floating_point T>
inline T derivative(T s) {
  if constexpr (K == UnaryOp::kRelu) return s > T(0) ? T(1) : T(0);
  else if constexpr (K == UnaryOp::kExp) return s;
  else if constexpr (K == UnaryOp::kLog) return T(1) / s;
  else if constexpr (K == UnaryOp::kTanh) return T(1) - s * s;
  else if constexpr (K == UnaryOp::kSigmoid) return s * (T(1) - s);
  else if constexpr (K == UnaryOp::kSqrt) return T(0.5) / s;
  else if constexpr (K == UnaryOp::kAbs) return s > T(0) ? T(1) : s < T(0) ? T(-1) : T(0);
  else if constexpr (K == UnaryOp::kNeg) return T(-1);
  else {  // gelu, tanh form (kernel::cpu::detail::gelu_tanh)
    constexpr T c = T(0.7978845608028654), a = T(0.044715);
    const T t = std::tanh(c * (s + a * s * s * s));
    return T(0.5) * (T(1) + t) + T(0.5) * s * (T(1) - t * t) * c * (T(1) + T(3) * a * s * s);
  }
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

  static constexpr bool kHostKernelOnly = true;  // run_op stages device pieces through the host
  template <Element T>
  static void kernel(const KernelArgs& k) {
    if constexpr (std::is_floating_point_v<T>)
      kernel::cpu::detail::map2([](T s, T g) { return derivative<K, T>(s) * g; }, k.in<T>(0), k.in<T>(1),
                                k.out_as<T>(), k.out_shape.numel());
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

  // x - m is exactly 0 iff x == m (finite values), so the broadcasting sub kernel does the work.
  static constexpr bool kHostKernelOnly = true;  // run_op stages device pieces through the host
  template <Element T>
  static void kernel(const KernelArgs& k) {
    T* out = k.out_as<T>();
    kernel::cpu::binary<T>(kernel::cpu::BinaryOp::kSub, k.in<T>(0), k.inputs[0].shape, k.in<T>(1), k.inputs[1].shape,
                           out, k.out_shape);
    kernel::cpu::detail::map1([](T d) { return d == T(0) ? T(1) : T(0); }, out, out, k.out_shape.numel());
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

  // Row by row of the output's last axis: each row is a copy or a fill (stretched last axis).
  static constexpr bool kHostKernelOnly = true;  // run_op stages device pieces through the host
  template <Element T>
  static void kernel(const KernelArgs& k) {
    const Shape& out = k.out_shape;
    const int64_t r = out.ndim(), n = r ? out[r - 1] : 1;
    if (out.numel() == 0) return;
    const std::vector<int64_t> strides = kernel::cpu::detail::broadcast_strides(k.inputs[0].shape, r);
    const T* in = k.in<T>(0);
    T* o = k.out_as<T>();
    std::vector<int64_t> idx(r, 0);
    for (int64_t row = 0, rows = out.numel() / n; row < rows; ++row) {
      int64_t offset = 0;
      for (int64_t d = 0; d + 1 < r; ++d) offset += idx[d] * strides[d];
      const int64_t step = r ? strides[r - 1] : 0;
      for (int64_t j = 0; j < n; ++j) o[row * n + j] = in[offset + j * step];
      for (int64_t d = r - 2; d >= 0 && ++idx[d] == out[d]; --d) idx[d] = 0;
    }
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

  static constexpr bool kHostKernelOnly = true;  // run_op stages device pieces through the host
  template <Element T>
  static void kernel(const KernelArgs& k) {
    T* out = k.out_as<T>();
    const int64_t rows = k.out_shape[0], dim = k.out_shape[1], row_begin = k.out_box.begin[0];
    std::fill(out, out + rows * dim, T(0));
    const T* g = k.in<T>(0);
    const int64_t* idx = k.in<int64_t>(1);
    for (int64_t i = 0, n = k.inputs[1].shape.numel(); i < n; ++i) {
      const int64_t r = idx[i] - row_begin;
      if (r < 0 || r >= rows) continue;  // another rank's row, or out of range (a NaN row forward)
      for (int64_t j = 0; j < dim; ++j) out[r * dim + j] += g[i * dim + j];
    }
  }
};

struct PickGradDef {
  static constexpr std::string_view name = "pick_grad";

  // attrs = [C]
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs& attrs) {
    SPSD_CHECK(attrs.size() == 1 && in[0].shape.ndim() == 1 && in[0].shape == in[1].shape, name,
               "needs g (N) and labels (N), got ", in[0].shape, " and ", in[1].shape);
    return {Shape{in[0].shape[0], attrs[0]}, in[0].dtype};
  }

  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    const Sbp &B = sbp::broadcast, &P = sbp::partial_sum;
    return {{{sbp::split(0), sbp::split(0)}, sbp::split(0)}, {{P, B}, P}, uniform_signature(2, B)};
  }

  static constexpr bool kHostKernelOnly = true;  // run_op stages device pieces through the host
  template <Element T>
  static void kernel(const KernelArgs& k) {
    T* out = k.out_as<T>();
    const int64_t n = k.out_shape[0], c = k.out_shape[1];
    std::fill(out, out + n * c, T(0));
    const T* g = k.in<T>(0);
    const int64_t* labels = k.in<int64_t>(1);
    for (int64_t i = 0; i < n; ++i)
      if (labels[i] >= 0 && labels[i] < c) out[i * c + labels[i]] = g[i];
  }
};

}  // namespace spsd::detail::grad_ops

namespace spsd::detail {

template <kernel::cpu::UnaryOp K, Element T>
GlobalTensor<T> unary_grad(const GlobalTensor<T>& saved, const GlobalTensor<T>& g) {
  return apply<grad_ops::UnaryGradDef<K>>({}, {}, saved, g);
}
template <Element T>
GlobalTensor<T> mask_eq(const GlobalTensor<T>& x, const GlobalTensor<T>& m) {
  return apply<grad_ops::MaskEqDef>({}, {}, x, m);
}
template <Element T>
GlobalTensor<T> expand(const GlobalTensor<T>& g, const Shape& shape) {
  return g.shape() == shape ? g : apply<grad_ops::ExpandDef>(shape.dims(), {}, g);
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
