// kernel/cpu/vector_math.hpp: exp, erf and tanh of float against <cmath>'s in double, in ulps of
// the float result, over a sweep of every 257th float bit pattern (all signs, exponents and
// subnormals, 16.7 million values), at the special values, and through the vectorized kernels
// (kernel::cpu::unary and unary_grad) that call them, in both copies of their loops (the
// x86-64 baseline and AVX2, kernel/cpu/isa.hpp), which must agree bit for bit. The bounds are
// those docs/operators.md states.
#include <catch2/catch.hpp>
#include <spsd/kernel/cpu/elementwise.hpp>
#include <spsd/kernel/cpu/isa.hpp>
#include <spsd/kernel/cpu/normalization.hpp>
#include <spsd/kernel/cpu/softmax.hpp>
#include <spsd/kernel/cpu/vector_math.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

namespace kc = spsd::kernel::cpu;

namespace {

// |got - want| in units of the last place of want rounded to float (the spacing at the smallest
// subnormal for 0); a result of the wrong class (NaN, inf, finite) counts as infinitely far.
double ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : INFINITY;
  const float w = static_cast<float>(want);
  if (std::isinf(w)) return got == w ? 0 : INFINITY;
  if (!std::isfinite(got)) return INFINITY;
  const float a = std::fabs(w);
  const double spacing = a == 0 ? std::numeric_limits<float>::denorm_min()
                                : std::nextafter(a, std::numeric_limits<float>::infinity()) - a;
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

struct Fn {
  const char* name;
  float (*fast)(float);
  double (*exact)(double);
  double max_ulps;
  kc::UnaryOp op;
};
const Fn kFns[] = {
    {"exp", kc::exp_float, [](double x) { return std::exp(x); }, 1, kc::UnaryOp::kExp},
    {"erf", kc::erf_float, [](double x) { return std::erf(x); }, 3, kc::UnaryOp::kErf},
    {"tanh", kc::tanh_float, [](double x) { return std::tanh(x); }, 2, kc::UnaryOp::kTanh},
};

// The instruction sets this CPU runs the dispatched loops with (the baseline at least).
std::vector<kc::Isa> isas() {
  std::vector<kc::Isa> v = {kc::Isa::kBaseline};
  if (kc::isa_supported(kc::Isa::kAvx2)) v.push_back(kc::Isa::kAvx2);
  return v;
}
const char* isa_name(kc::Isa isa) { return isa == kc::Isa::kAvx2 ? "avx2" : "baseline"; }

// Sets the dispatched loops' instruction set for a scope, then restores the one before.
struct IsaScope {
  kc::Isa before = kc::isa();
  explicit IsaScope(kc::Isa isa) { kc::set_isa(isa); }
  ~IsaScope() { kc::set_isa(before); }
};

std::vector<float> sweep() {
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 257) x.push_back(std::bit_cast<float>(uint32_t(bits)));
  return x;
}

}  // namespace

TEST_CASE("vector_math: exp, erf and tanh of float within their ulp bounds over the whole range", "[kernels]") {
  const std::vector<float> x = sweep();
  std::vector<float> out(x.size());
  for (const kc::Isa isa : isas())
    for (const Fn& f : kFns) {
      INFO(f.name << ", " << isa_name(isa) << " loops");
      // Through the kernel: the vectorized loop of kernel::cpu::unary.
      const IsaScope scope(isa);
      kc::unary<float>(f.op, x.data(), out.data(), static_cast<int64_t>(x.size()));
      double worst = 0;
      float at = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double e = ulps(out[i], f.exact(x[i]));
        if (e > worst) worst = e, at = x[i];
      }
      INFO("worst " << worst << " ulp at x = " << at);
      CHECK(worst <= f.max_ulps);
      // The scalar form (a call, not vectorized) gives the same bits.
      size_t differ = 0;
      for (size_t i = 0; i < x.size(); i += 7) differ += std::bit_cast<uint32_t>(f.fast(x[i])) != std::bit_cast<uint32_t>(out[i]);
      CHECK(differ == 0);
    }
}

TEST_CASE("vector_math: special values are as <cmath>'s", "[kernels]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {0.0f,   -0.0f,   inf,     -inf,    nan,    -nan,   std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(), 88.72283f, 88.72284f, -87.33655f, -103.97208f,
                            -103.97209f, -104.5f, 89.5f, 0.625f, -0.625f, 1.5f, -1.5f, 3.9f, 4.0f, 4.5f};
  for (const Fn& f : kFns)
    for (float x : specials) {
      INFO(f.name << "(" << x << ") = " << f.fast(x) << ", want " << f.exact(x));
      CHECK(ulps(f.fast(x), f.exact(x)) <= f.max_ulps);
      // erf keeps the sign of a zero; tanh(-0) is +0 (the one difference from <cmath>: x + x^3 P
      // adds -0 and +0).
      if (x == 0 && f.op == kc::UnaryOp::kErf) CHECK(std::signbit(f.fast(x)) == std::signbit(x));
      if (x == 0 && f.op == kc::UnaryOp::kTanh) CHECK(f.fast(x) == 0.0f);
    }
  CHECK(kc::exp_float(inf) == inf);
  CHECK(kc::exp_float(-inf) == 0.0f);
  CHECK(kc::erf_float(-inf) == -1.0f);
  CHECK(kc::tanh_float(inf) == 1.0f);
}

namespace {

double Phi(double v) { return 0.5 * (1 + std::erf(v / std::sqrt(2.0))); }
double phi(double v) { return std::exp(-0.5 * v * v) / std::sqrt(2 * std::numbers::pi); }
double sig(double v) { return 1 / (1 + std::exp(-v)); }

}  // namespace

TEST_CASE("vector_math: gelu, silu and their gradients through the kernels within 1e-6 (1 + |f|)", "[kernels]") {
  // Against the formulas in double on a dense grid of [-12, 12] (both sides of each
  // approximation's switch); unary's test (test_kernels.cpp) checks random points at 2e-6.
  std::vector<float> x;
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> out(x.size()), ones(x.size(), 1.0f);
  struct Case {
    kc::UnaryOp op;
    bool grad;
    double (*ref)(double);
  };
  const Case cases[] = {
      {kc::UnaryOp::kGelu, false, [](double v) { return v * Phi(v); }},
      {kc::UnaryOp::kGelu, true, [](double v) { return Phi(v) + v * phi(v); }},
      {kc::UnaryOp::kSilu, false, [](double v) { return v * sig(v); }},
      {kc::UnaryOp::kSilu, true, [](double v) { return sig(v) * (1 + v * (1 - sig(v))); }},
      {kc::UnaryOp::kGeluTanh, false,
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v))); }},
  };
  for (const kc::Isa isa : isas())
    for (const Case& c : cases) {
      INFO(kc::to_string(c.op) << (c.grad ? " gradient" : "") << ", " << isa_name(isa) << " loops");
      const IsaScope scope(isa);
      if (c.grad) kc::unary_grad<float>(c.op, x.data(), ones.data(), out.data(), n);
      else kc::unary<float>(c.op, x.data(), out.data(), n);
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = c.ref(x[i]);
        worst = std::max(worst, std::fabs(out[i] - want) / (1 + std::fabs(want)));
      }
      INFO("worst error " << worst);
      CHECK(worst <= 1e-6);
    }
}

namespace {

// Runs f once per instruction set and returns each run's output bits.
template <class F>
std::vector<std::vector<uint32_t>> bits_per_isa(size_t n, F f) {
  std::vector<std::vector<uint32_t>> runs;
  for (const kc::Isa isa : isas()) {
    const IsaScope scope(isa);
    std::vector<float> out(n);
    f(out.data());
    runs.emplace_back(n);
    for (size_t i = 0; i < n; ++i) runs.back()[i] = std::bit_cast<uint32_t>(out[i]);
  }
  return runs;
}

}  // namespace

TEST_CASE("vector_math: the AVX2 copies of the dispatched loops give the baseline's bits", "[kernels]") {
  if (!kc::isa_supported(kc::Isa::kAvx2)) WARN("no AVX2 on this CPU: only the baseline copy runs");
  CHECK(kc::isa() == (kc::isa_supported(kc::Isa::kAvx2) ? kc::Isa::kAvx2 : kc::Isa::kBaseline));
  // Every 4099th float pattern (NaN, inf, subnormals included) and a dense grid of [-12, 12].
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) x.push_back(std::bit_cast<float>(uint32_t(bits)));
  for (int i = -12000; i <= 12000; ++i) x.push_back(static_cast<float>(i) * 1e-3f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> g(x.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
  auto same = [](const std::vector<std::vector<uint32_t>>& runs) {
    for (size_t r = 1; r < runs.size(); ++r)
      for (size_t i = 0; i < runs[0].size(); ++i)
        if (runs[r][i] != runs[0][i]) return false;
    return true;
  };
  using U = kc::UnaryOp;
  for (const U op : {U::kNeg, U::kRelu, U::kGelu, U::kGeluTanh, U::kErf, U::kSilu, U::kRsqrt, U::kExp, U::kLog, U::kTanh,
                     U::kSigmoid, U::kSqrt, U::kAbs}) {
    INFO(kc::to_string(op));
    CHECK(same(bits_per_isa(x.size(), [&](float* o) { kc::unary<float>(op, x.data(), o, n); })));
    CHECK(same(bits_per_isa(x.size(), [&](float* o) { kc::unary_grad<float>(op, x.data(), g.data(), o, n); })));
  }
  // softmax and log_softmax, forward and backward, rows (axis last) and blocks (axis first).
  std::vector<float> logits(64 * 96);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = x[x.size() - logits.size() + i] * 3.0f;
  const spsd::Shape shape{64, 96};
  for (const int64_t axis : {0, 1})
    for (const bool log : {false, true}) {
      INFO("softmax axis " << axis << (log ? " log" : ""));
      std::vector<float> y(logits.size());
      kc::softmax<float>(logits.data(), shape, axis, y.data(), log);
      CHECK(same(bits_per_isa(y.size(), [&](float* o) { kc::softmax<float>(logits.data(), shape, axis, o, log); })));
      CHECK(same(bits_per_isa(y.size(), [&](float* o) {
        kc::softmax_backward<float>(y.data(), g.data(), shape, axis, o, log);
      })));
    }
  // layer_norm and rms_norm: forward, dx and dweight, on rows of 128 and of 37 (a tail).
  for (const int64_t len : {int64_t{128}, int64_t{37}})
    for (const bool rms : {false, true}) {
      INFO("norm rows of " << len << (rms ? " rms" : " layer"));
      const int64_t rows = static_cast<int64_t>(logits.size()) / len;
      const float* w = g.data() + 7;
      const float* b = rms ? nullptr : g.data() + 300;
      CHECK(same(bits_per_isa(logits.size(), [&](float* o) {
        kc::norm_forward<float>(logits.data(), w, b, rows, len, 1e-5, rms, o);
      })));
      CHECK(same(bits_per_isa(logits.size(), [&](float* o) {
        kc::norm_backward_x<float>(logits.data(), w, g.data(), rows, len, 1e-5, rms, o);
      })));
      CHECK(same(bits_per_isa(static_cast<size_t>(len), [&](float* o) {
        kc::norm_backward_w<float>(logits.data(), g.data(), rows, len, 1e-5, rms, o);
      })));
    }
  std::vector<int64_t> labels(64);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i * 7 % 97) - 1;  // -1, 96: a zero row
  const float one = 1.0f;
  CHECK(same(bits_per_isa(logits.size(), [&](float* o) {
    kc::cross_entropy_backward<float>(logits.data(), labels.data(), &one, 64, 96, 64, o);
  })));
}

TEST_CASE("vector_math: gelu's and erf's loops give the full function's bits on blocks that take the fast case",
          "[kernels]") {
  // The loops run erf's first case alone on a block whose elements it all covers (loop.hpp,
  // TwoRegimes). Blocks here: all covered (up to the switch's very edge, where a wrong bound
  // would show), one element past the switch, NaN and inf among covered ones, and a tail; each
  // output must be the bits of the function applied to its element alone.
  std::vector<float> x;
  const float edge = 1.5f * std::numbers::sqrt2_v<float>;  // where gelu's erf argument reaches 1.5
  for (int b = 0; b < 64; ++b)
    for (int j = 0; j < 16; ++j) {
      const float t = static_cast<float>((b * 16 + j) % 97) / 96.0f;  // [0, 1]
      float v = (2 * t - 1) * (b % 2 ? edge : 1.5f);
      if (b % 8 == 3 && j == 5) v = b % 16 == 3 ? 2.3f : -1.6f;             // past gelu's or erf's switch
      if (b % 8 == 5 && j == 9) v = b % 16 == 5 ? std::nanf("") : INFINITY;  // NaN, inf
      if (b % 8 == 7) v = std::nextafter(j % 2 ? edge : 1.5f, j % 4 < 2 ? 0.0f : 3.0f) * (j % 3 ? 1 : -1);
      x.push_back(v);
    }
  for (int j = 0; j < 7; ++j) x.push_back(0.3f * static_cast<float>(j) - 1.0f);  // a tail
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> g(x.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
  using U = kc::UnaryOp;
  const auto one_by_one = [&](auto f) {
    std::vector<uint32_t> bits(x.size());
    for (size_t i = 0; i < x.size(); ++i) bits[i] = std::bit_cast<uint32_t>(f(x[i], g[i]));
    return bits;
  };
  const auto want_gelu = one_by_one([](float v, float) { return spsd::kernel::gelu_exact(v); });
  const auto want_grad = one_by_one([](float v, float dy) { return spsd::kernel::gelu_derivative(v) * dy; });
  const auto want_erf = one_by_one([](float v, float) { return kc::erf_float(v); });
  const auto differences = [&](const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
    int64_t d = 0;
    for (size_t i = 0; i < got.size(); ++i) d += got[i] != want[i];
    return d;
  };
  for (const kc::Isa isa : isas()) {
    INFO(isa_name(isa) << " loops");
    const IsaScope scope(isa);
    std::vector<float> out(x.size());
    const auto bits = [&] {
      std::vector<uint32_t> b(out.size());
      for (size_t i = 0; i < out.size(); ++i) b[i] = std::bit_cast<uint32_t>(out[i]);
      return b;
    };
    kc::unary<float>(U::kGelu, x.data(), out.data(), n);
    CHECK(differences(bits(), want_gelu) == 0);
    kc::unary_grad<float>(U::kGelu, x.data(), g.data(), out.data(), n);
    CHECK(differences(bits(), want_grad) == 0);
    kc::unary<float>(U::kErf, x.data(), out.data(), n);
    CHECK(differences(bits(), want_erf) == 0);
  }
}
