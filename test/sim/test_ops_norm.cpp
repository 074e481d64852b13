// layer_norm, rms_norm and dropout under simulated ranks on meshes {1}, {2}, {3}, {4}, {2, 2}:
// the shared differential suite (test/common/norm_suite.hpp: every layout of x against plain-
// loop references, forward and gradients, its tolerances), the bytes a split last axis moves
// (comm_stats), dropout's kept fraction (within 5 binomial sigma of 1 - p), its gradient
// (mask / (1 - p) * g in every layout) and p == 0. Finite differences of the norms and dropout
// are cases of test/sim/test_autograd.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "boxing_suite.hpp"
#include "norm_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;
using spsd_test::uniform_values;

namespace {

std::vector<double> as_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

TEST_CASE("layer_norm, rms_norm and dropout of every layout equal the single-process result", "[ops-norm]") {
  for (const Shape& mesh : {Shape{1}, Shape{2}, Shape{3}, Shape{4}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      // The 16-bit cases on the meshes of 2, 4 and 2x2 ranks.
      spsd_test::run_norm_suite(mesh_placement(mesh), {.stride = 1, .grads = true, .half = mesh.numel() % 2 == 0},
                                mine);
    });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("norms over a split last axis move the statistics, never the axis", "[ops-norm]") {
  // (4, 1000) float split over 4 ranks on the last axis: gathering it would receive
  // 3/4 * 16000 = 12000 B per rank; layer_norm all-reduces two (4, 1) tensors (2 * 2 * 3/4 *
  // 16 = 48 B sent per rank), rms_norm one (24 B).
  const int64_t N = 4, C = 1000;
  const std::vector<float> xv = uniform_values<float>(N * C, 51, -3, 3), wv = uniform_values<float>(C, 52, -2, 2),
                           bv = uniform_values<float>(C, 53, -1, 1), rv = uniform_values<float>(N * C, 54, -1, 1);
  std::vector<CommStats> ln(4), rn(4), back(4);
  Failures f = spsd_test::on_simulated_ranks(4, [&](Failures& mine) {
    Placement p("cpu", {0, 1, 2, 3});
    auto x = from_host(Tensor<float>::from_vector(Shape{N, C}, xv), p, sbp::split(1)).requires_grad_();
    auto w = from_host(Tensor<float>::from_vector(Shape{C}, wv), p, sbp::split(0)).requires_grad_();
    auto b = from_host(Tensor<float>::from_vector(Shape{C}, bv), p, sbp::split(0)).requires_grad_();
    auto r = from_host(Tensor<float>::from_vector(Shape{N, C}, rv), p, sbp::split(1));
    reset_comm_stats();
    auto y = layer_norm(x, w, b);
    ln[rank()] = comm_stats();
    reset_comm_stats();
    auto z = rms_norm(x, w);
    rn[rank()] = comm_stats();
    if (!(y.nd_sbp() == NdSbp(sbp::split(1)))) mine.add("layer_norm output layout " + y.nd_sbp().to_string());
    if (!(z.nd_sbp() == NdSbp(sbp::split(1)))) mine.add("rms_norm output layout " + z.nd_sbp().to_string());
    auto loss = sum(y * r, {1});  // (N) P(sum): the backward starts without a gather
    reset_comm_stats();
    backward(loss, ones<float>(Shape{N}, p, sbp::broadcast));
    back[rank()] = comm_stats();
    const spsd_test::NormRef ref = spsd_test::ref_norm(as_double(xv), as_double(wv), as_double(bv), as_double(rv), C, 1e-5, false);
    spsd_test::expect_close(mine, "layer_norm (4, 1000) S(1)", y, ref.y);
    spsd_test::expect_close(mine, "layer_norm dx (4, 1000) S(1)", x.grad(), ref.dx);
    spsd_test::expect_close(mine, "layer_norm dweight", w.grad(), ref.dw);
  });
  INFO(f.report());
  CHECK(f.empty());
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": layer_norm " << ln[r] << "; rms_norm " << rn[r] << "; backward " << back[r]);
    CHECK(ln[r].bytes_sent == 48);
    CHECK(rn[r].bytes_sent == 24);
    CHECK(ln[r].calls_of(CollectiveKind::kAllReduce) == 2);
    CHECK(rn[r].calls_of(CollectiveKind::kAllReduce) == 1);
    CHECK(ln[r].calls_of(CollectiveKind::kAllGather) == 0);
    // Backward: the statistics recomputed (2 all-reduces), then the row sums of g w and
    // g w xhat (2 more), R = 4 floats each: 4 * 2 * 3/4 * 16 = 96 B.
    CHECK(back[r].calls_of(CollectiveKind::kAllGather) == 0);
    CHECK(back[r].calls_of(CollectiveKind::kAllReduce) == 4);
    CHECK(back[r].bytes_sent == 96);
  }
}

TEST_CASE("norms under a batch split are local, their parameter gradients P(sum)", "[ops-norm]") {
  // x (8, 6) S(0) on 4 ranks, weight and bias B: the forward and the whole backward move
  // nothing; dweight and dbias come out P(sum) (each rank's rows), left so by
  // reduce_gradients_early = false and reduced when read.
  const int64_t N = 8, C = 6;
  const std::vector<float> xv = uniform_values<float>(N * C, 81, -3, 3), wv = uniform_values<float>(C, 82, -2, 2),
                           bv = uniform_values<float>(C, 83, -1, 1), rv = uniform_values<float>(N * C, 84, -1, 1);
  Failures f = spsd_test::on_simulated_ranks(4, [&](Failures& mine) {
    Placement p("cpu", {0, 1, 2, 3});
    auto x = from_host(Tensor<float>::from_vector(Shape{N, C}, xv), p, sbp::split(0)).requires_grad_();
    auto w = from_host(Tensor<float>::from_vector(Shape{C}, wv), p, sbp::broadcast).requires_grad_();
    auto b = from_host(Tensor<float>::from_vector(Shape{C}, bv), p, sbp::broadcast).requires_grad_();
    auto r = from_host(Tensor<float>::from_vector(Shape{N, C}, rv), p, sbp::split(0));
    reset_comm_stats();
    auto y = layer_norm(x, w, b);
    auto loss = sum(y * r);  // P(sum): read only by backward's seed
    backward(loss, ones<float>(Shape{}, p, sbp::broadcast), {.reduce_gradients_early = false});
    if (comm_stats().bytes_sent != 0) mine.add("a batch-split layer_norm communicated: " + comm_stats().to_string());
    if (!(y.nd_sbp() == NdSbp(sbp::split(0)))) mine.add("y layout " + y.nd_sbp().to_string());
    if (!(x.grad().nd_sbp() == NdSbp(sbp::split(0)))) mine.add("dx layout " + x.grad().nd_sbp().to_string());
    if (!(w.grad().nd_sbp() == NdSbp(sbp::partial_sum))) mine.add("dweight layout " + w.grad().nd_sbp().to_string());
    if (!(b.grad().nd_sbp() == NdSbp(sbp::partial_sum))) mine.add("dbias layout " + b.grad().nd_sbp().to_string());
    const spsd_test::NormRef ref = spsd_test::ref_norm(as_double(xv), as_double(wv), as_double(bv), as_double(rv), C,
                                                       1e-5, false);
    spsd_test::expect_close(mine, "dx", x.grad(), ref.dx);
    spsd_test::expect_close(mine, "dweight", w.grad(), ref.dw);
    spsd_test::expect_close(mine, "dbias", b.grad(), ref.db);
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("dropout keeps 1 - p of the elements, within 5 binomial sigma", "[ops-norm][dropout]") {
  const int64_t n = 200000;
  for (double prob : {0.1, 0.5, 0.9}) {
    for (uint64_t seed : {1u, 2u}) {
      int64_t kept = 0;
      spsd::simulate(1, [&] {
        auto y = dropout(ones<float>(Shape{n}, Placement("cpu", {0}), sbp::broadcast), prob, seed);
        for (float v : y.full().to_vector()) kept += v != 0;
      });
      const double mean = n * (1 - prob), sigma = std::sqrt(n * prob * (1 - prob));
      INFO("p " << prob << " seed " << seed << ": kept " << kept << " of " << n);
      CHECK(std::abs(static_cast<double>(kept) - mean) <= 5 * sigma);
    }
  }
  // Another seed drops other elements.
  CHECK(spsd_test::reference_dropout_mask(1000, 0.5, 1) != spsd_test::reference_dropout_mask(1000, 0.5, 2));
}

TEST_CASE("dropout's gradient is mask / (1 - p) * g, and p == 0 is the identity", "[ops-norm][dropout]") {
  const Shape s{4, 6};
  const double prob = 0.3;
  const std::vector<double> xv = uniform_values<double>(s.numel(), 71, 0.5, 2),
                            gv = uniform_values<double>(s.numel(), 72, -1, 1);
  const std::vector<bool> keep = spsd_test::reference_dropout_mask(s.numel(), prob, 9);
  for (const Shape& mesh : {Shape{1}, Shape{4}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      const Placement p = mesh_placement(mesh);
      const NdSbp B(std::vector<Sbp>(mesh.ndim(), sbp::broadcast));
      for (const NdSbp& nd : spsd_test::all_nd_sbps(mesh.ndim(), 2)) {
        auto x = spsd_test::build_layout(Tensor<double>::from_vector(s, xv), {p, nd}).requires_grad_();
        auto y = dropout(x, prob, 9);
        backward(sum(y * from_host(Tensor<double>::from_vector(s, gv), p, B)));
        const std::vector<double> dx = x.grad().full().to_vector();
        for (int64_t i = 0; i < s.numel(); ++i) {
          const double want = keep[i] ? gv[i] / (1 - prob) : 0.0;
          if (std::abs(dx[i] - want) > 1e-12 * (1 + std::abs(want))) {
            mine.add("dropout gradient, x " + nd.to_string() + ": element " + std::to_string(i) + " is " +
                     std::to_string(dx[i]) + ", expected " + std::to_string(want));
            break;
          }
        }
      }
      auto x = from_host(Tensor<double>::from_vector(s, xv), p, B);
      if (dropout(x, 0.0, 9).full().to_vector() != xv) mine.add("dropout with p = 0 changed x");
    });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}
