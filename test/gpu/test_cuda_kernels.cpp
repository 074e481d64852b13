// gpu-kernels: every local CUDA kernel (include/spsd/kernel/cuda/) against its cpu counterpart
// on random inputs: several shapes (empty, 0-d, odd sizes, broadcasts) and every dtype each
// supports. Integers, copies, permutes, fills and max/min must match exactly; floating math
// within per-op tolerances; a NaN fails unless the cpu has NaN at the same position. The
// bfloat16/float16 instances run against the float instance on the same (exactly widened)
// inputs, rounded once: test_halves states each kernel's bound. Exits 77 (meson: SKIP) only where
// the machine has no CUDA device (../common/cuda_devices.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "spsd/core/reduce_op.hpp"
#include "spsd/kernel/cpu/attention.hpp"
#include "spsd/kernel/cpu/dropout.hpp"
#include "spsd/kernel/cpu/elementwise.hpp"
#include "spsd/kernel/cpu/gemm.hpp"
#include "spsd/kernel/cpu/index.hpp"
#include "spsd/kernel/cpu/normalization.hpp"
#include "spsd/kernel/cpu/permute.hpp"
#include "spsd/kernel/cpu/reduce.hpp"
#include "spsd/kernel/cpu/softmax.hpp"
#include "spsd/kernel/cuda/attention.hpp"
#include "spsd/kernel/cpu/compare.hpp"
#include "spsd/kernel/cuda/cast.hpp"
#include "spsd/kernel/cuda/compare.hpp"
#include "spsd/kernel/cuda/copy.hpp"
#include "spsd/kernel/cuda/dropout.hpp"
#include "spsd/kernel/cuda/elementwise.hpp"
#include "spsd/kernel/cuda/gemm.hpp"
#include "spsd/kernel/cuda/index.hpp"
#include "spsd/kernel/cuda/nonfinite.hpp"
#include "spsd/kernel/cuda/normalization.hpp"
#include "spsd/kernel/cuda/optim.hpp"
#include "spsd/kernel/cuda/permute.hpp"
#include "spsd/kernel/cuda/random.hpp"
#include "spsd/kernel/cuda/reduce.hpp"
#include "spsd/kernel/cuda/softmax.hpp"
#include "spsd/runtime/matmul_precision.hpp"
#include "spsd/tensor/random.hpp"

#include "../common/cuda_devices.hpp"
#include "../common/transposed.hpp"

using spsd_test::swap_last_two;
using spsd_test::transposed_copy;

namespace {

using spsd::Box;
using spsd::DType;
using spsd::ReduceOp;
using spsd::Shape;
namespace cpu = spsd::kernel::cpu;
namespace gpu = spsd::kernel::cuda;
using Axes = std::vector<int64_t>;

cudaStream_t g_stream = nullptr;
std::mt19937_64 g_rng(20240601);

struct Tally {
  int64_t cases = 0, failures = 0;
};
Tally g_group, g_total;
int g_printed = 0;

void fail(const std::string& what) {
  ++g_group.failures;
  if (++g_printed <= 40) std::cout << "  FAIL " << what << "\n";
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// Waits for the stream and surfaces asynchronous kernel faults at the call that caused them.
void sync() {
  check_cuda(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize");
  check_cuda(cudaGetLastError(), "kernel");
}

template <class T>
struct Dev {
  T* ptr = nullptr;
  int64_t n = 0;
  explicit Dev(int64_t count) : n(count) {
    check_cuda(cudaMalloc(&ptr, std::max<int64_t>(count, 1) * sizeof(T)), "cudaMalloc");
  }
  explicit Dev(const std::vector<T>& v) : Dev(static_cast<int64_t>(v.size())) {
    if (n) check_cuda(cudaMemcpy(ptr, v.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(ptr); }
  std::vector<T> get() const {
    sync();
    std::vector<T> v(n);
    if (n) check_cuda(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return v;
  }
};

template <class T>
std::vector<T> random_values(int64_t n, double lo = -3, double hi = 3) {
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(static_cast<T>(lo), static_cast<T>(hi));
    for (T& x : v) x = d(g_rng);
  } else {  // mostly small, one in 16 an extreme so products and sums wrap
    std::uniform_int_distribution<T> small(-1000, 1000), any(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    for (T& x : v) x = g_rng() % 16 == 0 ? any(g_rng) : small(g_rng);
  }
  return v;
}

template <class T>
std::string show(T v) {
  std::ostringstream s;
  s.precision(std::is_same_v<T, float> ? 9 : 17);
  s << v;
  return s.str();
}

// got vs want element by element: |got - want| <= atol + rtol * scale[i] (scale = |want| when
// empty); exact when both tolerances are 0 (integers always). NaN passes only against NaN.
template <class T>
void compare(const std::string& what, const std::vector<T>& got, const std::vector<T>& want, double rtol = 0,
             double atol = 0, const std::vector<T>& scale = {}) {
  ++g_group.cases;
  if (got.size() != want.size()) return fail(what + ": size " + std::to_string(got.size()) + " vs " + std::to_string(want.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      const double g = got[i], w = want[i];
      if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
      else if (std::isinf(w) || (rtol == 0 && atol == 0)) ok = g == w;
      else ok = std::abs(g - w) <= atol + rtol * (scale.empty() ? std::abs(w) : std::abs(double(scale[i])));
    } else {
      ok = got[i] == want[i];
    }
    if (!ok) return fail(what + ": at " + std::to_string(i) + " gpu " + show(got[i]) + ", cpu " + show(want[i]));
  }
}

template <class F>
void expect_error(const std::string& what, F f) {
  ++g_group.cases;
  try {
    f();
  } catch (const spsd::Error&) {
    return;
  }
  fail(what + ": no spsd::Error");
}

void group(const char* name, const std::function<void()>& body) {
  g_group = {};
  try {
    body();
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  std::cout << (g_group.failures ? "FAIL " : "ok   ") << name << ": " << g_group.cases << " cases, " << g_group.failures
            << " failures\n";
  g_total.cases += g_group.cases;
  g_total.failures += g_group.failures;
}

template <class F>
void for_each_type(F f) {
  f.template operator()<float>();
  f.template operator()<double>();
  f.template operator()<int32_t>();
  f.template operator()<int64_t>();
}

template <class T>
std::string tname() { return std::string(spsd::to_string(spsd::dtype_of<T>)); }

// Relative tolerances for one rounding-sensitive floating op (a few ulps of the device libm,
// and contraction into FMAs).
template <class T>
double rtol_of() { return std::is_same_v<T, float> ? 1e-5 : 1e-12; }
template <class T>
double atol_of() { return std::is_same_v<T, float> ? 1e-6 : 1e-14; }

// The shapes each kernel group runs, shared by its float/double/integer test and test_halves.
const std::vector<std::pair<Shape, Shape>>& broadcast_pairs() {
  static const std::vector<std::pair<Shape, Shape>> v = {
    {{}, {}}, {{5}, {5}}, {{0}, {0}}, {{3, 0}, {0}}, {{4, 5}, {5}}, {{4, 5}, {4, 1}}, {{1, 5}, {4, 1}},
    {{2, 3, 4}, {3, 1}}, {{7}, {}}, {{}, {7}}, {{2, 1, 3, 1, 5}, {4, 1, 6, 1}}, {{17, 33}, {17, 33}},
    {{3, 1, 129}, {1, 65, 1}}};
  return v;
}

const std::vector<std::pair<Shape, Axes>>& reduce_cases() {
  static const std::vector<std::pair<Shape, Axes>> v = {
    {{}, {}}, {{7}, {0}}, {{0}, {0}}, {{3, 0}, {1}}, {{0, 3}, {1}}, {{4, 5}, {0}}, {{4, 5}, {1}}, {{4, 5}, {0, 1}},
    {{2, 3, 4}, {0, 2}}, {{2, 3, 4}, {1}}, {{5, 1, 7}, {1}}, {{3, 1000}, {1}}, {{1000, 3}, {0}},
    {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 2}}, {{1025}, {0}}, {{64, 33, 17}, {0, 1}}, {{2, 3}, {}},
    {{3, 100000}, {1}}, {{100000, 2}, {0}}, {{1 << 21}, {0}}, {{50000, 40}, {0}},  // these two split over blocks
    {{600, 2048}, {1}}, {{600, 2049}, {1}}};  // the longest rows a warp folds; a block per row
  return v;
}

const std::vector<std::pair<Shape, int64_t>>& softmax_cases() {
  static const std::vector<std::pair<Shape, int64_t>> v = {
    {{5}, 0}, {{0}, 0}, {{3, 0}, 1}, {{3, 0}, 0}, {{4, 7}, 1}, {{4, 7}, 0}, {{2, 3, 5}, 1}, {{2, 1000}, 1},
    {{1000, 3}, 0}, {{3, 4097}, 1}, {{1, 1}, 1}};
  return v;
}

const std::vector<std::pair<Shape, int64_t>>& softmax_backward_cases() {
  static const std::vector<std::pair<Shape, int64_t>> v = {
    {{5}, 0}, {{3, 0}, 1}, {{4, 7}, 1}, {{4, 7}, 0}, {{2, 3, 5}, 1}, {{2, 1000}, 1}, {{1000, 3}, 0}, {{3, 4097}, 1}};
  return v;
}

const std::vector<std::pair<Shape, Axes>>& permute_cases() {
  static const std::vector<std::pair<Shape, Axes>> v = {
    {{}, {}}, {{5}, {0}}, {{0, 3}, {1, 0}}, {{4, 5}, {1, 0}}, {{4, 5}, {0, 1}}, {{2, 3, 4}, {0, 2, 1}},
    {{2, 3, 4}, {2, 0, 1}}, {{2, 3, 4}, {1, 0, 2}}, {{33, 65}, {1, 0}}, {{3, 1, 5, 7}, {3, 2, 1, 0}},
    {{2, 3, 4, 5}, {1, 3, 0, 2}}, {{70, 3, 40}, {2, 1, 0}}, {{5, 1}, {1, 0}}, {{300, 257}, {1, 0}}};
  return v;
}

const std::vector<std::pair<Shape, Shape>>& matmul_cases() {
  static const std::vector<std::pair<Shape, Shape>> v = {
    {{2, 3}, {3, 4}}, {{0, 3}, {3, 4}}, {{2, 0}, {0, 4}}, {{5, 3}, {3, 0}}, {{4, 2, 3}, {3, 5}},
    {{4, 2, 3}, {4, 3, 5}}, {{2, 3}, {4, 3, 5}}, {{2, 1, 3, 4}, {3, 4, 2}}, {{3, 1, 2, 3}, {1, 4, 3, 2}},
    {{65, 33}, {33, 17}}, {{1, 1}, {1, 1}}, {{3, 17, 40}, {40, 19}}, {{128, 256}, {256, 64}}};
  return v;
}

// ---- element-wise ----

void test_elementwise() {
  const std::vector<int64_t> sizes = {0, 1, 7, 1000, 65537};
  const auto& pairs = broadcast_pairs();
  const cpu::UnaryOp unary_ops[] = {cpu::UnaryOp::kNeg, cpu::UnaryOp::kRelu, cpu::UnaryOp::kGelu,
                                    cpu::UnaryOp::kExp, cpu::UnaryOp::kLog, cpu::UnaryOp::kTanh,
                                    cpu::UnaryOp::kSigmoid, cpu::UnaryOp::kSqrt, cpu::UnaryOp::kAbs,
                                    cpu::UnaryOp::kRsqrt, cpu::UnaryOp::kErf, cpu::UnaryOp::kSilu,
                                    cpu::UnaryOp::kGeluTanh};
  const cpu::BinaryOp binary_ops[] = {cpu::BinaryOp::kAdd, cpu::BinaryOp::kSub, cpu::BinaryOp::kMul,
                                      cpu::BinaryOp::kDiv, cpu::BinaryOp::kMax, cpu::BinaryOp::kMin};
  for_each_type([&]<class T>() {
    const bool fp = std::is_floating_point_v<T>;
    for (int64_t n : sizes) {
      std::vector<T> x = random_values<T>(n);
      for (T& v : x)
        if (v == T(0)) v = T(1);  // rdiv_scalar divides by x; integer zero divisors are the caller's check
      const Dev<T> dx(x);
      for (cpu::UnaryOp op : unary_ops) {
        const std::string what = "unary " + std::string(to_string(op)) + " " + tname<T>() + " n=" + std::to_string(n);
        if (!cpu::unary_supports(op, spsd::dtype_of<T>)) {
          expect_error(what, [&] { gpu::unary<T>(op, dx.ptr, dx.ptr, n, g_stream); });
          continue;
        }
        std::vector<T> want(n);
        cpu::unary<T>(op, x.data(), want.data(), n);
        Dev<T> out(n);
        gpu::unary<T>(op, dx.ptr, out.ptr, n, g_stream);
        const bool exact = op == cpu::UnaryOp::kNeg || op == cpu::UnaryOp::kRelu || op == cpu::UnaryOp::kAbs;
        compare(what, out.get(), want, exact ? 0 : rtol_of<T>(), exact ? 0 : atol_of<T>());
      }
      // fill, scale (wrapping for integers), binary_scalar both ways
      std::vector<T> want(n);
      Dev<T> out(n);
      cpu::fill<T>(want.data(), n, T(3));
      gpu::fill<T>(out.ptr, n, T(3), g_stream);
      compare("fill " + tname<T>(), out.get(), want);
      want = x;
      cpu::scale<T>(want.data(), n, T(fp ? 0.37 : 977));
      Dev<T> scaled(x);
      gpu::scale<T>(scaled.ptr, n, T(fp ? 0.37 : 977), g_stream);
      compare("scale " + tname<T>(), scaled.get(), want);
      for (cpu::BinaryOp op : binary_ops) {
        for (bool first : {false, true}) {
          const T s = T(fp ? -1.75 : -7);
          cpu::binary_scalar<T>(op, x.data(), s, want.data(), n, first);
          gpu::binary_scalar<T>(op, dx.ptr, s, out.ptr, n, first, g_stream);
          compare("binary_scalar " + std::string(to_string(op)) + (first ? " (scalar first) " : " ") + tname<T>(),
                  out.get(), want);
        }
      }
      if (!fp) expect_error("div_scalar by 0", [&] { gpu::binary_scalar<T>(cpu::BinaryOp::kDiv, dx.ptr, T(0), out.ptr, n, false, g_stream); });
    }
    for (const auto& [sa, sb] : pairs) {
      const Shape so = cpu::detail::broadcast_shape("test", sa, sb);
      std::vector<T> a = random_values<T>(sa.numel()), b = random_values<T>(sb.numel());
      for (T& v : b)
        if (v == T(0)) v = T(1);  // integer div: callers rule out zero divisors
      const Dev<T> da(a), db(b);
      for (cpu::BinaryOp op : binary_ops) {
        const std::string what = std::string(to_string(op)) + " " + tname<T>() + " " + sa.to_string() + " x " + sb.to_string();
        std::vector<T> want(so.numel());
        cpu::binary<T>(op, a.data(), sa, b.data(), sb, want.data(), so);
        Dev<T> out(so.numel());
        gpu::binary<T>(op, da.ptr, sa, db.ptr, sb, out.ptr, so, g_stream);
        compare(what, out.get(), want);
        if (sa == so) {  // in place into a
          Dev<T> inplace(a);
          gpu::binary<T>(op, inplace.ptr, sa, db.ptr, sb, inplace.ptr, so, g_stream);
          compare(what + " in place", inplace.get(), want);
        }
      }
    }
    // Flat operands at element offsets from cudaMalloc's alignment: the 16-byte pack kernels where
    // all three are aligned, the element kernels where one is not; lengths with and without a tail.
    for (int64_t n : {1, 5, 1031}) {
      const int64_t pad = 3;
      std::vector<T> a = random_values<T>(n + pad), b = random_values<T>(n + pad);
      const Dev<T> da(a), db(b);
      for (auto [oa, ob, oo] : {std::array<int64_t, 3>{0, 0, 0}, {1, 1, 1}, {0, 1, 0}, {2, 0, 2}, {0, 0, 3}}) {
        const std::string at = tname<T>() + " n=" + std::to_string(n) + " at offsets " + std::to_string(oa) + "/" +
                               std::to_string(ob) + "/" + std::to_string(oo);
        std::vector<T> want(n);
        cpu::binary<T>(cpu::BinaryOp::kSub, a.data() + oa, Shape{n}, b.data() + ob, Shape{n}, want.data(), Shape{n});
        Dev<T> out(n + pad);
        gpu::binary<T>(cpu::BinaryOp::kSub, da.ptr + oa, Shape{n}, db.ptr + ob, Shape{n}, out.ptr + oo, Shape{n}, g_stream);
        std::vector<T> got = out.get();
        compare("flat sub " + at, std::vector<T>(got.begin() + oo, got.begin() + oo + n), want);
        cpu::unary<T>(cpu::UnaryOp::kNeg, a.data() + oa, want.data(), n);
        gpu::unary<T>(cpu::UnaryOp::kNeg, da.ptr + oa, out.ptr + oo, n, g_stream);
        got = out.get();
        compare("flat neg " + at, std::vector<T>(got.begin() + oo, got.begin() + oo + n), want);
      }
    }
    Dev<T> tmp(20);
    expect_error("binary bad out shape", [&] { gpu::binary<T>(cpu::BinaryOp::kAdd, tmp.ptr, Shape{4, 5}, tmp.ptr, Shape{5}, tmp.ptr, Shape{5, 4}, g_stream); });
  });
}

// ---- reduce ----

void test_reduce() {
  const auto& cases = reduce_cases();
  for_each_type([&]<class T>() {
    for (const auto& [shape, axes] : cases) {
      const std::vector<T> x = random_values<T>(shape.numel());
      int64_t out_n = 1;
      for (int64_t d = 0; d < shape.ndim(); ++d)
        if (std::find(axes.begin(), axes.end(), d) == axes.end()) out_n *= shape[d];
      const Dev<T> dx(x);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
        std::vector<T> want(out_n);
        cpu::reduce<T>(op, x.data(), shape, axes, want.data());
        Dev<T> out(out_n);
        gpu::reduce<T>(op, dx.ptr, shape, axes, out.ptr, g_stream);
        const std::string what = "reduce " + std::string(to_string(op)) + " " + tname<T>() + " " + shape.to_string() +
                                 " axes " + spsd::detail::join(axes);
        if (std::is_floating_point_v<T> && op == ReduceOp::kSum) {
          // Sums differ by summation order: scale the tolerance by the sum of magnitudes.
          std::vector<T> ax(x.size()), abs_sum(out_n);
          for (size_t i = 0; i < x.size(); ++i) ax[i] = std::abs(x[i]);
          cpu::reduce<T>(ReduceOp::kSum, ax.data(), shape, axes, abs_sum.data());
          compare(what, out.get(), want, rtol_of<T>(), atol_of<T>(), abs_sum);
        } else {
          compare(what, out.get(), want);
        }
      }
    }
    Dev<T> tmp(20);
    expect_error("reduce unsorted axes", [&] { gpu::reduce<T>(ReduceOp::kSum, tmp.ptr, Shape{4, 5}, Axes{1, 0}, tmp.ptr, g_stream); });
  });
}

// ---- softmax ----

void test_softmax() {
  const auto& cases = softmax_cases();
  auto run = [&]<class T>() {
    for (const auto& [shape, axis] : cases) {
      std::vector<T> x = random_values<T>(shape.numel(), -20, 20);
      if (shape.ndim() == 2 && shape[0] >= 2 && axis == 1)  // a row of -inf gives NaN on both sides
        for (int64_t j = 0; j < shape[1]; ++j) x[shape[1] + j] = -std::numeric_limits<T>::infinity();
      const Dev<T> dx(x);
      for (bool log : {false, true}) {
        std::vector<T> want(x.size());
        cpu::softmax<T>(x.data(), shape, axis, want.data(), log);
        Dev<T> out(shape.numel());
        gpu::softmax<T>(dx.ptr, shape, axis, out.ptr, log, g_stream);
        const std::string what = std::string(log ? "log_softmax " : "softmax ") + tname<T>() + " " + shape.to_string() +
                                 " axis " + std::to_string(axis);
        // log_softmax near 0 is (x - max) - lse with lse up to ~log(len): an ulp of lse, absolute.
        const double atol = log ? (std::is_same_v<T, float> ? 2e-5 : 1e-13) : atol_of<T>();
        compare(what, out.get(), want, rtol_of<T>(), atol);
        Dev<T> inplace(x);
        gpu::softmax<T>(inplace.ptr, shape, axis, inplace.ptr, log, g_stream);
        compare(what + " in place", inplace.get(), want, rtol_of<T>(), atol);
      }
    }
    Dev<T> tmp(1);
    expect_error("softmax 0-d", [&] { gpu::softmax<T>(tmp.ptr, Shape{}, 0, tmp.ptr, false, g_stream); });
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

// Fused backward (softmax_backward, cross_entropy_backward) against the cpu kernels; y from the
// cpu forward, so only the backward differs. Tolerance scaled by |g| (the row sum's terms).
void test_softmax_backward() {
  const auto& cases = softmax_backward_cases();
  auto run = [&]<class T>() {
    for (const auto& [shape, axis] : cases) {
      const std::vector<T> x = random_values<T>(shape.numel(), -5, 5), g = random_values<T>(shape.numel());
      for (bool log : {false, true}) {
        std::vector<T> y(x.size()), want(x.size());
        cpu::softmax<T>(x.data(), shape, axis, y.data(), log);
        cpu::softmax_backward<T>(y.data(), g.data(), shape, axis, want.data(), log);
        const Dev<T> dy(y), dg(g);
        Dev<T> out(shape.numel());
        gpu::softmax_backward<T>(dy.ptr, dg.ptr, shape, axis, out.ptr, log, g_stream);
        const std::string what = std::string(log ? "log_softmax_backward " : "softmax_backward ") + tname<T>() + " " +
                                 shape.to_string() + " axis " + std::to_string(axis);
        const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
        const int64_t len = shape.ndim() ? shape[axis] : 1;
        compare(what, out.get(), want, 0, tol * 3 * static_cast<double>(std::max<int64_t>(len, 1)));
        Dev<T> inplace(g);
        gpu::softmax_backward<T>(dy.ptr, inplace.ptr, shape, axis, inplace.ptr, log, g_stream);
        compare(what + " in place", inplace.get(), want, 0, tol * 3 * static_cast<double>(std::max<int64_t>(len, 1)));
      }
    }
    for (const auto& [rows, classes] : std::vector<std::pair<int64_t, int64_t>>{{4, 5}, {0, 3}, {3, 1}, {64, 1000}}) {
      std::vector<T> logits = random_values<T>(rows * classes, -20, 20), g = {T(-1.5)};
      std::vector<int64_t> labels(rows);
      for (int64_t r = 0; r < rows; ++r) labels[r] = r == 1 ? classes : (r * 7) % classes;  // row 1 out of range
      std::vector<T> want(logits.size());
      cpu::cross_entropy_backward<T>(logits.data(), labels.data(), g.data(), rows, classes, rows + 2, want.data());
      const Dev<T> dl(logits), dgr(g);
      const Dev<int64_t> dlab(labels);
      Dev<T> out(rows * classes);
      gpu::cross_entropy_backward<T>(dl.ptr, dlab.ptr, dgr.ptr, rows, classes, rows + 2, out.ptr, g_stream);
      compare("cross_entropy_backward " + tname<T>() + " " + std::to_string(rows) + "x" + std::to_string(classes),
              out.get(), want, rtol_of<T>(), atol_of<T>());
    }
    Dev<T> tmp(1);
    expect_error("softmax_backward bad axis",
                 [&] { gpu::softmax_backward<T>(tmp.ptr, tmp.ptr, Shape{1}, 1, tmp.ptr, false, g_stream); });
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

// ---- permute, copy_region ----

void test_permute() {
  const auto& cases = permute_cases();
  struct Region {
    Shape src;
    Axes src_begin;
    Shape dst;
    Axes dst_begin;
    Shape extent;
  };
  const std::vector<Region> regions = {
      {{}, {}, {}, {}, {}},
      {{10}, {2}, {8}, {1}, {5}},
      {{4, 5}, {1, 0}, {6, 5}, {2, 0}, {3, 5}},
      {{4, 5}, {1, 1}, {6, 7}, {0, 2}, {3, 3}},
      {{3, 4, 5}, {1, 0, 2}, {2, 6, 5}, {0, 1, 0}, {2, 3, 3}},
      {{3, 4, 5}, {0, 0, 0}, {3, 4, 5}, {0, 0, 0}, {3, 4, 5}},
      {{3, 4}, {0, 0}, {3, 4}, {0, 0}, {0, 4}},
      {{9, 1, 300}, {2, 0, 7}, {5, 2, 299}, {1, 1, 0}, {3, 1, 290}}};
  for_each_type([&]<class T>() {
    for (const auto& [shape, perm] : cases) {
      const std::vector<T> x = random_values<T>(shape.numel());
      std::vector<T> want(x.size());
      cpu::permute<T>(x.data(), shape, perm, want.data());
      const Dev<T> dx(x);
      Dev<T> out(shape.numel());
      gpu::permute<T>(dx.ptr, shape, perm, out.ptr, g_stream);
      compare("permute " + tname<T>() + " " + shape.to_string() + " perm " + spsd::detail::join(perm), out.get(), want);
    }
    for (const Region& r : regions) {
      const std::vector<T> src = random_values<T>(r.src.numel());
      std::vector<T> want = random_values<T>(r.dst.numel());  // untouched elements must stay
      const Dev<T> ds(src);
      Dev<T> dd(want);
      cpu::copy_region<T>(src.data(), r.src, r.src_begin, want.data(), r.dst, r.dst_begin, r.extent);
      gpu::copy_region<T>(ds.ptr, r.src, r.src_begin, dd.ptr, r.dst, r.dst_begin, r.extent, g_stream);
      compare("copy_region " + tname<T>() + " extent " + r.extent.to_string(), dd.get(), want);
    }
    Dev<T> tmp(20);
    expect_error("permute bad perm", [&] { gpu::permute<T>(tmp.ptr, Shape{4, 5}, Axes{0, 0}, tmp.ptr, g_stream); });
    expect_error("copy_region out of bounds", [&] {
      gpu::copy_region<T>(tmp.ptr, Shape{4, 5}, Axes{2, 0}, tmp.ptr, Shape{4, 5}, Axes{0, 0}, Shape{3, 5}, g_stream);
    });
  });
}

// ---- copy.hpp: copy_box, fill_identity, first_zero, copy_bytes ----

// The reference box copy: element by element over the region, in global coordinates.
void reference_copy_box(const unsigned char* src, const Box& src_box, unsigned char* dst, const Box& dst_box,
                        const Box& region, int64_t elem) {
  const Shape r = region.shape();
  const std::vector<int64_t> ss = spsd::contiguous_strides(src_box.shape()), ds = spsd::contiguous_strides(dst_box.shape());
  for (int64_t i = 0; i < r.numel(); ++i) {
    int64_t so = 0, dof = 0;
    for (int64_t d = r.ndim() - 1, rest = i; d >= 0; --d) {
      const int64_t at = region.begin[d] + rest % r[d];
      so += (at - src_box.begin[d]) * ss[d];
      dof += (at - dst_box.begin[d]) * ds[d];
      rest /= r[d];
    }
    std::memcpy(dst + dof * elem, src + so * elem, elem);
  }
}

void test_copy() {
  const std::vector<std::tuple<Box, Box, Box>> boxes = {  // src box, dst box, region (global coordinates)
      {{{}, {}}, {{}, {}}, {{}, {}}},
      {{{3}, {10}}, {{0}, {6}}, {{3}, {6}}},
      {{{1, 0, 0}, {5, 7, 5}}, {{0, 2, 1}, {6, 6, 4}}, {{1, 2, 1}, {5, 6, 4}}},
      {{{0, 0}, {4, 6}}, {{2, 0}, {6, 6}}, {{2, 0}, {4, 6}}},
      {{{0, 0}, {4, 6}}, {{0, 0}, {4, 6}}, {{0, 0}, {4, 6}}},
      {{{0, 0}, {4, 6}}, {{0, 0}, {4, 6}}, {{1, 3}, {1, 5}}},
      {{{0, 0, 0, 0}, {3, 4, 5, 6}}, {{1, 0, 2, 0}, {3, 4, 5, 6}}, {{1, 1, 2, 0}, {3, 3, 5, 6}}}};
  for (int64_t elem : {4, 8, 2, 12}) {
    for (int64_t misalign : {int64_t{0}, elem / 2}) {
      for (const auto& [sb, db, region] : boxes) {
        const int64_t sbytes = sb.numel() * elem, dbytes = db.numel() * elem;
        std::vector<unsigned char> src(sbytes), want(dbytes);
        for (auto& c : src) c = static_cast<unsigned char>(g_rng());
        for (auto& c : want) c = static_cast<unsigned char>(g_rng());
        Dev<unsigned char> ds(sbytes + misalign), dd(dbytes + misalign);
        check_cuda(cudaMemcpy(ds.ptr + misalign, src.data(), sbytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        check_cuda(cudaMemcpy(dd.ptr + misalign, want.data(), dbytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        reference_copy_box(src.data(), sb, want.data(), db, region, elem);
        gpu::copy_box(ds.ptr + misalign, sb, dd.ptr + misalign, db, region, elem, g_stream);
        std::vector<unsigned char> got = dd.get();
        got.erase(got.begin(), got.begin() + misalign);
        got.resize(dbytes);
        compare("copy_box elem " + std::to_string(elem) + " offset " + std::to_string(misalign) + " region " +
                    region.to_string(),
                got, want);
      }
    }
  }
  for_each_type([&]<class T>() {
    for (int64_t n : {0, 5, 1000}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
        const std::vector<T> want(n, spsd::reduce_identity<T>(op));
        Dev<T> out(n);
        gpu::fill_identity(out.ptr, n, spsd::dtype_of<T>, op, g_stream);
        compare("fill_identity " + tname<T>() + " " + std::string(to_string(op)), out.get(), want);
      }
    }
    for (int64_t n : {0, 1, 17, 100000}) {
      std::vector<T> x = random_values<T>(n, 1, 3);
      for (T& v : x)
        if (v == T(0)) v = T(1);
      for (int64_t at : {int64_t{-1}, int64_t{0}, n / 2, n - 1}) {
        if (at >= n) continue;
        std::vector<T> y = x;
        if (at >= 0) {
          y[at] = T(0);
          if (at + 1 < n) y[n - 1] = T(0);  // a later zero must not win
        }
        const Dev<T> dy(y);
        const int64_t got = gpu::first_zero(dy.ptr, n, spsd::dtype_of<T>, g_stream);
        ++g_group.cases;
        if (got != at)
          fail("first_zero " + tname<T>() + " n=" + std::to_string(n) + ": " + std::to_string(got) + " vs " + std::to_string(at));
      }
    }
  });
  const std::vector<int64_t> bytes = random_values<int64_t>(1001);
  const Dev<int64_t> from(bytes);
  Dev<int64_t> to(1001);
  gpu::copy_bytes(to.ptr, from.ptr, 1001 * 8, g_stream);
  compare("copy_bytes", to.get(), bytes);
}

// ---- index ----

void test_index() {
  for_each_type([&]<class T>() {
    for (int64_t dim : {0, 1, 7}) {
      for (int64_t n : {0, 1, 13}) {
        const int64_t rows = 5, row_begin = 3, vocab = 10;
        const std::vector<T> w = random_values<T>(rows * dim);
        std::vector<int64_t> idx(n);
        for (int64_t& i : idx) i = static_cast<int64_t>(g_rng() % 14) - 2;  // [-2, 12): some outside [0, vocab)
        const Dev<T> dw(w);
        const Dev<int64_t> di(idx);
        std::vector<T> want(n * dim);
        cpu::embedding<T>(w.data(), row_begin, rows, dim, idx.data(), n, want.data());
        Dev<T> out(n * dim);
        gpu::embedding<T>(dw.ptr, row_begin, rows, dim, di.ptr, n, out.ptr, g_stream);
        const std::string what = tname<T>() + " n=" + std::to_string(n) + " dim=" + std::to_string(dim);
        compare("embedding " + what, out.get(), want);
        // op/index.hpp's marking, written out on the host
        for (int64_t i = 0; i < n; ++i)
          if (idx[i] < 0 || idx[i] >= vocab)
            for (int64_t j = 0; j < dim; ++j) want[i * dim + j] = std::numeric_limits<T>::quiet_NaN();
        gpu::mark_out_of_range<T>(di.ptr, n, vocab, dim, out.ptr, g_stream);
        compare("mark_out_of_range " + what, out.get(), want);

        const int64_t c = dim, c_begin = 2;  // pick: x (n, c), classes [2, 2 + c)
        const std::vector<T> x = random_values<T>(n * c);
        const Dev<T> dx(x);
        std::vector<T> pwant(n);
        cpu::pick<T>(x.data(), n, c_begin, c, idx.data(), pwant.data());
        Dev<T> pout(n);
        gpu::pick<T>(dx.ptr, n, c_begin, c, di.ptr, pout.ptr, g_stream);
        compare("pick " + what, pout.get(), pwant);
      }
    }
  });
}

// ---- the kernels only backward needs (autograd/grad_ops.hpp) ----

void test_backward_kernels() {
  using spsd::kernel::cpu::UnaryOp;
  // unary_grad: f'(saved) * g for every op; log and sqrt on positive values.
  for (UnaryOp op : {UnaryOp::kNeg, UnaryOp::kRelu, UnaryOp::kGelu, UnaryOp::kExp, UnaryOp::kLog, UnaryOp::kTanh,
                     UnaryOp::kSigmoid, UnaryOp::kSqrt, UnaryOp::kAbs, UnaryOp::kRsqrt, UnaryOp::kErf, UnaryOp::kSilu,
                     UnaryOp::kGeluTanh}) {
    auto one = [&]<class T>() {
      const int64_t n = 1003;  // not a multiple of the packs
      const bool positive = op == UnaryOp::kLog || op == UnaryOp::kSqrt || op == UnaryOp::kRsqrt;
      const std::vector<T> s = random_values<T>(n, positive ? 0.1 : -3, 3), g = random_values<T>(n);
      std::vector<T> want(n);
      cpu::unary_grad<T>(op, s.data(), g.data(), want.data(), n);
      const Dev<T> ds(s), dg(g);
      Dev<T> out(n);
      gpu::unary_grad<T>(op, ds.ptr, dg.ptr, out.ptr, n, g_stream);
      compare(std::string(to_string(op)) + "_grad " + tname<T>(), out.get(), want, rtol_of<T>(), atol_of<T>());
    };
    one.template operator()<float>();
    one.template operator()<double>();
  }
  for_each_type([&]<class T>() {
    // mask_eq over broadcast shapes, with ties (small integer-valued inputs).
    for (const auto& [a, b] : std::vector<std::pair<Shape, Shape>>{{{6, 5}, {6, 1}}, {{4, 3, 5}, {5}}, {{7}, {7}},
                                                                   {{2, 3}, {}}, {{0, 3}, {1, 3}}}) {
      const Shape out_shape = cpu::detail::broadcast_shape("mask_eq", a, b);
      std::vector<T> x(a.numel()), m(b.numel());
      for (T& v : x) v = static_cast<T>(g_rng() % 3);
      for (T& v : m) v = static_cast<T>(g_rng() % 3);
      std::vector<T> want(out_shape.numel());
      cpu::equal_mask<T>(x.data(), a, m.data(), b, want.data(), out_shape);
      const Dev<T> dx(x), dm(m);
      Dev<T> out(out_shape.numel());
      gpu::equal_mask<T>(dx.ptr, a, dm.ptr, b, out.ptr, out_shape, g_stream);
      compare("mask_eq " + tname<T>() + " " + a.to_string() + " " + b.to_string(), out.get(), want);
    }
    // expand: stretched leading, middle and last axes.
    for (const auto& [from, to] : std::vector<std::pair<Shape, Shape>>{
             {{1, 5}, {4, 5}}, {{4, 1}, {4, 6}}, {{3, 1, 2}, {3, 4, 2}}, {{}, {2, 3}}, {{5}, {2, 3, 5}}, {{2, 0}, {2, 0}}}) {
      const std::vector<T> x = random_values<T>(from.numel());
      std::vector<T> want(to.numel());
      cpu::broadcast_to<T>(x.data(), from, want.data(), to);
      const Dev<T> dx(x);
      Dev<T> out(to.numel());
      gpu::broadcast_to<T>(dx.ptr, from, out.ptr, to, g_stream);
      compare("expand " + tname<T>() + " " + from.to_string() + " -> " + to.to_string(), out.get(), want);
    }
    // embedding_grad (repeated rows, rows of other ranks, out of range) and pick_grad.
    for (int64_t dim : {1, 7}) {
      const int64_t n = 40, rows = 5, row_begin = 3, c = dim;
      std::vector<int64_t> idx(n);
      for (int64_t& i : idx) i = static_cast<int64_t>(g_rng() % 14) - 2;
      std::vector<T> g(n * dim);
      for (T& v : g) v = static_cast<T>(static_cast<int>(g_rng() % 9) - 4);  // exact sums in any order
      std::vector<T> want(rows * dim);
      cpu::embedding_grad<T>(g.data(), idx.data(), n, row_begin, rows, dim, want.data());
      const Dev<T> dg(g);
      const Dev<int64_t> di(idx);
      Dev<T> out(rows * dim);
      gpu::embedding_grad<T>(dg.ptr, di.ptr, n, row_begin, rows, dim, out.ptr, g_stream);
      compare("embedding_grad " + tname<T>() + " dim=" + std::to_string(dim), out.get(), want);
      const std::vector<T> pg = random_values<T>(n);
      std::vector<T> pwant(n * c);
      cpu::pick_grad<T>(pg.data(), idx.data(), n, c, pwant.data());
      const Dev<T> dpg(pg);
      Dev<T> pout(n * c);
      gpu::pick_grad<T>(dpg.ptr, di.ptr, n, c, pout.ptr, g_stream);
      compare("pick_grad " + tname<T>() + " c=" + std::to_string(c), pout.get(), pwant);
    }
  });
}

// ---- matmul ----


void test_matmul() {
  const auto& cases = matmul_cases();
  auto run = [&]<class T>(const std::string& label, double rtol) {
    for (const auto& [sa, sb] : cases) {
      std::vector<int64_t> od = cpu::detail::broadcast_shape("test", cpu::detail::batch_of(sa), cpu::detail::batch_of(sb)).dims();
      od.insert(od.end(), {sa[sa.ndim() - 2], sb[sb.ndim() - 1]});
      const Shape so(od);
      const std::vector<T> a = random_values<T>(sa.numel()), b = random_values<T>(sb.numel());
      std::vector<T> want(so.numel());
      cpu::matmul<T>(a.data(), sa, b.data(), sb, want.data(), so);
      std::vector<T> scale;  // tolerance scaled by |a| @ |b|
      if constexpr (std::is_floating_point_v<T>) {
        std::vector<T> aa(a.size()), ab(b.size());
        scale.resize(so.numel());
        std::transform(a.begin(), a.end(), aa.begin(), [](T v) { return std::abs(v); });
        std::transform(b.begin(), b.end(), ab.begin(), [](T v) { return std::abs(v); });
        cpu::matmul<T>(aa.data(), sa, ab.data(), sb, scale.data(), so);
      }
      // Every transpose flag: the operand stored transposed (cpu: the host copy made here).
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          const Dev<T> da(ta ? transposed_copy(a, sa) : a), db(tb ? transposed_copy(b, sb) : b);
          Dev<T> out(so.numel());
          gpu::matmul<T>(da.ptr, ta ? swap_last_two(sa) : sa, db.ptr, tb ? swap_last_two(sb) : sb, out.ptr, so, ta, tb,
                         g_stream);
          const std::string what = "matmul " + label + " " + sa.to_string() + (ta ? "^T" : "") + " x " +
                                   sb.to_string() + (tb ? "^T" : "");
          if constexpr (std::is_floating_point_v<T>) compare(what, out.get(), want, rtol, atol_of<T>(), scale);
          else compare(what, out.get(), want);
        }
    }
  };
  run.template operator()<float>("float32", 1e-5);
  run.template operator()<double>("float64", 1e-13);
  run.template operator()<int32_t>("int32", 0);
  run.template operator()<int64_t>("int64", 0);
  spsd::set_matmul_precision(spsd::MatmulPrecision::kHigh);  // TF32 tensor cores
  run.template operator()<float>("float32 tf32", 5e-3);
  spsd::set_matmul_precision(spsd::MatmulPrecision::kHighest);
  Dev<float> tmp(20);
  expect_error("matmul inner mismatch", [&] { gpu::matmul<float>(tmp.ptr, Shape{2, 3}, tmp.ptr, Shape{4, 2}, tmp.ptr, Shape{2, 2}, g_stream); });
}

// ---- random ----

void test_random() {
  const std::vector<std::pair<Shape, Box>> cases = {
      {{7, 13}, {{0, 0}, {7, 13}}}, {{7, 13}, {{2, 3}, {5, 11}}}, {{7, 13}, {{0, 0}, {0, 13}}}, {{}, {{}, {}}},
      {{4, 5, 6}, {{1, 0, 2}, {3, 5, 6}}}, {{1000, 1000}, {{100, 0}, {900, 1000}}}, {{100001}, {{3}, {100001}}}};
  auto run = [&]<class T>() {
    int64_t normal_total = 0, normal_diff = 0;
    double normal_max_rel = 0;
    for (uint64_t seed : {uint64_t{0}, uint64_t{12345}, uint64_t{0xDEADBEEFCAFEF00Dull}}) {
      for (const auto& [global, box] : cases) {
        const int64_t n = box.numel();
        std::vector<T> uni(n), nor(n);
        const std::vector<int64_t> gs = spsd::contiguous_strides(global);
        const Shape local = box.shape();
        for (int64_t i = 0; i < n; ++i) {  // the global index of local element i
          int64_t g = 0;
          for (int64_t d = box.ndim() - 1, rest = i; d >= 0; --d) {
            g += (box.begin[d] + rest % local[d]) * gs[d];
            rest /= local[d];
          }
          uni[i] = spsd::philox::uniform<T>(seed, static_cast<uint64_t>(g));
          nor[i] = spsd::philox::normal<T>(seed, static_cast<uint64_t>(g));
        }
        Dev<T> du(n), dn(n);
        gpu::fill_uniform<T>(du.ptr, box, global, seed, g_stream);
        gpu::fill_normal<T>(dn.ptr, box, global, seed, g_stream);
        compare("fill_uniform " + tname<T>() + " box " + box.to_string() + " (bit-exact)", du.get(), uni);
        const std::vector<T> got = dn.get();
        ++g_group.cases;
        for (int64_t i = 0; i < n; ++i) {
          ++normal_total;
          if (std::memcmp(&got[i], &nor[i], sizeof(T)) == 0) continue;
          ++normal_diff;
          const double rel = std::abs(double(got[i]) - double(nor[i])) / std::max(1e-300, std::abs(double(nor[i])));
          normal_max_rel = std::max(normal_max_rel, std::isnan(rel) ? 1.0 : rel);
        }
      }
    }
    // Device log/cos may differ from glibc's by an ulp: reported, and a failure only beyond that.
    std::cout << "  fill_normal " << tname<T>() << ": " << normal_diff << " of " << normal_total
              << " elements differ bitwise from the host, max relative difference " << normal_max_rel << "\n";
    if (normal_max_rel > (std::is_same_v<T, float> ? 1e-6 : 1e-14)) fail("fill_normal " + tname<T>() + " beyond an ulp");
  };
  run.template operator()<float>();
  run.template operator()<double>();
}

// ---- bfloat16 / float16 ----
//
// Each 16-bit instance against the float instance of the same kernel on the same inputs (16-bit
// values, widened exactly), that result rounded once to the 16-bit type. Bounds, with e the
// type's epsilon (2^-7 bfloat16, 2^-10 float16) times |result| (plus the least subnormal):
// - moves, fills, max/min, embedding and pick, random fills, casts: bit-exact;
// - element-wise maps, unary_grad, optimizer steps: 1 e (the same float expression rounded once:
//   equal unless contraction differs right at a rounding boundary);
// - sums (reduce, softmax and its backward, cross-entropy backward, matmul): 1 e plus 1e-5 times
//   the sum of |terms| (float accumulation in another order: packs of 8 instead of 4, tensor cores).

template <class H>
std::vector<H> narrowed(const std::vector<float>& v) {
  std::vector<H> r(v.size());
  std::transform(v.begin(), v.end(), r.begin(), [](float x) { return H(x); });
  return r;
}
template <class H>
std::vector<float> widened(const std::vector<H>& v) {
  return std::vector<float>(v.begin(), v.end());
}
// Random float values that are exactly 16-bit values.
template <class H>
std::vector<float> random_halves(int64_t n, double lo = -3, double hi = 3) {
  return widened(narrowed<H>(random_values<float>(n, lo, hi)));
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// got against want (the float kernel's result) rounded once to H, within the bound above:
// ulps * e * |want| (0: bit-exact, NaN only against NaN) plus sum_tol * scale[i].
template <class H>
void compare_rounded(const std::string& what, const std::vector<H>& got, const std::vector<float>& want,
                     double ulps = 0, double sum_tol = 0, const std::vector<float>& scale = {}) {
  ++g_group.cases;
  if (got.size() != want.size()) return fail(what + ": size " + std::to_string(got.size()) + " vs " + std::to_string(want.size()));
  const double e = static_cast<float>(std::numeric_limits<H>::epsilon());
  const double tiny = static_cast<float>(std::numeric_limits<H>::denorm_min());
  for (size_t i = 0; i < got.size(); ++i) {
    const H w(want[i]);
    const double g = static_cast<float>(got[i]), wd = static_cast<float>(w);
    bool ok;
    if (std::isnan(g) || std::isnan(wd)) ok = std::isnan(g) && std::isnan(wd);
    else if (ulps == 0 && sum_tol == 0) ok = same_bits(got[i], w);
    else if (std::isinf(wd)) ok = g == wd;
    else ok = std::abs(g - wd) <= ulps * (e * std::abs(wd) + tiny) + sum_tol * (scale.empty() ? 0.0 : scale[i]);
    if (!ok) return fail(what + ": at " + std::to_string(i) + " gpu " + show(g) + ", float kernel rounded " + show(wd));
  }
}

// Runs the H instance and the float instance of one kernel: run(ptrs...) with Dev<H> or Dev<float>.
template <class H>
struct Pair {
  Dev<H> h;
  Dev<float> f;
  explicit Pair(const std::vector<float>& v) : h(narrowed<H>(v)), f(v) {}
  explicit Pair(int64_t n) : h(n), f(n) {}
};

template <class H>
void halves_elementwise() {
  const std::string t = tname<H>();
  const cpu::UnaryOp unary_ops[] = {cpu::UnaryOp::kNeg, cpu::UnaryOp::kRelu, cpu::UnaryOp::kGelu,
                                    cpu::UnaryOp::kExp, cpu::UnaryOp::kLog, cpu::UnaryOp::kTanh,
                                    cpu::UnaryOp::kSigmoid, cpu::UnaryOp::kSqrt, cpu::UnaryOp::kAbs,
                                    cpu::UnaryOp::kRsqrt, cpu::UnaryOp::kErf, cpu::UnaryOp::kSilu,
                                    cpu::UnaryOp::kGeluTanh};
  const cpu::BinaryOp binary_ops[] = {cpu::BinaryOp::kAdd, cpu::BinaryOp::kSub, cpu::BinaryOp::kMul,
                                      cpu::BinaryOp::kDiv, cpu::BinaryOp::kMax, cpu::BinaryOp::kMin};
  for (int64_t n : {0, 1, 7, 1000, 65537}) {
    std::vector<float> x = random_halves<H>(n);
    for (float& v : x)
      if (v == 0) v = 1;
    const Pair<H> in(x);
    for (cpu::UnaryOp op : unary_ops) {
      Pair<H> out(n);
      gpu::unary<H>(op, in.h.ptr, out.h.ptr, n, g_stream);
      gpu::unary<float>(op, in.f.ptr, out.f.ptr, n, g_stream);
      compare_rounded("unary " + std::string(to_string(op)) + " " + t + " n=" + std::to_string(n), out.h.get(),
                      out.f.get(), 1);
      Pair<H> grad(n), g(random_halves<H>(n));
      gpu::unary_grad<H>(op, in.h.ptr, g.h.ptr, grad.h.ptr, n, g_stream);
      gpu::unary_grad<float>(op, in.f.ptr, g.f.ptr, grad.f.ptr, n, g_stream);
      compare_rounded(std::string(to_string(op)) + "_grad " + t + " n=" + std::to_string(n), grad.h.get(),
                      grad.f.get(), 1);
    }
    Pair<H> out(n);
    gpu::fill<H>(out.h.ptr, n, H(3.0f), g_stream);
    compare_rounded("fill " + t, out.h.get(), std::vector<float>(n, 3.0f));
    Pair<H> scaled(x);
    const H factor(0.37f);  // the kernel multiplies by the 16-bit factor, widened
    gpu::scale<H>(scaled.h.ptr, n, factor, g_stream);
    gpu::scale<float>(scaled.f.ptr, n, static_cast<float>(factor), g_stream);
    compare_rounded("scale " + t, scaled.h.get(), scaled.f.get(), 1);
    for (cpu::BinaryOp op : binary_ops)
      for (bool first : {false, true}) {
        gpu::binary_scalar<H>(op, in.h.ptr, H(-1.75f), out.h.ptr, n, first, g_stream);
        gpu::binary_scalar<float>(op, in.f.ptr, -1.75f, out.f.ptr, n, first, g_stream);
        compare_rounded("binary_scalar " + std::string(to_string(op)) + (first ? " (scalar first) " : " ") + t,
                        out.h.get(), out.f.get(), 1);
      }
  }
  for (const auto& [sa, sb] : broadcast_pairs()) {
    const Shape so = cpu::detail::broadcast_shape("test", sa, sb);
    const Pair<H> a(random_halves<H>(sa.numel())), b(random_halves<H>(sb.numel()));
    for (cpu::BinaryOp op : binary_ops) {
      Pair<H> out(so.numel());
      gpu::binary<H>(op, a.h.ptr, sa, b.h.ptr, sb, out.h.ptr, so, g_stream);
      gpu::binary<float>(op, a.f.ptr, sa, b.f.ptr, sb, out.f.ptr, so, g_stream);
      compare_rounded(std::string(to_string(op)) + " " + t + " " + sa.to_string() + " x " + sb.to_string(),
                      out.h.get(), out.f.get(), 1);
    }
    Pair<H> mask(sa.numel());
    gpu::equal_mask<H>(a.h.ptr, sa, a.h.ptr, sa, mask.h.ptr, sa, g_stream);
    compare_rounded("mask_eq " + t + " " + sa.to_string(), mask.h.get(), std::vector<float>(sa.numel(), 1.0f));
  }
  // The pack kernels (8 halves per 16 bytes) where all operands are aligned, the element kernels where not.
  const int64_t n = 1031, pad = 9;
  const Pair<H> a(random_halves<H>(n + pad)), b(random_halves<H>(n + pad));
  for (auto [oa, ob, oo] : {std::array<int64_t, 3>{0, 0, 0}, {8, 8, 8}, {1, 1, 1}, {0, 8, 1}}) {
    Pair<H> out(n + pad);
    gpu::binary<H>(cpu::BinaryOp::kMul, a.h.ptr + oa, Shape{n}, b.h.ptr + ob, Shape{n}, out.h.ptr + oo, Shape{n}, g_stream);
    gpu::binary<float>(cpu::BinaryOp::kMul, a.f.ptr + oa, Shape{n}, b.f.ptr + ob, Shape{n}, out.f.ptr + oo, Shape{n},
                       g_stream);
    const std::vector<H> gh = out.h.get();
    const std::vector<float> gf = out.f.get();
    compare_rounded("flat mul " + t + " at offsets " + std::to_string(oa) + "/" + std::to_string(ob) + "/" +
                        std::to_string(oo),
                    std::vector<H>(gh.begin() + oo, gh.begin() + oo + n),
                    std::vector<float>(gf.begin() + oo, gf.begin() + oo + n), 1);
  }
}

template <class H>
void halves_reductions() {
  const std::string t = tname<H>();
  for (const auto& [shape, axes] : reduce_cases()) {
    const std::vector<float> x = random_halves<H>(shape.numel());
    std::vector<float> ax(x.size());
    std::transform(x.begin(), x.end(), ax.begin(), [](float v) { return std::abs(v); });
    int64_t out_n = 1;
    for (int64_t d = 0; d < shape.ndim(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) out_n *= shape[d];
    const Pair<H> in(x);
    const Dev<float> dax(ax);
    Dev<float> abs_sum(out_n);
    gpu::reduce<float>(ReduceOp::kSum, dax.ptr, shape, axes, abs_sum.ptr, g_stream);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      Pair<H> out(out_n);
      gpu::reduce<H>(op, in.h.ptr, shape, axes, out.h.ptr, g_stream);
      gpu::reduce<float>(op, in.f.ptr, shape, axes, out.f.ptr, g_stream);
      const std::string what = "reduce " + std::string(to_string(op)) + " " + t + " " + shape.to_string();
      // An empty reduction gives H's own identity (finite lowest()/max(), as the cpu kernel
      // does), which float's identity rounded to H is not: it overflows to -inf/+inf.
      const std::vector<float> want =
          shape.numel() == 0 ? std::vector<float>(out_n, static_cast<float>(reduce_identity<H>(op))) : out.f.get();
      if (op == ReduceOp::kSum) compare_rounded(what, out.h.get(), want, 1, 1e-5, abs_sum.get());
      else compare_rounded(what, out.h.get(), want);
    }
  }
  for (const auto& [shape, axis] : softmax_cases()) {
    const Pair<H> in(random_halves<H>(shape.numel(), -20, 20));
    for (bool log : {false, true}) {
      Pair<H> out(shape.numel());
      gpu::softmax<H>(in.h.ptr, shape, axis, out.h.ptr, log, g_stream);
      gpu::softmax<float>(in.f.ptr, shape, axis, out.f.ptr, log, g_stream);
      // log_softmax: (x - max) - lse, lse up to ~log(len) + 20: an e of it, absolute.
      const std::vector<float> lse_scale(shape.numel(), log ? 30.0f : 0.0f);
      compare_rounded(std::string(log ? "log_softmax " : "softmax ") + t + " " + shape.to_string(), out.h.get(),
                      out.f.get(), 1, 1e-5, lse_scale);
      Pair<H> g(random_halves<H>(shape.numel())), dx(shape.numel());
      gpu::softmax_backward<H>(out.h.ptr, g.h.ptr, shape, axis, dx.h.ptr, log, g_stream);
      const std::vector<float> y16 = widened(out.h.get());  // the float kernel sees the same (rounded) y
      const Dev<float> yf(y16);
      gpu::softmax_backward<float>(yf.ptr, g.f.ptr, shape, axis, dx.f.ptr, log, g_stream);
      const int64_t len = shape.ndim() ? std::max<int64_t>(shape[axis], 1) : 1;
      compare_rounded(std::string(log ? "log_softmax_backward " : "softmax_backward ") + t + " " + shape.to_string(),
                      dx.h.get(), dx.f.get(), 1, 1e-5, std::vector<float>(shape.numel(), 3.0f * len));
    }
  }
  for (const auto& [rows, classes] : std::vector<std::pair<int64_t, int64_t>>{{4, 5}, {3, 1}, {64, 1000}}) {
    const Pair<H> logits(random_halves<H>(rows * classes, -20, 20)), g(std::vector<float>{-1.5f});
    std::vector<int64_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r) labels[r] = r == 1 ? classes : (r * 7) % classes;
    const Dev<int64_t> dl(labels);
    Pair<H> dx(rows * classes);
    gpu::cross_entropy_backward<H>(logits.h.ptr, dl.ptr, g.h.ptr, rows, classes, rows + 2, dx.h.ptr, g_stream);
    gpu::cross_entropy_backward<float>(logits.f.ptr, dl.ptr, g.f.ptr, rows, classes, rows + 2, dx.f.ptr, g_stream);
    compare_rounded("cross_entropy_backward " + t + " " + std::to_string(rows) + "x" + std::to_string(classes),
                    dx.h.get(), dx.f.get(), 1, 1e-5, std::vector<float>(rows * classes, 1.5f));
  }
}

template <class H>
void halves_moves() {
  const std::string t = tname<H>();
  for (const auto& [shape, perm] : permute_cases()) {
    const Pair<H> in(random_halves<H>(shape.numel()));
    Pair<H> out(shape.numel());
    gpu::permute<H>(in.h.ptr, shape, perm, out.h.ptr, g_stream);
    gpu::permute<float>(in.f.ptr, shape, perm, out.f.ptr, g_stream);
    compare_rounded("permute " + t + " " + shape.to_string(), out.h.get(), out.f.get());
  }
  for (int64_t dim : {1, 7}) {
    const int64_t n = 40, rows = 5, row_begin = 3, vocab = 10;
    std::vector<int64_t> idx(n);
    for (int64_t& i : idx) i = static_cast<int64_t>(g_rng() % 14) - 2;
    const Dev<int64_t> di(idx);
    const Pair<H> w(random_halves<H>(rows * dim));
    Pair<H> out(n * dim);
    gpu::embedding<H>(w.h.ptr, row_begin, rows, dim, di.ptr, n, out.h.ptr, g_stream);
    gpu::embedding<float>(w.f.ptr, row_begin, rows, dim, di.ptr, n, out.f.ptr, g_stream);
    gpu::mark_out_of_range<H>(di.ptr, n, vocab, dim, out.h.ptr, g_stream);
    gpu::mark_out_of_range<float>(di.ptr, n, vocab, dim, out.f.ptr, g_stream);
    compare_rounded("embedding " + t + " dim=" + std::to_string(dim), out.h.get(), out.f.get());
    std::vector<float> g(n * dim);
    for (float& v : g) v = static_cast<float>(static_cast<int>(g_rng() % 9) - 4);  // exact sums in any order
    const Pair<H> dg(g);
    Pair<H> grad(rows * dim);
    gpu::embedding_grad<H>(dg.h.ptr, di.ptr, n, row_begin, rows, dim, grad.h.ptr, g_stream);
    gpu::embedding_grad<float>(dg.f.ptr, di.ptr, n, row_begin, rows, dim, grad.f.ptr, g_stream);
    compare_rounded("embedding_grad " + t + " dim=" + std::to_string(dim), grad.h.get(), grad.f.get());
    const Pair<H> x(random_halves<H>(n * dim));
    Pair<H> picked(n), pg(n * dim);
    gpu::pick<H>(x.h.ptr, n, 2, dim, di.ptr, picked.h.ptr, g_stream);
    gpu::pick<float>(x.f.ptr, n, 2, dim, di.ptr, picked.f.ptr, g_stream);
    compare_rounded("pick " + t, picked.h.get(), picked.f.get());
    gpu::pick_grad<H>(x.h.ptr, di.ptr, n, dim, pg.h.ptr, g_stream);
    gpu::pick_grad<float>(x.f.ptr, di.ptr, n, dim, pg.f.ptr, g_stream);
    compare_rounded("pick_grad " + t, pg.h.get(), pg.f.get());
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    Dev<H> out(33);
    gpu::fill_identity(out.ptr, 33, spsd::dtype_of<H>, op, g_stream);
    compare_rounded("fill_identity " + t, out.get(), std::vector<float>(33, static_cast<float>(spsd::reduce_identity<H>(op))));
  }
  std::vector<float> x = random_halves<H>(1000, 1, 3);
  x[700] = 0;
  const Dev<H> dx(narrowed<H>(x));
  ++g_group.cases;
  if (gpu::first_zero(dx.ptr, 1000, spsd::dtype_of<H>, g_stream) != 700) fail("first_zero " + t);
  // rand/randn: the float value of the same counter, rounded once, bit for bit.
  const Shape global{300, 70};
  const Box box{{10, 3}, {290, 70}};
  for (bool normal : {false, true}) {
    Pair<H> out(box.numel());
    if (normal) {
      gpu::fill_normal<H>(out.h.ptr, box, global, 99, g_stream);
      gpu::fill_normal<float>(out.f.ptr, box, global, 99, g_stream);
    } else {
      gpu::fill_uniform<H>(out.h.ptr, box, global, 99, g_stream);
      gpu::fill_uniform<float>(out.f.ptr, box, global, 99, g_stream);
    }
    compare_rounded(std::string(normal ? "fill_normal " : "fill_uniform ") + t + " (bit-exact)", out.h.get(),
                    out.f.get());
  }
}

template <class H>
void halves_matmul() {
  const std::string t = tname<H>();
  for (const auto& [sa, sb] : matmul_cases()) {
    std::vector<int64_t> od = cpu::detail::broadcast_shape("test", cpu::detail::batch_of(sa), cpu::detail::batch_of(sb)).dims();
    od.insert(od.end(), {sa[sa.ndim() - 2], sb[sb.ndim() - 1]});
    const Shape so(od);
    const std::vector<float> a = random_halves<H>(sa.numel()), b = random_halves<H>(sb.numel());
    std::vector<float> aa(a.size()), ab(b.size()), scale(so.numel());
    std::transform(a.begin(), a.end(), aa.begin(), [](float v) { return std::abs(v); });
    std::transform(b.begin(), b.end(), ab.begin(), [](float v) { return std::abs(v); });
    cpu::matmul<float>(aa.data(), sa, ab.data(), sb, scale.data(), so);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const Pair<H> da(ta ? transposed_copy(a, sa) : a), db(tb ? transposed_copy(b, sb) : b);
        const Shape ha = ta ? swap_last_two(sa) : sa, hb = tb ? swap_last_two(sb) : sb;
        Pair<H> out(so.numel());
        gpu::matmul<H>(da.h.ptr, ha, db.h.ptr, hb, out.h.ptr, so, ta, tb, g_stream);
        gpu::matmul<float>(da.f.ptr, ha, db.f.ptr, hb, out.f.ptr, so, ta, tb, g_stream);  // kHighest: exact float32
        compare_rounded("matmul " + t + " " + sa.to_string() + (ta ? "^T" : "") + " x " + sb.to_string() +
                            (tb ? "^T" : ""),
                        out.h.get(), out.f.get(), 1, 1e-5, scale);
      }
  }
}

template <class H>
void halves_optim() {
  const std::string t = tname<H>();
  const int64_t n = 1003;
  const std::vector<float> p0 = random_halves<H>(n), g0 = random_halves<H>(n), m0 = random_halves<H>(n, -0.1, 0.1),
                           v0 = random_halves<H>(n, 0, 0.1);
  for (auto [momentum, decay, nesterov] : {std::tuple{false, false, false}, {true, true, false}, {true, false, true}}) {
    const cpu::SgdStep<float> s{0.01f, 0.9f, 0.1f, momentum, decay, nesterov};
    Pair<H> p(p0), buf(m0);
    const Pair<H> g(g0);
    gpu::sgd_step<H>(p.h.ptr, g.h.ptr, buf.h.ptr, n, s, g_stream);
    gpu::sgd_step<float>(p.f.ptr, g.f.ptr, buf.f.ptr, n, s, g_stream);
    const std::string what = "sgd_step " + t + (momentum ? " momentum" : "") + (nesterov ? " nesterov" : "");
    compare_rounded(what + " p", p.h.get(), p.f.get(), 1);
    compare_rounded(what + " buf", buf.h.get(), buf.f.get(), 1);
  }
  for (auto [l2, decoupled] : {std::pair{false, false}, {true, false}, {false, true}}) {
    const cpu::AdamStep<float> s{0.9f, 0.1f, 0.999f, 0.001f, 1e-3f, 1e-8f, 0.01f, 0.9999f, l2, decoupled};
    Pair<H> p(p0), m(m0), v(v0);
    const Pair<H> g(g0);
    gpu::adam_step<H>(p.h.ptr, g.h.ptr, m.h.ptr, v.h.ptr, n, s, g_stream);
    gpu::adam_step<float>(p.f.ptr, g.f.ptr, m.f.ptr, v.f.ptr, n, s, g_stream);
    const std::string what = std::string("adam_step ") + t + (l2 ? " l2" : "") + (decoupled ? " decoupled" : "");
    compare_rounded(what + " p", p.h.get(), p.f.get(), 1);
    compare_rounded(what + " m", m.h.get(), m.f.get(), 1);
    compare_rounded(what + " v", v.h.get(), v.f.get(), 1);
  }
}

void test_halves() {
  const auto both = [](auto body) {
    body.template operator()<spsd::bfloat16>();
    body.template operator()<spsd::float16>();
  };
  both([]<class H>() { halves_elementwise<H>(); });
  both([]<class H>() { halves_reductions<H>(); });
  both([]<class H>() { halves_moves<H>(); });
  both([]<class H>() { halves_matmul<H>(); });
  both([]<class H>() { halves_optim<H>(); });
}

// ---- cast and note_nonfinite ----

template <class F>
void for_every_type(F f) {
  for_each_type(f);
  f.template operator()<spsd::bfloat16>();
  f.template operator()<spsd::float16>();
}

// The host conversion cast promises: through float when either side is 16-bit, else static_cast.
template <class From, class To>
To host_convert(From x) {
  if constexpr (spsd::is_half_v<From> || spsd::is_half_v<To>) return static_cast<To>(static_cast<float>(x));
  else return static_cast<To>(x);
}

// Values of From for a cast to To: in To's range when To is an integer (out of range is undefined
// in C++); with ties, subnormals, overflow, infinities and NaN when To is floating.
template <class From, class To>
std::vector<From> cast_inputs() {
  std::vector<double> v = {0.0, -0.0, 0.5, -1.5, 2.5, 1.0, -7.0, 100.75, 1000.0, 65504.0, 60000.0};
  for (int i = 0; i < 500; ++i) v.push_back(std::uniform_real_distribution<double>(-30000, 30000)(g_rng));
  if constexpr (std::is_floating_point_v<spsd::compute_t<To>>) {
    const double inf = std::numeric_limits<double>::infinity();
    v.insert(v.end(), {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 1.0 + 1.0 / 2048, 1.0 + 3.0 / 2048, 65520.0, 70000.0, 1e-40,
                       3e-8, 1e-7, 3.4e38, 1e300, inf, -inf, std::numeric_limits<double>::quiet_NaN()});
    for (int i = 0; i < 500; ++i) v.push_back(std::ldexp(std::uniform_real_distribution<double>(-1, 1)(g_rng), static_cast<int>(g_rng() % 80) - 40));
  }
  std::vector<From> r;
  for (double d : v) {
    if constexpr (std::is_integral_v<From>) {
      r.push_back(static_cast<From>(std::isfinite(d) && std::abs(d) < 2e9 ? d : 0));
    } else {
      const From x = host_convert<double, From>(d);
      const double w = static_cast<double>(spsd::compute_t<From>(x));
      if (std::is_integral_v<To> && !(std::abs(w) < 2e9)) continue;  // inf/NaN from rounding: not for integers
      r.push_back(x);
    }
  }
  return r;
}

void test_cast() {
  for_every_type([&]<class From>() {
    for_every_type([&]<class To>() {
      const std::vector<From> x = cast_inputs<From, To>();
      const int64_t n = static_cast<int64_t>(x.size());
      std::vector<To> want(n);
      std::transform(x.begin(), x.end(), want.begin(), host_convert<From, To>);
      const Dev<From> dx(x);
      for (int64_t offset : {0, 1}) {  // the vector path and the element path
        Dev<To> out(n);
        gpu::cast<From, To>(dx.ptr + offset, out.ptr + offset, n - offset, g_stream);
        const std::vector<To> got = out.get();
        ++g_group.cases;
        for (int64_t i = offset; i < n; ++i) {
          bool ok = same_bits(got[i], want[i]);
          if constexpr (std::is_floating_point_v<spsd::compute_t<To>>) {  // NaN payloads may differ
            using C = spsd::compute_t<To>;
            ok = ok || (std::isnan(static_cast<C>(got[i])) && std::isnan(static_cast<C>(want[i])));
          }
          if (!ok) {
            fail("cast " + tname<From>() + " -> " + tname<To>() + " offset " + std::to_string(offset) + ": at " +
                 std::to_string(i) + " gpu " + show(got[i]) + ", host " + show(want[i]));
            break;
          }
        }
      }
    });
  });
}

void test_note_nonfinite() {
  const auto run = [&]<class T>() {
    using C = spsd::compute_t<T>;
    for (int64_t n : {0, 1, 9, 1000, 100003}) {
      for (int64_t at : {int64_t{-1}, int64_t{0}, n / 2, n - 1}) {
        for (C bad : {std::numeric_limits<C>::infinity(), -std::numeric_limits<C>::infinity(),
                      std::numeric_limits<C>::quiet_NaN()}) {
          if (at >= n || (at < 0 && bad != std::numeric_limits<C>::infinity())) continue;  // clean: once per n
          std::vector<T> x(n, T(static_cast<C>(std::numeric_limits<T>::max())));  // large, finite
          if (at >= 0) x[at] = T(bad);
          const Dev<T> dx(x);
          for (int64_t offset : {0, 1}) {  // packs, then unaligned
            if (offset > n) continue;
            const bool expect = at >= offset;
            for (float before : {0.0f, 1.0f}) {
              const Dev<float> flag(std::vector<float>{before});
              gpu::note_nonfinite<T>(dx.ptr + offset, n - offset, flag.ptr, g_stream);
              const float got = flag.get()[0];
              ++g_group.cases;
              if (got != (expect ? 1.0f : before))
                fail("note_nonfinite " + tname<T>() + " n=" + std::to_string(n) + " bad at " + std::to_string(at) +
                     " offset " + std::to_string(offset) + ": flag " + show(got) + " (was " + show(before) + ")");
            }
          }
        }
      }
    }
  };
  run.template operator()<float>();
  run.template operator()<double>();
  run.template operator()<spsd::bfloat16>();
  run.template operator()<spsd::float16>();
}

}  // namespace

// ---- attention ----

// The fused attention kernels (the forward with lse, its lse-only form, dq, and dk/dv stacked)
// against the cpu kernels on the same inputs; the backward runs on the cpu's out and lse, so only
// it differs. Partial tiles (37 queries, 45 keys), 1 to 8 columns per lane (head_dim 1, 10, 64,
// 72, 200), causal masks offset as on a piece of a query split (q_begin 5, 31), no keys at all,
// and head_dim over the limit (an error). Bounds relative to 1 + |cpu value| (another summation
// order): float 1e-4, double 1e-10, 16 bits 2 ulps of the type (both sides compute in float and
// round once); lse in float 1e-4 or double 1e-10.
void test_attention() {
  struct Case {
    int64_t batch_heads, seq_q, seq_k, head_dim, q_begin;
    bool causal;
  };
  const std::vector<Case> cases = {{3, 37, 45, 10, 0, false}, {3, 37, 45, 72, 0, true}, {2, 45, 37, 200, 5, true},
                                   {2, 5, 7, 1, 3, true},     {1, 4, 0, 8, 0, false},    {2, 33, 64, 64, 31, true}};
  auto run = [&]<class T>(double rtol) {
    using C = spsd::compute_t<T>;
    const auto as_double = []<class U>(const std::vector<U>& v) {
      std::vector<double> r;
      for (const U& x : v) r.push_back(static_cast<double>(x));
      return r;
    };
    const double lse_rtol = std::is_same_v<C, double> ? 1e-10 : 1e-4;
    for (const Case& c : cases) {
      const cpu::AttentionDims d{c.batch_heads, c.seq_q, c.seq_k, c.head_dim, c.q_begin, 0, c.causal,
                                 1 / std::sqrt(static_cast<double>(c.head_dim))};
      const int64_t nq = c.batch_heads * c.seq_q * c.head_dim, nk = c.batch_heads * c.seq_k * c.head_dim,
                    rows = c.batch_heads * c.seq_q;
      const auto values = [](int64_t n) {
        std::vector<T> v;
        for (float x : random_values<float>(n, -2, 2)) v.push_back(static_cast<T>(x));
        return v;
      };
      const std::vector<T> q = values(nq), k = values(nk), v = values(nk), g = values(nq);
      std::vector<T> out(nq), dq(nq), dkv(2 * nk);
      std::vector<C> lse(rows);
      cpu::attention_forward<T>(q.data(), k.data(), v.data(), d, out.data(), lse.data());
      cpu::attention_backward_q<T>(q.data(), k.data(), v.data(), out.data(), g.data(), lse.data(), d, dq.data());
      cpu::attention_backward_kv<T>(q.data(), k.data(), v.data(), out.data(), g.data(), lse.data(), d, dkv.data());
      const Dev<T> q_d(q), k_d(k), v_d(v), g_d(g), out_d(out);
      const Dev<C> lse_d(lse);
      Dev<T> got_out(nq), got_dq(nq), got_dkv(2 * nk);
      Dev<C> got_lse(rows), got_lse_only(rows);
      gpu::attention_forward<T>(q_d.ptr, k_d.ptr, v_d.ptr, d, got_out.ptr, got_lse.ptr, g_stream);
      gpu::attention_forward<T>(q_d.ptr, k_d.ptr, static_cast<const T*>(nullptr), d, static_cast<T*>(nullptr),
                                got_lse_only.ptr, g_stream);
      gpu::attention_backward_q<T>(q_d.ptr, k_d.ptr, v_d.ptr, out_d.ptr, g_d.ptr, lse_d.ptr, d, got_dq.ptr, g_stream);
      gpu::attention_backward_kv<T>(q_d.ptr, k_d.ptr, v_d.ptr, out_d.ptr, g_d.ptr, lse_d.ptr, d, got_dkv.ptr,
                                    g_stream);
      const std::string what = "attention " + tname<T>() + " (" + std::to_string(c.batch_heads) + ", " +
                               std::to_string(c.seq_q) + "/" + std::to_string(c.seq_k) + ", " +
                               std::to_string(c.head_dim) + ")" + (c.causal ? " causal" : "") + " q_begin " +
                               std::to_string(c.q_begin);
      const std::vector<double> ones_q(nq, 1.0), ones_kv(2 * nk, 1.0), ones_rows(rows, 1.0);
      const auto with_one = [](std::vector<double> w) {  // the scale 1 + |w|
        for (double& x : w) x = 1 + std::abs(x);
        return w;
      };
      compare(what + ": out", as_double(got_out.get()), as_double(out), rtol, 0.0, with_one(as_double(out)));
      compare(what + ": lse", as_double(got_lse.get()), as_double(lse), lse_rtol, 0.0, with_one(as_double(lse)));
      compare(what + ": lse alone", as_double(got_lse_only.get()), as_double(lse), lse_rtol, 0.0,
              with_one(as_double(lse)));
      compare(what + ": dq", as_double(got_dq.get()), as_double(dq), rtol, 0.0, with_one(as_double(dq)));
      compare(what + ": dk and dv", as_double(got_dkv.get()), as_double(dkv), rtol, 0.0, with_one(as_double(dkv)));
    }
    Dev<T> tmp(301 * 2);
    Dev<C> tmp_lse(2);
    const cpu::AttentionDims too_wide{1, 2, 2, 301, 0, 0, false, 1.0};
    expect_error("attention head_dim 301 " + tname<T>(), [&] {
      gpu::attention_forward<T>(tmp.ptr, tmp.ptr, tmp.ptr, too_wide, tmp.ptr, tmp_lse.ptr, g_stream);
    });
  };
  run.template operator()<float>(1e-4);
  run.template operator()<double>(1e-10);
  run.template operator()<spsd::bfloat16>(2 * 0x1p-7);
  run.template operator()<spsd::float16>(2 * 0x1p-10);
}

// ---- layer_norm / rms_norm and dropout ----

// The norm kernels (forward, dx, dweight) and dropout against the cpu ones, in all four
// floating types. Tolerances: float rtol 1e-4 (outputs ~|w| + |b|, statistics summed in
// another order), double 1e-11; the backward sums over a row or a column scale atol by its
// length; 16-bit: 2 units of the type's epsilon (one rounding on each side, float sums within
// it). dropout: bit for bit (the same host-device mask and one multiplication).
void test_norm_dropout() {
  auto run = [&]<class T>() {
    const double eps_t = std::is_same_v<T, float> ? 1e-4 : std::is_same_v<T, double> ? 1e-11
                         : std::is_same_v<T, spsd::bfloat16> ? 2.0 / 128 : 2.0 / 1024;
    auto widened = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
    auto draw = [](int64_t n, double lo, double hi) {
      std::vector<T> v(n);
      std::uniform_real_distribution<double> d(lo, hi);
      for (T& x : v) x = static_cast<T>(d(g_rng));
      return v;
    };
    for (const auto& [rows, len] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 5}, {3, 1}, {4, 7}, {64, 1000}, {5, 3000}, {2100, 33}}) {
      const std::vector<T> x = draw(rows * len, 40, 60), w = draw(len, -2, 2), b = draw(len, -1, 1),
                           g = draw(rows * len, -1, 1);
      const Dev<T> dxv(x), dw(w), db(b), dg(g);
      for (bool rms : {false, true}) {
        const std::string what = std::string(rms ? "rms_norm " : "layer_norm ") + tname<T>() + " " +
                                 std::to_string(rows) + "x" + std::to_string(len);
        const double eps = 1e-5;
        std::vector<T> want(x.size()), want_dx(x.size()), want_dw(len);
        cpu::norm_forward<T>(x.data(), w.data(), rms ? nullptr : b.data(), rows, len, eps, rms, want.data());
        cpu::norm_backward_x<T>(x.data(), w.data(), g.data(), rows, len, eps, rms, want_dx.data());
        cpu::norm_backward_w<T>(x.data(), g.data(), rows, len, eps, rms, want_dw.data());
        Dev<T> out(x.size()), out_dx(x.size()), out_dw(len);
        gpu::norm_forward<T>(dxv.ptr, dw.ptr, rms ? nullptr : db.ptr, rows, len, eps, rms, out.ptr, g_stream);
        gpu::norm_backward_x<T>(dxv.ptr, dw.ptr, dg.ptr, rows, len, eps, rms, out_dx.ptr, g_stream);
        gpu::norm_backward_w<T>(dxv.ptr, dg.ptr, rows, len, eps, rms, out_dw.ptr, g_stream);
        compare(what, widened(out.get()), widened(want), eps_t, eps_t);
        compare(what + " dx", widened(out_dx.get()), widened(want_dx), eps_t, eps_t * 4);
        compare(what + " dweight", widened(out_dw.get()), widened(want_dw), eps_t,
                eps_t * static_cast<double>(std::max<int64_t>(rows, 1)));
      }
    }
    const Shape global{6, 10, 7};
    for (const Box& box : {Box{{1, 2, 0}, {5, 9, 7}}, Box{{0, 3, 2}, {6, 4, 5}}, Box{{0, 0, 0}, {6, 10, 7}}}) {
      const std::vector<T> x = draw(box.numel(), 0.5, 2);
      for (double p : {0.1, 0.5, 0.9}) {
        const uint64_t threshold = cpu::dropout_threshold(p);
        std::vector<T> want(x.size());
        cpu::dropout<T>(x.data(), want.data(), box, global, 1234, threshold, 1.0 / (1.0 - p));
        const Dev<T> dx(x);
        Dev<T> out(x.size());
        gpu::dropout<T>(dx.ptr, out.ptr, box, global, 1234, threshold, 1.0 / (1.0 - p), g_stream);
        compare("dropout " + tname<T>() + " p " + std::to_string(p), widened(out.get()), widened(want));
      }
    }
  };
  run.template operator()<float>();
  run.template operator()<double>();
  run.template operator()<spsd::bfloat16>();
  run.template operator()<spsd::float16>();
}

// ---- comparisons, where, masked_fill, argmax keys (kernel/cuda/compare.hpp): exact ----

std::vector<unsigned char> bytes_of(const bool* p, int64_t n) { return std::vector<unsigned char>(p, p + n); }

void test_compare_kernels() {
  using spsd::kernel::CompareOp;
  const CompareOp ops[] = {CompareOp::kLt, CompareOp::kLe, CompareOp::kGt, CompareOp::kGe, CompareOp::kEq, CompareOp::kNe};
  for_each_type([&]<class T>() {
    for (const auto& [sa, sb] : broadcast_pairs()) {
      const Shape out = cpu::detail::broadcast_shape("test", sa, sb);
      const int64_t n = out.numel();
      std::vector<T> a = random_values<T>(sa.numel()), b = random_values<T>(sb.numel());
      for (size_t i = 0; i < b.size() && i < a.size(); i += 2) b[i] = a[i];  // ties
      const Dev<T> da(a), db(b);
      const std::string shapes = " " + tname<T>() + " " + sa.to_string() + " " + sb.to_string();
      for (CompareOp op : ops) {
        std::unique_ptr<bool[]> want(new bool[std::max<int64_t>(n, 1)]);
        cpu::compare<T>(op, a.data(), sa, b.data(), sb, want.get(), out);
        Dev<unsigned char> got(n);
        gpu::compare<T>(op, da.ptr, sa, db.ptr, sb, reinterpret_cast<bool*>(got.ptr), out, g_stream);
        compare(std::string(to_string(op)) + shapes, got.get(), bytes_of(want.get(), n));
        if (sa.numel() > 0) {
          cpu::compare_scalar<T>(op, a.data(), b.empty() ? T(0) : b[0], want.get(), sa.numel());
          Dev<unsigned char> gs(sa.numel());
          gpu::compare_scalar<T>(op, da.ptr, b.empty() ? T(0) : b[0], reinterpret_cast<bool*>(gs.ptr), sa.numel(), g_stream);
          compare(std::string(to_string(op)) + "_scalar" + shapes, gs.get(), bytes_of(want.get(), sa.numel()));
        }
      }
      // where(cond of a's shape, a, b), masked_fill(x of out's shape, mask of b's shape)
      std::vector<unsigned char> c(sa.numel()), m(sb.numel());
      for (auto& v : c) v = g_rng() & 1;
      for (auto& v : m) v = g_rng() & 1;
      const Dev<unsigned char> dc(c), dm(m);
      std::vector<T> want(n), x = random_values<T>(n);
      const Dev<T> dx(x);
      Dev<T> got(n);
      cpu::where<T>(reinterpret_cast<const bool*>(c.data()), sa, a.data(), sa, b.data(), sb, want.data(), out);
      gpu::where<T>(reinterpret_cast<const bool*>(dc.ptr), sa, da.ptr, sa, db.ptr, sb, got.ptr, out, g_stream);
      compare("where" + shapes, got.get(), want);
      cpu::masked_fill<T>(x.data(), out, reinterpret_cast<const bool*>(m.data()), sb, 7, want.data());
      gpu::masked_fill<T>(dx.ptr, out, reinterpret_cast<const bool*>(dm.ptr), sb, 7, got.ptr, g_stream);
      compare("masked_fill" + shapes, got.get(), want);
    }
    // extreme_keys of (3, 5, 4) along axis 1 against (3, 1, 4), global offset 2 of 9, with ties and NaN.
    std::vector<T> x = random_values<T>(60), m = random_values<T>(12);
    for (int64_t i = 0; i < 12; ++i) x[(i / 4) * 20 + 4 * (i % 5) + i % 4] = m[i];
    if constexpr (std::is_floating_point_v<T>) x[7] = std::numeric_limits<T>::quiet_NaN();
    const Dev<T> dx(x), dm(m);
    std::vector<int64_t> want(60);
    Dev<int64_t> got(60);
    cpu::extreme_keys<T>(x.data(), m.data(), 3, 5, 4, 2, 9, want.data());
    gpu::extreme_keys<T>(dx.ptr, dm.ptr, 3, 5, 4, 2, 9, got.ptr, g_stream);
    compare("extreme_keys " + tname<T>(), got.get(), want);
  });
  expect_error("compare bad out shape", [&] {
    Dev<float> t(20);
    gpu::compare<float>(CompareOp::kLt, t.ptr, Shape{4, 5}, t.ptr, Shape{5}, reinterpret_cast<bool*>(t.ptr), Shape{5, 4}, g_stream);
  });
}

int main() {
  if (const auto devices = spsd_test::find_cuda_devices("gpu-kernels"); devices.count == 0) return devices.exit_code;
  check_cuda(cudaStreamCreate(&g_stream), "cudaStreamCreate");
  group("elementwise", test_elementwise);
  group("reduce", test_reduce);
  group("softmax", test_softmax);
  group("softmax backward", test_softmax_backward);
  group("attention", test_attention);
  group("permute/copy_region", test_permute);
  group("copy", test_copy);
  group("index", test_index);
  group("backward kernels", test_backward_kernels);
  group("matmul", test_matmul);
  group("random", test_random);
  group("bfloat16/float16 against float", test_halves);
  group("cast", test_cast);
  group("note_nonfinite", test_note_nonfinite);
  group("layer_norm/rms_norm/dropout", test_norm_dropout);
  group("compare/where/masked_fill/extreme_keys", test_compare_kernels);
  cudaStreamDestroy(g_stream);
  std::cout << (g_total.failures ? "FAIL: " : "PASS: ") << g_total.cases << " cases, " << g_total.failures
            << " failures\n";
  return g_total.failures ? 1 : 0;
}
