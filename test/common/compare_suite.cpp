#include "compare_suite.hpp"

#include <cmath>
#include <functional>
#include <optional>
#include <type_traits>

#include "boxing_suite.hpp"
#include "reference_loops.hpp"

namespace spsd_test {

using namespace spsd;

namespace {

// Multiples of 1/2 in [-2, 2] (integers: -3..3; bool: a coin): few distinct values, so equality
// and ties happen.
template <class T>
Tensor<T> values(const Shape& shape, uint64_t seed) {
  std::vector<T> v(shape.numel());
  for (int64_t g = 0; g < shape.numel(); ++g) {
    const uint64_t r = splitmix(seed * 131 + static_cast<uint64_t>(g));
    if constexpr (std::is_same_v<T, bool>) v[g] = (r & 1) != 0;
    else if constexpr (std::is_integral_v<T>) v[g] = static_cast<T>(static_cast<int64_t>(r % 7) - 3);
    else v[g] = static_cast<T>((static_cast<double>(r % 9) - 4.0) / 2.0);
  }
  return Tensor<T>::from_vector(shape, std::move(v));
}

// Row-major index into `in` (right-aligned, size-1 axes stretch) of output index g.
int64_t read_index(const Shape& in, const Shape& out, int64_t g) { return broadcast_offset(in, unravel(g, out)); }

// A host tensor of any element type, type-erased for the driver.
struct HostInput {
  Shape shape;
  bool partial_ok;  // false for bool
  std::function<std::vector<double>()> as_doubles;
};

// One case: inputs (shapes, dtypes), the op run on inputs in given layouts (returns the full
// result as doubles on members), and the reference.
struct Case {
  std::string name;
  std::vector<Shape> shapes;
  std::vector<bool> partial_ok;
  std::function<std::vector<double>(const Placement&, const std::vector<NdSbp>&, bool lopsided)> run;
  std::function<std::vector<double>()> reference;
  Shape out_shape;
};

template <class T>
GlobalTensor<T> build(const Tensor<T>& whole, const Placement& p, const NdSbp& nd, bool lopsided) {
  if constexpr (!std::is_same_v<T, bool>)
    if (nd.has_partial() && lopsided) return build_layout(whole, Layout{p, nd}, 1.0);
  return from_host(whole, p, nd);
}

template <class T>
std::vector<double> doubles(const Tensor<T>& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<double>(t.data()[i]);
  return v;
}

template <class T>
const char* name_of() {
  return std::is_same_v<T, bool> ? "bool" : to_string(dtype_of<T>).data();
}

template <class T>
void add_compare_cases(std::vector<Case>& cases) {
  using C = compute_t<T>;
  const std::vector<std::pair<Shape, Shape>> shapes = {{Shape{4, 5}, Shape{4, 5}}, {Shape{4, 1}, Shape{5}}};
  struct Op {
    const char* name;
    std::function<GlobalTensor<bool>(const GlobalTensor<T>&, const GlobalTensor<T>&)> tt;
    std::function<GlobalTensor<bool>(const GlobalTensor<T>&, C)> ts, st;
    std::function<bool(C, C)> ref;
  };
  std::vector<Op> ops = {
      {"eq", [](auto& a, auto& b) { return a == b; }, [](auto& a, C s) { return a == s; },
       [](auto& a, C s) { return s == a; }, [](C x, C y) { return x == y; }},
      {"ne", [](auto& a, auto& b) { return a != b; }, [](auto& a, C s) { return a != s; },
       [](auto& a, C s) { return s != a; }, [](C x, C y) { return x != y; }},
  };
  if constexpr (!std::is_same_v<T, bool>) {
    ops.push_back({"lt", [](auto& a, auto& b) { return a < b; }, [](auto& a, C s) { return a < s; },
                   [](auto& a, C s) { return s < a; }, [](C x, C y) { return x < y; }});
    ops.push_back({"le", [](auto& a, auto& b) { return le(a, b); }, [](auto& a, C s) { return a <= s; },
                   [](auto& a, C s) { return s <= a; }, [](C x, C y) { return x <= y; }});
    ops.push_back({"gt", [](auto& a, auto& b) { return a > b; }, [](auto& a, C s) { return gt(a, s); },
                   [](auto& a, C s) { return s > a; }, [](C x, C y) { return x > y; }});
    ops.push_back({"ge", [](auto& a, auto& b) { return a >= b; }, [](auto& a, C s) { return a >= s; },
                   [](auto& a, C s) { return s >= a; }, [](C x, C y) { return x >= y; }});
  }
  const bool partial_ok = !std::is_same_v<T, bool>;
  const C s = std::is_same_v<T, bool> ? C(1) : std::is_integral_v<T> ? C(1) : C(0.5);
  for (const Op& op : ops) {
    for (const auto& [sa, sb] : shapes) {
      const Tensor<T> a = values<T>(sa, 1), b = values<T>(sb, 2);
      const Shape out = ref_broadcast(sa, sb);
      cases.push_back({std::string(op.name) + " " + name_of<T>(), {sa, sb}, {partial_ok, partial_ok},
                       [a, b, f = op.tt](const Placement& p, const std::vector<NdSbp>& l, bool lop) {
                         return doubles(f(build(a, p, l[0], lop), build(b, p, l[1], lop)).full());
                       },
                       [a, b, out, ref = op.ref] {
                         std::vector<double> v(out.numel());
                         for (int64_t g = 0; g < out.numel(); ++g)
                           v[g] = ref(C(a.data()[read_index(a.shape(), out, g)]), C(b.data()[read_index(b.shape(), out, g)]));
                         return v;
                       },
                       out});
    }
    const Tensor<T> a = values<T>(Shape{4, 5}, 3);
    for (bool first : {false, true}) {
      cases.push_back({std::string(op.name) + (first ? " s,x " : " x,s ") + name_of<T>(), {a.shape()}, {partial_ok},
                       [a, s, first, ts = op.ts, st = op.st](const Placement& p, const std::vector<NdSbp>& l, bool lop) {
                         const GlobalTensor<T> x = build(a, p, l[0], lop);
                         return doubles((first ? st(x, s) : ts(x, s)).full());
                       },
                       [a, s, first, ref = op.ref] {
                         std::vector<double> v(a.numel());
                         for (int64_t g = 0; g < a.numel(); ++g) v[g] = first ? ref(s, C(a.data()[g])) : ref(C(a.data()[g]), s);
                         return v;
                       },
                       a.shape()});
    }
  }
}

template <class T>
void add_select_cases(std::vector<Case>& cases) {
  using C = compute_t<T>;
  const bool partial_ok = !std::is_same_v<T, bool>;
  // where: cond (4, 1) broadcast against a (4, 5) and b (5).
  {
    const Tensor<bool> c = values<bool>(Shape{4, 1}, 4);
    const Tensor<T> a = values<T>(Shape{4, 5}, 5), b = values<T>(Shape{5}, 6);
    const Shape out{4, 5};
    cases.push_back({std::string("where ") + name_of<T>(), {c.shape(), a.shape(), b.shape()}, {false, partial_ok, partial_ok},
                     [c, a, b](const Placement& p, const std::vector<NdSbp>& l, bool lop) {
                       return doubles(where(build(c, p, l[0], lop), build(a, p, l[1], lop), build(b, p, l[2], lop)).full());
                     },
                     [c, a, b, out] {
                       std::vector<double> v(out.numel());
                       for (int64_t g = 0; g < out.numel(); ++g)
                         v[g] = static_cast<double>(c.data()[read_index(c.shape(), out, g)] ? a.data()[read_index(a.shape(), out, g)]
                                                                                          : b.data()[read_index(b.shape(), out, g)]);
                       return v;
                     },
                     out});
  }
  for (const C value : {C(0), C(std::is_same_v<T, bool> ? 1 : std::is_integral_v<T> ? 2 : 1.5)}) {
    const Tensor<T> x = values<T>(Shape{4, 5}, 7);
    const Tensor<bool> m = values<bool>(Shape{5}, 8);
    cases.push_back({std::string("masked_fill ") + (value == C(0) ? "0 " : "v ") + name_of<T>(), {x.shape(), m.shape()},
                     {partial_ok, false},
                     [x, m, value](const Placement& p, const std::vector<NdSbp>& l, bool lop) {
                       return doubles(masked_fill(build(x, p, l[0], lop), build(m, p, l[1], lop), value).full());
                     },
                     [x, m, value] {
                       std::vector<double> v(x.numel());
                       for (int64_t g = 0; g < x.numel(); ++g)
                         v[g] = m.data()[read_index(m.shape(), x.shape(), g)] ? static_cast<double>(T(value))
                                                                              : static_cast<double>(x.data()[g]);
                       return v;
                     },
                     x.shape()});
  }
}

template <class T>
void add_arg_cases(std::vector<Case>& cases) {
  const Tensor<T> x = values<T>(Shape{3, 6}, 9);
  for (int64_t axis : {1, -2}) {
    for (bool is_max : {true, false}) {
      const int64_t a = axis < 0 ? axis + 2 : axis;
      const Shape out = a == 1 ? Shape{3} : Shape{6};
      cases.push_back({std::string(is_max ? "argmax " : "argmin ") + std::to_string(axis) + " " + name_of<T>(),
                       {x.shape()}, {true},
                       [x, axis, is_max](const Placement& p, const std::vector<NdSbp>& l, bool lop) {
                         const GlobalTensor<T> t = build(x, p, l[0], lop);
                         return doubles((is_max ? argmax(t, axis) : argmin(t, axis)).full());
                       },
                       [x, a, is_max, out] {
                         std::vector<double> v(out.numel());
                         for (int64_t o = 0; o < out.numel(); ++o) {
                           int64_t best = 0;
                           auto at = [&](int64_t j) { return a == 1 ? x.data()[o * 6 + j] : x.data()[j * 6 + o]; };
                           for (int64_t j = 1; j < x.shape()[a]; ++j)
                             if (is_max ? at(j) > at(best) : at(j) < at(best)) best = j;
                           v[o] = static_cast<double>(best);
                         }
                         return v;
                       },
                       out});
    }
  }
}

void add_logical_and_cast_cases(std::vector<Case>& cases) {
  const Tensor<bool> a = values<bool>(Shape{4, 5}, 10), b = values<bool>(Shape{4, 1}, 11);
  for (int k : {0, 1, 2}) {
    cases.push_back({k == 0 ? "logical_and" : k == 1 ? "logical_or" : "logical_not", {a.shape(), b.shape()}, {false, false},
                     [a, b, k](const Placement& p, const std::vector<NdSbp>& l, bool lop) {
                       const GlobalTensor<bool> x = build(a, p, l[0], lop), y = build(b, p, l[1], lop);
                       return doubles((k == 0 ? (x & y) : k == 1 ? (x | y) : !x).full());
                     },
                     [a, b, k] {
                       std::vector<double> v(a.numel());
                       for (int64_t g = 0; g < a.numel(); ++g) {
                         const bool x = a.data()[g], y = b.data()[read_index(b.shape(), a.shape(), g)];
                         v[g] = k == 0 ? (x && y) : k == 1 ? (x || y) : !x;
                       }
                       return v;
                     },
                     a.shape()});
  }
  // float -> bool (nonzero) -> float (1 or 0).
  const Tensor<float> f = values<float>(Shape{4, 5}, 12);
  cases.push_back({"cast float32 -> bool -> float64", {f.shape()}, {true},
                   [f](const Placement& p, const std::vector<NdSbp>& l, bool lop) {
                     return doubles(cast<double>(cast<bool>(build(f, p, l[0], lop))).full());
                   },
                   [f] {
                     std::vector<double> v(f.numel());
                     for (int64_t g = 0; g < f.numel(); ++g) v[g] = f.data()[g] != 0.0f ? 1.0 : 0.0;
                     return v;
                   },
                   f.shape()});
}

std::string text(const std::vector<double>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 24; ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

void run_case(const Case& c, const Placement& placement, int64_t stride, Failures& failures, CompareSuiteCounts& counts) {
  std::vector<std::vector<NdSbp>> layouts;
  size_t product = 1;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    std::vector<NdSbp> all = all_nd_sbps(placement.mesh().ndim(), c.shapes[i].ndim()), kept;
    for (const NdSbp& nd : all)
      if (c.partial_ok[i] || !nd.has_partial()) kept.push_back(nd);
    layouts.push_back(std::move(kept));
    product *= layouts.back().size();
  }
  const std::vector<double> expected = c.reference();
  const uint64_t phase = splitmix(std::hash<std::string>{}(c.name)) % static_cast<uint64_t>(stride);
  for (size_t index = 0; index < product; ++index) {
    if (index % static_cast<size_t>(stride) != phase) continue;
    std::vector<NdSbp> pick;
    size_t rest = index;
    std::string what = c.name + " (";
    for (size_t i = c.shapes.size(); i-- > 0;) {
      pick.insert(pick.begin(), layouts[i][rest % layouts[i].size()]);
      rest /= layouts[i].size();
    }
    for (size_t i = 0; i < pick.size(); ++i) what += (i ? ", " : "") + pick[i].to_string();
    const bool lopsided = (index / static_cast<size_t>(stride)) % 2 == 1;
    what += ") on " + placement.to_string() + (lopsided ? " [lopsided]" : "");
    try {
      const std::vector<double> got = c.run(placement, pick, lopsided);
      if (!placement.contains(rank())) continue;
      ++counts.cases;
      bool same = got.size() == expected.size();
      for (size_t i = 0; same && i < got.size(); ++i) same = got[i] == expected[i];
      if (!same) failures.add(what + ": got [" + text(got) + "], expected [" + text(expected) + "]");
    } catch (const Error& e) {
      failures.add(what + ": threw " + e.what());
    }
  }
}

}  // namespace

void run_compare_suite(const Placement& placement, int64_t stride, Failures& failures, CompareSuiteCounts& counts) {
  std::vector<Case> cases;
  add_compare_cases<float>(cases);
  add_compare_cases<int64_t>(cases);
  add_compare_cases<bfloat16>(cases);
  add_compare_cases<bool>(cases);
  add_select_cases<float>(cases);
  add_select_cases<double>(cases);
  add_select_cases<int32_t>(cases);
  add_select_cases<float16>(cases);
  add_select_cases<bool>(cases);
  add_arg_cases<float>(cases);
  add_arg_cases<int64_t>(cases);
  add_arg_cases<bfloat16>(cases);
  add_logical_and_cast_cases(cases);
  for (const Case& c : cases) run_case(c, placement, stride, failures, counts);
}

}  // namespace spsd_test
