// Reductions (sum, mean, max, min), softmax and log_softmax, embedding and pick, cross_entropy,
// under simulated ranks on meshes {1}, {2}, {3}, {4}, {2, 2}: every input is built with from_host
// from one random host tensor in every layout of the mesh (S(i) for each axis, B, P(sum),
// P(max), P(min) per mesh axis), and full() of the result is compared with a single-process
// reference written with plain loops here.
//
// Tolerances: float rel 1e-5 + abs 1e-5 (sums of up to 35 values in [-2, 2], softmax outputs in
// (0, 1)), double rel 1e-12 + abs 1e-12; int64 sums and every max / min / gather: exact.
//
// The two-input ops (embedding, pick, cross_entropy) would take |layouts|^2 cases; where that
// exceeds ~150 per mesh the second input's layouts are sampled deterministically: for the i-th
// layout of the first input, every `stride`-th layout of the second, starting at i % stride,
// so every layout of each input occurs and the pairs rotate (see `pairs_of`).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;

namespace {

const std::vector<Shape> kMeshes = {Shape{1}, Shape{2}, Shape{3}, Shape{4}, Shape{2, 2}};

std::vector<NdSbp> layouts_of(const Placement& p, int64_t ndim) {
  return spsd_test::all_nd_sbps(p.mesh().ndim(), ndim);
}

// Runs body on the ranks of each mesh; a failure names the case and the mesh.
void on_meshes(const std::string& what, const std::function<void(const Placement&, Failures&)>& body) {
  for (const Shape& mesh : kMeshes) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()),
                                               [&](Failures& mine) { body(mesh_placement(mesh), mine); });
    INFO(what << " on mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}

// Runs one case; an exception becomes a failure line (every rank throws alike, none waits).
void guarded(Failures& f, const std::string& what, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    f.add(what + ": threw: " + e.what());
  }
}

template <class T>
std::vector<T> random_values(int64_t n, uint64_t seed, double lo = -2, double hi = 2) {
  std::mt19937_64 gen(seed);
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (T& x : v) x = static_cast<T>(d(gen));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (T& x : v) x = static_cast<T>(d(gen));
  }
  return v;
}

template <class T>
Tensor<T> host(const Shape& s, const std::vector<T>& v) {
  return Tensor<T>::from_vector(s, v);
}

template <class T>
struct Tol {
  double rel, abs;
};
template <class T>
constexpr Tol<T> default_tol() {
  if constexpr (std::is_same_v<T, float>) return {1e-5, 1e-5};
  else if constexpr (std::is_same_v<T, double>) return {1e-12, 1e-12};
  else return {0, 0};
}

// full() of got against the reference (shape and values); NaN matches NaN.
template <class T>
void expect_close(Failures& f, const std::string& what, const GlobalTensor<T>& got, const Shape& shape,
                  const std::vector<T>& expected, Tol<T> tol = default_tol<T>()) {
  if (!(got.shape() == shape)) {
    f.add(what + ": shape " + got.shape().to_string() + ", expected " + shape.to_string());
    return;
  }
  Tensor<T> whole = got.full();
  const T* g = whole.data();
  int64_t bad = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = static_cast<double>(g[i]), e = static_cast<double>(expected[i]);
    bool ok;
    if (std::isnan(e)) ok = std::isnan(a);
    else if (std::isinf(e)) ok = a == e;
    else ok = std::abs(a - e) <= tol.abs + tol.rel * std::abs(e);
    if (ok) continue;
    if (bad++ < 3)
      f.add(what + ": element " + std::to_string(i) + ": got " + spsd_test::show(g[i]) + ", expected " +
            spsd_test::show(expected[i]) + " (result layout " + got.nd_sbp().to_string() + ")");
  }
  if (bad > 3) f.add(what + ": " + std::to_string(bad - 3) + " more mismatching elements");
}

std::string case_name(const std::string& op, const Shape& shape, const NdSbp& nd) {
  return op + " " + shape.to_string() + " " + nd.to_string();
}

// ---- references: plain loops on row-major vectors ----

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.ndim());
  for (int64_t d = s.ndim() - 1; d >= 0; --d) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

enum class Red { kSum, kMean, kMax, kMin };

// x reduced over `axes` (non-negative, distinct); the output shape goes to out_shape.
template <class T>
std::vector<T> ref_reduce(Red op, const std::vector<T>& x, const Shape& s, const std::vector<int64_t>& axes,
                          bool keepdim, Shape& out_shape) {
  std::vector<bool> red(s.ndim(), false);
  for (int64_t a : axes) red[a] = true;
  std::vector<int64_t> kept_dims, out_dims;
  for (int64_t d = 0; d < s.ndim(); ++d) {
    kept_dims.push_back(red[d] ? 1 : s[d]);
    if (!red[d]) out_dims.push_back(s[d]);
    else if (keepdim) out_dims.push_back(1);
  }
  out_shape = Shape(out_dims);
  const Shape kept(kept_dims);
  using Acc = std::conditional_t<std::is_integral_v<T>, T, double>;
  std::vector<Acc> acc(kept.numel());
  for (Acc& a : acc)
    a = op == Red::kMax ? std::numeric_limits<T>::lowest() : op == Red::kMin ? std::numeric_limits<T>::max() : Acc(0);
  for (int64_t i = 0; i < s.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, s);
    int64_t o = 0;
    for (int64_t d = 0; d < s.ndim(); ++d) o = o * kept[d] + (red[d] ? 0 : idx[d]);
    const Acc v = static_cast<Acc>(x[i]);
    if (op == Red::kMax) acc[o] = std::max(acc[o], v);
    else if (op == Red::kMin) acc[o] = std::min(acc[o], v);
    else acc[o] += v;
  }
  int64_t count = 1;
  for (int64_t a : axes) count *= s[a];
  std::vector<T> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    if (op == Red::kMean) out[i] = static_cast<T>(acc[i] / static_cast<double>(count));  // 0 / 0: NaN
    else out[i] = static_cast<T>(acc[i]);
  }
  return out;
}

template <class T>
std::vector<T> ref_softmax(const std::vector<T>& x, const Shape& s, int64_t axis, bool log) {
  int64_t outer = 1, inner = 1;
  const int64_t n = s[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (int64_t d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
  std::vector<T> out(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return o * n * inner + j * inner + i; };
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(x[at(j)]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(x[at(j)]) - m);
      for (int64_t j = 0; j < n; ++j) {
        const double z = static_cast<double>(x[at(j)]) - m;
        out[at(j)] = static_cast<T>(log ? z - std::log(sum) : std::exp(z) / sum);
      }
    }
  }
  return out;
}

template <class T>
std::vector<T> ref_embedding(const std::vector<T>& w, int64_t V, int64_t E, const std::vector<int64_t>& idx) {
  std::vector<T> out;
  for (int64_t i : idx)
    for (int64_t j = 0; j < E; ++j)
      out.push_back(i >= 0 && i < V ? w[i * E + j] : std::numeric_limits<T>::quiet_NaN());
  return out;
}

template <class T>
std::vector<T> ref_pick(const std::vector<T>& x, int64_t N, int64_t C, const std::vector<int64_t>& labels) {
  std::vector<T> out(N);
  for (int64_t i = 0; i < N; ++i)
    out[i] = labels[i] >= 0 && labels[i] < C ? x[i * C + labels[i]] : std::numeric_limits<T>::quiet_NaN();
  return out;
}

template <class T>
T ref_cross_entropy(const std::vector<T>& logits, int64_t N, int64_t C, const std::vector<int64_t>& labels) {
  std::vector<T> ls = ref_softmax(logits, Shape{N, C}, 1, true);
  double total = 0;
  for (int64_t i = 0; i < N; ++i)
    total += labels[i] >= 0 && labels[i] < C ? -static_cast<double>(ls[i * C + labels[i]])
                                             : std::numeric_limits<double>::quiet_NaN();
  return static_cast<T>(total / static_cast<double>(N));
}

// Pairs (i, j) of layout indices for two inputs with na and nb layouts: all of them when there
// are at most `budget`, else for each i every stride-th j starting at i % stride.
std::vector<std::pair<size_t, size_t>> pairs_of(size_t na, size_t nb, size_t budget = 150) {
  std::vector<std::pair<size_t, size_t>> out;
  const size_t stride = na * nb <= budget ? 1 : (na * nb + budget - 1) / budget;
  for (size_t i = 0; i < na; ++i)
    for (size_t j = i % stride; j < nb; j += stride) out.push_back({i, j});
  return out;
}

// ---- reductions ----

struct ReduceCase {
  Shape shape;
  std::vector<std::vector<int64_t>> axes;  // as passed (negative allowed)
};

const std::vector<ReduceCase> kReduceCases = {
    {Shape{5, 7}, {{}, {0}, {1}, {-1, 0}}},
    {Shape{3, 1, 4}, {{}, {1}, {0, 2}, {-1}, {2, 0, 1}}},
    {Shape{7}, {{}, {0}, {-1}}},
    {Shape{2, 0}, {{}, {0}, {1}}},
};

std::vector<int64_t> normalized(std::vector<int64_t> axes, int64_t ndim) {
  if (axes.empty())
    for (int64_t d = 0; d < ndim; ++d) axes.push_back(d);
  for (int64_t& a : axes)
    if (a < 0) a += ndim;
  std::sort(axes.begin(), axes.end());
  return axes;
}

const char* red_name(Red op) {
  return op == Red::kSum ? "sum" : op == Red::kMean ? "mean" : op == Red::kMax ? "max" : "min";
}

template <class T>
GlobalTensor<T> run_reduce(Red op, const GlobalTensor<T>& x, const std::vector<int64_t>& axes, bool keepdim) {
  switch (op) {
    case Red::kSum: return spsd::sum(x, axes, keepdim);
    case Red::kMean: return spsd::mean(x, axes, keepdim);
    case Red::kMax: return spsd::max(x, axes, keepdim);
    case Red::kMin: return spsd::min(x, axes, keepdim);
  }
  return x;
}

template <class T>
void check_reductions(const Placement& p, Failures& f, const std::vector<Red>& ops, bool both_keepdims,
                      uint64_t seed) {
  for (const ReduceCase& c : kReduceCases) {
    const std::vector<T> values = random_values<T>(c.shape.numel(), seed, -2, 2);
    const Tensor<T> whole = host(c.shape, values);
    for (const NdSbp& nd : layouts_of(p, c.shape.ndim())) {
      const GlobalTensor<T> x = from_host(whole, p, nd);
      for (const std::vector<int64_t>& axes : c.axes) {
        for (bool keepdim : {false, true}) {
          if (keepdim && !both_keepdims) continue;
          for (Red op : ops) {
            std::string what = case_name(red_name(op), c.shape, nd) + " axes " + spsd::detail::join(axes) +
                               (keepdim ? " keepdim" : "") + " " + std::string(to_string(dtype_of<T>));
            // max and min over no elements have no identity: an Error, as in numpy and torch.
            const std::vector<int64_t> reduced = normalized(axes, c.shape.ndim());
            const bool over_nothing = std::any_of(reduced.begin(), reduced.end(), [&](int64_t a) { return c.shape[a] == 0; });
            if (over_nothing && (op == Red::kMax || op == Red::kMin)) {
              try {
                run_reduce(op, x, axes, keepdim);
                f.add(what + ": reduced no elements without an error");
              } catch (const spsd::Error& e) {
                if (std::string(e.what()).find("no identity") == std::string::npos) f.add(what + ": " + e.what());
              }
              continue;
            }
            guarded(f, what, [&] {
              Shape out_shape;
              std::vector<T> expected = ref_reduce(op, values, c.shape, normalized(axes, c.shape.ndim()), keepdim, out_shape);
              expect_close(f, what, run_reduce(op, x, axes, keepdim), out_shape, expected);
            });
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("sum, mean, max, min of every layout equal the single-process reduction", "[ops-reduce][reduce]") {
  on_meshes("reductions", [](const Placement& p, Failures& f) {
    check_reductions<float>(p, f, {Red::kSum, Red::kMean, Red::kMax, Red::kMin}, true, 11);
    check_reductions<double>(p, f, {Red::kMean}, false, 12);
    check_reductions<int64_t>(p, f, {Red::kSum, Red::kMax, Red::kMin}, false, 13);
  });
}

TEST_CASE("reductions: output layouts follow the table", "[ops-reduce][reduce]") {
  Failures f = spsd_test::on_simulated_ranks(4, [](Failures& mine) {
    Placement p("cpu", {0, 1, 2, 3});
    Placement grid("cpu", {{0, 1}, {2, 3}});
    auto x = randn<float>({6, 5, 3}, p, sbp::split(1), 1);
    auto expect_layout = [&](const std::string& what, const NdSbp& got, const NdSbp& want) {
      if (!(got == want)) mine.add(what + ": layout " + got.to_string() + ", expected " + want.to_string());
    };
    reset_comm_stats();
    expect_layout("sum over the split axis", sum(x, {1}).nd_sbp(), NdSbp(sbp::partial_sum));
    expect_layout("mean over the split axis", mean(x, {1, 2}).nd_sbp(), NdSbp(sbp::partial_sum));
    expect_layout("max over the split axis", max(x, {1}).nd_sbp(), NdSbp(sbp::partial_max));
    expect_layout("min over the split axis", min(x, {-2}, true).nd_sbp(), NdSbp(sbp::partial_min));
    expect_layout("sum keeping the split axis", sum(x, {0}).nd_sbp(), NdSbp(sbp::split(0)));
    expect_layout("sum keeping the split axis, keepdim", sum(x, {0}, true).nd_sbp(), NdSbp(sbp::split(1)));
    if (comm_stats().bytes_received != 0 || comm_stats().bytes_sent != 0)
      mine.add("reductions of a split tensor communicated: " + comm_stats().to_string());
    auto ps = sum(x, {1});  // P(sum)
    expect_layout("sum of P(sum)", sum(ps, {0}).nd_sbp(), NdSbp(sbp::partial_sum));
    expect_layout("mean of P(sum)", mean(ps, {}).nd_sbp(), NdSbp(sbp::partial_sum));
    auto pm = max(x, {1});  // P(max)
    expect_layout("max of P(max)", max(pm, {1}).nd_sbp(), NdSbp(sbp::partial_max));
    auto g = randn<double>({4, 6}, grid, NdSbp{sbp::split(0), sbp::split(1)}, 2);
    expect_layout("2-d mesh: sum over axis 1", sum(g, {1}).nd_sbp(), NdSbp{sbp::split(0), sbp::partial_sum});
    expect_layout("2-d mesh: max of all", max(g, {}).nd_sbp(), NdSbp{sbp::partial_max, sbp::partial_max});
    if (!(sum(g, {}).shape() == Shape{})) mine.add("sum of every axis: shape " + sum(g, {}).shape().to_string());
  });
  INFO(f.report());
  CHECK(f.empty());
}

// ---- softmax ----

namespace {

struct SoftmaxCase {
  Shape shape;
  std::vector<int64_t> axes;
};
const std::vector<SoftmaxCase> kSoftmaxCases = {
    {Shape{5, 7}, {0, -1}},
    {Shape{3, 1, 4}, {0, 1, 2}},
    {Shape{7}, {0}},
};

template <class T>
void check_softmax(const Placement& p, Failures& f, uint64_t seed) {
  for (const SoftmaxCase& c : kSoftmaxCases) {
    const std::vector<T> values = random_values<T>(c.shape.numel(), seed, -3, 3);
    const Tensor<T> whole = host(c.shape, values);
    for (const NdSbp& nd : layouts_of(p, c.shape.ndim())) {
      const GlobalTensor<T> x = from_host(whole, p, nd);
      for (int64_t axis : c.axes) {
        const int64_t a = axis < 0 ? axis + c.shape.ndim() : axis;
        for (bool log : {false, true}) {
          std::string what = case_name(log ? "log_softmax" : "softmax", c.shape, nd) + " axis " +
                             std::to_string(axis) + " " + std::string(to_string(dtype_of<T>));
          guarded(f, what, [&] {
            GlobalTensor<T> y = log ? log_softmax(x, axis) : softmax(x, axis);
            expect_close(f, what, y, c.shape, ref_softmax(values, c.shape, a, log));
          });
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("softmax and log_softmax of every layout equal the single-process result", "[ops-reduce][softmax]") {
  on_meshes("softmax", [](const Placement& p, Failures& f) {
    check_softmax<float>(p, f, 21);
    check_softmax<double>(p, f, 22);
  });
}

TEST_CASE("softmax over a split axis moves the reduced tensors, never the axis", "[ops-reduce][softmax]") {
  // (4, 1000) float split over 4 ranks on the class axis: gathering the axis would receive
  // 3/4 * 16000 = 12000 B per rank; the decomposition all-reduces two (4, 1) tensors.
  const int64_t N = 4, C = 1000;
  const std::vector<float> values = random_values<float>(N * C, 31, -5, 5);
  const std::vector<int64_t> labels_v = random_values<int64_t>(N, 32, 0, C - 1);
  const int64_t gather_bytes = 3 * N * C * 4 / 4;
  std::vector<CommStats> soft(4), logsoft(4), ce(4), ce_batch(4);
  Failures f = spsd_test::on_simulated_ranks(4, [&](Failures& mine) {
    Placement p("cpu", {0, 1, 2, 3});
    auto x = from_host(host(Shape{N, C}, values), p, sbp::split(1));
    auto labels = from_host(host(Shape{N}, labels_v), p, sbp::broadcast);
    reset_comm_stats();
    auto y = softmax(x, 1);
    soft[rank()] = comm_stats();
    if (!(y.nd_sbp() == NdSbp(sbp::split(1)))) mine.add("softmax output layout " + y.nd_sbp().to_string());
    reset_comm_stats();
    auto ly = log_softmax(x, -1);
    logsoft[rank()] = comm_stats();
    reset_comm_stats();
    auto loss = cross_entropy(x, labels);
    ce[rank()] = comm_stats();
    if (!(loss.nd_sbp() == NdSbp(sbp::partial_sum))) mine.add("class-parallel loss layout " + loss.nd_sbp().to_string());
    expect_close(mine, "softmax (4, 1000) S(1)", y, Shape{N, C}, ref_softmax(values, Shape{N, C}, 1, false));
    expect_close(mine, "log_softmax (4, 1000) S(1)", ly, Shape{N, C}, ref_softmax(values, Shape{N, C}, 1, true));
    expect_close(mine, "cross_entropy (4, 1000) S(1)", loss, Shape{}, {ref_cross_entropy(values, N, C, labels_v)});

    // Batch parallel: nothing moves until the scalar is read.
    auto xb = from_host(host(Shape{N, C}, values), p, sbp::split(0));
    auto lb = from_host(host(Shape{N}, labels_v), p, sbp::split(0));
    reset_comm_stats();
    auto loss_b = cross_entropy(xb, lb);
    ce_batch[rank()] = comm_stats();
    if (!(loss_b.nd_sbp() == NdSbp(sbp::partial_sum))) mine.add("batch-parallel loss layout " + loss_b.nd_sbp().to_string());
    expect_close(mine, "cross_entropy (4, 1000) S(0)", loss_b, Shape{}, {ref_cross_entropy(values, N, C, labels_v)});
  });
  INFO(f.report());
  CHECK(f.empty());
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": softmax " << soft[r] << "; log_softmax " << logsoft[r] << "; cross_entropy " << ce[r]
                 << "; batch-parallel cross_entropy " << ce_batch[r]);
    CHECK(soft[r].bytes_received < gather_bytes / 10);
    CHECK(logsoft[r].bytes_received < gather_bytes / 10);
    CHECK(ce[r].bytes_received < gather_bytes / 10);
    CHECK(soft[r].calls_of(CollectiveKind::kAllGather) == 0);
    CHECK(soft[r].calls_of(CollectiveKind::kAllReduce) == 2);
    CHECK(logsoft[r].calls_of(CollectiveKind::kAllReduce) == 2);
    CHECK(ce_batch[r].bytes_received == 0);
    CHECK(ce_batch[r].bytes_sent == 0);
  }
}

// ---- embedding and pick ----

TEST_CASE("embedding of every layout pair equals the single-process gather", "[ops-reduce][index]") {
  const int64_t V = 7, E = 5;
  const std::vector<float> wf = random_values<float>(V * E, 41);
  const std::vector<double> wd = random_values<double>(V * E, 42);
  struct IdxCase {
    Shape shape;
    std::vector<int64_t> values;
  };
  const std::vector<IdxCase> cases = {
      {Shape{6}, {3, 0, 6, 6, 1, 2}},
      {Shape{2, 3}, {5, 4, 0, 1, 1, 6}},
      {Shape{}, {4}},
      {Shape{0}, {}},
      {Shape{5}, {2, -1, 7, 0, 100}},  // out of range: an Error naming indices[1] = -1
  };
  on_meshes("embedding", [&](const Placement& p, Failures& f) {
    const std::vector<NdSbp> wl = layouts_of(p, 2);
    for (const IdxCase& c : cases) {
      const bool bad = std::any_of(c.values.begin(), c.values.end(), [&](int64_t v) { return v < 0 || v >= V; });
      const std::vector<NdSbp> il = layouts_of(p, c.shape.ndim());
      std::vector<int64_t> out_dims = c.shape.dims();
      out_dims.push_back(E);
      for (auto [i, j] : pairs_of(wl.size(), il.size())) {
        const std::string what = "embedding weight " + wl[i].to_string() + ", indices " + c.shape.to_string() + " " +
                                 il[j].to_string();
        if (bad) {
          // Raised on every rank at once or at the next consistency check (full() runs one).
          spsd_test::expect_error(f, what, [&] {
            const Tensor<float> y =
                embedding(from_host(host(Shape{V, E}, wf), p, wl[i]), from_host(host(c.shape, c.values), p, il[j])).full();
            synchronize();
          }, {"embedding: indices[1] = -1 is outside [0, 7), the rows of the weight (7, 5) float32"});
          continue;
        }
        guarded(f, what, [&] {
          auto idx = from_host(host(c.shape, c.values), p, il[j]);
          // float for every pair, double for every other one.
          auto w = from_host(host(Shape{V, E}, wf), p, wl[i]);
          expect_close(f, what, embedding(w, idx), Shape(out_dims), ref_embedding(wf, V, E, c.values));
          if ((i + j) % 2 == 0) {
            auto w2 = from_host(host(Shape{V, E}, wd), p, wl[i]);
            expect_close(f, what + " double", embedding(w2, idx), Shape(out_dims), ref_embedding(wd, V, E, c.values));
          }
        });
      }
    }
  });
}

TEST_CASE("embedding: vocabulary-, dim- and data-parallel signatures", "[ops-reduce][index]") {
  Failures f = spsd_test::on_simulated_ranks(3, [](Failures& mine) {
    Placement p("cpu", {0, 1, 2});
    auto idx_b = from_host(host(Shape{4}, std::vector<int64_t>{0, 6, 3, 2}), p, sbp::broadcast);
    auto idx_s = from_host(host(Shape{2, 2}, std::vector<int64_t>{0, 6, 3, 1}), p, sbp::split(1));
    auto expect_layout = [&](const std::string& what, const NdSbp& got, const NdSbp& want) {
      if (!(got == want)) mine.add(what + ": layout " + got.to_string() + ", expected " + want.to_string());
    };
    reset_comm_stats();
    auto wv = randn<float>({7, 5}, p, sbp::split(0), 3);
    auto wd = randn<float>({7, 5}, p, sbp::split(1), 3);
    auto wb = randn<float>({7, 5}, p, sbp::broadcast, 3);
    auto vocab = embedding(wv, idx_b);
    auto dim = embedding(wd, idx_b);
    auto data = embedding(wb, idx_s);
    expect_layout("vocabulary parallel", vocab.nd_sbp(), NdSbp(sbp::partial_sum));
    expect_layout("embedding-dim parallel", dim.nd_sbp(), NdSbp(sbp::split(1)));
    expect_layout("data parallel", data.nd_sbp(), NdSbp(sbp::split(1)));
    if (comm_stats().bytes_received != 0) mine.add("the three signatures communicated: " + comm_stats().to_string());
    // An index out of range, every rank holding all of them (B): each throws at once, in every
    // signature, and nothing was communicated to find it.
    auto idx_bad = from_host(host(Shape{4}, std::vector<int64_t>{0, 6, 3, 9}), p, sbp::broadcast);
    reset_comm_stats();
    for (const auto* w : {&wv, &wd, &wb})
      spsd_test::expect_error(mine, "embedding, index 9 of 7 rows, weight " + w->nd_sbp().to_string(),
                              [&] { (void)embedding(*w, idx_bad); },
                              {"embedding: indices[3] = 9 is outside [0, 7), the rows of the weight (7, 5) float32"});
    if (comm_stats().collectives != 0) mine.add("finding index 9 communicated: " + comm_stats().to_string());
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("pick of every layout pair equals the single-process result", "[ops-reduce][index]") {
  const int64_t N = 7, C = 5;
  const std::vector<float> xf = random_values<float>(N * C, 51);
  const std::vector<std::vector<int64_t>> label_sets = {{0, 4, 2, 2, 1, 3, 4}, {1, -1, 5, 0, 4, 9, 2}};
  on_meshes("pick", [&](const Placement& p, Failures& f) {
    const std::vector<NdSbp> xl = layouts_of(p, 2), ll = layouts_of(p, 1);
    for (const std::vector<int64_t>& labels_v : label_sets) {
      const bool bad = labels_v[1] < 0;  // the second set: -1 first, 5 and 9 after it
      for (auto [i, j] : pairs_of(xl.size(), ll.size())) {
        const std::string what = "pick x " + xl[i].to_string() + ", labels " + ll[j].to_string();
        if (bad) {
          spsd_test::expect_error(f, what, [&] {
            const Tensor<float> y = pick(from_host(host(Shape{N, C}, xf), p, xl[i]), from_host(host(Shape{N}, labels_v), p, ll[j])).full();
            synchronize();
          }, {"pick: labels[1] = -1 is outside [0, 5), the classes (the last axis of (7, 5) float32)"});
          continue;
        }
        guarded(f, what, [&] {
          auto x = from_host(host(Shape{N, C}, xf), p, xl[i]);
          auto labels = from_host(host(Shape{N}, labels_v), p, ll[j]);
          expect_close(f, what, pick(x, labels), Shape{N}, ref_pick(xf, N, C, labels_v));
        });
      }
    }
  });
}

// ---- cross_entropy ----

TEST_CASE("cross_entropy of every layout pair equals the single-process loss", "[ops-reduce][loss]") {
  struct CeCase {
    int64_t N, C;
  };
  const std::vector<CeCase> cases = {{7, 5}, {3, 9}};
  on_meshes("cross_entropy", [&](const Placement& p, Failures& f) {
    const std::vector<NdSbp> xl = layouts_of(p, 2), ll = layouts_of(p, 1);
    for (const CeCase& c : cases) {
      const std::vector<float> xf = random_values<float>(c.N * c.C, 61 + c.C, -4, 4);
      const std::vector<double> xd = random_values<double>(c.N * c.C, 62 + c.C, -4, 4);
      const std::vector<int64_t> labels_v = random_values<int64_t>(c.N, 63 + c.C, 0, c.C - 1);
      const Shape shape{c.N, c.C};
      for (auto [i, j] : pairs_of(xl.size(), ll.size(), 100)) {
        const std::string what = "cross_entropy " + shape.to_string() + " logits " + xl[i].to_string() + ", labels " +
                                 ll[j].to_string();
        guarded(f, what, [&] {
          auto labels = from_host(host(Shape{c.N}, labels_v), p, ll[j]);
          auto xf_g = from_host(host(shape, xf), p, xl[i]);
          expect_close(f, what, cross_entropy(xf_g, labels), Shape{}, {ref_cross_entropy(xf, c.N, c.C, labels_v)});
          auto xd_g = from_host(host(shape, xd), p, xl[i]);
          expect_close(f, what + " double", cross_entropy(xd_g, labels), Shape{},
                       {ref_cross_entropy(xd, c.N, c.C, labels_v)});
        });
      }
    }
  });
}

// ---- errors ----

TEST_CASE("reduce, softmax, index and loss errors name the op and the values on every rank", "[ops-reduce][errors]") {
  Failures f = spsd_test::on_simulated_ranks(2, [](Failures& mine) {
    Placement p("cpu", {0, 1});
    auto x = randn<float>({5, 7}, p, sbp::split(0));
    auto xi = full<int64_t>({5, 7}, 3, p, sbp::broadcast);
    auto labels = full<int64_t>({3}, 0, p, sbp::broadcast);
    auto idx = full<int64_t>({4}, 0, p, sbp::split(0));
    using spsd_test::expect_error;
    expect_error(mine, "sum axis 2", [&] { sum(x, {2}); }, {"sum", "axis 2", "(5, 7)"});
    expect_error(mine, "max axis -3", [&] { max(x, {-3}); }, {"max", "axis -3", "(5, 7)"});
    expect_error(mine, "min repeated axis", [&] { min(x, {1, -1}); }, {"min", "repeated", "(5, 7)"});
    expect_error(mine, "mean repeated axis", [&] { mean(x, {0, 0}, true); }, {"mean", "axis 0", "repeated"});
    expect_error(mine, "mean of int64", [&] { mean(xi, {0}); }, {"mean", "int64"});
    expect_error(mine, "softmax axis 2", [&] { softmax(x, 2); }, {"softmax", "axis 2", "(5, 7)"});
    expect_error(mine, "log_softmax axis -3", [&] { log_softmax(x, -3); }, {"log_softmax", "axis -3", "(5, 7)"});
    expect_error(mine, "cross_entropy N differs", [&] { cross_entropy(x, labels); },
                 {"cross_entropy", "(5, 7)", "(3,)"});
    auto x3 = randn<float>({5, 7, 2}, p, sbp::broadcast);
    expect_error(mine, "cross_entropy 3-d logits", [&] { cross_entropy(x3, labels); },
                 {"cross_entropy", "(5, 7, 2)", "(3,)"});
    auto l2 = full<int64_t>({5, 1}, 0, p, sbp::broadcast);
    expect_error(mine, "cross_entropy 2-d labels", [&] { cross_entropy(x, l2); },
                 {"cross_entropy", "(5, 7)", "(5, 1)"});
    expect_error(mine, "pick N differs", [&] { pick(x, labels); }, {"pick", "(5, 7)", "(3,)"});
    auto w1 = randn<float>({7}, p, sbp::broadcast);
    expect_error(mine, "embedding 1-d weight", [&] { embedding(w1, idx); }, {"embedding", "weight", "(7,)"});
  });
  INFO(f.report());
  CHECK(f.empty());
}
