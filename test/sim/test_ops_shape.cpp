// Shape ops (permute, transpose, reshape, slice, concat) under simulated ranks: every op case on
// meshes {1}, {2}, {3}, {4} and {2, 2} with the input in every NdSbp of the mesh (S(i) per tensor
// axis, B, P(sum), P(max), P(min) per mesh axis), built with from_host from one host tensor, for
// float, double, int32 and int64; full() must equal a plain-loop reference exactly (these ops only
// move data). Then the signatures the resolver picks (zero communication where a split carries
// through), and the errors.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <spsd/op/shape_ops.hpp>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;

namespace {

// Deterministic values, distinct per position and per seed; exact in every element type.
template <class T>
std::vector<T> host_values(const Shape& s, int64_t seed) {
  std::vector<T> v(s.numel());
  for (int64_t g = 0; g < s.numel(); ++g) {
    const int64_t k = (g * 37 + seed * 11 + 5) % 97 - 48;
    v[g] = std::is_floating_point_v<T> ? static_cast<T>(k) + static_cast<T>(0.25) : static_cast<T>(k * 1000 + g);
  }
  return v;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.ndim(), 1);
  for (int64_t i = s.ndim() - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// The multi-index of linear index g in shape s.
std::vector<int64_t> unravel(int64_t g, const Shape& s) {
  std::vector<int64_t> idx(s.ndim());
  for (int64_t i = s.ndim() - 1; i >= 0; --i) {
    idx[i] = g % s[i];
    g /= s[i];
  }
  return idx;
}

// ---- plain-loop references ----

template <class T>
std::vector<T> ref_permute(const std::vector<T>& x, const Shape& xs, const std::vector<int64_t>& perm, Shape& os) {
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(xs[p]);
  os = Shape(dims);
  const std::vector<int64_t> st = strides_of(xs);
  std::vector<T> out(os.numel());
  for (int64_t g = 0; g < os.numel(); ++g) {
    std::vector<int64_t> oi = unravel(g, os);
    int64_t src = 0;
    for (size_t i = 0; i < perm.size(); ++i) src += oi[i] * st[perm[i]];
    out[g] = x[src];
  }
  return out;
}

template <class T>
std::vector<T> ref_slice(const std::vector<T>& x, const Shape& xs, int64_t axis, int64_t begin, int64_t end,
                         Shape& os) {
  std::vector<int64_t> dims = xs.dims();
  dims[axis] = end - begin;
  os = Shape(dims);
  const std::vector<int64_t> st = strides_of(xs);
  std::vector<T> out(os.numel());
  for (int64_t g = 0; g < os.numel(); ++g) {
    std::vector<int64_t> oi = unravel(g, os);
    oi[axis] += begin;
    int64_t src = 0;
    for (int64_t i = 0; i < xs.ndim(); ++i) src += oi[i] * st[i];
    out[g] = x[src];
  }
  return out;
}

template <class T>
std::vector<T> ref_concat(const std::vector<std::vector<T>>& xs, const std::vector<Shape>& shapes, int64_t axis,
                          Shape& os) {
  std::vector<int64_t> dims = shapes[0].dims();
  dims[axis] = 0;
  for (const Shape& s : shapes) dims[axis] += s[axis];
  os = Shape(dims);
  std::vector<T> out(os.numel());
  for (int64_t g = 0; g < os.numel(); ++g) {
    std::vector<int64_t> oi = unravel(g, os);
    size_t k = 0;
    while (oi[axis] >= shapes[k][axis]) oi[axis] -= shapes[k++][axis];
    const std::vector<int64_t> st = strides_of(shapes[k]);
    int64_t src = 0;
    for (int64_t i = 0; i < os.ndim(); ++i) src += oi[i] * st[i];
    out[g] = xs[k][src];
  }
  return out;
}

// ---- op cases ----

// One op applied to global inputs, and its reference on host vectors (fills the output shape).
template <class T>
struct OpCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<GlobalTensor<T>(const std::vector<GlobalTensor<T>>&)> op;
  std::function<std::vector<T>(const std::vector<std::vector<T>>&, Shape&)> ref;
};

template <class T>
std::vector<OpCase<T>> op_cases() {
  using V = std::vector<std::vector<T>>;
  using G = std::vector<GlobalTensor<T>>;
  std::vector<OpCase<T>> c;
  auto permute_case = [&](std::string name, Shape s, std::vector<int64_t> perm, std::vector<int64_t> norm) {
    c.push_back({name, {s}, [perm](const G& x) { return spsd::permute(x[0], perm); },
                 [s, norm](const V& x, Shape& os) { return ref_permute(x[0], s, norm, os); }});
  };
  permute_case("permute (5, 3, 2) [2, 0, 1]", Shape{5, 3, 2}, {2, 0, 1}, {2, 0, 1});
  permute_case("permute (5, 3, 2) [-2, -1, 0]", Shape{5, 3, 2}, {-2, -1, 0}, {1, 2, 0});
  permute_case("permute (3, 0, 2) [2, 1, 0]", Shape{3, 0, 2}, {2, 1, 0}, {2, 1, 0});
  c.push_back({"transpose (7, 3) 0 1", {Shape{7, 3}}, [](const G& x) { return spsd::transpose(x[0], 0, 1); },
               [](const V& x, Shape& os) { return ref_permute(x[0], Shape{7, 3}, {1, 0}, os); }});
  c.push_back({"transpose (2, 5, 3) -1 0", {Shape{2, 5, 3}}, [](const G& x) { return spsd::transpose(x[0], -1, 0); },
               [](const V& x, Shape& os) { return ref_permute(x[0], Shape{2, 5, 3}, {2, 1, 0}, os); }});

  auto reshape_case = [&](std::string name, Shape s, std::vector<int64_t> to, Shape expect) {
    c.push_back({name, {s}, [to](const G& x) { return spsd::reshape(x[0], to); },
                 [expect](const V& x, Shape& os) {
                   os = expect;
                   return x[0];
                 }});
  };
  reshape_case("reshape (6, 4) -> (24)", Shape{6, 4}, {24}, Shape{24});
  reshape_case("reshape (6, 4) -> (6, 2, 2)", Shape{6, 4}, {6, 2, 2}, Shape{6, 2, 2});
  reshape_case("reshape (6, 4) -> (4, -1)", Shape{6, 4}, {4, -1}, Shape{4, 6});
  reshape_case("reshape (5, 3, 2) -> (15, 2)", Shape{5, 3, 2}, {15, 2}, Shape{15, 2});
  reshape_case("reshape (5, 3, 2) -> (5, 1, 6)", Shape{5, 3, 2}, {5, 1, 6}, Shape{5, 1, 6});
  reshape_case("reshape (7) -> (7, 1)", Shape{7}, {7, 1}, Shape{7, 1});
  reshape_case("reshape (1, 1) -> ()", Shape{1, 1}, {}, Shape());
  reshape_case("reshape (0, 4) -> (2, 0, 2)", Shape{0, 4}, {2, 0, 2}, Shape{2, 0, 2});
  // The Shape form (no -1).
  c.push_back({"reshape (3, 8) -> Shape (3, 2, 4)", {Shape{3, 8}},
               [](const G& x) { return spsd::reshape(x[0], Shape{3, 2, 4}); },
               [](const V& x, Shape& os) {
                 os = Shape{3, 2, 4};
                 return x[0];
               }});

  auto slice_case = [&](std::string name, Shape s, int64_t axis, int64_t b, int64_t e) {
    const int64_t norm = axis < 0 ? axis + s.ndim() : axis;
    c.push_back({name, {s}, [axis, b, e](const G& x) { return spsd::slice(x[0], axis, b, e); },
                 [s, norm, b, e](const V& x, Shape& os) { return ref_slice(x[0], s, norm, b, e, os); }});
  };
  slice_case("slice (5, 3, 2) axis 0 [1, 4)", Shape{5, 3, 2}, 0, 1, 4);
  slice_case("slice (5, 3, 2) axis -1 [1, 2)", Shape{5, 3, 2}, -1, 1, 2);
  slice_case("slice (5, 3, 2) axis 1 [2, 2)", Shape{5, 3, 2}, 1, 2, 2);
  slice_case("slice (7, 3) axis 1 [0, 3)", Shape{7, 3}, 1, 0, 3);

  auto concat_case = [&](std::string name, std::vector<Shape> shapes, int64_t axis) {
    const int64_t norm = axis < 0 ? axis + shapes[0].ndim() : axis;
    c.push_back({name, shapes, [axis](const G& x) { return spsd::concat(x, axis); },
                 [shapes, norm](const V& x, Shape& os) { return ref_concat(x, shapes, norm, os); }});
  };
  concat_case("concat (2, 3) (5, 3) (1, 3) axis 0", {Shape{2, 3}, Shape{5, 3}, Shape{1, 3}}, 0);
  concat_case("concat (3, 2, 1) (3, 2, 4) axis -1", {Shape{3, 2, 1}, Shape{3, 2, 4}}, -1);
  concat_case("concat (5, 2) (5, 0) (5, 3) axis 1", {Shape{5, 2}, Shape{5, 0}, Shape{5, 3}}, 1);
  concat_case("concat (0, 3) (3, 3) axis 0", {Shape{0, 3}, Shape{3, 3}}, 0);
  concat_case("concat (4, 3) alone axis 1", {Shape{4, 3}}, 1);
  return c;
}

// Runs every op case of element type T on this rank. Input 0 takes every layout of the mesh;
// further inputs (concat) take it too in one pass and a different layout (index (i * (k + 2) +
// k) mod count for input k) in a second. Case i of an op case runs when i % stride == phase
// (phase: the op case's index mod stride). Counts the cases run.
template <class T>
void run_cases(const Placement& p, int64_t stride, Failures& f, int64_t& count) {
  const std::vector<OpCase<T>> cases = op_cases<T>();
  const std::string tname(to_string(dtype_of<T>));
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const OpCase<T>& c = cases[ci];
    const size_t n_in = c.shapes.size();
    std::vector<std::vector<T>> host;
    std::vector<Tensor<T>> wholes;
    for (size_t k = 0; k < n_in; ++k) {
      host.push_back(host_values<T>(c.shapes[k], static_cast<int64_t>(k)));
      wholes.push_back(Tensor<T>::from_vector(c.shapes[k], host.back()));
    }
    Shape expected_shape;
    const std::vector<T> expected = c.ref(host, expected_shape);
    const std::vector<NdSbp> layouts = spsd_test::all_nd_sbps(p.mesh().ndim(), c.shapes[0].ndim());
    const size_t L = layouts.size();
    const int passes = n_in > 1 ? 2 : 1;
    int64_t i = -1;
    for (int pass = 0; pass < passes; ++pass) {
      for (size_t li = 0; li < L; ++li) {
        if (++i % stride != static_cast<int64_t>(ci) % stride) continue;
        std::vector<NdSbp> in_layouts;
        for (size_t k = 0; k < n_in; ++k) in_layouts.push_back(layouts[pass == 0 ? li : (li * (k + 2) + k) % L]);
        std::string what = c.name + " " + tname + " on " + p.mesh().to_string() + " inputs";
        for (const NdSbp& l : in_layouts) what += " " + l.to_string();
        try {
          std::vector<GlobalTensor<T>> xs;
          for (size_t k = 0; k < n_in; ++k) xs.push_back(spsd::from_host(wholes[k], p, in_layouts[k]));
          GlobalTensor<T> y = c.op(xs);
          Tensor<T> got = y.full();
          if (!(y.shape() == expected_shape) || !(got.shape() == expected_shape)) {
            f.add(what + ": shape " + y.shape().to_string() + " (full " + got.shape().to_string() + "), expected " +
                  expected_shape.to_string());
          } else {
            spsd_test::expect_elements(f, what + " -> " + y.nd_sbp().to_string(), got.data(), expected);
          }
          if (!(y.to_local().shape() == box_of(y.shape(), p, y.nd_sbp(), spsd::rank()).shape()))
            f.add(what + ": local shape " + y.to_local().shape().to_string() + " is not the box of " +
                  y.nd_sbp().to_string());
        } catch (const std::exception& e) {
          f.add(what + ": threw " + e.what());
        }
        ++count;
      }
    }
  }
}

void run_differential(const Shape& mesh, int64_t other_stride) {
  Placement p = mesh_placement(mesh);
  const int n = static_cast<int>(p.size());
  std::vector<int64_t> counts(n, 0);
  auto start = std::chrono::steady_clock::now();
  Failures f = spsd_test::on_simulated_ranks(n, [&](Failures& mine) {
    int64_t& c = counts[spsd::rank()];
    run_cases<float>(p, 1, mine, c);
    run_cases<double>(p, other_stride, mine, c);
    run_cases<int32_t>(p, other_stride, mine, c);
    run_cases<int64_t>(p, other_stride, mine, c);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("shape ops on mesh %s: %lld cases (float: every layout; double/int32/int64: 1 in %lld), %.2f s\n",
              mesh.to_string().c_str(), static_cast<long long>(counts[0]), static_cast<long long>(other_stride),
              seconds);
  std::fflush(stdout);
  INFO("mesh " << mesh << "\n" << f.report());
  CHECK(f.empty());
  CHECK(counts[0] > 0);
}

// Runs body on the ranks of mesh; reports what rank 0 returns (a description of what was wrong,
// "" when nothing was).
std::string on_mesh(const Shape& mesh, const std::function<std::string(const Placement&)>& body) {
  Placement p = mesh_placement(mesh);
  std::vector<std::string> out(p.size());
  spsd::simulate(static_cast<int>(p.size()), [&] {
    try {
      out[spsd::rank()] = body(p);
    } catch (const std::exception& e) {
      out[spsd::rank()] = std::string("threw ") + e.what();
    }
  });
  std::string all;
  for (size_t r = 0; r < out.size(); ++r)
    if (!out[r].empty()) all += "rank " + std::to_string(r) + ": " + out[r] + "\n";
  return all;
}

// y's layout must be `layout`, y must equal expected, and this rank's bytes since the reset must
// be zero (or non-zero when !zero_bytes).
template <class T>
std::string expect_layout_and_bytes(const GlobalTensor<T>& y, const NdSbp& layout, bool zero_bytes,
                                    const std::vector<T>& expected) {
  CommStats s = spsd::comm_stats();  // before full(), which communicates
  std::string err;
  if (!(y.nd_sbp() == layout)) err += "layout " + y.nd_sbp().to_string() + ", expected " + layout.to_string() + "; ";
  const bool zero = s.bytes_sent == 0 && s.bytes_received == 0;
  if (zero != zero_bytes)
    err += "sent " + std::to_string(s.bytes_sent) + " B, received " + std::to_string(s.bytes_received) + " B; ";
  std::vector<T> got = y.full().to_vector();
  if (got != expected) err += "values differ; ";
  return err;
}

}  // namespace

TEST_CASE("shape ops differential: meshes {1}, {2}, {3}, {4}", "[ops-shape]") {
  for (int64_t n : {1, 2, 3, 4}) run_differential(Shape{n}, 1);
}

TEST_CASE("shape ops differential: mesh {2, 2}", "[ops-shape]") { run_differential(Shape{2, 2}, 3); }

TEST_CASE("reshape carries a split with no communication where it is exact, and boxes where not", "[ops-shape]") {
  const std::vector<float> v = host_values<float>(Shape{6, 4}, 0);
  auto x_of = [&](const Placement& p, const NdSbp& l) {
    return spsd::from_host(Tensor<float>::from_vector(Shape{6, 4}, v), p, l);
  };
  // (6, 4) -> (24,) S(0): 2 or 3 ranks split 6 rows and 24 elements alike.
  for (int64_t n : {2, 3}) {
    INFO("ranks " << n);
    CHECK(on_mesh(Shape{n}, [&](const Placement& p) {
            auto x = x_of(p, sbp::split(0));
            spsd::reset_comm_stats();
            return expect_layout_and_bytes(spsd::reshape(x, {24}), sbp::split(0), true, v);
          }) == "");
  }
  // On 4 ranks rows split 2, 2, 1, 1 (8, 8, 4, 4 elements) and 24 elements 6 each: no split
  // signature is exact, the input is gathered (B).
  CHECK(on_mesh(Shape{4}, [&](const Placement& p) {
          auto x = x_of(p, sbp::split(0));
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::reshape(x, {24}), sbp::broadcast, false, v);
        }) == "");
  // (6, 4) -> (6, 2, 2) S(1): columns [0, 2) and [2, 4) are axis 1's [0, 1) and [1, 2).
  CHECK(on_mesh(Shape{2}, [&](const Placement& p) {
          auto x = x_of(p, sbp::split(1));
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::reshape(x, {6, 2, 2}), sbp::split(1), true, v);
        }) == "");
  // ... but not on 4 ranks (columns 1 each; axis 1 of size 2 cannot split 4 ways alike).
  CHECK(on_mesh(Shape{4}, [&](const Placement& p) {
          auto x = x_of(p, sbp::split(1));
          spsd::reset_comm_stats();
          auto y = spsd::reshape(x, {6, 2, 2});
          return y.nd_sbp() == NdSbp(sbp::split(1)) ? std::string("S(1) -> S(1) taken on 4 ranks") : std::string();
        }) == "");
  // P(sum) stays P(sum), no communication.
  CHECK(on_mesh(Shape{3}, [&](const Placement& p) {
          auto x = x_of(p, sbp::partial_sum);
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::reshape(x, {2, 12}), sbp::partial_sum, true, v);
        }) == "");
  // 2-d mesh: (8, 4) -> (32,) with (S(0), S(0)) nests 8 rows as 2 per rank and 32 as 8.
  const std::vector<float> w = host_values<float>(Shape{8, 4}, 1);
  CHECK(on_mesh(Shape{2, 2}, [&](const Placement& p) {
          auto x = spsd::from_host(Tensor<float>::from_vector(Shape{8, 4}, w), p, NdSbp{sbp::split(0), sbp::split(0)});
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::reshape(x, {32}), NdSbp{sbp::split(0), sbp::split(0)}, true, w);
        }) == "");
  // 2 x 3 mesh: (2, 3, 4) -> (6, 4) with (S(0), S(1)) is (S(0), S(0)): the pieces are rows of 4.
  const std::vector<float> u = host_values<float>(Shape{2, 3, 4}, 2);
  CHECK(on_mesh(Shape{2, 3}, [&](const Placement& p) {
          auto x = spsd::from_host(Tensor<float>::from_vector(Shape{2, 3, 4}, u), p, NdSbp{sbp::split(0), sbp::split(1)});
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::reshape(x, {6, 4}), NdSbp{sbp::split(0), sbp::split(0)}, true, u);
        }) == "");
}

TEST_CASE("permute, slice and concat keep splits and partials with no communication", "[ops-shape]") {
  const Shape s{5, 3, 2};
  const std::vector<int64_t> v = host_values<int64_t>(s, 0);
  auto x_of = [&](const Placement& p, const NdSbp& l) { return spsd::from_host(Tensor<int64_t>::from_vector(s, v), p, l); };
  Shape ps;
  const std::vector<int64_t> pv = ref_permute(v, s, {2, 0, 1}, ps);
  // S(0) -> S(1): axis 0 is the output's axis 1.
  for (int64_t n : {2, 3, 4}) {
    INFO("ranks " << n);
    CHECK(on_mesh(Shape{n}, [&](const Placement& p) {
            auto x = x_of(p, sbp::split(0));
            spsd::reset_comm_stats();
            return expect_layout_and_bytes(spsd::permute(x, {2, 0, 1}), sbp::split(1), true, pv);
          }) == "");
  }
  CHECK(on_mesh(Shape{2, 2}, [&](const Placement& p) {
          auto x = x_of(p, NdSbp{sbp::split(0), sbp::split(2)});
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::permute(x, {2, 0, 1}), NdSbp{sbp::split(1), sbp::split(0)}, true, pv);
        }) == "");
  CHECK(on_mesh(Shape{2, 2}, [&](const Placement& p) {
          auto x = x_of(p, NdSbp{sbp::partial_max, sbp::split(1)});
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::permute(x, {2, 0, 1}), NdSbp{sbp::partial_max, sbp::split(2)}, true,
                                         pv);
        }) == "");
  // transpose of S(1) on (5, 3, 2) swapping 1 and 2 -> S(2).
  Shape ts;
  const std::vector<int64_t> tv = ref_permute(v, s, {0, 2, 1}, ts);
  CHECK(on_mesh(Shape{3}, [&](const Placement& p) {
          auto x = x_of(p, sbp::split(1));
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::transpose(x, 1, -1), sbp::split(2), true, tv);
        }) == "");
  // slice along axis 0 of S(1) and of P(min): no communication; of S(0): boxed.
  Shape ss;
  const std::vector<int64_t> sv = ref_slice(v, s, 0, 1, 4, ss);
  CHECK(on_mesh(Shape{2, 2}, [&](const Placement& p) {
          auto x = x_of(p, NdSbp{sbp::split(1), sbp::partial_min});
          spsd::reset_comm_stats();
          return expect_layout_and_bytes(spsd::slice(x, 0, 1, 4), NdSbp{sbp::split(1), sbp::partial_min}, true, sv);
        }) == "");
  CHECK(on_mesh(Shape{4}, [&](const Placement& p) {
          auto x = x_of(p, sbp::split(0));
          spsd::reset_comm_stats();
          auto y = spsd::slice(x, 0, 1, 4);
          std::string err = y.nd_sbp()[0].is_split() && y.nd_sbp()[0].axis() == 0 ? "kept S(0)" : "";
          return err + (y.full().to_vector() == sv ? "" : " values differ");
        }) == "");
  // concat along axis 1 of S(0) inputs and of P(sum) inputs.
  const Shape s2{5, 4, 2};
  const std::vector<int64_t> v2 = host_values<int64_t>(s2, 1);
  Shape cs;
  const std::vector<int64_t> cv = ref_concat<int64_t>({v, v2}, {s, s2}, 1, cs);
  for (const Sbp& l : {sbp::split(0), sbp::split(2), sbp::partial_sum}) {
    INFO("layout " << l.to_string());
    CHECK(on_mesh(Shape{3}, [&](const Placement& p) {
            auto a = x_of(p, l);
            auto b = spsd::from_host(Tensor<int64_t>::from_vector(s2, v2), p, l);
            spsd::reset_comm_stats();
            return expect_layout_and_bytes(spsd::concat({a, b}, 1), l, true, cv);
          }) == "");
  }
}

TEST_CASE("shape ops: invalid arguments give errors naming the op and the values", "[ops-shape]") {
  struct Bad {
    std::function<void(const Placement&)> call;
    std::vector<std::string> contains;
  };
  auto x = [](const Placement& p) { return spsd::zeros<float>(Shape{6, 4}, p, sbp::split(0)); };
  const std::vector<Bad> bad = {
      {[&](const Placement& p) { spsd::permute(x(p), {0, 0}); }, {"permute", "[0, 0]", "(6, 4)"}},
      {[&](const Placement& p) { spsd::permute(x(p), {1, 0, 2}); }, {"permute", "[1, 0, 2]", "(6, 4)"}},
      {[&](const Placement& p) { spsd::permute(x(p), {0, 2}); }, {"permute", "[0, 2]"}},
      {[&](const Placement& p) { spsd::transpose(x(p), 0, 2); }, {"transpose", "2", "(6, 4)"}},
      {[&](const Placement& p) { spsd::transpose(x(p), -3, 1); }, {"transpose", "-3", "(6, 4)"}},
      {[&](const Placement& p) { spsd::reshape(x(p), Shape{5, 5}); }, {"reshape", "(6, 4)", "[5, 5]", "25"}},
      {[&](const Placement& p) { spsd::reshape(x(p), {-1, -1}); }, {"reshape", "[-1, -1]", "more than one -1"}},
      {[&](const Placement& p) { spsd::reshape(x(p), {5, -1}); }, {"reshape", "[5, -1]", "24"}},
      {[&](const Placement& p) { spsd::reshape(x(p), {-2, 12}); }, {"reshape", "[-2, 12]", "-2"}},
      // 3 * 6148914691236517206 * 4 wraps around int64 to 8: an overflow, not a valid shape.
      {[&](const Placement& p) { spsd::reshape(x(p), {3, 6148914691236517206, 4}); },
       {"reshape", "[3, 6148914691236517206, 4]", "2^63 - 1"}},
      {[&](const Placement& p) { spsd::reshape(x(p), {3, 6148914691236517206, -1}); },
       {"reshape", "[3, 6148914691236517206, -1]", "2^63 - 1"}},
      {[&](const Placement& p) { spsd::slice(x(p), 0, 3, 2); }, {"slice", "[3, 2)", "(6, 4)"}},
      {[&](const Placement& p) { spsd::slice(x(p), 1, 0, 5); }, {"slice", "[0, 5)", "(6, 4)"}},
      {[&](const Placement& p) { spsd::slice(x(p), 1, -1, 2); }, {"slice", "[-1, 2)"}},
      {[&](const Placement& p) { spsd::slice(x(p), 2, 0, 1); }, {"slice", "axis 2", "(6, 4)"}},
      {[&](const Placement& p) { spsd::concat({x(p), spsd::zeros<float>(Shape{6, 3}, p, sbp::broadcast)}, 0); },
       {"concat", "input 1", "(6, 3)", "(6, 4)", "axis 1"}},
      {[&](const Placement& p) { spsd::concat({x(p), spsd::zeros<float>(Shape{6}, p, sbp::broadcast)}, 0); },
       {"concat", "input 1", "(6,)"}},
      {[&](const Placement& p) { spsd::concat({x(p), x(p)}, 2); }, {"concat", "axis 2", "(6, 4)"}},
      {[&](const Placement&) { spsd::concat(std::vector<GlobalTensor<float>>{}, 0); }, {"concat", "at least one"}},
      {[&](const Placement& p) {
         spsd::concat({x(p), x(p), spsd::zeros<float>(Shape{6, 4}, Placement("cpu", {1, 0}), sbp::split(0))}, 0);
       },
       {"concat", "input 2", "ranks=[1, 0]"}},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    std::vector<std::string> errors =
        spsd_test::errors_by_rank(2, [&] { bad[i].call(Placement("cpu", {0, 1})); });
    for (int r = 0; r < 2; ++r) {
      INFO("case " << i << ", rank " << r << ": " << errors[r]);
      CHECK(!errors[r].empty());
      for (const std::string& c : bad[i].contains) CHECK_THAT(errors[r], Catch::Contains(c));
    }
  }
}

TEST_CASE("shape ops on a placement that leaves a rank out", "[ops-shape]") {
  // 3 ranks, placement {2, 1}: rank 0 takes no part and gets empty components.
  const Shape s{5, 4};
  const std::vector<double> v = host_values<double>(s, 3);
  std::vector<std::string> errs(3);
  spsd::simulate(3, [&] {
    std::string& err = errs[spsd::rank()];
    try {
      Placement p("cpu", {2, 1});
      auto x = spsd::from_host(Tensor<double>::from_vector(s, v), p, sbp::split(0));
      auto ys = {spsd::permute(x, {1, 0}), spsd::reshape(x, {2, 10}), spsd::slice(x, 1, 1, 3),
                 spsd::concat({x, x}, 0), spsd::transpose(x, 0, 1)};
      Shape ps, ss, cs;
      const std::vector<std::vector<double>> expected = {ref_permute(v, s, {1, 0}, ps), v, ref_slice(v, s, 1, 1, 3, ss),
                                                         ref_concat<double>({v, v}, {s, s}, 0, cs),
                                                         ref_permute(v, s, {1, 0}, ps)};
      size_t k = 0;
      for (const auto& y : ys) {
        if (spsd::rank() == 0) {
          if (y.to_local().numel() != 0) err += "output " + std::to_string(k) + " has a component on rank 0; ";
        } else if (y.full().to_vector() != expected[k]) {
          err += "output " + std::to_string(k) + " differs; ";
        }
        ++k;
      }
    } catch (const std::exception& e) {
      err += std::string("threw ") + e.what();
    }
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(errs[r] == "");
  }
}
