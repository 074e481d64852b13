#include "op_suite.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>
#include <type_traits>

#include "boxing_suite.hpp"
#include "reference_loops.hpp"

namespace spsd_test {

using namespace spsd;

int64_t OpSuiteCounts::total() const {
  int64_t n = 0;
  for (const auto& [op, c] : per_op) n += c;
  return n;
}

std::string OpSuiteCounts::to_string() const {
  std::string s = std::to_string(total()) + " cases:";
  bool first = true;
  for (const auto& [op, c] : per_op) {
    s += (first ? " " : ", ") + op + " " + std::to_string(c);
    first = false;
  }
  return s;
}

void OpSuiteCounts::merge(const OpSuiteCounts& other) {
  for (const auto& [op, c] : other.per_op) per_op[op] += c;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Deterministic host values (the same on every rank: from_host checks it).

uint64_t hash_text(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

enum class Domain { kAny, kPositive, kNonzero };

template <class T>
T value_at(uint64_t seed, int64_t g, Domain d) {
  const uint64_t r = splitmix(seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(g));
  if constexpr (std::is_integral_v<T>) {
    const int64_t k = static_cast<int64_t>(r % 9) + 1;  // 1..9
    if (d == Domain::kPositive) return static_cast<T>(k);
    if (d == Domain::kNonzero) return static_cast<T>((r >> 32) & 1 ? k : -k);
    return static_cast<T>(static_cast<int64_t>(r % 19) - 9);  // -9..9
  } else {
    const double u = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    const double v = d == Domain::kPositive  ? 0.5 + 2.5 * u
                     : d == Domain::kNonzero ? (u < 0.5 ? -(0.5 + 3.0 * u) : 0.5 + 3.0 * (u - 0.5))
                                             : -2.0 + 4.0 * u;
    // 16-bit: multiples of 1/16 (|v| <= 3), so the lopsided partial pieces are exact (header).
    if constexpr (is_half_v<T>) return static_cast<T>(std::round(v * 16.0) / 16.0);
    return static_cast<T>(v);
  }
}

template <class T>
Tensor<T> host_tensor(const Shape& shape, uint64_t seed, Domain d) {
  std::vector<T> v(shape.numel());
  for (int64_t g = 0; g < shape.numel(); ++g) v[g] = value_at<T>(seed, g, d);
  return Tensor<T>::from_vector(shape, std::move(v));
}

// ---------------------------------------------------------------------------------------------
// References: plain loops on whole host tensors.

template <class T, class F>
Tensor<T> ref_binary(const Tensor<T>& a, const Tensor<T>& b, F f) {
  const Shape out = ref_broadcast(a.shape(), b.shape());
  std::vector<T> v(out.numel());
  for (int64_t g = 0; g < out.numel(); ++g) {
    std::vector<int64_t> idx = unravel(g, out);
    v[g] = f(a.data()[broadcast_offset(a.shape(), idx)], b.data()[broadcast_offset(b.shape(), idx)]);
  }
  return Tensor<T>::from_vector(out, std::move(v));
}

template <class T, class F>
Tensor<T> ref_map(const Tensor<T>& x, F f) {
  std::vector<T> v(x.numel());
  for (int64_t g = 0; g < x.numel(); ++g) v[g] = f(x.data()[g]);
  return Tensor<T>::from_vector(x.shape(), std::move(v));
}

// (..., m, k) x (..., k, n) with numpy-broadcast batch axes.
template <class T>
Tensor<T> ref_matmul(const Tensor<T>& a, const Tensor<T>& b) {
  const Shape &sa = a.shape(), &sb = b.shape();
  const int64_t m = sa[sa.ndim() - 2], k = sa[sa.ndim() - 1], n = sb[sb.ndim() - 1];
  const Shape ba(std::vector<int64_t>(sa.dims().begin(), sa.dims().end() - 2));
  const Shape bb(std::vector<int64_t>(sb.dims().begin(), sb.dims().end() - 2));
  const Shape batch = ref_broadcast(ba, bb);
  std::vector<int64_t> dims = batch.dims();
  dims.insert(dims.end(), {m, n});
  const Shape out(dims);
  std::vector<T> v(out.numel());
  for (int64_t bi = 0; bi < batch.numel(); ++bi) {
    std::vector<int64_t> idx = unravel(bi, batch);
    const T* pa = a.data() + broadcast_offset(ba, idx) * m * k;
    const T* pb = b.data() + broadcast_offset(bb, idx) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        compute_t<T> s{0};  // 16-bit: float accumulation of the 16-bit inputs, rounded once
        for (int64_t l = 0; l < k; ++l) s += pa[i * k + l] * pb[l * n + j];
        v[(bi * m + i) * n + j] = T(s);
      }
  }
  return Tensor<T>::from_vector(out, std::move(v));
}

// sum_l (|a_il| + delta)(|b_lj| + delta) per output element, in double: the scale of the
// rounding errors of a 16-bit matmul (delta > 0 bounds the extra magnitude of lopsided pieces).
template <class T>
std::vector<double> ref_matmul_magnitude(const Tensor<T>& a, const Tensor<T>& b, double delta) {
  auto mag = [delta](const Tensor<T>& t) {
    std::vector<double> v(t.numel());
    for (int64_t g = 0; g < t.numel(); ++g) v[g] = std::abs(static_cast<double>(t.data()[g])) + delta;
    return Tensor<double>::from_vector(t.shape(), std::move(v));
  };
  return ref_matmul(mag(a), mag(b)).to_vector();
}

template <class T>
T ref_gelu(T x) {  // exact: x Phi(x) (torch's default)
  const double d = static_cast<double>(x);
  return static_cast<T>(0.5 * d * (1.0 + std::erf(d / std::sqrt(2.0))));
}

template <class T>
T ref_gelu_tanh(T x) {  // GeluApproximation::kTanh (torch's approximate="tanh")
  const double d = static_cast<double>(x);
  return static_cast<T>(0.5 * d * (1.0 + std::tanh(0.7978845608028654 * (d + 0.044715 * d * d * d))));
}

// The variance over axes (sorted, non-negative) with keepdim off, in double.
template <class T>
Tensor<T> ref_var(const Tensor<T>& x, const std::vector<int64_t>& axes, int64_t correction) {
  const Shape& s = x.shape();
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < s.ndim(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(s[d]);
  const Shape out(kept);
  std::vector<double> sum(out.numel(), 0.0), sq(out.numel(), 0.0), count(out.numel(), 0.0);
  auto out_index = [&](int64_t g) {
    std::vector<int64_t> idx = unravel(g, s);
    int64_t o = 0;
    for (int64_t d = 0; d < s.ndim(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) o = o * s[d] + idx[d];
    return o;
  };
  for (int64_t g = 0; g < s.numel(); ++g) {
    sum[out_index(g)] += static_cast<double>(x.data()[g]);
    count[out_index(g)] += 1;
  }
  for (int64_t g = 0; g < s.numel(); ++g) {
    const int64_t o = out_index(g);
    const double d = static_cast<double>(x.data()[g]) - sum[o] / count[o];
    sq[o] += d * d;
  }
  std::vector<T> v(out.numel());
  for (int64_t o = 0; o < out.numel(); ++o) v[o] = static_cast<T>(sq[o] / (count[o] - static_cast<double>(correction)));
  return Tensor<T>::from_vector(out, std::move(v));
}

// ---------------------------------------------------------------------------------------------
// Op cases.

struct Tolerance {
  // |got - expected| <= atol + rtol * |expected| + mtol * magnitude (matmul: sum |a||b|).
  double rtol = 0, atol = 0, mtol = 0;
  double delta = 0;  // added to |a|, |b| in the magnitude (lopsided partial pieces)
  std::string text() const {
    if (rtol == 0 && atol == 0 && mtol == 0) return "exact";
    std::ostringstream s;
    s << "rtol " << rtol << ", atol " << atol;
    if (mtol != 0) s << ", " << mtol << " * sum(|a|+" << delta << ")(|b|+" << delta << ")";
    return s.str();
  }
};

// For inputs built from whole tensors (from_host), and for lopsided partial inputs.
struct Tolerances {
  Tolerance plain, lopsided;
};

// The unit roundoff of a 16-bit type.
template <class T>
constexpr double unit_roundoff() {
  return std::is_same_v<T, spsd::bfloat16> ? 0x1.0p-8 : 0x1.0p-11;
}

// Multiple of the lopsided partial pieces in 16-bit (the header): parts (g + 3q) % 7 - 3 times this.
constexpr double kHalfPartScale = 1.0 / 16.0;

template <class T>
Tolerances elementwise_tolerance() {
  if constexpr (std::is_integral_v<T>) return {};
  else if constexpr (std::is_same_v<T, float>) return {{1e-5, 1e-5}, {1e-5, 1e-5}};
  else if constexpr (std::is_same_v<T, double>) return {{1e-12, 1e-12}, {1e-12, 1e-12}};
  else {
    constexpr double u = unit_roundoff<T>();
    return {{}, {8 * u, 32 * u}};
  }
}
// exp, log, tanh, sigmoid, gelu: the kernel's float function and the reference's may differ in
// the last float bits, so the 16-bit results by one ulp.
template <class T>
Tolerances function_tolerance() {
  if constexpr (is_half_v<T>) return {{2 * unit_roundoff<T>(), 1e-6}, elementwise_tolerance<T>().lopsided};
  else return elementwise_tolerance<T>();
}
template <class T>
Tolerances matmul_tolerance() {
  if constexpr (std::is_integral_v<T>) return {};
  else if constexpr (std::is_same_v<T, float>) return {{1e-5, 1e-4}, {1e-5, 1e-4}};
  else if constexpr (std::is_same_v<T, double>) return {{1e-11, 1e-11}, {1e-11, 1e-11}};
  else {
    constexpr double u = unit_roundoff<T>();
    return {{2 * u, 1e-6, 8 * u, 0}, {2 * u, 1e-6, 8 * u, 18 * kHalfPartScale}};
  }
}

template <class T>
using Inputs = std::vector<const GlobalTensor<T>*>;

template <class T>
struct OpCase {
  std::string op;  // counted under this name
  std::vector<Shape> shapes;
  std::vector<Domain> domains;
  std::function<GlobalTensor<T>(const Inputs<T>&)> run;
  std::function<Tensor<T>(const std::vector<Tensor<T>>&)> reference;
  Tolerances tol;
  bool full = false;  // one of the ops whose product always runs in full (float32)
  // The magnitude per output element for Tolerance::mtol (matmul), with the tolerance's delta.
  std::function<std::vector<double>(const std::vector<Tensor<T>>&, double)> magnitude = nullptr;
};

template <class T>
void add_binary_cases(std::vector<OpCase<T>>& cases, bool full_dtype) {
  const std::vector<std::vector<Shape>> shapes = {
      {Shape{5, 7}, Shape{5, 7}}, {Shape{5, 7}, Shape{7}}, {Shape{5, 1}, Shape{1, 7}}, {Shape{3, 1, 4}, Shape{2, 1}}};
  for (const auto& s : shapes) {
    cases.push_back({"add", s, {Domain::kAny, Domain::kAny},
                     [](const Inputs<T>& in) { return spsd::add(*in[0], *in[1]); },
                     [](const std::vector<Tensor<T>>& w) { return ref_binary(w[0], w[1], [](T x, T y) { return T(x + y); }); },
                     elementwise_tolerance<T>(), full_dtype});
    cases.push_back({"sub", s, {Domain::kAny, Domain::kAny},
                     [](const Inputs<T>& in) { return spsd::sub(*in[0], *in[1]); },
                     [](const std::vector<Tensor<T>>& w) { return ref_binary(w[0], w[1], [](T x, T y) { return T(x - y); }); },
                     elementwise_tolerance<T>(), false});
    cases.push_back({"mul", s, {Domain::kAny, Domain::kAny},
                     [](const Inputs<T>& in) { return spsd::mul(*in[0], *in[1]); },
                     [](const std::vector<Tensor<T>>& w) { return ref_binary(w[0], w[1], [](T x, T y) { return T(x * y); }); },
                     elementwise_tolerance<T>(), full_dtype});
    cases.push_back({"div", s, {Domain::kAny, Domain::kNonzero},
                     [](const Inputs<T>& in) { return spsd::div(*in[0], *in[1]); },
                     [](const std::vector<Tensor<T>>& w) { return ref_binary(w[0], w[1], [](T x, T y) { return T(x / y); }); },
                     elementwise_tolerance<T>(), false});
  }
}

template <class T>
void add_scalar_cases(std::vector<OpCase<T>>& cases) {
  const T s = std::is_integral_v<T> ? T(3) : T(1.5);
  for (const Shape& shape : {Shape{5, 7}, Shape{3, 1, 4}}) {
    auto one = [&](std::string op, Domain d, std::function<GlobalTensor<T>(const GlobalTensor<T>&)> run,
                   std::function<T(T)> f) {
      cases.push_back({std::move(op), {shape}, {d}, [run](const Inputs<T>& in) { return run(*in[0]); },
                       [f](const std::vector<Tensor<T>>& w) { return ref_map(w[0], f); }, elementwise_tolerance<T>(),
                       false});
    };
    one("x+s", Domain::kAny, [s](const GlobalTensor<T>& x) { return x + s; }, [s](T x) { return T(x + s); });
    one("x-s", Domain::kAny, [s](const GlobalTensor<T>& x) { return x - s; }, [s](T x) { return T(x - s); });
    one("s-x", Domain::kAny, [s](const GlobalTensor<T>& x) { return s - x; }, [s](T x) { return T(s - x); });
    one("x*s", Domain::kAny, [s](const GlobalTensor<T>& x) { return x * s; }, [s](T x) { return T(x * s); });
    one("x/s", Domain::kAny, [s](const GlobalTensor<T>& x) { return x / s; }, [s](T x) { return T(x / s); });
    one("s/x", Domain::kNonzero, [s](const GlobalTensor<T>& x) { return s / x; }, [s](T x) { return T(s / x); });
  }
}

template <class T>
void add_unary_cases(std::vector<OpCase<T>>& cases, bool full_dtype) {
  auto one = [&](std::string op, const Shape& shape, Domain d, std::function<GlobalTensor<T>(const GlobalTensor<T>&)> run,
                 std::function<T(T)> f, bool full, Tolerances tol = elementwise_tolerance<T>()) {
    cases.push_back({std::move(op), {shape}, {d}, [run](const Inputs<T>& in) { return run(*in[0]); },
                     [f](const std::vector<Tensor<T>>& w) { return ref_map(w[0], f); }, tol, full});
  };
  for (const Shape& shape : {Shape{5, 7}, Shape{3, 1, 4}}) {
    one("relu", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::relu(x); },
        [](T x) { return x < T(0) ? T(0) : x; }, full_dtype);
    one("neg", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::neg(x); }, [](T x) { return T(-x); },
        false);
    one("abs", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::abs(x); },
        [](T x) { return x < T(0) ? T(-x) : x; }, false);
    if constexpr (!std::is_integral_v<T>) {
      using C = compute_t<T>;  // 16-bit: the float function of the 16-bit input, rounded once
      one("gelu", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::gelu(x); },
          [](T x) { return ref_gelu(x); }, false, function_tolerance<T>());
      one("exp", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::exp(x); },
          [](T x) { return T(std::exp(C(x))); }, false, function_tolerance<T>());
      one("log", shape, Domain::kPositive, [](const GlobalTensor<T>& x) { return spsd::log(x); },
          [](T x) { return T(std::log(C(x))); }, false, function_tolerance<T>());
      one("tanh", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::tanh(x); },
          [](T x) { return T(std::tanh(C(x))); }, false, function_tolerance<T>());
      one("sigmoid", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::sigmoid(x); },
          [](T x) { return T(C(1) / (C(1) + std::exp(-C(x)))); }, false, function_tolerance<T>());
      one("sqrt", shape, Domain::kPositive, [](const GlobalTensor<T>& x) { return spsd::sqrt(x); },
          [](T x) { return T(std::sqrt(C(x))); }, false);
      one("gelu_tanh", shape, Domain::kAny,
          [](const GlobalTensor<T>& x) { return spsd::gelu(x, GeluApproximation::kTanh); },
          [](T x) { return ref_gelu_tanh(x); }, false, function_tolerance<T>());
      one("rsqrt", shape, Domain::kPositive, [](const GlobalTensor<T>& x) { return spsd::rsqrt(x); },
          [](T x) { return T(1.0 / std::sqrt(static_cast<double>(x))); }, false, function_tolerance<T>());
      one("erf", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::erf(x); },
          [](T x) { return T(std::erf(static_cast<double>(x))); }, false, function_tolerance<T>());
      one("silu", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::silu(x); },
          [](T x) {
            const double d = static_cast<double>(x);
            return T(d / (1.0 + std::exp(-d)));
          },
          false, function_tolerance<T>());
      one("pow_scalar", shape, Domain::kPositive, [](const GlobalTensor<T>& x) { return spsd::pow(x, C(1.5)); },
          [](T x) { return T(std::pow(static_cast<double>(x), 1.5)); }, false, function_tolerance<T>());
    }
  }
}

// pow (tensor exponent, broadcast) and var: floating types.
template <class T>
void add_math_cases(std::vector<OpCase<T>>& cases) {
  if constexpr (!std::is_integral_v<T>) {
    for (const auto& s : std::vector<std::vector<Shape>>{{Shape{5, 7}, Shape{5, 7}}, {Shape{5, 1}, Shape{1, 7}}})
      cases.push_back({"pow", s, {Domain::kPositive, Domain::kAny},
                       [](const Inputs<T>& in) { return spsd::pow(*in[0], *in[1]); },
                       [](const std::vector<Tensor<T>>& w) {
                         return ref_binary(w[0], w[1], [](T x, T y) {
                           return T(std::pow(static_cast<double>(x), static_cast<double>(y)));
                         });
                       },
                       function_tolerance<T>(), false});
    // The deviations round to T before they are squared: 16-bit within a few ulps of the sum.
    Tolerances tol = elementwise_tolerance<T>();
    if constexpr (is_half_v<T>) tol = {{16 * unit_roundoff<T>(), 16 * unit_roundoff<T>()}, {64 * unit_roundoff<T>(), 128 * unit_roundoff<T>()}};
    for (const auto& [shape, axes, correction] :
         std::vector<std::tuple<Shape, std::vector<int64_t>, int64_t>>{{Shape{5, 7}, {1}, 1}, {Shape{5, 7}, {0}, 0},
                                                                       {Shape{3, 2, 4}, {0, 2}, 1}})
      cases.push_back({"var", {shape}, {Domain::kAny},
                       [axes, correction](const Inputs<T>& in) { return spsd::var(*in[0], axes, false, correction); },
                       [axes, correction](const std::vector<Tensor<T>>& w) { return ref_var(w[0], axes, correction); },
                       tol, false});
  }
}

template <class T>
void add_matmul_cases(std::vector<OpCase<T>>& cases, bool full_dtype) {
  const std::vector<std::vector<Shape>> shapes = {{Shape{5, 7}, Shape{7, 3}},
                                                  {Shape{4, 6}, Shape{6, 5}},
                                                  {Shape{2, 3, 4}, Shape{4, 5}},
                                                  {Shape{2, 1, 3, 4}, Shape{5, 4, 6}}};
  for (const auto& s : shapes)
    cases.push_back({"matmul", s, {Domain::kAny, Domain::kAny},
                     [](const Inputs<T>& in) { return spsd::matmul(*in[0], *in[1]); },
                     [](const std::vector<Tensor<T>>& w) { return ref_matmul(w[0], w[1]); }, matmul_tolerance<T>(),
                     full_dtype,
                     [](const std::vector<Tensor<T>>& w, double delta) { return ref_matmul_magnitude(w[0], w[1], delta); }});
}

// ---------------------------------------------------------------------------------------------
// The driver.

std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? " x " : "") + shapes[i].to_string();
  return s;
}

template <class T>
bool close(T got, T expected, const Tolerance& tol, double magnitude) {
  if constexpr (std::is_integral_v<T>) {
    return got == expected;
  } else {
    const double g = static_cast<double>(got), e = static_cast<double>(expected);
    if (std::isnan(g) || std::isnan(e)) return false;
    return std::abs(g - e) <= tol.atol + tol.rtol * std::abs(e) + tol.mtol * magnitude;
  }
}

template <class T>
void run_case(const OpCase<T>& c, const Placement& placement, const OpSuiteOptions& options, int64_t dtype_stride,
              Failures& failures, OpSuiteCounts& counts) {
  const int64_t stride = dtype_stride > 0 ? dtype_stride : c.full ? options.full_stride : options.other_stride;
  const std::string name = c.op + " " + std::string(spsd::to_string(dtype_of<T>)) + " " + shapes_text(c.shapes);
  const uint64_t seed = hash_text(name);
  const int64_t phase = static_cast<int64_t>(seed % static_cast<uint64_t>(stride));
  const size_t n_in = c.shapes.size();

  std::vector<Tensor<T>> wholes;
  for (size_t i = 0; i < n_in; ++i) wholes.push_back(host_tensor<T>(c.shapes[i], seed + 17 * i, c.domains[i]));
  const Tensor<T> expected = c.reference(wholes);
  std::vector<double> magnitude, lopsided_magnitude;
  if (c.magnitude) {
    magnitude = c.magnitude(wholes, c.tol.plain.delta);
    lopsided_magnitude = c.magnitude(wholes, c.tol.lopsided.delta);
  }

  // Every NdSbp per input, and the inputs built in them lazily (collective: every rank builds
  // the same ones in the same order).
  std::vector<std::vector<NdSbp>> layouts;
  size_t product = 1;
  for (size_t i = 0; i < n_in; ++i) {
    layouts.push_back(all_nd_sbps(placement.mesh().ndim(), c.shapes[i].ndim()));
    product *= layouts[i].size();
  }
  std::vector<std::vector<std::optional<GlobalTensor<T>>>> from_host_built(n_in), lopsided_built(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    from_host_built[i].resize(layouts[i].size());
    lopsided_built[i].resize(layouts[i].size());
  }
  auto input = [&](size_t i, size_t j, bool lopsided) -> const GlobalTensor<T>& {
    auto& slot = lopsided ? lopsided_built[i][j] : from_host_built[i][j];
    if (!slot) {
      slot = lopsided ? build_layout(wholes[i], Layout{placement, layouts[i][j]}, is_half_v<T> ? kHalfPartScale : 1.0)
                      : spsd::from_host(wholes[i], placement, layouts[i][j]);
    }
    return *slot;
  };

  const bool member = placement.contains(spsd::rank());
  std::vector<size_t> pick(n_in, 0);
  for (size_t index = 0; index < product; ++index) {
    // pick: the layout of each input for this index (input 0 most significant).
    size_t rest = index;
    for (size_t i = n_in; i-- > 0;) {
      pick[i] = rest % layouts[i].size();
      rest /= layouts[i].size();
    }
    if (static_cast<int64_t>(index % static_cast<size_t>(stride)) != phase) continue;
    bool any_partial = false;
    for (size_t i = 0; i < n_in; ++i) any_partial = any_partial || layouts[i][pick[i]].has_partial();
    // Partial inputs alternate between the factory's identity padding and lopsided pieces.
    const bool lopsided = any_partial && (index / static_cast<size_t>(stride)) % 2 == 1;

    std::string what = name + " (";
    for (size_t i = 0; i < n_in; ++i) what += (i ? ", " : "") + layouts[i][pick[i]].to_string();
    what += ") on " + placement.to_string() + (lopsided ? " [lopsided partials]" : "") + " on rank " +
            std::to_string(spsd::rank());

    Inputs<T> in;
    for (size_t i = 0; i < n_in; ++i) in.push_back(&input(i, pick[i], lopsided && layouts[i][pick[i]].has_partial()));
    try {
      GlobalTensor<T> y = c.run(in);
      Tensor<T> got = y.full();
      if (!member) continue;
      ++counts.per_op[c.op];
      if (!(y.shape() == expected.shape()) || !(got.shape() == expected.shape())) {
        failures.add(what + ": result shape " + y.shape().to_string() + " (full " + got.shape().to_string() +
                     "), expected " + expected.shape().to_string());
        continue;
      }
      const Tolerance& tol = lopsided ? c.tol.lopsided : c.tol.plain;
      const std::vector<double>& mag = lopsided ? lopsided_magnitude : magnitude;
      int64_t bad = 0;
      for (int64_t g = 0; g < expected.numel(); ++g) {
        if (close(got.data()[g], expected.data()[g], tol, mag.empty() ? 0.0 : mag[g])) continue;
        if (bad++ < 3)
          failures.add(what + " -> " + y.nd_sbp().to_string() + ": element " + std::to_string(g) + ": got " +
                       show(got.data()[g]) + ", expected " + show(expected.data()[g]) + " (" + tol.text() +
                       (mag.empty() ? "" : ", magnitude " + show(mag[g])) + ")");
      }
      if (bad > 3) failures.add(what + ": " + std::to_string(bad - 3) + " more mismatching elements");
    } catch (const spsd::Error& e) {
      failures.add(what + ": threw " + e.what());
    }
  }
}

template <class T>
void run_all(const Placement& placement, const OpSuiteOptions& options, bool full_dtype, int64_t dtype_stride,
             Failures& failures, OpSuiteCounts& counts) {
  std::vector<OpCase<T>> cases;
  add_binary_cases<T>(cases, full_dtype);
  add_scalar_cases<T>(cases);
  add_unary_cases<T>(cases, full_dtype);
  add_math_cases<T>(cases);
  add_matmul_cases<T>(cases, full_dtype);
  for (const OpCase<T>& c : cases)
    if (std::find(options.skip_ops.begin(), options.skip_ops.end(), c.op) == options.skip_ops.end())
      run_case(c, placement, options, dtype_stride, failures, counts);
}

}  // namespace

void run_op_suite(const Placement& placement, const OpSuiteOptions& options, Failures& failures, OpSuiteCounts& counts) {
  run_all<float>(placement, options, true, 0, failures, counts);
  if (options.float64) run_all<double>(placement, options, false, 0, failures, counts);
  if (options.int64) run_all<int64_t>(placement, options, false, 0, failures, counts);
  // (spsd::: OpenBLAS declares a global bfloat16.)
  if (options.bfloat16_stride > 0)
    run_all<spsd::bfloat16>(placement, options, false, options.bfloat16_stride, failures, counts);
  if (options.float16_stride > 0)
    run_all<spsd::float16>(placement, options, false, options.float16_stride, failures, counts);
}

}  // namespace spsd_test
