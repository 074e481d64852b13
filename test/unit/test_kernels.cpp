// Local cpu kernels (include/spsd/kernel/cpu/): each kernel against a naive reference written
// here with plain loops over unravelled indices (double accumulation for floats, wrapping
// unsigned accumulation for integers), on many shapes including zero-size dims, size-1
// broadcasts and odd sizes. Tolerances are stated per kernel.
#include <catch2/catch.hpp>

#include <spsd/kernel/cpu/elementwise.hpp>
#include <spsd/kernel/cpu/gemm.hpp>
#include <spsd/kernel/cpu/index.hpp>
#include <spsd/kernel/cpu/optim.hpp>
#include <spsd/kernel/cpu/permute.hpp>
#include <spsd/kernel/cpu/reduce.hpp>
#include <spsd/kernel/cpu/softmax.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/transposed.hpp"

using spsd_test::swap_last_two;
using spsd_test::transposed_copy;
using namespace spsd;
namespace kc = spsd::kernel::cpu;

namespace {

// Deterministic values: floats in [-2, 2], integers in [-50, 50]; nonzero avoids 0 (divisors).
template <class T>
std::vector<T> random_values(int64_t n, uint32_t seed, bool nonzero = false) {
  std::mt19937 gen(seed);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) {
    do {
      if constexpr (std::is_floating_point_v<T>) {
        x = static_cast<T>(std::uniform_real_distribution<double>(-2, 2)(gen));
      } else {
        x = static_cast<T>(std::uniform_int_distribution<int>(-50, 50)(gen));
      }
    } while (nonzero && x == T(0));
  }
  return v;
}

std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.ndim());
  for (int64_t d = s.ndim() - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

// Flat offset in dense shape s of the index idx of a bigger, right-aligned broadcast space.
int64_t ravel_broadcast(const std::vector<int64_t>& idx, const Shape& s) {
  const int64_t off = static_cast<int64_t>(idx.size()) - s.ndim();
  int64_t flat = 0;
  for (int64_t d = 0; d < s.ndim(); ++d) flat = flat * s[d] + (s[d] == 1 ? 0 : idx[off + d]);
  return flat;
}

Shape broadcast(const Shape& a, const Shape& b) {
  const int64_t r = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(r);
  for (int64_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.ndim() ? 1 : a[i - (r - a.ndim())], db = i < r - b.ndim() ? 1 : b[i - (r - b.ndim())];
    dims[i] = da == 1 ? db : da;
  }
  return Shape(dims);
}

// Accumulator of the references: double for floats, wrapping uint64 for integers.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <class T>
Acc<T> to_acc(T v) {
  if constexpr (std::is_floating_point_v<T>) return v;
  else return static_cast<uint64_t>(static_cast<int64_t>(v));
}

template <class T>
T from_acc(Acc<T> v) { return static_cast<T>(v); }  // integers: modulo 2^bits

template <class T>
std::string type_name() { return std::string(to_string(dtype_of<T>)); }

// Every subset of {0..r-1}, sorted.
std::vector<std::vector<int64_t>> all_axis_sets(int64_t r) {
  std::vector<std::vector<int64_t>> sets;
  for (int64_t mask = 0; mask < (int64_t{1} << r); ++mask) {
    std::vector<int64_t> s;
    for (int64_t d = 0; d < r; ++d)
      if (mask >> d & 1) s.push_back(d);
    sets.push_back(s);
  }
  return sets;
}

std::vector<std::vector<int64_t>> all_perms(int64_t r) {
  std::vector<int64_t> p(r);
  std::iota(p.begin(), p.end(), 0);
  std::vector<std::vector<int64_t>> out;
  do out.push_back(p);
  while (std::next_permutation(p.begin(), p.end()));
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// matmul. Tolerance: floats |got - ref| <= eps * k * sum_p |a_ip b_pj| with eps 1e-5 (float),
// 1e-13 (double), the reference in double; integers exact (wrapping).

template <class T>
void check_matmul(const Shape& as, const Shape& bs, uint32_t seed) {
  const Shape batch_a(std::vector<int64_t>(as.dims().begin(), as.dims().end() - 2));
  const Shape batch_b(std::vector<int64_t>(bs.dims().begin(), bs.dims().end() - 2));
  const Shape batch = broadcast(batch_a, batch_b);
  const int64_t m = as[as.ndim() - 2], k = as[as.ndim() - 1], n = bs[bs.ndim() - 1];
  std::vector<int64_t> od = batch.dims();
  od.insert(od.end(), {m, n});
  const Shape os(od);
  auto a = random_values<T>(as.numel(), seed), b = random_values<T>(bs.numel(), seed + 1);
  std::vector<T> out(os.numel(), T(77));
  kc::matmul<T>(a.data(), as, b.data(), bs, out.data(), os);
  const double eps = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  for (int64_t bi = 0; bi < batch.numel(); ++bi) {
    const auto bidx = unravel(bi, batch);
    const int64_t oa = ravel_broadcast(bidx, batch_a) * m * k, ob = ravel_broadcast(bidx, batch_b) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        Acc<T> ref = 0;
        double mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          ref += to_acc(a[oa + i * k + p]) * to_acc(b[ob + p * n + j]);
          mag += std::abs(double(a[oa + i * k + p]) * double(b[ob + p * n + j]));
        }
        const T got = out[(bi * m + i) * n + j];
        INFO(type_name<T>() << " a " << as << " b " << bs << " at batch " << bi << " (" << i << ", " << j << ")");
        if constexpr (std::is_floating_point_v<T>) {
          REQUIRE(std::abs(double(got) - ref) <= eps * double(std::max<int64_t>(k, 1)) * mag);
        } else {
          REQUIRE(got == from_acc<T>(ref));
        }
      }
  }
}

TEMPLATE_TEST_CASE("kernels: matmul matches the naive product", "[kernels]", float, double, int32_t, int64_t) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},       {{7, 13}, {13, 5}},         {{1, 1}, {1, 1}},          {{0, 4}, {4, 5}},
      {{3, 0}, {0, 5}},       {{3, 4}, {4, 0}},           {{2, 3, 4}, {4, 6}},       {{2, 1, 3, 4}, {5, 4, 6}},
      {{3, 4}, {2, 4, 5}},    {{2, 3, 4}, {2, 4, 5}},     {{1, 3, 4}, {2, 4, 5}},    {{0, 3, 4}, {4, 5}},
      {{2, 3, 4}, {1, 4, 5}}, {{2, 0, 3, 4}, {1, 4, 5}},  {{2, 2, 3, 0}, {2, 1, 0, 5}}, {{1, 2, 1, 7, 3}, {3, 1, 2, 3, 9}},
      {{5, 130}, {130, 600}}, {{33, 65}, {65, 17}},
  };
  uint32_t seed = 1;
  for (const auto& [a, b] : cases) check_matmul<TestType>(a, b, seed += 2);
}

TEST_CASE("kernels: matmul integer products wrap and bad shapes throw", "[kernels]") {
  const int32_t big = std::numeric_limits<int32_t>::max();
  std::vector<int32_t> a = {big, 2}, b = {big, big}, out(1);
  kc::matmul<int32_t>(a.data(), {1, 2}, b.data(), {2, 1}, out.data(), {1, 1});
  const uint32_t want = uint32_t(big) * uint32_t(big) + 2u * uint32_t(big);
  CHECK(out[0] == static_cast<int32_t>(want));
  std::vector<float> f(64);
  CHECK_THROWS_AS(kc::matmul<float>(f.data(), {2, 3}, f.data(), {4, 2}, f.data(), {2, 2}), Error);
  CHECK_THROWS_AS(kc::matmul<float>(f.data(), {2, 3}, f.data(), {3, 2}, f.data(), {2, 3}), Error);
  CHECK_THROWS_AS(kc::matmul<float>(f.data(), {2, 2, 3}, f.data(), {3, 3, 2}, f.data(), {3, 2, 2}), Error);
  CHECK_THROWS_AS(kc::matmul<float>(f.data(), {3}, f.data(), {3, 2}, f.data(), {2}), Error);
}

// matmul with transpose flags: an operand stored transposed (last two axes swapped), read in
// place, against the plain kernel on the materialized transpose. Integers exact; floats within
// the tolerance above with |a| @ |b| for the magnitude (BLAS may sum in another order).


TEMPLATE_TEST_CASE("kernels: matmul with transpose flags equals matmul of the materialized transposes", "[kernels]",
                   float, double, int32_t, int64_t) {
  using T = TestType;
  // (op(a), op(b)) shapes: 2-d, batched, broadcast batch dims, empty, and sizes past BLAS blocking.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},          {{2, 3, 4}, {4, 6}},    {{2, 1, 3, 4}, {5, 4, 6}}, {{3, 4}, {2, 4, 5}},
      {{1, 3, 4}, {2, 4, 5}},    {{2, 3, 4}, {2, 4, 5}}, {{3, 0}, {0, 5}},          {{0, 3, 4}, {4, 5}},
      {{33, 65}, {65, 17}},      {{1, 1}, {1, 1}},
  };
  uint32_t seed = 100;
  for (const auto& [la, lb] : cases) {
    const Shape os = [&] {
      std::vector<int64_t> d = broadcast(kc::detail::batch_of(la), kc::detail::batch_of(lb)).dims();
      d.insert(d.end(), {la[la.ndim() - 2], lb[lb.ndim() - 1]});
      return Shape(d);
    }();
    const auto a = random_values<T>(la.numel(), seed += 2), b = random_values<T>(lb.numel(), seed + 1);
    std::vector<T> want(os.numel()), scale(os.numel());
    kc::matmul<T>(a.data(), la, b.data(), lb, want.data(), os);
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<T> aa(a.size()), ab(b.size());
      std::transform(a.begin(), a.end(), aa.begin(), [](T v) { return std::abs(v); });
      std::transform(b.begin(), b.end(), ab.begin(), [](T v) { return std::abs(v); });
      kc::matmul<T>(aa.data(), la, ab.data(), lb, scale.data(), os);
    }
    const int64_t k = la[la.ndim() - 1];
    const double eps = std::is_same_v<T, float> ? 1e-5 : 1e-13;
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const std::vector<T> sa = ta ? transposed_copy(a, la) : a, sb = tb ? transposed_copy(b, lb) : b;
        std::vector<T> got(os.numel(), T(77));
        kc::matmul<T>(sa.data(), ta ? swap_last_two(la) : la, sb.data(), tb ? swap_last_two(lb) : lb, got.data(), os,
                      ta, tb);
        for (int64_t i = 0; i < os.numel(); ++i) {
          INFO(type_name<T>() << " op(a) " << la << " op(b) " << lb << " trans_a " << ta << " trans_b " << tb
                              << " at " << i);
          if constexpr (std::is_floating_point_v<T>) {
            REQUIRE(std::abs(double(got[i]) - double(want[i])) <= eps * double(std::max<int64_t>(k, 1)) * scale[i]);
          } else {
            REQUIRE(got[i] == want[i]);
          }
        }
      }
  }
  // Shapes are checked as read: a (2, 3) transposed is (3, 2), so (4, 2) does not fit it.
  std::vector<T> f(64);
  CHECK_THROWS_WITH(kc::matmul<T>(f.data(), {2, 3}, f.data(), {4, 2}, f.data(), {3, 2}, true, false),
                    Catch::Contains("a (transposed) is (2, 3)") && Catch::Contains("inner dimensions differ"));
  CHECK_NOTHROW(kc::matmul<T>(f.data(), {2, 3}, f.data(), {4, 2}, f.data(), {3, 4}, true, true));
}

// ---------------------------------------------------------------------------------------------
// unary. Tolerance: |got - ref| <= tol * (1 + |ref|), ref from <cmath> in double; tol 2e-6
// (float), 1e-14 (double). Integers exact.

double unary_ref(kc::UnaryOp op, double x) {
  switch (op) {
    case kc::UnaryOp::kNeg: return -x;
    case kc::UnaryOp::kRelu: return x > 0 ? x : 0;
    case kc::UnaryOp::kGelu: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case kc::UnaryOp::kGeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case kc::UnaryOp::kRsqrt: return 1 / std::sqrt(x);
    case kc::UnaryOp::kErf: return std::erf(x);
    case kc::UnaryOp::kSilu: return x / (1 + std::exp(-x));
    case kc::UnaryOp::kExp: return std::exp(x);
    case kc::UnaryOp::kLog: return std::log(x);
    case kc::UnaryOp::kTanh: return std::tanh(x);
    case kc::UnaryOp::kSigmoid: return 1 / (1 + std::exp(-x));
    case kc::UnaryOp::kSqrt: return std::sqrt(x);
    case kc::UnaryOp::kAbs: return std::abs(x);
  }
  return 0;
}

const std::vector<kc::UnaryOp> kUnaryOps = {kc::UnaryOp::kNeg,  kc::UnaryOp::kRelu,    kc::UnaryOp::kGelu,
                                            kc::UnaryOp::kExp,  kc::UnaryOp::kLog,     kc::UnaryOp::kTanh,
                                            kc::UnaryOp::kSigmoid, kc::UnaryOp::kSqrt, kc::UnaryOp::kAbs,
                                            kc::UnaryOp::kRsqrt, kc::UnaryOp::kErf, kc::UnaryOp::kSilu,
                                            kc::UnaryOp::kGeluTanh};

TEMPLATE_TEST_CASE("kernels: unary float ops match <cmath>", "[kernels]", float, double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  for (int64_t n : {0, 1, 7, 16, 37, 100}) {
    for (kc::UnaryOp op : kUnaryOps) {
      auto x = random_values<T>(n, 11 + uint32_t(n));
      if (op == kc::UnaryOp::kLog || op == kc::UnaryOp::kSqrt || op == kc::UnaryOp::kRsqrt)
        for (T& v : x) v = std::abs(v) + T(0.01);
      std::vector<T> out(n, T(-9));
      kc::unary<T>(op, x.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double ref = unary_ref(op, double(x[i]));
        INFO(kc::to_string(op) << " x=" << x[i]);
        CHECK(std::abs(double(out[i]) - ref) <= tol * (1 + std::abs(ref)));
      }
      kc::unary<T>(op, x.data(), x.data(), n);  // in place
      CHECK(x == out);
    }
  }
  // Saturation: no NaN at the extremes.
  std::vector<T> x = {T(-1000), T(1000)}, out(2);
  kc::unary<T>(kc::UnaryOp::kSigmoid, x.data(), out.data(), 2);
  CHECK(out == std::vector<T>{T(0), T(1)});
  kc::unary<T>(kc::UnaryOp::kGelu, x.data(), out.data(), 2);
  CHECK(out == std::vector<T>{T(0), T(1000)});
  kc::unary<T>(kc::UnaryOp::kGeluTanh, x.data(), out.data(), 2);
  CHECK(out == std::vector<T>{T(0), T(1000)});
  kc::unary<T>(kc::UnaryOp::kSilu, x.data(), out.data(), 2);
  CHECK(out == std::vector<T>{T(0), T(1000)});
}

TEMPLATE_TEST_CASE("kernels: unary integer ops wrap; the others throw", "[kernels]", int32_t, int64_t) {
  using T = TestType;
  const T lo = std::numeric_limits<T>::min();
  std::vector<T> x = {T(-3), T(0), T(5), lo, std::numeric_limits<T>::max()};
  for (int i = 0; i < 40; ++i) x.push_back(T(i * 7 - 140));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<T> out(n);
  kc::unary<T>(kc::UnaryOp::kNeg, x.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) CHECK(out[i] == (x[i] == lo ? lo : T(-x[i])));
  kc::unary<T>(kc::UnaryOp::kAbs, x.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) CHECK(out[i] == (x[i] == lo ? lo : T(x[i] < 0 ? -x[i] : x[i])));
  kc::unary<T>(kc::UnaryOp::kRelu, x.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) CHECK(out[i] == std::max(x[i], T(0)));
  for (kc::UnaryOp op : kUnaryOps) {
    const bool ok = op == kc::UnaryOp::kNeg || op == kc::UnaryOp::kRelu || op == kc::UnaryOp::kAbs;
    CHECK(kc::unary_supports(op, dtype_of<T>) == ok);
    CHECK(kc::unary_supports(op, DType::kFloat32));
    if (!ok) {
      CHECK_THROWS_WITH(kc::unary<T>(op, x.data(), out.data(), 0),
                        Catch::Contains(std::string(kc::to_string(op))) && Catch::Contains(type_name<T>()));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// binary. The reference applies the same op in T (wrapping for integers) at each broadcast
// index, so results must match exactly.

const std::vector<kc::BinaryOp> kBinaryOps = {kc::BinaryOp::kAdd, kc::BinaryOp::kSub, kc::BinaryOp::kMul,
                                              kc::BinaryOp::kDiv, kc::BinaryOp::kMax, kc::BinaryOp::kMin};

// The type the reference computes +, -, * in: unsigned for integers, so that they wrap.
template <class T>
struct WrapOf { using type = T; };
template <std::integral T>
struct WrapOf<T> { using type = std::make_unsigned_t<T>; };

template <class T>
T binary_ref(kc::BinaryOp op, T x, T y) {
  using W = typename WrapOf<T>::type;
  switch (op) {
    case kc::BinaryOp::kAdd: return T(W(x) + W(y));
    case kc::BinaryOp::kSub: return T(W(x) - W(y));
    case kc::BinaryOp::kMul: return T(W(x) * W(y));
    case kc::BinaryOp::kDiv: return T(x / y);
    case kc::BinaryOp::kMax: return std::max(x, y);
    case kc::BinaryOp::kMin: return std::min(x, y);
    case kc::BinaryOp::kPow: return T(std::pow(double(x), double(y)));
  }
  return T(0);
}

TEMPLATE_TEST_CASE("kernels: binary broadcasting matches the naive loop", "[kernels]", float, double, int32_t,
                   int64_t) {
  using T = TestType;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7, 13}, {7, 13}},     {{7, 13}, {13}},          {{7, 13}, {7, 1}},        {{1, 13}, {7, 1}},
      {{7, 13}, {}},          {{}, {7, 13}},            {{1}, {7, 13}},           {{2, 1, 3}, {4, 1}},
      {{2, 3, 1, 5}, {3, 4, 1}}, {{0, 3}, {3}},         {{3, 0}, {1}},            {{2, 0, 3}, {1, 1, 3}},
      {{}, {}},               {{5, 1, 1}, {1, 1, 1}},   {{3, 1, 4, 1, 2}, {1, 5, 1, 3, 1}}, {{100}, {100}},
      {{37, 41}, {41}},       {{41, 1}, {41, 37}},      {{2, 3, 17}, {2, 1, 17}}, {{6, 1, 19}, {1, 5, 19}},
      {{1, 1, 7}, {7, 1, 1}}, {{4, 2}, {1, 1, 4, 2}},
  };
  uint32_t seed = 100;
  for (const auto& [as, bs] : cases) {
    const Shape os = broadcast(as, bs);
    auto a = random_values<T>(as.numel(), ++seed), b = random_values<T>(bs.numel(), ++seed, true);
    for (kc::BinaryOp op : kBinaryOps) {
      std::vector<T> out(os.numel(), T(-7));
      kc::binary<T>(op, a.data(), as, b.data(), bs, out.data(), os);
      for (int64_t i = 0; i < os.numel(); ++i) {
        const auto idx = unravel(i, os);
        INFO(kc::to_string(op) << " " << type_name<T>() << " " << as << " with " << bs << " at " << i);
        REQUIRE(out[i] == binary_ref(op, a[ravel_broadcast(idx, as)], b[ravel_broadcast(idx, bs)]));
      }
      if (as == os) {  // in place into a
        std::vector<T> a2 = a;
        kc::binary<T>(op, a2.data(), as, b.data(), bs, a2.data(), os);
        CHECK(a2 == out);
      }
    }
  }
}

TEMPLATE_TEST_CASE("kernels: binary_scalar both orders and fill", "[kernels]", float, double, int32_t, int64_t) {
  using T = TestType;
  for (int64_t n : {0, 1, 15, 16, 17, 77}) {
    auto a = random_values<T>(n, 7 + uint32_t(n), true);
    for (kc::BinaryOp op : kBinaryOps) {
      for (bool first : {false, true}) {
        const T s = T(3);
        std::vector<T> out(n);
        kc::binary_scalar<T>(op, a.data(), s, out.data(), n, first);
        for (int64_t i = 0; i < n; ++i)
          REQUIRE(out[i] == (first ? binary_ref(op, s, a[i]) : binary_ref(op, a[i], s)));
      }
    }
    std::vector<T> f(n, T(1));
    kc::fill<T>(f.data(), n, T(4));
    CHECK(std::count(f.begin(), f.end(), T(4)) == n);
  }
}

TEST_CASE("kernels: binary integer wrap, division by zero, bad shapes", "[kernels]") {
  const int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> a = {mx, mn, mx, 6}, b = {1, -1, 2, 0}, out(4);
  kc::binary<int32_t>(kc::BinaryOp::kAdd, a.data(), {2}, b.data(), {2}, out.data(), {2});
  CHECK(out[0] == mn);
  kc::binary<int32_t>(kc::BinaryOp::kDiv, a.data(), {2}, b.data(), {2}, out.data(), {2});
  CHECK(out[1] == mn);  // INT_MIN / -1 wraps instead of trapping
  kc::binary<int32_t>(kc::BinaryOp::kMul, a.data() + 2, {1}, b.data() + 2, {1}, out.data(), {1});
  CHECK(out[0] == -2);
  CHECK_THROWS_WITH(kc::binary<int32_t>(kc::BinaryOp::kDiv, a.data(), {4}, b.data(), {4}, out.data(), {4}),
                    Catch::Contains("division by zero"));
  CHECK_NOTHROW(kc::binary<int64_t>(kc::BinaryOp::kDiv, nullptr, {0}, nullptr, {}, nullptr, {0}));  // nothing divided
  int64_t zero = 0, one = 1, r = 0;
  CHECK_THROWS_AS(kc::binary<int64_t>(kc::BinaryOp::kDiv, &one, {}, &zero, {}, &r, {}), Error);
  CHECK_THROWS_AS(kc::binary_scalar<int64_t>(kc::BinaryOp::kDiv, &one, 0, &r, 1, false), Error);
  CHECK_THROWS_AS(kc::binary_scalar<int64_t>(kc::BinaryOp::kDiv, nullptr, 0, nullptr, 0, false), Error);
  CHECK_THROWS_AS(kc::binary_scalar<int64_t>(kc::BinaryOp::kDiv, &zero, 5, &r, 1, true), Error);
  kc::binary_scalar<int64_t>(kc::BinaryOp::kDiv, &one, 0, &r, 1, true);  // 0 / 1 is fine
  CHECK(r == 0);
  float fz = 0, fo = 1, fr = 0;
  kc::binary<float>(kc::BinaryOp::kDiv, &fo, {}, &fz, {}, &fr, {});
  CHECK(std::isinf(fr));
  std::vector<float> f(64);
  CHECK_THROWS_AS(kc::binary<float>(kc::BinaryOp::kAdd, f.data(), {3, 2}, f.data(), {3}, f.data(), {3, 3}), Error);
  CHECK_THROWS_AS(kc::binary<float>(kc::BinaryOp::kAdd, f.data(), {3, 2}, f.data(), {2}, f.data(), {3, 3}), Error);
  CHECK(kc::to_string(kc::BinaryOp::kAdd) == "add");
  CHECK(kc::to_string(kc::UnaryOp::kSigmoid) == "sigmoid");
}

// ---------------------------------------------------------------------------------------------
// reduce. Tolerance: sums of floats |got - ref| <= eps * sum |x| (eps 1e-6 float, 1e-14
// double), ref in double; max/min and integer sums exact (wrapping).

template <class T>
void check_reduce(const Shape& xs, uint32_t seed) {
  auto x = random_values<T>(xs.numel(), seed);
  for (const auto& axes : all_axis_sets(xs.ndim())) {
    std::vector<int64_t> kept;
    for (int64_t d = 0, i = 0; d < xs.ndim(); ++d) {
      if (i < int64_t(axes.size()) && axes[i] == d) ++i;
      else kept.push_back(xs[d]);
    }
    const Shape os(kept);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      std::vector<Acc<T>> ref(os.numel(), Acc<T>(0));
      std::vector<T> refm(os.numel(), reduce_identity<T>(op));
      std::vector<double> mag(os.numel(), 0);
      for (int64_t i = 0; i < xs.numel(); ++i) {
        const auto idx = unravel(i, xs);
        int64_t o = 0;
        for (int64_t d = 0, j = 0; d < xs.ndim(); ++d) {
          if (j < int64_t(axes.size()) && axes[j] == d) ++j;
          else o = o * xs[d] + idx[d];
        }
        ref[o] += to_acc(x[i]);
        mag[o] += std::abs(double(x[i]));
        refm[o] = op == ReduceOp::kMax ? std::max(refm[o], x[i]) : std::min(refm[o], x[i]);
      }
      std::vector<T> out(os.numel(), T(99));
      kc::reduce<T>(op, x.data(), xs, axes, out.data());
      const double eps = std::is_same_v<T, float> ? 1e-6 : 1e-14;
      for (int64_t o = 0; o < os.numel(); ++o) {
        INFO(to_string(op) << " " << type_name<T>() << " " << xs << " axes " << spsd::detail::join(axes) << " at " << o);
        if (op != ReduceOp::kSum) {
          REQUIRE(out[o] == refm[o]);
        } else if constexpr (std::is_floating_point_v<T>) {
          REQUIRE(std::abs(double(out[o]) - ref[o]) <= eps * mag[o]);
        } else {
          REQUIRE(out[o] == from_acc<T>(ref[o]));
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("kernels: reduce over every axis set matches the naive loop", "[kernels]", float, double,
                   int32_t, int64_t) {
  const std::vector<Shape> shapes = {{7, 13}, {2, 3, 4}, {3, 1, 5}, {0, 4}, {4, 0}, {2, 0, 3},
                                     {},      {5},       {2, 3, 4, 5}, {1, 1}, {6, 1, 7, 2}, {37, 41},
                                     {300, 5}, {5, 300}, {3, 40, 2, 33}};
  uint32_t seed = 500;
  for (const Shape& s : shapes) check_reduce<TestType>(s, ++seed);
}

TEST_CASE("kernels: reduce identities, integer wrap, bad axes, scale", "[kernels]") {
  std::vector<float> out(4, 5.f);
  const std::vector<int64_t> ax1 = {1}, ax0_of_one = {0};
  kc::reduce<float>(ReduceOp::kMax, nullptr, {4, 0}, ax1, out.data());
  // Nothing to reduce: the identity partial layouts pad with (finite: see docs/operators.md).
  CHECK(out == std::vector<float>(4, std::numeric_limits<float>::lowest()));
  // Something to reduce: exact, so rows (and columns) of -inf have max -inf, of +inf min +inf.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> minus_inf(60, -inf), plus_inf(60, inf);
  float m = 0;
  kc::reduce<float>(ReduceOp::kMax, minus_inf.data(), {20}, ax0_of_one, &m);
  CHECK(m == -inf);
  kc::reduce<float>(ReduceOp::kMin, plus_inf.data(), {20}, ax0_of_one, &m);
  CHECK(m == inf);
  std::vector<float> cols(20, 0.f);
  kc::reduce<float>(ReduceOp::kMax, minus_inf.data(), {3, 20}, ax0_of_one, cols.data());
  CHECK(cols == std::vector<float>(20, -inf));
  kc::reduce<float>(ReduceOp::kSum, nullptr, {4, 0}, ax1, out.data());
  CHECK(out == std::vector<float>(4, 0.f));
  std::vector<int32_t> big(3, std::numeric_limits<int32_t>::max());
  int32_t r = 0;
  const std::vector<int64_t> ax0 = {0};
  kc::reduce<int32_t>(ReduceOp::kSum, big.data(), {3}, ax0, &r);
  CHECK(r == static_cast<int32_t>(3u * uint32_t(std::numeric_limits<int32_t>::max())));
  std::vector<float> x(6, 1.f);
  for (std::vector<int64_t> bad : {std::vector<int64_t>{1, 0}, {0, 0}, {2}, {-1}})
    CHECK_THROWS_AS(kc::reduce<float>(ReduceOp::kSum, x.data(), {2, 3}, bad, out.data()), Error);
  std::vector<double> v = {1, 2, 3};
  kc::scale<double>(v.data(), 3, 0.5);
  CHECK(v == std::vector<double>{0.5, 1, 1.5});
  kc::scale<double>(nullptr, 0, 2.0);
}

// ---------------------------------------------------------------------------------------------
// softmax. Tolerance: |got - ref| <= tol * (1 + |ref|), ref in double after subtracting the
// max; tol 1e-6 (float), 1e-14 (double).

template <class T>
void check_softmax(const Shape& s, T scale_by, uint32_t seed) {
  auto x = random_values<T>(s.numel(), seed);
  for (T& v : x) v *= scale_by;
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  for (int64_t axis = 0; axis < s.ndim(); ++axis) {
    for (bool log : {false, true}) {
      std::vector<T> out(s.numel(), T(-5));
      kc::softmax<T>(x.data(), s, axis, out.data(), log);
      const int64_t len = s[axis];
      int64_t inner = 1;
      for (int64_t d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
      for (int64_t i = 0; i < s.numel(); ++i) {
        const int64_t base = i - ((i / inner) % len) * inner;  // same index with axis coordinate 0
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < len; ++j) mx = std::max(mx, double(x[base + j * inner]));
        for (int64_t j = 0; j < len; ++j) sum += std::exp(double(x[base + j * inner]) - mx);
        const double ref = log ? double(x[i]) - mx - std::log(sum) : std::exp(double(x[i]) - mx) / sum;
        INFO(type_name<T>() << " " << s << " axis " << axis << " log " << log << " at " << i);
        REQUIRE(std::abs(double(out[i]) - ref) <= tol * (1 + std::abs(ref)));
      }
      std::vector<T> inplace = x;
      kc::softmax<T>(inplace.data(), s, axis, inplace.data(), log);
      CHECK(inplace == out);
    }
  }
}

TEMPLATE_TEST_CASE("kernels: softmax along every axis matches the reference", "[kernels]", float, double) {
  using T = TestType;
  const std::vector<Shape> shapes = {{7, 13}, {2, 3, 4}, {5}, {1, 1}, {3, 0}, {0, 3}, {4, 1, 3}, {3, 37, 2}, {2, 70}};
  uint32_t seed = 900;
  for (const Shape& s : shapes) {
    check_softmax<T>(s, T(1), ++seed);
    check_softmax<T>(s, T(300), ++seed);  // exp(600) overflows without the max shift
  }
  std::vector<T> x = {-INFINITY, T(0), T(1)}, out(3);
  kc::softmax<T>(x.data(), {3}, 0, out.data(), false);
  CHECK(out[0] == T(0));
  CHECK(std::abs(double(out[1] + out[2]) - 1) < 1e-6);
  CHECK_THROWS_AS(kc::softmax<T>(x.data(), {3}, 1, out.data(), false), Error);
}

// softmax_backward against the composed formulas in double: softmax dx = y (g - sum(g y)),
// log_softmax dx = g - exp(y) sum(g), y from the forward kernel. Tolerance as softmax's, the
// magnitude sum |g y| (or |g|) and |g| added to the reference's; in place (dx = g) identical.
template <class T>
void check_softmax_backward(const Shape& s, uint32_t seed) {
  const auto x = random_values<T>(s.numel(), seed), g = random_values<T>(s.numel(), seed + 1);
  const double tol = std::is_same_v<T, float> ? 4e-6 : 1e-14;
  for (int64_t axis = 0; axis < s.ndim(); ++axis) {
    for (bool log : {false, true}) {
      std::vector<T> y(s.numel()), dx(s.numel(), T(-5));
      kc::softmax<T>(x.data(), s, axis, y.data(), log);
      kc::softmax_backward<T>(y.data(), g.data(), s, axis, dx.data(), log);
      const int64_t len = s[axis];
      int64_t inner = 1;
      for (int64_t d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
      for (int64_t i = 0; i < s.numel(); ++i) {
        const int64_t base = i - ((i / inner) % len) * inner;
        double sum = 0, mag = 0;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t e = base + j * inner;
          sum += log ? double(g[e]) : double(g[e]) * double(y[e]);
          mag += log ? std::abs(double(g[e])) : std::abs(double(g[e]) * double(y[e]));
        }
        const double ref = log ? double(g[i]) - std::exp(double(y[i])) * sum : double(y[i]) * (double(g[i]) - sum);
        INFO(type_name<T>() << " " << s << " axis " << axis << " log " << log << " at " << i);
        REQUIRE(std::abs(double(dx[i]) - ref) <= tol * (1 + std::abs(ref) + mag + std::abs(double(g[i]))));
      }
      std::vector<T> inplace = g;
      kc::softmax_backward<T>(y.data(), inplace.data(), s, axis, inplace.data(), log);
      CHECK(inplace == dx);
    }
  }
}

TEMPLATE_TEST_CASE("kernels: softmax_backward along every axis matches the composed formulas", "[kernels]", float,
                   double) {
  using T = TestType;
  const std::vector<Shape> shapes = {{7, 13}, {2, 3, 4}, {5}, {1, 1}, {3, 0}, {0, 3}, {4, 1, 3}, {3, 37, 2}, {2, 70}};
  uint32_t seed = 1900;
  for (const Shape& s : shapes) check_softmax_backward<T>(s, seed += 2);
  std::vector<T> y(3), g(3);
  CHECK_THROWS_WITH(kc::softmax_backward<T>(y.data(), g.data(), {3}, 1, g.data(), true),
                    Catch::Contains("log_softmax_grad") && Catch::Contains("axis 1"));
}

// cross_entropy_backward against the composed formula in double: the gradient of
// -mean(pick(log_softmax(x), labels)) * g is (softmax(x) - onehot) g / N (pick_grad then
// log_softmax's backward), a zero row for an out-of-range label; N the whole batch's rows.
TEMPLATE_TEST_CASE("kernels: cross_entropy_backward matches softmax - onehot", "[kernels]", float, double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  for (const auto& [rows, classes] : std::vector<std::pair<int64_t, int64_t>>{{4, 5}, {3, 1}, {2, 70}, {0, 3}}) {
    auto x = random_values<T>(rows * classes, 40 + static_cast<uint32_t>(classes));
    for (T& v : x) v *= T(30);  // exp overflows without the max shift
    std::vector<int64_t> labels(rows);
    for (int64_t r = 0; r < rows; ++r) labels[r] = (r * 7 + 1) % classes;
    if (rows > 1) labels[1] = classes;  // out of range: no gradient
    const T g = T(-1.5);
    const int64_t total = rows + 3;  // this piece is part of a bigger batch
    std::vector<T> dx(rows * classes, T(9));
    kc::cross_entropy_backward<T>(x.data(), labels.data(), &g, rows, classes, total, dx.data());
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < classes; ++j) mx = std::max(mx, double(x[r * classes + j]));
      for (int64_t j = 0; j < classes; ++j) sum += std::exp(double(x[r * classes + j]) - mx);
      const bool valid = labels[r] >= 0 && labels[r] < classes;
      for (int64_t j = 0; j < classes; ++j) {
        const double p = std::exp(double(x[r * classes + j]) - mx) / sum;
        const double ref = valid ? (p - (j == labels[r] ? 1.0 : 0.0)) * double(g) / double(total) : 0.0;
        INFO(type_name<T>() << " rows " << rows << " classes " << classes << " at (" << r << ", " << j << ")");
        REQUIRE(std::abs(double(dx[r * classes + j]) - ref) <= tol * std::abs(double(g)) / double(total));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// permute and copy_region: pure data movement, exact.

template <class T>
void check_permute(const Shape& s, uint32_t seed) {
  auto x = random_values<T>(s.numel(), seed);
  for (const auto& perm : all_perms(s.ndim())) {
    std::vector<int64_t> od(s.ndim());
    for (int64_t i = 0; i < s.ndim(); ++i) od[i] = s[perm[i]];
    const Shape os(od);
    std::vector<T> out(os.numel(), T(-3));
    kc::permute<T>(x.data(), s, perm, out.data());
    for (int64_t i = 0; i < os.numel(); ++i) {
      const auto oidx = unravel(i, os);
      std::vector<int64_t> xidx(s.ndim());
      for (int64_t d = 0; d < s.ndim(); ++d) xidx[perm[d]] = oidx[d];
      INFO(type_name<T>() << " " << s << " perm " << spsd::detail::join(perm) << " at " << i);
      REQUIRE(out[i] == x[ravel_broadcast(xidx, s)]);
    }
  }
}

TEMPLATE_TEST_CASE("kernels: permute over every permutation matches the naive loop", "[kernels]", float, double,
                   int32_t, int64_t) {
  const std::vector<Shape> shapes = {{2, 3, 4}, {7, 13}, {2, 1, 3, 4}, {3, 0, 2}, {}, {5},
                                     {33, 65},  {2, 40, 35}, {4, 5, 6, 7}, {3, 1, 1, 2}, {70, 3}};
  uint32_t seed = 1300;
  for (const Shape& s : shapes) check_permute<TestType>(s, ++seed);
  std::vector<TestType> x(6);
  for (std::vector<int64_t> bad : {std::vector<int64_t>{0}, {0, 0}, {1, 2}, {-1, 0}})
    CHECK_THROWS_AS(kc::permute<TestType>(x.data(), {2, 3}, bad, x.data()), Error);
}

TEMPLATE_TEST_CASE("kernels: copy_region copies exactly the box", "[kernels]", float, int64_t) {
  using T = TestType;
  std::mt19937 gen(77);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t r = pick(0, 4);
    std::vector<int64_t> sd(r), dd(r), ext(r), sb(r), db(r);
    for (int64_t d = 0; d < r; ++d) {
      sd[d] = pick(0, 6);
      dd[d] = pick(0, 6);
      if (pick(0, 2) == 0) dd[d] = sd[d];  // often full trailing axes: longer runs
      ext[d] = pick(0, std::min(sd[d], dd[d]));
      if (pick(0, 2) == 0) ext[d] = std::min(sd[d], dd[d]);
      sb[d] = pick(0, sd[d] - ext[d]);
      db[d] = pick(0, dd[d] - ext[d]);
    }
    const Shape ss(sd), ds(dd), es(ext);
    auto src = random_values<T>(ss.numel(), 3000 + trial);
    std::vector<T> dst(ds.numel(), T(-99)), want = dst;
    for (int64_t i = 0; i < es.numel(); ++i) {
      auto idx = unravel(i, es), si = idx, di = idx;
      for (int64_t d = 0; d < r; ++d) {
        si[d] += sb[d];
        di[d] += db[d];
      }
      want[ravel_broadcast(di, ds)] = src[ravel_broadcast(si, ss)];
    }
    kc::copy_region<T>(src.data(), ss, sb, dst.data(), ds, db, es);
    INFO("src " << ss << " dst " << ds << " extent " << es);
    REQUIRE(dst == want);
  }
  std::vector<T> a(12), b(12);
  const std::vector<int64_t> at1 = {1, 0}, at0 = {0, 0};
  CHECK_THROWS_AS(kc::copy_region<T>(a.data(), {3, 4}, at1, b.data(), {3, 4}, at0, {3, 4}), Error);
  CHECK_THROWS_AS(kc::copy_region<T>(a.data(), {3, 4}, at0, b.data(), {12}, at0, {3, 4}), Error);
}

// ---------------------------------------------------------------------------------------------
// embedding and pick: rows / classes this rank holds, zeros elsewhere; exact.

TEMPLATE_TEST_CASE("kernels: embedding and pick keep only the local range", "[kernels]", float, double, int32_t,
                   int64_t) {
  using T = TestType;
  const int64_t vocab = 20, dim = 7, n = 33;
  auto full = random_values<T>(vocab * dim, 4242);
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = (i * 7) % vocab;
  for (auto [begin, rows] : {std::pair<int64_t, int64_t>{0, 20}, {5, 6}, {19, 1}, {8, 0}}) {
    std::vector<T> out(n * dim, T(5));
    kc::embedding<T>(full.data() + begin * dim, begin, rows, dim, idx.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < dim; ++j) {
        const bool mine = idx[i] >= begin && idx[i] < begin + rows;
        REQUIRE(out[i * dim + j] == (mine ? full[idx[i] * dim + j] : T(0)));
      }
  }
  kc::embedding<T>(nullptr, 0, 0, 0, idx.data(), n, nullptr);  // dim 0
  kc::embedding<T>(full.data(), 0, vocab, dim, nullptr, 0, nullptr);  // n 0

  const int64_t classes = 9;
  auto logits = random_values<T>(n * classes, 99);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = (i * 5) % 27;  // 27 classes overall, 3 ranks of 9
  for (int64_t rank = 0; rank < 3; ++rank) {
    std::vector<T> out(n, T(7));
    kc::pick<T>(logits.data(), n, rank * classes, classes, labels.data(), out.data());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = labels[i] - rank * classes;
      REQUIRE(out[i] == (j >= 0 && j < classes ? logits[i * classes + j] : T(0)));
    }
  }
  kc::pick<T>(nullptr, 0, 0, 0, nullptr, nullptr);
}

// The fused optimizer kernels against the textbook formulas in long double, element by element
// over 3 steps, for every flag combination; 37 elements: whole cache-line blocks and a tail.
// (Adam's kernel takes the bias corrections folded into step size and eps; the reference
// applies them to the moments, as Kingma & Ba's algorithm 1 writes it.)
TEMPLATE_TEST_CASE("kernels: sgd_step and adam_step match the scalar formulas", "[kernels]", float, double) {
  using T = TestType;
  using L = long double;
  const double rtol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  const int64_t n = 37;
  auto close = [&](T got, L want) { return std::abs(static_cast<L>(got) - want) <= rtol * (1 + std::abs(want)); };
  for (int flags = 0; flags < 8; ++flags) {
    const bool decay = flags & 1, momentum = flags & 2, nesterov = momentum && (flags & 4);
    const double lr = 0.1, mu = 0.9, wd = 0.05;
    const kc::SgdStep<T> args{T(lr), T(mu), T(wd), momentum, decay, nesterov};
    std::vector<T> p = random_values<T>(n, 1), buf(n, T(0));
    std::vector<L> rp(p.begin(), p.end()), rbuf(n, 0);
    for (int t = 1; t <= 3; ++t) {
      const std::vector<T> g = random_values<T>(n, 10 + t);
      kc::sgd_step<T>(p.data(), g.data(), momentum ? buf.data() : nullptr, n, args);
      for (int64_t i = 0; i < n; ++i) {
        L d = g[i] + (decay ? L(wd) * rp[i] : 0);
        if (momentum) {
          rbuf[i] = L(mu) * rbuf[i] + d;
          d = nesterov ? d + L(mu) * rbuf[i] : rbuf[i];
        }
        rp[i] -= L(lr) * d;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      INFO("sgd flags " << flags << ", element " << i);
      REQUIRE(close(p[i], rp[i]));
      if (momentum) REQUIRE(close(buf[i], rbuf[i]));
    }
  }
  for (int flags = 0; flags < 3; ++flags) {  // none, L2 (Adam), decoupled (AdamW)
    const bool l2 = flags == 1, decoupled = flags == 2;
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    std::vector<T> p = random_values<T>(n, 2), m(n, T(0)), v(n, T(0));
    std::vector<L> rp(p.begin(), p.end()), rm(n, 0), rv(n, 0);
    for (int t = 1; t <= 3; ++t) {
      const double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
      const kc::AdamStep<T> args{T(b1), T(1 - b1), T(b2), T(1 - b2), T(lr * std::sqrt(c2) / c1), T(eps * std::sqrt(c2)),
                                 T(wd), T(1 - lr * wd), l2, decoupled};
      const std::vector<T> g = random_values<T>(n, 20 + t);
      kc::adam_step<T>(p.data(), g.data(), m.data(), v.data(), n, args);
      for (int64_t i = 0; i < n; ++i) {
        const L gi = g[i] + (l2 ? L(wd) * rp[i] : 0);
        rm[i] = L(b1) * rm[i] + (1 - L(b1)) * gi;
        rv[i] = L(b2) * rv[i] + (1 - L(b2)) * gi * gi;
        if (decoupled) rp[i] *= 1 - L(lr) * L(wd);
        rp[i] -= L(lr) * (rm[i] / L(c1)) / (std::sqrt(rv[i] / L(c2)) + L(eps));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      INFO("adam flags " << flags << ", element " << i);
      REQUIRE(close(p[i], rp[i]));
      REQUIRE(close(m[i], rm[i]));
      REQUIRE(close(v[i], rv[i]));
    }
  }
}
