#pragma once
// A user-defined global op, written outside the library (docs/custom_ops.md walks through it):
//   bias_gelu(x, b) = gelu(x + b), x (..., C), b (C): a linear layer's bias and activation in
// one pass over x instead of two (x + b, then gelu, each reading and writing the whole tensor).
//
// What spsd needs from it: a name, shape inference, the SBP table, a kernel on this rank's
// pieces, and a backward written with global ops. The rest (resolution, boxing, the cross-rank
// check, autograd recording) is the library's dispatch path, as for matmul.
#include <cmath>
#include <numbers>
#include <spsd/spsd.hpp>

namespace examples {

struct BiasGelu {
  static constexpr std::string_view name = "bias_gelu";

  static spsd::TensorMeta infer(std::span<const spsd::TensorMeta> in, const spsd::OpAttrs&) {
    SPSD_CHECK(in.size() == 2, name, "takes x and b, got ", in.size(), " inputs");
    const spsd::Shape &x = in[0].shape, &b = in[1].shape;
    SPSD_CHECK(x.ndim() >= 1 && b.ndim() == 1 && b[0] == x[x.ndim() - 1], name,
               "needs x (..., C) and b (C), got x ", x, " and b ", b);
    SPSD_CHECK(in[0].dtype == in[1].dtype && spsd::is_floating(in[0].dtype), name,
               "needs x and b of one floating type, got ", in[0].dtype, " and ", in[1].dtype);
    return in[0];
  }

  // Element-wise in x, so any split of x's leading axes keeps b whole (B); splitting C splits b
  // alike. gelu is not linear, so no partial layout passes through: a P(sum) x is reduced first.
  static std::vector<spsd::Signature> signatures(std::span<const spsd::TensorMeta> in, const spsd::OpAttrs&) {
    using namespace spsd;
    const int64_t last = in[0].shape.ndim() - 1;
    std::vector<Signature> t;
    for (int64_t d = 0; d < last; ++d) t.push_back({{sbp::split(d), sbp::broadcast}, sbp::split(d)});
    t.push_back({{sbp::split(last), sbp::split(0)}, sbp::split(last)});
    t.push_back(uniform_signature(2, sbp::broadcast));
    return t;
  }

  // On this rank's pieces: under every signature above, b's piece holds exactly the columns of
  // x's piece, so the column of element i is i % (piece's C).
  template <spsd::FloatingElement T>
  static void cpu_kernel(const spsd::KernelArgs& k) {
    using C = spsd::compute_t<T>;  // float for bfloat16 and float16
    const T *x = k.in<T>(0), *b = k.in<T>(1);
    T* y = k.out_as<T>();
    const int64_t n = k.out_shape.numel(), cols = k.inputs[1].shape.numel();
    for (int64_t i = 0; i < n; ++i) {
      const C u = static_cast<C>(x[i]) + static_cast<C>(b[i % cols]);
      y[i] = static_cast<T>(C(0.5) * u * (C(1) + std::erf(u * C(1 / std::numbers::sqrt2))));
    }
  }
  // No cuda_kernel: on a cuda placement the op is an spsd::Error naming it.

  // d/du gelu(u) = Phi(u) + u phi(u), u = x + b; b's gradient sums over the rows (sum_to).
  // Global ops: the gradients take their layouts from the signatures, like any result.
  template <spsd::FloatingElement T>
  static void backward(const spsd::GradArgs<T>& a) {
    using namespace spsd;
    using C = compute_t<T>;
    const GlobalTensor<T> u = a.x(0) + a.x(1);
    const GlobalTensor<T> cdf = (erf(u * C(1 / std::numbers::sqrt2)) + C(1)) * C(0.5);
    const GlobalTensor<T> pdf = exp(u * u * C(-0.5)) * C(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    const GlobalTensor<T> gu = a.g() * (cdf + u * pdf);
    if (a.wants(0)) a.set(0, gu);
    if (a.wants(1)) a.set(1, sum_to(gu, a.shape(1)));
  }
};

// The op's function, as the library's are: call_op runs it on the dispatch path.
template <spsd::FloatingElement T>
spsd::GlobalTensor<T> bias_gelu(const spsd::GlobalTensor<T>& x, const spsd::GlobalTensor<T>& b) {
  return spsd::call_op<BiasGelu>(x, b);
}

}  // namespace examples
