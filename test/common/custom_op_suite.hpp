#pragma once
// The user-defined op of examples/custom/bias_gelu.hpp on one placement (collective over its
// ranks), shared by test/sim/test_custom_ops.cpp (meshes {1}, {2}, {4}, {2, 2}) and
// test/mpi/test_custom_ops.cpp (the world's mesh, 2x2): x in every layout of the mesh (partial
// ones spread lopsidedly in double), b rotating through the layouts of a 1-d tensor; the output
// and the gradients of L = sum(y * r) against plain loops in double, as one process computes them.
//
// Tolerances: float rel 1e-4 + abs 1e-5; double rel 1e-10 + abs 1e-12 (norm_suite's).
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "boxing_suite.hpp"
#include "custom/bias_gelu.hpp"
#include "norm_suite.hpp"

namespace spsd_test {

// BiasGelu with a wrong rule planted before all-B: gelu is not linear, so P(sum) cannot pass
// through it, yet the resolver would take the rule (it needs no boxing) for a partial x.
struct PlantedPartialRule : examples::BiasGelu {
  static constexpr std::string_view name = "bias_gelu_planted_partial";
  static std::vector<spsd::Signature> signatures(std::span<const spsd::TensorMeta> in, const spsd::OpAttrs& attrs) {
    std::vector<spsd::Signature> t = BiasGelu::signatures(in, attrs);
    t.insert(t.end() - 1, spsd::Signature{{spsd::sbp::partial_sum, spsd::sbp::broadcast}, spsd::sbp::partial_sum});
    return t;
  }
};

// With validation on first dispatch (SPSD_CHECK_OPS), the planted rule is an Error at the op's
// first call, on every rank of the placement, naming the op and the row; and at every later call.
inline void check_planted_rule_refused(const spsd::Placement& p, Failures& f) {
  using namespace spsd;
  const NdSbp B(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  const auto x = ones<float>(Shape{4, 3}, p, B), b = ones<float>(Shape{3}, p, B);
  for (int call = 0; call < 2; ++call)
    expect_error(f, "the planted rule, call " + std::to_string(call), [&] { (void)call_op<PlantedPartialRule>(x, b); },
                 {"bias_gelu_planted_partial: its SBP signature table does not hold for its kernel (SPSD_CHECK_OPS=1",
                  "declared signature fails: bias_gelu_planted_partial (P(sum), B) -> P(sum) for (4, 3) float32, (3,) float32",
                  "reduced pieces"});
  try {  // the right table passes
    (void)examples::bias_gelu(x, b);
  } catch (const Error& e) {
    f.add(std::string("bias_gelu under SPSD_CHECK_OPS: ") + e.what());
  }
}

struct BiasGeluRef {
  std::vector<double> y, dx, db;
};

// gelu(x + b) over rows of C, and the gradients of sum(y * r).
inline BiasGeluRef ref_bias_gelu(const std::vector<double>& x, const std::vector<double>& b,
                                 const std::vector<double>& r) {
  const size_t C = b.size();
  BiasGeluRef out{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(C, 0.0)};
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = x[i] + b[i % C], cdf = 0.5 * (1 + std::erf(u / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * u * u) / std::sqrt(2 * std::numbers::pi);
    out.y[i] = u * cdf;
    out.dx[i] = r[i] * (cdf + u * pdf);
    out.db[i % C] += out.dx[i];
  }
  return out;
}

template <class T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

template <class T>
void check_bias_gelu(const spsd::Placement& p, Failures& f, uint64_t seed, int64_t stride) {
  using namespace spsd;
  const NdSbp B(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  for (const Shape& s : {Shape{6, 5}, Shape{2, 3, 7}}) {
    const int64_t C = s[s.ndim() - 1];
    const std::vector<T> xv = uniform_values<T>(s.numel(), seed, -3, 3), bv = uniform_values<T>(C, seed + 1, -1, 1),
                         rv = uniform_values<T>(s.numel(), seed + 2, -1, 1);
    const BiasGeluRef ref = ref_bias_gelu(to_double(xv), to_double(bv), to_double(rv));
    const std::vector<NdSbp> x_layouts = all_nd_sbps(p.mesh().ndim(), s.ndim()), b_layouts = all_nd_sbps(p.mesh().ndim(), 1);
    for (size_t k = 0; k < x_layouts.size(); k += stride) {
      const NdSbp &xl = x_layouts[k], &bl = b_layouts[k % b_layouts.size()];
      const std::string what = "bias_gelu " + s.to_string() + " x " + xl.to_string() + " b " + bl.to_string() + " " +
                               std::string(to_string(dtype_of<T>));
      try {
        // double: partial layouts with lopsided pieces; float: whole on one rank of each group.
        const auto in = [&](const Shape& shape, const std::vector<T>& v, const NdSbp& nd) {
          if constexpr (std::is_same_v<T, double>) return build_layout(Tensor<T>::from_vector(shape, v), {p, nd});
          else return from_host(Tensor<T>::from_vector(shape, v), p, nd);
        };
        GlobalTensor<T> x = in(s, xv, xl), b = in(Shape{C}, bv, bl);
        x.requires_grad_();
        b.requires_grad_();
        const GlobalTensor<T> y = examples::bias_gelu(x, b);
        expect_close(f, what + " y", y, ref.y);
        backward(sum(y * from_host(Tensor<T>::from_vector(s, rv), p, B)));
        expect_close(f, what + " dx", x.grad(), ref.dx);
        expect_close(f, what + " db", b.grad(), ref.db);
      } catch (const std::exception& e) {
        f.add(what + ": threw: " + e.what());
      }
    }
  }
}

// Every stride-th layout of x, float and double.
inline void run_custom_op_suite(const spsd::Placement& p, int64_t stride, Failures& f) {
  check_bias_gelu<double>(p, f, 71, stride);
  check_bias_gelu<float>(p, f, 72, stride);
}

}  // namespace spsd_test
