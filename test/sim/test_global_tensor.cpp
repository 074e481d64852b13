// GlobalTensor, factories, local -> global, random tensors, plans and the error catalogue of
// issue 3, under simulated ranks.
#include <catch2/catch.hpp>
#include <cmath>

#include "boxing_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {
// Every layout of a mesh for a tensor of ndim axes, on ranks 0..mesh.numel()-1.
std::vector<Layout> layouts_of(const Shape& mesh, int64_t ndim) {
  std::vector<int64_t> ranks(mesh.numel());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int64_t>(i);
  Placement p("cpu", ranks, mesh);
  std::vector<Layout> out;
  for (const NdSbp& nd : spsd_test::all_nd_sbps(mesh.ndim(), ndim)) out.push_back({p, nd});
  return out;
}
}  // namespace

TEST_CASE("factories: full() of every layout equals the single-process tensor", "[global][factory]") {
  const Shape shape{5, 3};
  for (const Shape& mesh : {Shape{1}, Shape{3}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      for (const Layout& l : layouts_of(mesh, 2)) {
        std::string what = " in " + l.to_string();
        spsd_test::expect_elements(mine, "zeros" + what, zeros<int64_t>(shape, l.placement, l.nd_sbp).full().data(),
                                   std::vector<int64_t>(15, 0));
        spsd_test::expect_elements(mine, "ones" + what, ones<double>(shape, l.placement, l.nd_sbp).full().data(),
                                   std::vector<double>(15, 1.0));
        spsd_test::expect_elements(mine, "full" + what, full<int32_t>(shape, -7, l.placement, l.nd_sbp).full().data(),
                                   std::vector<int32_t>(15, -7));
        Tensor<float> whole = spsd_test::reference_tensor<float>(shape);
        spsd_test::expect_elements(mine, "from_host" + what, from_host(whole, l.placement, l.nd_sbp).full().data(),
                                   whole.to_vector());
      }
      for (const Layout& l : layouts_of(mesh, 1)) {
        std::vector<int64_t> expected(11);
        for (int64_t i = 0; i < 11; ++i) expected[i] = i;
        spsd_test::expect_elements(mine, "arange in " + l.to_string(), arange<int64_t>(11, l.placement, l.nd_sbp).full().data(),
                                   expected);
      }
    });
    INFO(f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("randn and rand are the same for every layout and world size", "[global][random]") {
  const Shape shape{6, 5};
  std::vector<double> normal, uniform;
  spsd::simulate(1, [&] {
    Placement p("cpu", {0});
    normal = randn<double>(shape, p, sbp::broadcast, 42).full().to_vector();
    uniform = rand<double>(shape, p, sbp::broadcast, 42).full().to_vector();
  });
  std::vector<float> normal_f;
  spsd::simulate(1, [&] { normal_f = randn<float>(shape, Placement("cpu", {0}), sbp::broadcast, 42).full().to_vector(); });
  for (const Shape& mesh : {Shape{1}, Shape{2}, Shape{3}, Shape{4}, Shape{8}, Shape{2, 2}, Shape{2, 2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      for (const Layout& l : layouts_of(mesh, 2)) {
        spsd_test::expect_elements(mine, "randn " + l.to_string(), randn<double>(shape, l.placement, l.nd_sbp, 42).full().data(), normal);
        spsd_test::expect_elements(mine, "rand " + l.to_string(), rand<double>(shape, l.placement, l.nd_sbp, 42).full().data(), uniform);
        spsd_test::expect_elements(mine, "randn<float> " + l.to_string(),
                                   randn<float>(shape, l.placement, l.nd_sbp, 42).full().data(), normal_f);
      }
    });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
  // Another seed gives other values.
  std::vector<double> other;
  spsd::simulate(1, [&] { other = randn<double>(shape, Placement("cpu", {0}), sbp::broadcast, 43).full().to_vector(); });
  CHECK(other != normal);
}

TEST_CASE("randn and rand statistics on 1M samples", "[global][random]") {
  std::vector<double> normal, uniform;
  spsd::simulate(4, [&] {
    Placement p("cpu", {0, 1, 2, 3});
    auto n = randn<double>({1000, 1000}, p, sbp::split(0), 7).full();
    auto u = rand<double>({1000, 1000}, p, sbp::split(1), 7).full();
    if (rank() == 0) normal = n.to_vector(), uniform = u.to_vector();
  });
  auto moments = [](const std::vector<double>& v) {
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    for (double x : v) var += (x - mean) * (x - mean);
    return std::pair{mean, var / static_cast<double>(v.size())};
  };
  auto [nm, nv] = moments(normal);
  auto [um, uv] = moments(uniform);
  // Standard errors on 1e6 samples: mean 1e-3, variance ~1.4e-3 (normal); 5 sigma bounds.
  CHECK(std::abs(nm) < 5e-3);
  CHECK(std::abs(nv - 1.0) < 7e-3);
  CHECK(std::abs(um - 0.5) < 1.5e-3);
  CHECK(std::abs(uv - 1.0 / 12.0) < 5e-4);
  CHECK(*std::min_element(uniform.begin(), uniform.end()) >= 0.0);
  CHECK(*std::max_element(uniform.begin(), uniform.end()) < 1.0);
}

TEST_CASE("to_global from local components infers the global shape", "[global]") {
  // Uneven and nested: (S(0), S(0)) of 7 rows on 2x2 gives 2, 2, 2, 1 rows.
  Failures f = spsd_test::on_simulated_ranks(4, [&](Failures& mine) {
    Placement grid("cpu", {{0, 1}, {2, 3}});
    for (const NdSbp& nd : {NdSbp{sbp::split(0), sbp::split(0)}, NdSbp{sbp::split(0), sbp::split(1)},
                            NdSbp{sbp::broadcast, sbp::split(1)}, NdSbp{sbp::partial_sum, sbp::split(0)}}) {
      Shape global{7, 5};
      Shape mine_shape = box_of(global, grid, nd, rank()).shape();
      GlobalTensor<float> g = to_global(Tensor<float>(mine_shape), grid, nd);
      if (!(g.shape() == global)) mine.add("inferred " + g.shape().to_string() + " for " + nd.to_string());
      GlobalTensor<float> h = to_global(Tensor<float>(mine_shape), grid, nd, global);
      if (!(h.to_local().shape() == mine_shape)) mine.add("given shape: local changed for " + nd.to_string());
    }
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("ranks outside both placements are not involved", "[global][boxing]") {
  Failures f = spsd_test::on_simulated_ranks(5, [&](Failures& mine) {
    if (rank() == 4) {
      reset_comm_stats();
      // Rank 4 runs the same program but no communication waits for it (it never calls).
      auto x = arange<int64_t>(10, Placement("cpu", {0, 1}), sbp::split(0));
      auto y = x.to_global(Placement("cpu", {2, 3}), sbp::broadcast);
      if (x.to_local().defined() || y.to_local().defined()) mine.add("rank 4 holds data");
      if (comm_stats().collectives != 0) mine.add("rank 4 communicated");
      return;
    }
    auto x = arange<int64_t>(10, Placement("cpu", {0, 1}), sbp::split(0));
    auto y = x.to_global(Placement("cpu", {2, 3}), sbp::broadcast);
    if (rank() >= 2) {
      std::vector<int64_t> expected(10);
      for (int64_t i = 0; i < 10; ++i) expected[i] = i;
      spsd_test::expect_elements(mine, "moved", y.to_local().data(), expected);
    } else if (y.to_local().defined()) {
      mine.add("a source rank outside the target kept data");
    }
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("plans: cached, printable, and a 2x2 (S(0), S(1)) -> (B, B) gathers along both axes", "[boxing][plan]") {
  Placement grid("cpu", {{0, 1}, {2, 3}});
  auto a = plan_boxing(Shape{8, 8}, DType::kFloat32, {grid, {sbp::split(0), sbp::split(1)}}, {grid, {sbp::broadcast, sbp::broadcast}});
  auto b = plan_boxing(Shape{8, 8}, DType::kFloat32, {grid, {sbp::split(0), sbp::split(1)}}, {grid, {sbp::broadcast, sbp::broadcast}});
  CHECK(a == b);
  REQUIRE(a->steps.size() == 2);
  for (const Step& s : a->steps) CHECK(s.kind == StepKind::kAllGather);
  // Each rank receives the 48 of 64 floats it lacks, once.
  for (int64_t r = 0; r < 4; ++r) CHECK(a->bytes_received(r) == 48 * 4);
  std::string text = explain_boxing(Shape{8, 8}, DType::kFloat32, grid, {sbp::split(0), sbp::split(1)}, grid,
                                    {sbp::broadcast, sbp::broadcast});
  CHECK_THAT(text, Catch::Contains("all_gather along mesh axis") && Catch::Contains("r0 ") && Catch::Contains("predicted cost"));
  // P -> S(0) on one axis is a reduce-scatter; P -> B an all-reduce.
  Placement line("cpu", {0, 1, 2, 3});
  CHECK(plan_boxing(Shape{8}, DType::kFloat32, {line, sbp::partial_sum}, {line, sbp::split(0)})->steps.at(0).kind ==
        StepKind::kReduceScatter);
  CHECK(plan_boxing(Shape{8}, DType::kFloat32, {line, sbp::partial_max}, {line, sbp::broadcast})->steps.at(0).kind ==
        StepKind::kAllReduce);
  // Empty plan for equal layouts.
  CHECK(plan_boxing(Shape{8}, DType::kFloat32, {line, sbp::split(0)}, {line, sbp::split(0)})->steps.empty());
}

// The search numbers a layout by one digit per mesh axis in an int64: 26 axes of size 1 still
// fit for a 1-d tensor (5 Sbps each), 30 do not and say so instead of overflowing.
TEST_CASE("plans: meshes of many axes plan, or name what is too big", "[boxing][plan]") {
  auto mesh_of = [](size_t axes) { return Placement("cpu", {0}, Shape(std::vector<int64_t>(axes, 1))); };
  auto nd = [](size_t axes, Sbp last) {
    std::vector<Sbp> v(axes, sbp::broadcast);
    v.back() = last;
    return NdSbp(v);
  };
  Placement deep = mesh_of(26);
  auto plan = plan_boxing(Shape{8}, DType::kFloat32, {deep, nd(26, sbp::broadcast)}, {deep, nd(26, sbp::split(0))});
  REQUIRE(plan->steps.size() == 1);
  CHECK(plan->steps[0].kind == StepKind::kLocal);
  Placement deeper = mesh_of(30);
  CHECK_THROWS_WITH(plan_boxing(Shape{8}, DType::kFloat32, {deeper, nd(30, sbp::broadcast)}, {deeper, nd(30, sbp::split(0))}),
                    Catch::Contains("boxing") && Catch::Contains("30 axes") && Catch::Contains("too many layouts"));
}

TEST_CASE("plans: the cache tells apart every part of the conversion", "[boxing][plan]") {
  const Placement line("cpu", {0, 1, 2, 3}), grid("cpu", {{0, 1}, {2, 3}}), reordered("cpu", {1, 0, 2, 3});
  const NdSbp s0(sbp::split(0)), b(sbp::broadcast);
  auto base = plan_boxing(Shape{8, 4}, DType::kFloat32, line, s0, line, b);
  CHECK(base == plan_boxing(Shape{8, 4}, DType::kFloat32, {line, s0}, {line, b}));  // both forms, one entry
  REQUIRE(base->identity != nullptr);
  CHECK(base->identity->description == "to_global((8, 4) float32 from (S(0)) on " + line.to_string() + " to (B) on " +
                                           line.to_string() + ")");
  // Each differs from base in one part; none may come back as base's plan.
  const std::vector<std::shared_ptr<const Plan>> others = {
      plan_boxing(Shape{4, 8}, DType::kFloat32, line, s0, line, b),                  // the shape
      plan_boxing(Shape{8, 4}, DType::kFloat64, line, s0, line, b),                  // the dtype
      plan_boxing(Shape{8, 4}, DType::kFloat32, reordered, s0, line, b),             // the source's rank order
      plan_boxing(Shape{8, 4}, DType::kFloat32, line, s0, reordered, b),             // the target's rank order
      plan_boxing(Shape{8, 4}, DType::kFloat32, line, NdSbp(sbp::split(1)), line, b),  // the source Sbp
      plan_boxing(Shape{8, 4}, DType::kFloat32, line, s0, line, NdSbp(sbp::partial_sum)),  // the target Sbp
      plan_boxing(Shape{8, 4}, DType::kFloat32, grid, {sbp::split(0), sbp::broadcast}, grid, {b[0], b[0]}),  // the mesh
  };
  for (size_t i = 0; i < others.size(); ++i) {
    INFO("variant " << i << ": " << others[i]->identity->description);
    CHECK(others[i] != base);
    CHECK(others[i]->identity->description != base->identity->description);
  }
}

TEST_CASE("layout_diagram of a global tensor", "[global]") {
  std::string text;
  spsd::simulate(4, [&] {
    auto x = zeros<float>({4, 6}, Placement("cpu", {{0, 1}, {2, 3}}), {sbp::split(0), sbp::split(1)});
    if (rank() == 0) text = layout_diagram(x);
  });
  CHECK_THAT(text, Catch::Contains("(S(0), S(1))") && Catch::Contains("r3"));
}

TEST_CASE("P(sum) of integers wraps modulo 2^bits", "[global][boxing]") {
  // Documented behaviour (docs/boxing.md): not an error, the two's-complement sum.
  std::vector<int32_t> got;
  spsd::simulate(2, [&] {
    Placement p("cpu", {0, 1});
    Tensor<int32_t> local = Tensor<int32_t>::from_vector({1}, {std::numeric_limits<int32_t>::max()});
    auto x = to_global(local, p, sbp::partial_sum);
    auto full = x.full();
    if (rank() == 0) got = full.to_vector();
  });
  CHECK(got == std::vector<int32_t>{-2});
}

TEST_CASE("error catalogue: global tensors and boxing", "[global][errors]") {
  using spsd_test::errors_by_rank;
  auto every_rank_says = [](const std::vector<std::string>& errors, const std::vector<std::string>& fragments) {
    for (size_t r = 0; r < errors.size(); ++r) {
      INFO("rank " << r << ": " << errors[r]);
      CHECK(!errors[r].empty());
      for (const std::string& frag : fragments) CHECK_THAT(errors[r], Catch::Contains(frag));
    }
  };
  Placement line("cpu", {0, 1});
  SECTION("NdSbp length differs from the mesh") {
    every_rank_says(errors_by_rank(2, [&] { zeros<float>({4}, line, {sbp::split(0), sbp::broadcast}); }),
                    {"zeros", "(S(0), B)", "2 entries", "1 axes"});
    every_rank_says(errors_by_rank(2, [&] {
                      zeros<float>({4}, line, sbp::split(0)).to_global(Placement("cpu", {{0, 1}}), sbp::broadcast);
                    }),
                    {"to_global", "1 entries", "2 axes"});
  }
  SECTION("split axis out of range") {
    every_rank_says(errors_by_rank(2, [&] { ones<double>({4, 2}, line, sbp::split(2)); }),
                    {"ones", "splits axis 2", "(4, 2)"});
    every_rank_says(errors_by_rank(2, [&] { ones<double>({4, 2}, line, sbp::split(0)).to_global(sbp::split(5)); }),
                    {"to_global", "splits axis 5"});
  }
  SECTION("mismatched local shapes in to_global") {
    every_rank_says(errors_by_rank(2, [&] { to_global(Tensor<float>(Shape{rank() == 0 ? 3 : 1, 4}), line, sbp::broadcast); }),
                    {"to_global", "rank 0 (3, 4)", "rank 1 (1, 4)", "(B)"});
    every_rank_says(errors_by_rank(2, [&] { to_global(Tensor<float>(Shape{rank() == 0 ? 1 : 3, 4}), line, sbp::split(0)); }),
                    {"to_global", "are not (S(0))"});
    every_rank_says(errors_by_rank(2, [&] { to_global(Tensor<float>(rank() == 0 ? Shape{2} : Shape{2, 1}), line, sbp::split(0)); }),
                    {"to_global", "differ in rank", "1 axes", "2"});
  }
  SECTION("global_shape inconsistent with the local shapes") {
    every_rank_says(errors_by_rank(2, [&] { to_global(Tensor<float>(Shape{2, 4}), line, sbp::split(0), Shape{5, 4}); }),
                    {"to_global", "rank 0 holds a local tensor of shape (2, 4)", "(5, 4)", "(3, 4)"});
  }
  SECTION("from_host with different data on different ranks") {
    every_rank_says(errors_by_rank(3, [&] {
                      Placement p("cpu", {0, 1, 2});
                      from_host(Tensor<int64_t>::from_vector({2}, {1, rank() == 2 ? 9 : 2}), p, sbp::split(0));
                    }),
                    {"from_host", "ranks [2]", "different from rank 0"});
  }
  SECTION("a placement with ranks outside the world") {
    every_rank_says(errors_by_rank(2, [&] { zeros<float>({4}, Placement("cpu", {0, 1, 2}), sbp::split(0)); }),
                    {"zeros", "names rank 2", "world has 2 ranks"});
    every_rank_says(errors_by_rank(2, [&] {
                      zeros<float>({4}, line, sbp::split(0)).to_global(Placement("cpu", {1, 5}), sbp::broadcast);
                    }),
                    {"to_global", "names rank 5"});
  }
  SECTION("arange with a negative length; rand of an integer type does not compile") {
    every_rank_says(errors_by_rank(2, [&] { arange<int64_t>(-1, line, sbp::broadcast); }), {"arange", "-1"});
  }
}
