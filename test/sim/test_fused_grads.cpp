// The backward-only forms under simulated ranks, against what they replace, written out here:
//   matmul with transpose flags (detail::matmul_transposed) vs matmul of transpose(...), every
//   pair of input layouts on 2 ranks;
//   a 2-d weight's gradient summed over the batch (detail::matmul_batch_summed) vs the sum of
//   the batched a^T b it replaces: values, result layout and bytes sent, every pair of layouts
//   on 2 ranks and a sample on 2x2, plus the gradients of x @ W and x @ W^T through backward;
//   the fused softmax / log_softmax / cross_entropy backward vs the composed formulas, with the
//   input rows split (S(0): the fused kernels), whole (B) and the softmax axis split (S(1): the
//   rules fall back to the composed formulas), float and double.
// Tolerances: double 1e-12, float 2e-6, relative to 1 + |reference|.
#include <catch2/catch.hpp>
#include <cmath>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

template <class T>
Tensor<T> normal_values(const Shape& shape, uint64_t seed, double scale = 1) {
  std::vector<T> v(shape.numel());
  for (int64_t i = 0; i < shape.numel(); ++i) v[i] = static_cast<T>(scale * philox::normal<double>(seed, static_cast<uint64_t>(i)));
  return Tensor<T>::from_vector(shape, std::move(v));
}

template <class T>
void compare(Failures& f, const std::string& what, const std::vector<T>& got, const std::vector<T>& want) {
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-12;
  if (got.size() != want.size()) return f.add(what + ": sizes differ");
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(double(got[i]) - double(want[i])) <= tol * (1 + std::abs(double(want[i]))))) {
      return f.add(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                   std::to_string(want[i]));
    }
}

std::vector<int64_t> swapped(const Shape& s) {
  std::vector<int64_t> d = s.dims();
  std::swap(d[d.size() - 1], d[d.size() - 2]);
  return d;
}

}  // namespace

TEST_CASE("matmul with transpose flags equals matmul of the transposed operands on every layout", "[autograd]") {
  // (op(a), op(b)) shapes; the stored operands are their transposes where flagged.
  const std::vector<std::pair<Shape, Shape>> cases = {{{3, 4}, {4, 2}}, {{2, 3, 4}, {4, 2}}, {{2, 4}, {3, 4, 5}}};
  Failures failures = spsd_test::on_simulated_ranks(2, [&](Failures& f) {
    const Placement p("cpu", {0, 1});
    for (const auto& [la, lb] : cases)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          const Tensor<double> ha = normal_values<double>(ta ? Shape(swapped(la)) : la, 1);
          const Tensor<double> hb = normal_values<double>(tb ? Shape(swapped(lb)) : lb, 2);
          for (const NdSbp& da : spsd_test::all_nd_sbps(1, la.ndim()))
            for (const NdSbp& db : spsd_test::all_nd_sbps(1, lb.ndim())) {
              const auto a = spsd_test::build_layout(ha, {p, da}), b = spsd_test::build_layout(hb, {p, db});
              const auto want = matmul(ta ? transpose(a, -1, -2) : a, tb ? transpose(b, -1, -2) : b).full();
              const auto got = detail::matmul_transposed(a, b, ta, tb).full();
              compare(f, "op(a) " + la.to_string() + " " + da.to_string() + (ta ? " a^T" : "") + ", op(b) " +
                             lb.to_string() + " " + db.to_string() + (tb ? " b^T" : ""),
                      got.to_vector(), want.to_vector());
            }
        }
    // Data parallel: x^T g with x and g S(0) is S(k) x S(k) -> P(sum), computed without a message.
    const auto x = spsd_test::build_layout(normal_values<double>({8, 3}, 3), {p, NdSbp(sbp::split(0))});
    const auto g = spsd_test::build_layout(normal_values<double>({8, 2}, 4), {p, NdSbp(sbp::split(0))});
    reset_comm_stats();
    const auto dw = detail::matmul_transposed(x, g, true, false);
    if (comm_stats().collectives != 0) f.add("x^T g communicated: " + comm_stats().to_string());
    if (!(dw.nd_sbp() == NdSbp(sbp::partial_sum))) f.add("x^T g is " + dw.nd_sbp().to_string() + ", not P(sum)");
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("a weight's gradient summed over the batch equals the batched a^T b summed, layout and bytes too",
          "[autograd]") {
  // (a, b) shapes: a (..., r, k), b (..., r, n), the same batch axes.
  const std::vector<std::pair<Shape, Shape>> cases = {{{4, 6, 3}, {4, 6, 2}}, {{2, 3, 4, 3}, {2, 3, 4, 5}}};
  int64_t checked = 0;
  for (const Shape& mesh : {Shape{2}, Shape{2, 2}}) {
    Failures failures = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& f) {
      const Placement p = spsd_test::mesh_placement(mesh);
      for (const auto& [sa, sb] : cases) {
        const Tensor<double> ha = normal_values<double>(sa, 5), hb = normal_values<double>(sb, 6);
        std::vector<int64_t> batch_axes(sa.ndim() - 2);
        for (size_t i = 0; i < batch_axes.size(); ++i) batch_axes[i] = static_cast<int64_t>(i);
        const std::vector<NdSbp> la = spsd_test::all_nd_sbps(mesh.ndim(), sa.ndim()),
                                 lb = spsd_test::all_nd_sbps(mesh.ndim(), sb.ndim());
        // Every pair on 2 ranks; every 23rd on 2x2 (a stride prime to the options' count).
        const size_t stride = mesh.ndim() == 1 ? 1 : 23;
        for (size_t k = 0; k < la.size() * lb.size(); k += stride) {
          const NdSbp &da = la[k / lb.size()], &db = lb[k % lb.size()];
          const auto a = spsd_test::build_layout(ha, {p, da}), b = spsd_test::build_layout(hb, {p, db});
          reset_comm_stats();
          const auto want = sum(detail::matmul_transposed(a, b, true, false), batch_axes);
          const CommStats want_sent = comm_stats();
          reset_comm_stats();
          const auto got = detail::matmul_batch_summed(a, b);
          const CommStats got_sent = comm_stats();
          const std::string what = "a " + sa.to_string() + " " + da.to_string() + ", b " + sb.to_string() + " " +
                                   db.to_string() + " on " + mesh.to_string();
          if (!(got.nd_sbp() == want.nd_sbp()))
            f.add(what + ": layout " + got.nd_sbp().to_string() + ", the composition gives " + want.nd_sbp().to_string());
          if (got_sent.bytes_sent != want_sent.bytes_sent)
            f.add(what + ": sent " + got_sent.to_string() + ", the composition " + want_sent.to_string());
          compare(f, what, got.full().to_vector(), want.full().to_vector());
          if (rank() == 0) ++checked;
        }
      }
      // Through backward: x @ W and x @ W^T (W stored (n, k)) against the same products with the
      // batch flattened into rows by hand (reshape: 2-d, so the rule takes the plain path).
      for (const NdSbp& dx : spsd_test::all_nd_sbps(mesh.ndim(), 3)) {
        for (const bool tw : {false, true}) {
          const Tensor<double> hx = normal_values<double>({4, 6, 3}, 7);
          const Tensor<double> hw = normal_values<double>(tw ? Shape{2, 3} : Shape{3, 2}, 8);
          const Tensor<double> hr = normal_values<double>({4, 6, 2}, 9);
          const auto r = from_host(hr, p, NdSbp(std::vector<Sbp>(mesh.ndim(), sbp::broadcast)));
          auto x = spsd_test::build_layout(hx, {p, dx});
          auto w = from_host(hw, p, NdSbp(std::vector<Sbp>(mesh.ndim(), sbp::broadcast))).requires_grad_();
          backward(sum(detail::matmul_transposed(x, w, false, tw) * r));
          auto w2 = from_host(hw, p, NdSbp(std::vector<Sbp>(mesh.ndim(), sbp::broadcast))).requires_grad_();
          backward(sum(detail::matmul_transposed(reshape(x, {24, 3}), w2, false, tw) * reshape(r, {24, 2})));
          compare(f, "dW of x " + dx.to_string() + (tw ? " @ W^T" : " @ W") + " on " + mesh.to_string(),
                  w.grad().full().to_vector(), w2.grad().full().to_vector());
        }
      }
    });
    INFO(failures.report());
    CHECK(failures.empty());
  }
  CHECK(checked > 100);
}

namespace {

template <class T>
void check_softmax_backward(Failures& f, const Placement& p, const NdSbp& layout, bool log) {
  const std::string what = std::string(log ? "log_softmax" : "softmax") + " " + std::string(to_string(dtype_of<T>)) + " x " +
                           layout.to_string();
  const Tensor<T> hx = normal_values<T>({6, 5}, 7, 3);
  const auto r = from_host(normal_values<T>({6, 5}, 8), p, NdSbp(sbp::broadcast));  // dL/dy
  auto x = spsd_test::build_layout(hx, {p, layout}).requires_grad_();
  reset_comm_stats();
  backward(sum((log ? log_softmax(x, 1) : softmax(x, 1)) * r));
  // Rows split: the fused kernel is local. (A B x is sliced into S(0) for the forward and its
  // gradient gathered back to B by the boxing's backward; a split axis takes all-reduces.)
  const bool rows = layout[0].is_split() && layout[0].axis() == 0;
  if (rows && comm_stats().collectives != 0) f.add(what + ": backward communicated " + comm_stats().to_string());
  // The composed formulas, on the same layout.
  const auto xd = spsd_test::build_layout(hx, {p, layout});
  const auto y = log ? log_softmax(xd, 1) : softmax(xd, 1);
  const auto want = log ? r - exp(y) * sum(r, {1}, true) : y * (r - sum(r * y, {1}, true));
  compare(f, what, x.grad().full().to_vector(), want.full().to_vector());
}

template <class T>
void check_cross_entropy_backward(Failures& f, const Placement& p, const NdSbp& layout) {
  const std::string what = "cross_entropy " + std::string(to_string(dtype_of<T>)) + " logits " + layout.to_string();
  const int64_t n = 6, c = 5;
  const Tensor<T> hx = normal_values<T>({n, c}, 9, 3);
  const std::vector<int64_t> hl = {3, 0, 4, 1, 1, 2};
  const NdSbp label_layout = layout[0].is_split() && layout[0].axis() == 0 ? layout : NdSbp(sbp::broadcast);
  const auto labels = from_host(Tensor<int64_t>::from_vector(Shape{n}, hl), p, label_layout);
  auto x = spsd_test::build_layout(hx, {p, layout}).requires_grad_();
  backward(cross_entropy(x, labels) * T(2));
  // The composed formula: d/dx of -2 mean(pick(log_softmax(x))) = 2 (softmax(x) - onehot) / N.
  std::vector<T> want(n * c);
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, double(hx.data()[i * c + j]));
    for (int64_t j = 0; j < c; ++j) s += std::exp(double(hx.data()[i * c + j]) - mx);
    for (int64_t j = 0; j < c; ++j)
      want[i * c + j] = static_cast<T>(2 * (std::exp(double(hx.data()[i * c + j]) - mx) / s - (j == hl[i])) / n);
  }
  compare(f, what, x.grad().full().to_vector(), want);
}

}  // namespace

TEST_CASE("fused softmax, log_softmax and cross_entropy backward equal the composed formulas", "[autograd]") {
  Failures failures = spsd_test::on_simulated_ranks(2, [](Failures& f) {
    const Placement p("cpu", {0, 1});
    for (const NdSbp& layout : {NdSbp(sbp::split(0)), NdSbp(sbp::broadcast), NdSbp(sbp::split(1))}) {
      for (const bool log : {false, true}) {
        check_softmax_backward<float>(f, p, layout, log);
        check_softmax_backward<double>(f, p, layout, log);
      }
      check_cross_entropy_backward<float>(f, p, layout);
      check_cross_entropy_backward<double>(f, p, layout);
    }
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

// A language model's (B, T, V) logits with (B, T) targets: the loss and its gradient in every
// 1-d layout (batch, sequence or vocabulary split, B) equal the plain loops' over all B*T rows,
// and a split of a leading axis (batch or sequence) takes no boxing of the logits: forward
// reduces only the P(sum) scalar, backward communicates nothing.
TEST_CASE("cross_entropy over leading axes (B, T, V): every layout equals one process", "[autograd]") {
  Failures failures = spsd_test::on_simulated_ranks(2, [](Failures& f) {
    const Placement p("cpu", {0, 1});
    const int64_t b = 2, t = 3, c = 5, n = b * t;
    const Tensor<double> hx = normal_values<double>({b, t, c}, 11, 3);
    const std::vector<int64_t> hl = {3, 0, 4, 1, 1, 2};
    double want_loss = 0;
    std::vector<double> want(n * c);
    for (int64_t i = 0; i < n; ++i) {
      double mx = -INFINITY, s = 0;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, hx.data()[i * c + j]);
      for (int64_t j = 0; j < c; ++j) s += std::exp(hx.data()[i * c + j] - mx);
      want_loss += (mx + std::log(s) - hx.data()[i * c + hl[i]]) / n;
      for (int64_t j = 0; j < c; ++j) want[i * c + j] = (std::exp(hx.data()[i * c + j] - mx) / s - (j == hl[i])) / n;
    }
    for (const NdSbp& layout : {NdSbp(sbp::split(0)), NdSbp(sbp::split(1)), NdSbp(sbp::split(2)), NdSbp(sbp::broadcast)}) {
      const std::string what = "cross_entropy (2, 3, 5) logits " + layout.to_string();
      const bool leading = layout[0].is_split() && layout[0].axis() < 2;
      const auto labels = from_host(Tensor<int64_t>::from_vector(Shape{b, t}, hl), p, leading ? layout : NdSbp(sbp::broadcast));
      auto x = spsd_test::build_layout(hx, {p, layout}).requires_grad_();
      reset_comm_stats();
      const auto loss = cross_entropy(x, labels);
      if (leading && comm_stats().collectives != 0) f.add(what + ": forward communicated " + comm_stats().to_string());
      compare(f, what + " loss", loss.full().to_vector(), std::vector<double>{want_loss});
      reset_comm_stats();
      backward(loss);
      if (leading && comm_stats().collectives != 0) f.add(what + ": backward communicated " + comm_stats().to_string());
      compare(f, what + " gradient", x.grad().full().to_vector(), want);
    }
  });
  INFO(failures.report());
  CHECK(failures.empty());
}
