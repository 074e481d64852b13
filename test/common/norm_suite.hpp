#pragma once
// The differential checks of layer_norm, rms_norm and dropout on one placement (collective over
// its ranks), shared by test/sim/test_ops_norm.cpp (meshes {1}, {2}, {3}, {4}, {2, 2}) and
// test/mpi/test_norm.cpp (the world's mesh, 2x2): every layout of x, against single-process
// references written with plain loops in norm_suite.cpp.
//
// Tolerances: float rel 1e-4 + abs 1e-5 (normalized outputs of size ~1, the statistics summed
// in another order per layout), double rel 1e-10 + abs 1e-12; bfloat16 rel 2^-7 + abs 2^-7 and
// float16 rel 2^-10 + abs 2^-10 against the reference of the rounded inputs (float accumulation,
// one rounding of each output: within an ulp of the output plus the float error).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>

#include "failures.hpp"

namespace spsd_test {

template <class T>
struct Tol {
  double rel, abs;
};
template <class T>
Tol<T> tol_of() {
  if constexpr (std::is_same_v<T, float>) return {1e-4, 1e-5};
  else if constexpr (std::is_same_v<T, double>) return {1e-10, 1e-12};
  else if constexpr (std::is_same_v<T, spsd::bfloat16>) return {1.0 / 128, 1.0 / 128};
  else return {1.0 / 1024, 1.0 / 1024};
}

// full() of got against want, element by element.
template <class T>
void expect_close(Failures& f, const std::string& what, const spsd::GlobalTensor<T>& got,
                  const std::vector<double>& want) {
  const std::vector<T> g = got.full().to_vector();
  const Tol<T> tol = tol_of<T>();
  if (g.size() != want.size())
    return f.add(what + ": " + std::to_string(g.size()) + " elements, expected " + std::to_string(want.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double a = static_cast<double>(g[i]);
    if (!(std::abs(a - want[i]) <= tol.abs + tol.rel * std::abs(want[i]))) {
      f.add(what + ": element " + std::to_string(i) + ": got " + std::to_string(a) + ", expected " +
            std::to_string(want[i]) + " (layout " + got.nd_sbp().to_string() + ")");
      return;
    }
  }
}

struct NormRef {
  std::vector<double> y, dx, dw, db;
};

// y of layer_norm (rms: rms_norm; b unused) over rows of C, and the gradients of
// L = sum(y * r), in double.
NormRef ref_norm(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                 const std::vector<double>& r, int64_t C, double eps, bool rms);

// Whether dropout(p, seed) keeps each of the first n global indices: the documented rule
// (op/dropout.hpp: the first Philox word of (seed, index) at least ceil(p 2^32)), in plain loops.
std::vector<bool> reference_dropout_mask(int64_t n, double p, uint64_t seed);

// n values uniform in [lo, hi) from a seeded generator.
template <class T>
std::vector<T> uniform_values(int64_t n, uint64_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(d(gen));
  return v;
}

struct NormSuiteOptions {
  int64_t stride = 1;  // case k of a layout list runs when k % stride == 0
  bool grads = true;   // the norms' gradients (float64 and float32)
  bool half = false;   // the bfloat16 and float16 forward cases
};

void run_norm_suite(const spsd::Placement& p, const NormSuiteOptions& options, Failures& f);

}  // namespace spsd_test
