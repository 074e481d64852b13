#include "edge_cases.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "misuse_catalogue.hpp"

namespace spsd_test {

namespace {

using namespace spsd;
using V = std::vector<int64_t>;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Run {
  Failures& failures;
  std::set<std::string>& covered;
  int count = 0;
  std::string where = " on world rank " + std::to_string(rank());

  // Runs one case, naming the API it covers; an unexpected spsd::Error is a failure (it is
  // thrown alike on every rank, so no rank is left waiting).
  void run(const std::string& name, const std::function<void()>& body) {
    covered.insert(api_of(name));
    ++count;
    try {
      body();
    } catch (const std::exception& e) {
      failures.add("edge case \"" + name + "\"" + where + ": threw " + e.what());
    }
  }
  void check(const std::string& name, bool ok, const std::string& detail) {
    if (!ok) failures.add("edge case \"" + name + "\"" + where + ": " + detail);
  }
  // body must throw spsd::Error naming every fragment, on this rank as on every other.
  void error(const std::string& name, const std::function<void()>& body, const std::vector<std::string>& fragments) {
    covered.insert(api_of(name));
    ++count;
    expect_error(failures, "edge case \"" + name + "\"" + where, body, fragments);
  }
};

template <class T>
bool same(T got, T want) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::fabs(got - want) <= T(1e-5) * std::max<T>(1, std::fabs(want));
  } else {
    return got == want;
  }
}

// got must be the tensor of this shape and these values (NaN matches NaN), read with full().
template <class T>
void expect_tensor(Run& run, const std::string& what, const GlobalTensor<T>& got, const Shape& shape,
                   const std::vector<T>& want) {
  if (got.shape() != shape) {
    run.check(what, false, "shape " + got.shape().to_string() + ", expected " + shape.to_string());
    return;
  }
  const std::vector<T> values = got.full().to_vector();
  if (values.size() != want.size()) {
    run.check(what, false, "full() has " + std::to_string(values.size()) + " elements, expected " + std::to_string(want.size()));
    return;
  }
  for (size_t i = 0; i < want.size(); ++i)
    if (!same(values[i], want[i])) {
      run.check(what, false, "element " + std::to_string(i) + " is " + show(values[i]) + ", expected " + show(want[i]) +
                                 " (layout " + got.nd_sbp().to_string() + ")");
      return;
    }
}

// Every rank reads, element by element, either NaN or the value in want, and all read the same
// bits (collective over the world: got's placement must be the world).
bool same_on_every_rank(double v);
void expect_either(Run& run, const std::string& what, const GlobalTensor<float>& got, const std::vector<float>& want) {
  const std::vector<float> values = got.full().to_vector();
  run.check(what, values.size() == want.size(), "wrong element count");
  // One comparison per element of want on every rank, whatever this rank read (else a rank with
  // fewer values would leave the others waiting in same_on_every_rank).
  for (size_t i = 0; i < want.size(); ++i) {
    const float v = i < values.size() ? values[i] : kNaN;
    run.check(what, same_on_every_rank(v), "ranks read different values at element " + std::to_string(i));
    if (i >= values.size()) continue;
    run.check(what, std::isnan(values[i]) || values[i] == want[i],
              "element " + std::to_string(i) + " is " + show(values[i]) + ", expected NaN or " + show(want[i]));
  }
}

template <class T>
GlobalTensor<T> host(const Shape& shape, std::vector<T> values, const Placement& p, const NdSbp& layout) {
  return from_host(Tensor<T>::from_vector(shape, std::move(values)), p, layout);
}

// The layouts a tensor of this shape takes on p: B, a split of each axis (the 1-d world), and
// on a 2x2 mesh a few products.
std::vector<NdSbp> layouts_for(const Placement& p, const Shape& shape) {
  std::vector<NdSbp> out;
  if (p.mesh().ndim() == 1) {
    out.push_back(NdSbp(sbp::broadcast));
    for (int64_t d = 0; d < shape.ndim(); ++d) out.push_back(NdSbp(sbp::split(d)));
  } else {
    out.push_back(NdSbp{sbp::broadcast, sbp::broadcast});
    for (int64_t d = 0; d < shape.ndim(); ++d) {
      out.push_back(NdSbp{sbp::split(d), sbp::broadcast});
      out.push_back(NdSbp{sbp::split(d), sbp::split(shape.ndim() - 1 - d)});
    }
  }
  return out;
}

// Integers: the bits every rank of the world holds in v must agree.
bool same_on_every_rank(double v) {
  const int64_t mine = std::bit_cast<int64_t>(v);
  std::vector<int64_t> all(world_size());
  world_communicator().all_gather(&mine, all.data(), 1, DType::kInt64);
  for (int64_t b : all)
    if (b != mine) return false;
  return true;
}

void results_at_zero_size(Run& run, const Placement& p) {
  const std::string on = " on " + p.to_string();
  const Shape e03{0, 3};
  for (const NdSbp& l : layouts_for(p, e03)) {
    const std::string in = " (x " + l.to_string() + on + ")";
    const auto x = zeros<float>(e03, p, l);
    const auto xi = zeros<int64_t>(e03, p, l);
    run.run("sum: over an axis of size 0 is 0" + in, [&] {
      expect_tensor(run, "sum axis 0" + in, sum(x, {0}), Shape{3}, {0, 0, 0});
      expect_tensor(run, "sum all" + in, sum(x), Shape{}, {0});
      expect_tensor(run, "sum keepdim" + in, sum(xi, {0}, true), Shape{1, 3}, V{0, 0, 0});
    });
    run.run("mean: over an axis of size 0 is NaN" + in,
            [&] { expect_tensor(run, "mean axis 0" + in, mean(x, {0}), Shape{3}, {kNaN, kNaN, kNaN}); });
    run.error("max: over an axis of size 0 throws" + in, [&] { spsd::max(x, {0}); },
              {"max", "axis 0 of size 0", "(0, 3)", "no identity"});
    run.error("min: over every axis of an empty tensor throws" + in, [&] { spsd::min(xi); },
              {"min", "axis 0 of size 0", "(0, 3)"});
    run.run("max: over a non-empty axis of an empty tensor is empty" + in,
            [&] { expect_tensor(run, "max axis 1" + in, spsd::max(x, {1}), Shape{0}, {}); });
    run.run("softmax: of a (0, 3) tensor is empty" + in, [&] {
      expect_tensor(run, "softmax" + in, softmax(x, 1), e03, {});
      expect_tensor(run, "log_softmax axis 0" + in, log_softmax(x, 0), e03, {});
    });
    run.run("transpose: of an empty tensor" + in, [&] {
      expect_tensor(run, "transpose" + in, transpose(x, 0, 1), Shape{3, 0}, {});
      expect_tensor(run, "permute" + in, permute(x, {-1, 0}), Shape{3, 0}, {});
    });
    run.run("permute: of an empty tensor" + in, [&] { expect_tensor(run, "permute" + in, permute(xi, {1, 0}), Shape{3, 0}, V{}); });
    run.run("reshape: an empty tensor with -1" + in, [&] {
      expect_tensor(run, "reshape" + in, reshape(x, {3, -1}), Shape{3, 0}, {});
      expect_tensor(run, "reshape Shape" + in, reshape(x, Shape{0}), Shape{0}, {});
    });
    run.error("reshape: -1 beside a 0 throws" + in, [&] { reshape(x, {-1, 0}); }, {"reshape", "no size for -1", "0 elements"});
    run.run("add: broadcasting against a zero-size axis" + in, [&] {
      const auto row = ones<float>({3}, p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
      expect_tensor(run, "add" + in, x + row, e03, {});
      expect_tensor(run, "relu" + in, relu(x), e03, {});
    });
    run.run("relu: of an empty tensor" + in, [&] { expect_tensor(run, "relu" + in, relu(xi), e03, V{}); });
    run.run("slice: of an empty tensor" + in, [&] { expect_tensor(run, "slice" + in, slice(x, 1, 1, 3), Shape{0, 2}, {}); });
    run.run("concat: with a zero-size input" + in, [&] {
      const auto a = host<float>({2, 3}, {1, 2, 3, 4, 5, 6}, p, l);
      expect_tensor(run, "concat" + in, concat({x, a, x}, 0), Shape{2, 3}, {1, 2, 3, 4, 5, 6});
    });
    run.run("GlobalTensor::to_global: boxing an empty tensor" + in, [&] {
      for (const NdSbp& to : layouts_for(p, e03)) expect_tensor(run, "to " + to.to_string() + in, x.to_global(to), e03, {});
      const NdSbp ps(std::vector<Sbp>(p.mesh().ndim(), sbp::partial_sum));
      expect_tensor(run, "to P(sum)" + in, x.to_global(ps), e03, {});
    });
    run.run("GlobalTensor::full: of an empty tensor" + in,
            [&] { run.check("full", x.full().numel() == 0 && x.full().shape() == e03, "not an empty (0, 3)"); });
    run.run("matmul: m = 0 gives an empty (0, 2)" + in, [&] {
      const auto b = ones<float>({3, 2}, p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
      expect_tensor(run, "matmul" + in, matmul(x, b), Shape{0, 2}, {});
    });
    run.run("cross_entropy: N = 0 gives NaN (the mean of nothing)" + in, [&] {
      const auto labels = zeros<int64_t>({0}, p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
      expect_tensor(run, "cross_entropy" + in, cross_entropy(x, labels), Shape{}, {kNaN});
    });
    run.run("embedding: no indices gives (0, E)" + in, [&] {
      const auto w = ones<float>({4, 3}, p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
      const auto none = zeros<int64_t>({0}, p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
      expect_tensor(run, "embedding" + in, embedding(w, none), Shape{0, 3}, {});
    });
  }

  // Axes of size 0 inside non-empty-looking shapes, in every layout.
  const Shape e20{2, 0};
  for (const NdSbp& l : layouts_for(p, e20)) {
    const std::string in = " (x " + l.to_string() + on + ")";
    const auto x = zeros<float>(e20, p, l);
    run.run("softmax: along an axis of size 0 is empty" + in, [&] {
      expect_tensor(run, "softmax" + in, softmax(x, 1), e20, {});
      expect_tensor(run, "log_softmax" + in, log_softmax(x, -1), e20, {});
    });
    run.run("log_softmax: along an axis of size 0 is empty" + in,
            [&] { expect_tensor(run, "log_softmax" + in, log_softmax(x, 1), e20, {}); });
    run.run("matmul: k = 0 gives zeros" + in, [&] {
      for (const NdSbp& lb : layouts_for(p, Shape{0, 3}))
        expect_tensor(run, "matmul with b " + lb.to_string() + in, matmul(x, zeros<float>({0, 3}, p, lb)), Shape{2, 3},
                      {0, 0, 0, 0, 0, 0});
    });
    run.error("cross_entropy: C = 0 is an Error (every label is out of range)" + in, [&] {
      const auto labels = zeros<int64_t>({2}, p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
      const Tensor<float> loss = cross_entropy(x, labels).full();
      synchronize();  // an error raised by a queued check surfaces here
    }, {"cross_entropy: labels[0] = 0 is outside [0, 0), the classes (the last axis of (2, 0) float32)"});
    run.run("mean: over an axis of size 0 is NaN, kept rows" + in,
            [&] { expect_tensor(run, "mean axis 1" + in, mean(x, {1}, true), Shape{2, 1}, {kNaN, kNaN}); });
  }

  const NdSbp all_b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  run.run("arange: n = 0 is empty" + on, [&] { expect_tensor(run, "arange", arange<int64_t>(0, p, all_b), Shape{0}, V{}); });
  run.run("zeros: a zero dimension is empty" + on,
          [&] { expect_tensor(run, "zeros", zeros<double>({3, 0, 2}, p, all_b), Shape{3, 0, 2}, {}); });
  run.run("ones: a zero dimension is empty" + on, [&] { expect_tensor(run, "ones", ones<int32_t>({0}, p, all_b), Shape{0}, std::vector<int32_t>{}); });
  run.run("full: a 0-d tensor holds one value" + on, [&] { expect_tensor(run, "full", full<float>({}, 2.5f, p, all_b), Shape{}, {2.5f}); });
  run.run("rand: an empty shape" + on, [&] { expect_tensor(run, "rand", rand<float>({0, 4}, p, all_b, 3), Shape{0, 4}, {}); });
  run.run("randn: an empty shape" + on, [&] { expect_tensor(run, "randn", randn<double>({0}, p, all_b, 3), Shape{0}, {}); });
  run.run("from_host: an empty tensor" + on, [&] {
    expect_tensor(run, "from_host", from_host(Tensor<float>::from_vector({0, 2}, {}), p, all_b), Shape{0, 2}, {});
  });
  // Every rank holds every index (B): each finds the first bad one, and all throw at once.
  run.error("embedding: an index outside [0, V) is an Error naming the first" + on, [&] {
    const auto w = host<float>({3, 2}, {0, 1, 2, 3, 4, 5}, p, all_b);
    (void)embedding(w, host<int64_t>({3}, {1, 3, -1}, p, all_b));
  }, {"embedding: indices[1] = 3 is outside [0, 3), the rows of the weight (3, 2) float32"});
}

void results_with_nan(Run& run, const Placement& p) {
  const std::string on = " on " + p.to_string();
  const Shape s24{2, 4};
  const std::vector<float> data = {kNaN, 1, 2, kNaN, kNaN, kNaN, kNaN, kNaN};
  const std::vector<float> rows = {kNaN, 1, 2, 3, 0, 1, 2, 3};
  float e0 = 0;
  for (int j = 0; j < 4; ++j) e0 += std::exp(static_cast<float>(j) - 3);
  std::vector<float> soft = {kNaN, kNaN, kNaN, kNaN}, logsoft = {kNaN, kNaN, kNaN, kNaN};
  for (int j = 0; j < 4; ++j) {
    soft.push_back(std::exp(static_cast<float>(j) - 3) / e0);
    logsoft.push_back(static_cast<float>(j) - 3 - std::log(e0));
  }
  for (const NdSbp& l : layouts_for(p, s24)) {
    const std::string in = " (x " + l.to_string() + on + ")";
    const auto x = host<float>(s24, data, p, l);
    // Not specified beyond this: a NaN folded with other elements of a rank's piece is skipped,
    // one alone in its piece (or first in the cross-rank combine) is kept; every rank agrees.
    run.run("max: a NaN is skipped or kept, the same on every rank" + in, [&] {
      expect_either(run, "max axis 1" + in, spsd::max(x, {1}), {2, -kInf});
      expect_either(run, "max all" + in, spsd::max(x), {2});
    });
    run.run("min: a NaN is skipped or kept, the same on every rank" + in,
            [&] { expect_either(run, "min axis 1" + in, spsd::min(x, {1}), {1, kInf}); });
    run.run("sum: NaN propagates" + in, [&] { expect_tensor(run, "sum axis 1" + in, sum(x, {1}), Shape{2}, {kNaN, kNaN}); });
    const auto xr = host<float>(s24, rows, p, l);
    run.run("softmax: a NaN makes its whole row NaN, other rows are exact" + in,
            [&] { expect_tensor(run, "softmax" + in, softmax(xr, 1), s24, soft); });
    run.run("log_softmax: a NaN makes its whole row NaN" + in,
            [&] { expect_tensor(run, "log_softmax" + in, log_softmax(xr, -1), s24, logsoft); });
    run.run("cross_entropy: a NaN logit gives a NaN loss" + in, [&] {
      const auto labels = host<int64_t>({2}, {1, 2}, p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
      expect_tensor(run, "cross_entropy" + in, cross_entropy(xr, labels), Shape{}, {kNaN});
    });
  }
  const NdSbp all_b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  const auto u = host<float>({5}, {kNaN, -1, 0, 4, -kInf}, p, all_b);
  run.run("relu: NaN stays NaN" + on, [&] { expect_tensor(run, "relu", relu(u), Shape{5}, {kNaN, 0, 0, 4, 0}); });
  run.run("log: of -1 is NaN, of 0 is -inf" + on,
          [&] { expect_tensor(run, "log", spsd::log(u), Shape{5}, {kNaN, kNaN, -kInf, std::log(4.0f), kNaN}); });
  run.run("sqrt: of -1 is NaN" + on, [&] { expect_tensor(run, "sqrt", spsd::sqrt(u), Shape{5}, {kNaN, kNaN, 0, 2, kNaN}); });
  run.run("exp: of NaN is NaN, of -inf is 0" + on,
          [&] { expect_tensor(run, "exp", spsd::exp(u), Shape{5}, {kNaN, std::exp(-1.0f), 1, std::exp(4.0f), 0}); });
  run.run("div: float x / 0 is inf or NaN" + on,
          [&] { expect_tensor(run, "div", u / 0.0f, Shape{5}, {kNaN, -kInf, kNaN, kInf, -kInf}); });
}

// Results an outside check found different from PyTorch on the same inputs (issue 38), in
// every layout: a split that leaves some rank's piece empty (an axis of 3 on 4 ranks) included.
void results_against_pytorch(Run& run, const Placement& p) {
  const std::string on = " on " + p.to_string();
  const NdSbp all_b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  const Shape s33{3, 3};
  // Rows of only -inf / +inf: a piece's max is the finite padding lowest() where the piece is
  // empty, and no element equals it; torch gives 0, the first index.
  const std::vector<float> rows = {-kInf, -kInf, -kInf, -kInf, 2, -kInf, kInf, kInf, kInf};
  // On the 2x2 mesh also both mesh axes on one tensor axis: 3 split in 4 nested parts.
  std::vector<NdSbp> layouts = layouts_for(p, s33);
  if (p.mesh().ndim() == 2)
    for (int64_t d : {0, 1}) layouts.push_back(NdSbp{sbp::split(d), sbp::split(d)});
  for (const NdSbp& l : layouts) {
    const std::string in = " (x " + l.to_string() + on + ")";
    const auto x = host<float>(s33, rows, p, l);
    run.run("argmax: a row of only -inf gives 0, in every layout" + in, [&] {
      expect_tensor(run, "argmax axis 1" + in, argmax(x, 1), Shape{3}, V{0, 1, 0});
      expect_tensor(run, "argmax axis 0 keepdim" + in, argmax(x, 0, true), Shape{1, 3}, V{2, 2, 2});
    });
    run.run("argmin: a row of only +inf gives 0, in every layout" + in, [&] {
      expect_tensor(run, "argmin axis 1" + in, argmin(x, 1), Shape{3}, V{0, 0, 0});
      expect_tensor(run, "argmin axis 0" + in, argmin(x, 0), Shape{3}, V{0, 0, 0});
    });
    run.run("argmax: double, every element -inf" + in, [&] {
      const auto d = host<double>(s33, std::vector<double>(9, -std::numeric_limits<double>::infinity()), p, l);
      expect_tensor(run, "argmax double" + in, argmax(d, 1), Shape{3}, V{0, 0, 0});
    });
    // var over an axis of 3 with correction 3 (N - correction = 0): torch divides by 0, giving
    // inf, or NaN where the squares sum to 0; a split axis must not turn a piece's 0 into NaN.
    run.run("var: N - correction <= 0 gives inf, or NaN for a constant row" + in, [&] {
      const auto v = host<float>(s33, {1, 2, 4, 5, 5, 5, -1, 0, 1}, p, l);
      expect_tensor(run, "var correction 3" + in, var(v, {1}, false, 3), Shape{3}, {kInf, kNaN, kInf});
      expect_tensor(run, "var correction 5" + in, var(v, {0}, true, 5), Shape{1, 3}, {kInf, kInf, kInf});
    });
  }
  // pow's gradient to x where the exponent is 0: torch gives 0 (the formula e x^(e-1) would be
  // 0 * inf = NaN at x == 0); the exponent's gradient where x == 0 and e >= 0 is 0 too.
  const Shape s4{4};
  for (const NdSbp& l : layouts_for(p, s4)) {
    const std::string in = " (x " + l.to_string() + on + ")";
    run.run("pow: the gradient where the exponent is 0 is 0, also at x == 0" + in, [&] {
      auto x = host<float>(s4, {0, 0, 2, 0}, p, l);
      auto e = host<float>(s4, {0, 1, 0, 2}, p, all_b);
      x.requires_grad_();
      e.requires_grad_();
      backward(sum(spsd::pow(x, e)));
      expect_tensor(run, "d/dx pow(x, e)" + in, x.grad(), s4, {0, 1, 0, 0});
      expect_tensor(run, "d/de pow(x, e)" + in, e.grad(), s4, {0, 0, std::log(2.0f), 0});
      auto x0 = host<float>(s4, {0, 0, 2, -1}, p, l);
      x0.requires_grad_();
      backward(sum(spsd::pow(x0, 0.0f)) + sum(spsd::pow(x0, 2.0f)));
      expect_tensor(run, "d/dx pow(x, 0) + pow(x, 2)" + in, x0.grad(), s4, {0, 0, 4, -2});
    });
  }
}

void results_elsewhere(Run& run, const Placement& p) {
  const int64_t n = world_size(), r = rank();
  const Placement world = p;
  const NdSbp B(sbp::broadcast);
  // A P(max) whose pieces hold NaN: the reduction across ranks is std::max / MPI_MAX, which may
  // keep or drop it, but every rank must read the same value, and the other elements are exact.
  run.run("combine_into: P(max) pieces with NaN reduce alike on every rank", [&] {
    std::vector<float> mine = {r == 0 ? kNaN : static_cast<float>(r), static_cast<float>(r)};
    const auto t = to_global(Tensor<float>::from_vector({2}, mine), world, sbp::partial_max);
    std::vector<float> whole = t.full().to_vector();
    run.check("P(max) with NaN", whole.size() == 2, "full() has " + show(whole.size()) + " elements, expected 2");
    whole.resize(2, 0.0f);
    run.check("P(max) with NaN", same_on_every_rank(whole[0]), "ranks read different values for the NaN element");
    run.check("P(max) with NaN", std::isnan(whole[0]) || whole[0] == static_cast<float>(n - 1),
              "element 0 is " + show(whole[0]) + ", expected NaN or " + show(n - 1));
    run.check("P(max) with NaN", whole[1] == static_cast<float>(n - 1), "element 1 is " + show(whole[1]));
  });
  run.run("wrapping_add: an int32 sum wraps", [&] {
    for (const NdSbp& l : layouts_for(p, Shape{2}))
      expect_tensor(run, "sum " + l.to_string(), sum(host<int32_t>({2}, {std::numeric_limits<int32_t>::max(), 1}, p, l)),
                    Shape{}, std::vector<int32_t>{std::numeric_limits<int32_t>::min()});
  });
  // The edge table's other rows (docs/operators.md), in every layout the shape takes.
  run.run("sum: of a 0-d tensor is its value", [&] {
    expect_tensor(run, "sum 0-d", sum(full<float>({}, 2.5f, world, B)), Shape{}, {2.5f});
    expect_tensor(run, "max 0-d", spsd::max(full<int64_t>({}, -7, world, B)), Shape{}, V{-7});
  });
  run.error("transpose: of a 0-d tensor throws", [&] { transpose(full<float>({}, 1.0f, world, B), 0, 0); },
            {"transpose", "d0 0", "()"});
  run.error("slice: of a 0-d tensor throws", [&] { slice(full<float>({}, 1.0f, world, B), 0, 0, 1); },
            {"slice", "axis 0", "()"});
  run.run("matmul: n = 0 gives an empty (m, 0)", [&] {
    for (const NdSbp& l : layouts_for(p, Shape{2, 3}))
      expect_tensor(run, "matmul " + l.to_string(), matmul(ones<float>({2, 3}, world, l), zeros<float>({3, 0}, world, B)),
                    Shape{2, 0}, {});
  });
  run.run("slice: begin == end gives an empty axis", [&] {
    for (const NdSbp& l : layouts_for(p, Shape{2, 3}))
      expect_tensor(run, "slice " + l.to_string(), slice(host<float>({2, 3}, {1, 2, 3, 4, 5, 6}, world, l), 1, 2, 2),
                    Shape{2, 0}, {});
  });
  run.run("mean: NaN propagates, and through add", [&] {
    for (const NdSbp& l : layouts_for(p, Shape{4})) {
      const auto x = host<float>({4}, {1, kNaN, 3, 4}, world, l);
      expect_tensor(run, "mean " + l.to_string(), mean(x), Shape{}, {kNaN});
      expect_tensor(run, "add " + l.to_string(), x + 1.0f, Shape{4}, {2, kNaN, 4, 5});
    }
  });
  for (const NdSbp& l : layouts_for(p, Shape{2, 3})) {
    const auto x = host<float>({2, 3}, {0, 1, 2, 3, 4, 5}, world, l);
    const auto labels = host<int64_t>({2}, {2, 3}, world, B);
    // At once, or at the check full() runs where the op split the labels.
    run.error("pick: a label >= C is an Error naming it (x " + l.to_string() + ")", [&] {
      const Tensor<float> y = pick(x, labels).full();
      synchronize();
    }, {"pick: labels[1] = 3 is outside [0, 3), the classes (the last axis of (2, 3) float32)"});
    run.error("cross_entropy: a label >= C is an Error naming it (x " + l.to_string() + ")", [&] {
      const Tensor<float> loss = cross_entropy(x, labels).full();
      synchronize();
    }, {"cross_entropy: labels[1] = 3 is outside [0, 3)"});
  }
  run.run("max: of a row of -inf on B is -inf", [&] {
    expect_tensor(run, "max", spsd::max(host<float>({3}, {-kInf, -kInf, -kInf}, world, B)), Shape{}, {-kInf});
    expect_tensor(run, "min", spsd::min(host<float>({2}, {kInf, kInf}, world, B)), Shape{}, {kInf});
  });
  run.run("div: INT64_MIN / -1 wraps to INT64_MIN", [&] {
    constexpr int64_t lo = std::numeric_limits<int64_t>::min();
    for (const NdSbp& l : layouts_for(p, Shape{2})) {
      const auto x = host<int64_t>({2}, {lo, 6}, world, l);
      expect_tensor(run, "tensor / tensor " + l.to_string(), x / host<int64_t>({2}, {-1, -1}, world, l), Shape{2}, V{lo, -6});
      expect_tensor(run, "tensor / scalar " + l.to_string(), x / int64_t{-1}, Shape{2}, V{lo, -6});
    }
  });
  run.run("gelu: of -inf is NaN, of +inf is +inf (x (1 + erf) / 2 evaluated in IEEE: -inf * 0)", [&] {
    expect_tensor(run, "gelu", gelu(host<float>({3}, {-kInf, kInf, 0}, world, B)), Shape{3}, {kNaN, kInf, 0});
  });
  run.run("gelu: the tanh form (GeluApproximation::kTanh) of -inf is NaN, of +inf is +inf (IEEE)", [&] {
    expect_tensor(run, "gelu_tanh", gelu(host<float>({3}, {-kInf, kInf, 0}, world, B), GeluApproximation::kTanh),
                  Shape{3}, {kNaN, kInf, 0});
  });
  run.run("to_global: zero-size local pieces", [&] {
    expect_tensor(run, "to_global", to_global(Tensor<float>(Shape{0, 3}), world, sbp::split(0)), Shape{0, 3}, {});
  });
  run.run("GlobalTensor::to_local: empty outside the placement", [&] {
    const Placement last("cpu", V{n - 1});
    const auto t = arange<int64_t>(3, last, B);
    run.check("to_local", t.to_local().numel() == (r == n - 1 ? 3 : 0), "local numel " + show(t.to_local().numel()));
  });
  run.run("Tensor::to_vector: of an undefined tensor is empty", [&] {
    run.check("to_vector", Tensor<double>().to_vector().empty() && !Tensor<double>().defined(), "not empty");
  });
  run.run("GlobalTensor::detach: a leaf that shares the values", [&] {
    auto w = GlobalTensor<float>(ones<float>({2}, world, B)).requires_grad_();
    const auto d = (w * 2.0f).detach();
    run.check("detach", d.is_leaf() && !d.requires_grad(), "not a leaf without grad");
    const auto shared = w.detach();
    run.check("detach", shared.to_local().data() == w.to_local().data() && !shared.requires_grad(),
              "w.detach() does not share w's storage");
    expect_tensor(run, "detach values", d, Shape{2}, {2, 2});
  });
  run.run("GlobalTensor::zero_grad: then grad() throws, step() leaves the parameter", [&] {
    auto w = GlobalTensor<float>(ones<float>({2}, world, B)).requires_grad_();
    backward(sum(w * w));
    expect_tensor(run, "grad", w.grad(), Shape{2}, {2, 2});
    w.zero_grad();
    run.check("zero_grad", !w.has_grad(), "still has a gradient");
    expect_error(run.failures, "grad() after zero_grad", [&] { (void)w.grad(); }, {"grad", "has no gradient yet"});
    SGD<float> sgd({w}, {.lr = 0.5});
    sgd.step();
    expect_tensor(run, "step after zero_grad", w, Shape{2}, {1, 1});
  });
  run.run("Optimizer::step: without a gradient leaves the parameters unchanged", [&] {
    auto w = GlobalTensor<float>(ones<float>({2}, world, sbp::split(0))).requires_grad_();
    SGD<float> sgd({w}, {.lr = 0.5});
    sgd.step();
    expect_tensor(run, "step", w, Shape{2}, {1, 1});
    backward(sum(w));
    sgd.step();
    expect_tensor(run, "step after backward", w, Shape{2}, {0.5f, 0.5f});
  });
  run.run("Optimizer::zero_grad: drops every gradient", [&] {
    auto w = GlobalTensor<double>(ones<double>({2}, world, B)).requires_grad_();
    Adam<double> adam({w}, {});
    backward(sum(w));
    adam.zero_grad();
    run.check("zero_grad", !w.has_grad(), "a gradient is left");
  });
  run.run("is_grad_enabled: false under NoGradGuard, nothing recorded", [&] {
    auto w = GlobalTensor<float>(ones<float>({2}, world, B)).requires_grad_();
    NoGradGuard guard;
    run.check("is_grad_enabled", !is_grad_enabled() && !(w * w).requires_grad(), "recorded under NoGradGuard");
  });
  // Pure functions at their edges.
  run.run("Shape::numel: 0 for a zero dimension", [&] { run.check("numel", Shape{3, 0}.numel() == 0, "not 0"); });
  run.run("contiguous_strides: of a shape with a 0", [&] {
    run.check("strides", contiguous_strides(Shape{2, 0, 3}) == V{0, 3, 1}, "not [0, 3, 1]");
  });
  run.run("to_string(DType): every dtype", [&] {
    run.check("to_string", spsd::to_string(DType::kInt32) == "int32" && spsd::to_string(static_cast<DType>(9)) == "invalid dtype",
              "wrong names");
  });
  run.run("size_of: every dtype", [&] { run.check("size_of", size_of(DType::kFloat64) == 8 && size_of(DType::kInt32) == 4, "wrong"); });
  run.run("is_floating: every dtype", [&] { run.check("is_floating", is_floating(DType::kFloat32) && !is_floating(DType::kInt64), "wrong"); });
  run.run("reduce_identity: max of float is lowest(), finite", [&] {
    run.check("identity", reduce_identity<float>(ReduceOp::kMax) == std::numeric_limits<float>::lowest(), "not lowest()");
  });
  run.run("Placement::contains: a negative rank is not contained", [&] { run.check("contains", !p.contains(-1), "contains -1"); });
  run.run("sbp::partial: each op", [&] { run.check("partial", sbp::partial(ReduceOp::kMin) == sbp::partial_min, "not P(min)"); });
  run.run("intersect: disjoint boxes give an empty box", [&] {
    run.check("intersect", intersect(Box{{0}, {2}}, Box{{3}, {5}}).empty(), "not empty");
  });
  run.run("overlap: 0 for disjoint boxes", [&] { run.check("overlap", overlap(Box{{0}, {2}}, Box{{3}, {5}}) == 0, "not 0"); });
  run.run("full_box: of a 0-d shape", [&] {
    const Box b = full_box(Shape{});
    run.check("full_box", b.ndim() == 0 && b.numel() == 1 && !b.empty() && b.shape() == Shape{}, "not one element of shape ()");
  });
  run.run("box_at: pieces of an axis shorter than the mesh are empty", [&] {
    for (int64_t k = 0; k < n; ++k)
      run.check("box_at", box_at(Shape{1}, Shape{n}, sbp::split(0), {k}).numel() == (k == 0 ? 1 : 0), "piece " + show(k));
  });
  run.run("layout_diagram: empty pieces are named", [&] {
    const std::string d = layout_diagram(zeros<float>({0, 3}, world, sbp::split(0)));
    run.check("layout_diagram", d.find("(empty)") != std::string::npos, "no (empty) in:\n" + d);
  });
  run.run("to_string(CollectiveKind): an invalid value is named, not read past the names", [&] {
    run.check("to_string", spsd::to_string(CollectiveKind::kBarrier) == "barrier" &&
                               spsd::to_string(static_cast<CollectiveKind>(7)) == "invalid collective kind",
              "wrong names");
  });
  run.run("displacements: counts with zeros", [&] {
    const V counts = {0, 2, 0, 3};
    run.check("displacements", displacements(counts) == V{0, 0, 2, 2}, "wrong offsets");
  });
  run.run("traffic::all_reduce: nothing for count 0 or one rank", [&] {
    const traffic::Traffic a = traffic::all_reduce(0, 4, 1), b = traffic::all_reduce(10, 1, 0);
    run.check("traffic", a.sent == 0 && a.received == 0 && b.sent == 0 && b.received == 0, "not 0");
  });
  run.run("philox::uniform: in [0, 1) at extreme indices", [&] {
    for (uint64_t i : {uint64_t{0}, ~uint64_t{0}}) {
      const float f = philox::uniform<float>(~uint64_t{0}, i);
      const double d = philox::uniform<double>(0, i);
      run.check("uniform", f >= 0 && f < 1 && d >= 0 && d < 1, "out of [0, 1)");
    }
  });
  run.run("philox::normal: finite at extreme indices", [&] {
    for (uint64_t i : {uint64_t{0}, ~uint64_t{0}}) run.check("normal", std::isfinite(philox::normal<float>(7, i)), "not finite");
  });
  run.run("cost_model: the host model for cpu", [&] { run.check("cost_model", &cost_model(DeviceType::kCPU) == &kMpiCostModel, "not MPI's"); });
  run.run("latency_rounds: one rank takes no rounds", [&] {
    run.check("latency_rounds", latency_rounds(StepKind::kAllReduce, 1, 0) == 0 && latency_rounds(StepKind::kAllToAll, 1, 0) == 0,
              "not 0");
  });
  run.run("step_cost_us: finite for zero bytes", [&] {
    run.check("step_cost_us", step_cost_us(kMpiCostModel, StepKind::kLocal, 1, 0, 0, 0) == kMpiCostModel.step_us, "not step_us");
  });
}

// Errors only found after the ranks exchange facts: every rank must throw.
void collective_errors(Run& run, const Placement& p) {
  const int64_t n = world_size(), r = rank();
  run.error("to_global: a local shape that is not its piece",
            [&] { to_global(Tensor<float>(Shape{5, 3}), p, sbp::split(0), Shape{4, 3}); },
            {"to_global", "rank 0 holds a local tensor of shape (5, 3)", "(4, 3)"});
  run.error("div: an integer zero divisor in one rank's piece",
            [&] { host<int64_t>({8}, V(8, 5), p, sbp::split(0)) / host<int64_t>({8}, {1, 1, 1, 0, 1, 1, 1, 1}, p, sbp::split(0)); },
            {"div", "integer division by zero", "(8,) int64 (S(0))", "is 0 at [3]"});
  run.error("rdiv_scalar: an integer zero divisor in one rank's piece",
            [&] { int64_t{6} / host<int64_t>({5}, {1, 2, 3, 4, 0}, p, sbp::split(0)); },
            {"div", "integer division by zero", "is 0 at [4]"});
  run.error("to_global: an undefined local Tensor on every rank, global shape given",
            [&] { to_global(Tensor<float>(), p, sbp::broadcast, Shape{}); },
            {"to_global", "rank 0 passed an undefined local Tensor", "no storage"});
  run.error("to_global: an undefined local Tensor on the last rank",
            [&] { to_global(r == n - 1 ? Tensor<float>() : Tensor<float>(Shape{1}), p, sbp::split(0)); },
            {"to_global", "rank " + std::to_string(n - 1) + " passed an undefined local Tensor"});
  if (n < 2) return;
  run.error("to_global: local shapes that fit no layout",
            [&] { to_global(Tensor<float>(Shape{r + 1, 3}), p, sbp::split(0)); },
            {"to_global", "rank 0 (1, 3)", "are not (S(0))", "of any global shape"});
  run.error("to_global: local tensors of different ranks",
            [&] { to_global(r == 0 ? Tensor<float>(Shape{3}) : Tensor<float>(Shape{1, 3}), p, sbp::broadcast); },
            {"to_global", "differ in rank", "rank 0 has 1 axes"});
  run.error("from_host: data differing across ranks",
            [&] { from_host(Tensor<int64_t>::from_vector({1}, {r}), p, sbp::split(0)); },
            {"from_host", "must pass the same tensor", "different from rank 0"});
}

// Indices out of range in some ranks' pieces (op/index_check.hpp): raised at the placement's
// next consistency check, which reading the result (or any communication) runs, on every rank,
// naming the first bad value; on one rank at once.
void index_errors(Run& run, const Placement& p) {
  const NdSbp rows(std::vector<Sbp>(p.mesh().ndim(), sbp::split(0)));
  const std::string on = " (" + rows.to_string() + " on " + p.to_string() + ")";
  run.error("embedding: an index out of range in one rank's piece" + on, [&] {
    const auto w = host<float>({4, 3}, std::vector<float>(12, 0.5f), p, NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast)));
    const Tensor<float> y = embedding(w, host<int64_t>({8}, {0, 1, 2, 3, 0, 9, 2, 1}, p, rows)).full();
    synchronize();
  }, {"embedding: indices[5] = 9 is outside [0, 4), the rows of the weight (4, 3) float32"});
  run.error("cross_entropy: labels out of range in two ranks' pieces, the first named" + on, [&] {
    const auto logits = host<float>({8, 5}, std::vector<float>(40, 0.25f), p, rows);
    const Tensor<float> loss = cross_entropy(logits, host<int64_t>({8}, {0, 1, 2, -1, 4, 0, 7, 1}, p, rows)).full();
    synchronize();
  }, {"cross_entropy: labels[3] = -1 is outside [0, 5), the classes (the last axis of (8, 5) float32)"});
  run.error("pick: a label out of range, raised by the placement's next communication" + on, [&] {
    (void)pick(host<float>({6, 4}, std::vector<float>(24, 1.0f), p, rows), host<int64_t>({6}, {0, 1, 2, 3, 0, 4}, p, rows));
    const Tensor<float> other = randn<float>({4}, p, rows, 1).full();
    synchronize();
  }, {"pick: labels[5] = 4 is outside [0, 4), the classes (the last axis of (6, 4) float32)"});
}

}  // namespace

int run_edge_cases(Failures& failures, std::set<std::string>& covered) {
  Run run{failures, covered};
  const int64_t n = world_size();
  V ranks(n);
  for (int64_t i = 0; i < n; ++i) ranks[i] = i;
  const Placement line("cpu", ranks);
  std::vector<Placement> placements = {line};
  if (n == 4) placements.emplace_back("cpu", ranks, Shape{2, 2});
  for (const Placement& p : placements) {
    results_at_zero_size(run, p);
    results_with_nan(run, p);
    index_errors(run, p);
    results_against_pytorch(run, p);
  }
  results_elsewhere(run, line);
  collective_errors(run, line);
  // Nothing above may have left the world communicator or a check pending.
  synchronize();
  return run.count;
}

}  // namespace spsd_test
