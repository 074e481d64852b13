// The norm and dropout differential checks (norm_suite.hpp).
#include "norm_suite.hpp"

#include <random>

#include "boxing_suite.hpp"

using namespace spsd;

namespace spsd_test {

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

std::vector<bool> reference_dropout_mask(int64_t n, double p, uint64_t seed) {
  const auto threshold = static_cast<uint64_t>(std::ceil(p * 4294967296.0));
  std::vector<bool> keep(n);
  for (int64_t i = 0; i < n; ++i) keep[i] = philox::draw(seed, static_cast<uint64_t>(i)).v[0] >= threshold;
  return keep;
}

namespace {

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// x in this layout: partial values spread lopsidedly over the group (build_layout) in double,
// where the pieces' sum is exact to the tolerance; else whole on one rank of each group.
template <class T>
GlobalTensor<T> input_in(const Tensor<T>& whole, const Placement& p, const NdSbp& nd) {
  if constexpr (std::is_same_v<T, double>) return build_layout(whole, {p, nd});
  else return from_host(whole, p, nd);
}

const std::vector<Shape> kNormShapes = {Shape{5, 8}, Shape{2, 3, 7}, Shape{6}, Shape{4, 1}};

// Forward (and, with grad, backward) of both norms for x in every stride-th layout of the mesh,
// weight and bias rotating through the layouts of a 1-d tensor.
template <class T>
void check_norms(const Placement& p, Failures& f, uint64_t seed, bool grad, int64_t stride) {
  const NdSbp B(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  for (const Shape& s : kNormShapes) {
    const int64_t C = s[s.ndim() - 1];
    // A large mean: the statistics must not cancel (float's E[x^2] - E[x]^2 would).
    const std::vector<T> xv = uniform_values<T>(s.numel(), seed, 90, 110), wv = uniform_values<T>(C, seed + 1, -2, 2),
                         bv = uniform_values<T>(C, seed + 2, -1, 1), rv = uniform_values<T>(s.numel(), seed + 3, -1, 1);
    const std::vector<NdSbp> x_layouts = all_nd_sbps(p.mesh().ndim(), s.ndim()),
                             w_layouts = all_nd_sbps(p.mesh().ndim(), 1);
    for (bool rms : {false, true}) {
      const double eps = rms ? 1e-6 : 1e-5;
      const NormRef ref = ref_norm(as_double(xv), as_double(wv), as_double(bv), as_double(rv), C, eps, rms);
      for (size_t k = 0; k < x_layouts.size(); k += stride) {
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

// dropout of x in every stride-th layout: 0 exactly where the reference mask drops, elsewhere
// exactly T(x * (1 / (1 - p))) in compute_t<T> (x has no zeros, so a 0 is a drop).
template <class T>
void check_dropout(const Placement& p, Failures& f, int64_t stride) {
  for (const Shape& s : {Shape{6, 5}, Shape{3, 4, 5}, Shape{7}}) {
    const std::vector<T> xv = uniform_values<T>(s.numel(), 61, 0.5, 2);
    for (double prob : {0.1, 0.5}) {
      const std::vector<bool> keep = reference_dropout_mask(s.numel(), prob, 77);
      const auto k = static_cast<compute_t<T>>(1.0 / (1.0 - prob));
      const std::vector<NdSbp> layouts = all_nd_sbps(p.mesh().ndim(), s.ndim());
      for (size_t c = 0; c < layouts.size(); c += stride) {
        const NdSbp& nd = layouts[c];
        const std::string what = "dropout " + s.to_string() + " " + nd.to_string() + " p " + std::to_string(prob) +
                                 " " + std::string(to_string(dtype_of<T>));
        try {
          // A partial x is whole on one rank of each group (from_host), so even P(sum) is exact.
          auto y = dropout(from_host(Tensor<T>::from_vector(s, xv), p, nd), prob, 77);
          const std::vector<T> got = y.full().to_vector();
          for (size_t i = 0; i < got.size(); ++i) {
            const T want = keep[i] ? static_cast<T>(static_cast<compute_t<T>>(xv[i]) * k) : T(0);
            if (!(got[i] == want)) {
              f.add(what + ": element " + std::to_string(i) + ": got " + show(got[i]) + ", expected " + show(want) +
                    " (result layout " + y.nd_sbp().to_string() + ")");
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

void run_norm_suite(const Placement& p, const NormSuiteOptions& o, Failures& f) {
  check_norms<float>(p, f, 41, false, o.stride);
  check_norms<double>(p, f, 42, false, o.stride);
  if (o.grads) {
    check_norms<double>(p, f, 43, true, o.stride);
    check_norms<float>(p, f, 44, true, o.stride);
  }
  check_dropout<float>(p, f, o.stride);
  check_dropout<double>(p, f, o.stride);
  if (o.half) {
    check_norms<bfloat16>(p, f, 45, false, o.stride);
    check_norms<float16>(p, f, 46, false, o.stride);
    check_dropout<bfloat16>(p, f, o.stride);
    check_dropout<float16>(p, f, o.stride);
  }
}

}  // namespace spsd_test
