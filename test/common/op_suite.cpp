#include "op_suite.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>

#include "boxing_suite.hpp"

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

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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
    if (d == Domain::kPositive) return static_cast<T>(0.5 + 2.5 * u);
    if (d == Domain::kNonzero) return static_cast<T>(u < 0.5 ? -(0.5 + 3.0 * u) : 0.5 + 3.0 * (u - 0.5));
    return static_cast<T>(-2.0 + 4.0 * u);
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

Shape ref_broadcast(const Shape& a, const Shape& b) {
  const int64_t n = std::max(a.ndim(), b.ndim());
  std::vector<int64_t> dims(n);
  for (int64_t d = 0; d < n; ++d) {
    const int64_t x = d - (n - a.ndim()) >= 0 ? a[d - (n - a.ndim())] : 1;
    const int64_t y = d - (n - b.ndim()) >= 0 ? b[d - (n - b.ndim())] : 1;
    dims[d] = x == 1 ? y : x;
  }
  return Shape(std::move(dims));
}

// Row-major index of `in` read at output index idx (in right-aligned; size-1 axes stretch).
int64_t broadcast_offset(const Shape& in, const std::vector<int64_t>& idx) {
  const int64_t off = static_cast<int64_t>(idx.size()) - in.ndim();
  int64_t g = 0;
  for (int64_t d = 0; d < in.ndim(); ++d) g = g * in[d] + (in[d] == 1 ? 0 : idx[off + d]);
  return g;
}

std::vector<int64_t> unravel(int64_t g, const Shape& shape) {
  std::vector<int64_t> idx(shape.ndim());
  for (int64_t d = shape.ndim() - 1; d >= 0; --d) {
    idx[d] = g % shape[d];
    g /= shape[d];
  }
  return idx;
}

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
        T s{0};
        for (int64_t l = 0; l < k; ++l) s += pa[i * k + l] * pb[l * n + j];
        v[(bi * m + i) * n + j] = s;
      }
  }
  return Tensor<T>::from_vector(out, std::move(v));
}

template <class T>
T ref_gelu(T x) {  // the tanh form the kernel documents (torch's approximate="tanh")
  const double d = static_cast<double>(x);
  return static_cast<T>(0.5 * d * (1.0 + std::tanh(0.7978845608028654 * (d + 0.044715 * d * d * d))));
}

// ---------------------------------------------------------------------------------------------
// Op cases.

struct Tolerance {
  double rtol = 0, atol = 0;
  std::string text() const {
    if (rtol == 0 && atol == 0) return "exact";
    std::ostringstream s;
    s << "rtol " << rtol << ", atol " << atol;
    return s.str();
  }
};

template <class T>
Tolerance elementwise_tolerance() {
  if constexpr (std::is_integral_v<T>) return {};
  else if constexpr (std::is_same_v<T, float>) return {1e-5, 1e-5};
  else return {1e-12, 1e-12};
}
template <class T>
Tolerance matmul_tolerance() {
  if constexpr (std::is_integral_v<T>) return {};
  else if constexpr (std::is_same_v<T, float>) return {1e-5, 1e-4};
  else return {1e-11, 1e-11};
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
  Tolerance tol;
  bool full = false;  // one of the ops whose product always runs in full (float32)
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
                 std::function<T(T)> f, bool full) {
    cases.push_back({std::move(op), {shape}, {d}, [run](const Inputs<T>& in) { return run(*in[0]); },
                     [f](const std::vector<Tensor<T>>& w) { return ref_map(w[0], f); }, elementwise_tolerance<T>(), full});
  };
  for (const Shape& shape : {Shape{5, 7}, Shape{3, 1, 4}}) {
    one("relu", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::relu(x); },
        [](T x) { return x < T(0) ? T(0) : x; }, full_dtype);
    one("neg", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::neg(x); }, [](T x) { return T(-x); },
        false);
    one("abs", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::abs(x); },
        [](T x) { return x < T(0) ? T(-x) : x; }, false);
    if constexpr (std::is_floating_point_v<T>) {
      one("gelu", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::gelu(x); },
          [](T x) { return ref_gelu(x); }, false);
      one("exp", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::exp(x); },
          [](T x) { return std::exp(x); }, false);
      one("log", shape, Domain::kPositive, [](const GlobalTensor<T>& x) { return spsd::log(x); },
          [](T x) { return std::log(x); }, false);
      one("tanh", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::tanh(x); },
          [](T x) { return std::tanh(x); }, false);
      one("sigmoid", shape, Domain::kAny, [](const GlobalTensor<T>& x) { return spsd::sigmoid(x); },
          [](T x) { return T(1) / (T(1) + std::exp(-x)); }, false);
      one("sqrt", shape, Domain::kPositive, [](const GlobalTensor<T>& x) { return spsd::sqrt(x); },
          [](T x) { return std::sqrt(x); }, false);
    }
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
                     full_dtype});
}

// ---------------------------------------------------------------------------------------------
// The driver.

std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? " x " : "") + shapes[i].to_string();
  return s;
}

template <class T>
bool close(T got, T expected, const Tolerance& tol) {
  if constexpr (std::is_integral_v<T>) {
    return got == expected;
  } else {
    if (std::isnan(got) || std::isnan(expected)) return false;
    return std::abs(static_cast<double>(got) - static_cast<double>(expected)) <=
           tol.atol + tol.rtol * std::abs(static_cast<double>(expected));
  }
}

template <class T>
void run_case(const OpCase<T>& c, const Placement& placement, const OpSuiteOptions& options, Failures& failures,
              OpSuiteCounts& counts) {
  const int64_t stride = c.full ? options.full_stride : options.other_stride;
  const std::string name = c.op + " " + std::string(spsd::to_string(dtype_of<T>)) + " " + shapes_text(c.shapes);
  const uint64_t seed = hash_text(name);
  const int64_t phase = static_cast<int64_t>(seed % static_cast<uint64_t>(stride));
  const size_t n_in = c.shapes.size();

  std::vector<Tensor<T>> wholes;
  for (size_t i = 0; i < n_in; ++i) wholes.push_back(host_tensor<T>(c.shapes[i], seed + 17 * i, c.domains[i]));
  const Tensor<T> expected = c.reference(wholes);

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
      slot = lopsided ? build_layout(wholes[i], Layout{placement, layouts[i][j]})
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
      int64_t bad = 0;
      for (int64_t g = 0; g < expected.numel(); ++g) {
        if (close(got.data()[g], expected.data()[g], c.tol)) continue;
        if (bad++ < 3)
          failures.add(what + " -> " + y.nd_sbp().to_string() + ": element " + std::to_string(g) + ": got " +
                       show(got.data()[g]) + ", expected " + show(expected.data()[g]) + " (" + c.tol.text() + ")");
      }
      if (bad > 3) failures.add(what + ": " + std::to_string(bad - 3) + " more mismatching elements");
    } catch (const spsd::Error& e) {
      failures.add(what + ": threw " + e.what());
    }
  }
}

template <class T>
void run_all(const Placement& placement, const OpSuiteOptions& options, bool full_dtype, Failures& failures,
             OpSuiteCounts& counts) {
  std::vector<OpCase<T>> cases;
  add_binary_cases<T>(cases, full_dtype);
  add_scalar_cases<T>(cases);
  add_unary_cases<T>(cases, full_dtype);
  add_matmul_cases<T>(cases, full_dtype);
  for (const OpCase<T>& c : cases)
    if (std::find(options.skip_ops.begin(), options.skip_ops.end(), c.op) == options.skip_ops.end())
      run_case(c, placement, options, failures, counts);
}

}  // namespace

void run_op_suite(const Placement& placement, const OpSuiteOptions& options, Failures& failures, OpSuiteCounts& counts) {
  run_all<float>(placement, options, true, failures, counts);
  if (options.float64) run_all<double>(placement, options, false, failures, counts);
  if (options.int64) run_all<int64_t>(placement, options, false, failures, counts);
}

}  // namespace spsd_test
