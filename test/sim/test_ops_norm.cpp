// layer_norm, rms_norm and dropout under simulated ranks on meshes {1}, {2}, {3}, {4}, {2, 2}.
//
// Norms: x in every layout of the mesh (S(i), B, P(sum), P(max), P(min) per mesh axis, built
// with from_host from one random host tensor), weight and bias rotating through the layouts of
// a 1-d tensor; full() of the output, and of the gradients of L = sum(y * R) (R fixed, random),
// against single-process references written with plain loops here (double accumulation).
// Finite differences are in test/sim/test_autograd.cpp's cases.
// Tolerances: float rel 1e-4 + abs 1e-5 (normalized outputs of size ~1, the statistics summed
// in another order per layout), double rel 1e-10 + abs 1e-12; bfloat16 rel 2^-7 + abs 2^-7 and
// float16 rel 2^-10 + abs 2^-10 against the reference of the rounded inputs (float accumulation,
// one rounding of each output: within an ulp of the output plus the float error).
//
// Dropout: the mask (which elements are 0) of every layout and mesh, world sizes 1 to 4 and
// 2x2, equals the single-process one; kept values are exactly T(x * (1 / (1 - p))) in
// compute_t<T>; the fraction kept lies within 5 binomial sigma of 1 - p; the gradient is
// mask / (1 - p) * g. The bytes a split last axis moves are measured with comm_stats.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;

namespace {

const std::vector<Shape> kMeshes = {Shape{1}, Shape{2}, Shape{3}, Shape{4}, Shape{2, 2}};

void on_meshes(const std::string& what, const std::function<void(const Placement&, Failures&)>& body) {
  for (const Shape& mesh : kMeshes) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()),
                                               [&](Failures& mine) { body(mesh_placement(mesh), mine); });
    INFO(what << " on mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}

template <class T>
std::vector<T> random_values(int64_t n, uint64_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(d(gen));
  return v;
}

template <class T>
struct Tol {
  double rel, abs;
};
template <class T>
Tol<T> tol_of() {
  if constexpr (std::is_same_v<T, float>) return {1e-4, 1e-5};
  else if constexpr (std::is_same_v<T, double>) return {1e-10, 1e-12};
  else if constexpr (std::is_same_v<T, bfloat16>) return {1.0 / 128, 1.0 / 128};
  else return {1.0 / 1024, 1.0 / 1024};
}

template <class T>
void expect_close(Failures& f, const std::string& what, const GlobalTensor<T>& got, const std::vector<double>& want) {
  const std::vector<T> g = got.full().to_vector();
  const Tol<T> tol = tol_of<T>();
  if (g.size() != want.size()) return f.add(what + ": " + std::to_string(g.size()) + " elements, expected " +
                                            std::to_string(want.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double a = static_cast<double>(g[i]);
    if (!(std::abs(a - want[i]) <= tol.abs + tol.rel * std::abs(want[i]))) {
      f.add(what + ": element " + std::to_string(i) + ": got " + std::to_string(a) + ", expected " +
            std::to_string(want[i]) + " (layout " + got.nd_sbp().to_string() + ")");
      return;
    }
  }
}

// ---- reference: plain loops over rows of C, in double ----

struct NormRef {
  std::vector<double> y, dx, dw, db;
};

// y and the gradients of L = sum(y * r) (dy = r); b empty for rms.
NormRef ref_norm(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                 const std::vector<double>& r, int64_t C, double eps, bool rms) {
  const int64_t rows = C == 0 ? 0 : static_cast<int64_t>(x.size()) / C;
  NormRef out{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(C, 0.0),
              std::vector<double>(C, 0.0)};
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = &x[i * C];
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < C; ++j) mean += xr[j];
      mean /= static_cast<double>(C);
    }
    for (int64_t j = 0; j < C; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1 / std::sqrt(var / static_cast<double>(C) + eps);
    double s1 = 0, s2 = 0;  // row sums of dy w and dy w xhat
    for (int64_t j = 0; j < C; ++j) {
      const double xhat = (xr[j] - mean) * rstd, gw = r[i * C + j] * w[j];
      out.y[i * C + j] = xhat * w[j] + (rms ? 0.0 : b[j]);
      out.dw[j] += r[i * C + j] * xhat;
      out.db[j] += r[i * C + j];
      s1 += gw;
      s2 += gw * xhat;
    }
    for (int64_t j = 0; j < C; ++j) {
      const double xhat = (xr[j] - mean) * rstd, gw = r[i * C + j] * w[j];
      out.dx[i * C + j] = rstd * (gw - (rms ? 0.0 : s1 / C) - xhat * s2 / C);
    }
  }
  return out;
}

// x in this layout: partial values spread lopsidedly over the group (build_layout) in double,
// where the pieces' sum is exact to the tolerance; else whole on one rank of each group.
template <class T>
GlobalTensor<T> input_in(const Tensor<T>& whole, const Placement& p, const NdSbp& nd) {
  if constexpr (std::is_same_v<T, double>) return spsd_test::build_layout(whole, {p, nd});
  else return from_host(whole, p, nd);
}

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

const std::vector<Shape> kNormShapes = {Shape{5, 8}, Shape{2, 3, 7}, Shape{6}, Shape{4, 1}};

// Forward (and, with grad, backward) of both norms for x in every layout of the mesh.
template <class T>
void check_norms(const Placement& p, Failures& f, uint64_t seed, bool grad) {
  const NdSbp B(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  for (const Shape& s : kNormShapes) {
    const int64_t C = s[s.ndim() - 1];
    // A large mean: the statistics must not cancel (float's E[x^2] - E[x]^2 would).
    const std::vector<T> xv = random_values<T>(s.numel(), seed, 90, 110), wv = random_values<T>(C, seed + 1, -2, 2),
                         bv = random_values<T>(C, seed + 2, -1, 1), rv = random_values<T>(s.numel(), seed + 3, -1, 1);
    const std::vector<NdSbp> x_layouts = spsd_test::all_nd_sbps(p.mesh().ndim(), s.ndim()),
                             w_layouts = spsd_test::all_nd_sbps(p.mesh().ndim(), 1);
    for (bool rms : {false, true}) {
      const double eps = rms ? 1e-6 : 1e-5;
      const NormRef ref = ref_norm(as_double(xv), as_double(wv), as_double(bv), as_double(rv), C, eps, rms);
      for (size_t k = 0; k < x_layouts.size(); ++k) {
        const NdSbp& nd = x_layouts[k];
        const NdSbp& wl = w_layouts[k % w_layouts.size()];
        const std::string what = std::string(rms ? "rms_norm " : "layer_norm ") + s.to_string() + " x " +
                                 nd.to_string() + " weight " + wl.to_string() + " " + std::string(to_string(dtype_of<T>));
        try {
          auto x = input_in(Tensor<T>::from_vector(s, xv), p, nd);
          auto w = from_host(Tensor<T>::from_vector(Shape{C}, wv), p, wl);
          auto b = from_host(Tensor<T>::from_vector(Shape{C}, bv), p, w_layouts[(k + 1) % w_layouts.size()]);
          if (grad) {
            x.requires_grad_();
            w.requires_grad_();
            b.requires_grad_();
          }
          GlobalTensor<T> y = rms ? rms_norm(x, w, eps) : layer_norm(x, w, b, eps);
          expect_close(f, what + " y", y, ref.y);
          if (!grad) continue;
          backward(sum(y * from_host(Tensor<T>::from_vector(s, rv), p, B)));
          expect_close(f, what + " dx", x.grad(), ref.dx);
          expect_close(f, what + " dweight", w.grad(), ref.dw);
          if (!rms) expect_close(f, what + " dbias", b.grad(), ref.db);
        } catch (const std::exception& e) {
          f.add(what + ": threw: " + e.what());
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("layer_norm and rms_norm of every layout equal the single-process result", "[ops-norm]") {
  on_meshes("norms", [](const Placement& p, Failures& f) {
    check_norms<float>(p, f, 41, false);
    check_norms<double>(p, f, 42, false);
  });
}

TEST_CASE("layer_norm and rms_norm gradients of every layout equal the single-process ones", "[ops-norm]") {
  on_meshes("norm gradients", [](const Placement& p, Failures& f) {
    check_norms<double>(p, f, 43, true);
    check_norms<float>(p, f, 44, true);
  });
}

TEST_CASE("layer_norm and rms_norm in bfloat16 and float16", "[ops-norm]") {
  for (const Shape& mesh : {Shape{2}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      check_norms<bfloat16>(mesh_placement(mesh), mine, 45, false);
      check_norms<float16>(mesh_placement(mesh), mine, 46, false);
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
  const std::vector<float> xv = random_values<float>(N * C, 51, -3, 3), wv = random_values<float>(C, 52, -2, 2),
                           bv = random_values<float>(C, 53, -1, 1), rv = random_values<float>(N * C, 54, -1, 1);
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
    const NormRef ref = ref_norm(as_double(xv), as_double(wv), as_double(bv), as_double(rv), C, 1e-5, false);
    expect_close(mine, "layer_norm (4, 1000) S(1)", y, ref.y);
    expect_close(mine, "layer_norm dx (4, 1000) S(1)", x.grad(), ref.dx);
    expect_close(mine, "layer_norm dweight", w.grad(), ref.dw);
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
    CHECK(back[r].calls_of(CollectiveKind::kAllGather) == 0);
    CHECK(back[r].bytes_received < 12000 / 10);
  }
}

// ---- dropout ----

namespace {

// The mask (1 kept, 0 dropped) and values of dropout(x) on one rank: the reference the layouts
// are compared with; x has no zeros, so a 0 is a drop.
template <class T>
std::vector<T> dropout_on_one_rank(const Shape& s, const std::vector<T>& xv, double p, uint64_t seed) {
  std::vector<T> out;
  spsd::simulate(1, [&] {
    out = dropout(from_host(Tensor<T>::from_vector(s, xv), Placement("cpu", {0}), sbp::broadcast), p, seed)
              .full()
              .to_vector();
  });
  return out;
}

// Every element 0 or exactly x * (1 / (1 - p)) in compute_t<T>, rounded once.
template <class T>
void check_dropout_values(Failures& f, const std::string& what, const std::vector<T>& got, const std::vector<T>& x,
                          double p) {
  const auto k = static_cast<compute_t<T>>(1.0 / (1.0 - p));
  for (size_t i = 0; i < got.size(); ++i) {
    const T kept = static_cast<T>(static_cast<compute_t<T>>(x[i]) * k);
    if (!(got[i] == T(0) || got[i] == kept)) {
      f.add(what + ": element " + std::to_string(i) + " is " + spsd_test::show(got[i]) + ", neither 0 nor " +
            spsd_test::show(kept));
      return;
    }
  }
}

template <class T>
void check_dropout_layouts(const Placement& p, Failures& f) {
  for (const Shape& s : {Shape{6, 5}, Shape{3, 4, 5}, Shape{7}}) {
    const std::vector<T> xv = random_values<T>(s.numel(), 61, 0.5, 2);
    for (double prob : {0.1, 0.5}) {
      const std::vector<T> want = dropout_on_one_rank(s, xv, prob, 77);
      check_dropout_values(f, "dropout " + s.to_string(), want, xv, prob);
      for (const NdSbp& nd : spsd_test::all_nd_sbps(p.mesh().ndim(), s.ndim())) {
        const std::string what = "dropout " + s.to_string() + " " + nd.to_string() + " p " + std::to_string(prob) +
                                 " " + std::string(to_string(dtype_of<T>));
        try {
          // A partial x is whole on one rank of each group (from_host), so even P(sum) is exact.
          auto y = dropout(from_host(Tensor<T>::from_vector(s, xv), p, nd), prob, 77);
          const std::vector<T> got = y.full().to_vector();
          for (size_t i = 0; i < got.size(); ++i) {
            const double a = static_cast<double>(got[i]), e = static_cast<double>(want[i]);
            if (a != e) {
              f.add(what + ": element " + std::to_string(i) + ": got " + std::to_string(a) + ", expected " +
                    std::to_string(e) + " (result layout " + y.nd_sbp().to_string() + ")");
              break;
            }
          }
        } catch (const std::exception& e) {
          f.add(what + ": threw: " + e.what());
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("dropout drops the same elements in every layout, mesh and world size", "[ops-norm][dropout]") {
  on_meshes("dropout", [](const Placement& p, Failures& f) {
    check_dropout_layouts<float>(p, f);
    check_dropout_layouts<double>(p, f);
  });
  Failures f = spsd_test::on_simulated_ranks(2, [](Failures& mine) {
    check_dropout_layouts<bfloat16>(mesh_placement(Shape{2}), mine);
    check_dropout_layouts<float16>(mesh_placement(Shape{2}), mine);
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
  spsd::simulate(1, [&] {
    const Placement one("cpu", {0});
    auto a = dropout(ones<float>(Shape{1000}, one, sbp::broadcast), 0.5, 1).full().to_vector();
    auto b = dropout(ones<float>(Shape{1000}, one, sbp::broadcast), 0.5, 2).full().to_vector();
    CHECK(a != b);
  });
}

TEST_CASE("dropout's gradient is mask / (1 - p) * g, and p == 0 is the identity", "[ops-norm][dropout]") {
  const Shape s{4, 6};
  const double prob = 0.3;
  const std::vector<double> xv = random_values<double>(s.numel(), 71, 0.5, 2),
                            gv = random_values<double>(s.numel(), 72, -1, 1);
  const std::vector<double> y1 = dropout_on_one_rank(s, xv, prob, 9);
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
          const double want = y1[i] == 0 ? 0.0 : gv[i] / (1 - prob);
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
