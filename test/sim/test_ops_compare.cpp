// The bool-valued and mask ops under simulated ranks (issue 25): the compare suite
// (test/common/compare_suite.cpp) on meshes {1}, {2}, {4} and {2, 2} (every layout combination
// on {1} and {2}, every 3rd on {4}, every 7th on 2x2); bool's partial-layout errors, casts and
// checkpoints; argmax's NaN and tie rules.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "compare_suite.hpp"
#include "error_matchers.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;

TEST_CASE("compare suite: comparisons, masks, argmax in every layout", "[ops-compare]") {
  for (const auto& [mesh, stride] : std::vector<std::pair<Shape, int64_t>>{
           {Shape{1}, 1}, {Shape{2}, 1}, {Shape{4}, 3}, {Shape{2, 2}, 7}}) {
    const Placement p = mesh_placement(mesh);
    const int n = static_cast<int>(p.size());
    std::vector<spsd_test::CompareSuiteCounts> counts(n);
    Failures f = spsd_test::on_simulated_ranks(n, [&](Failures& mine) {
      spsd_test::run_compare_suite(p, stride, mine, counts[rank()]);
    });
    INFO("mesh " << mesh << ": " << counts[0].cases << " cases on rank 0");
    CHECK(counts[0].cases > 100);
    CHECK(f.report() == "");
  }
}

TEST_CASE("bool: no partial layouts, in factories, boxing and op signatures", "[ops-compare]") {
  const Placement p = mesh_placement(Shape{2});
  const auto errors = spsd_test::errors_by_rank(2, [&] {
    const auto t = Tensor<bool>::from_vector(Shape{2}, {true, false});
    from_host(t, p, NdSbp({sbp::partial_max}));
  });
  for (const std::string& e : errors) CHECK_THAT(e, Catch::Contains("from_host") && Catch::Contains("bool"));
  const auto boxing = spsd_test::errors_by_rank(2, [&] {
    const auto t = from_host(Tensor<bool>::from_vector(Shape{2}, {true, false}), p, NdSbp({sbp::broadcast}));
    t.to_global(NdSbp({sbp::partial_sum}));
  });
  for (const std::string& e : boxing) CHECK_THAT(e, Catch::Contains("to_global") && Catch::Contains("bool"));
  // A float partial cast to bool is reduced first (no P row for bool).
  const auto casts = spsd_test::results_by_rank<std::pair<bool, std::vector<bool>>>(2, [&] {
    const auto x = full<float>(Shape{3}, -1.0f, p, NdSbp({sbp::partial_sum}));  // -1 on rank 0, 0 on rank 1
    const auto b = cast<bool>(x);
    return std::pair{b.nd_sbp().has_partial(), b.full().to_vector()};
  });
  for (const auto& [partial, values] : casts) {
    CHECK_FALSE(partial);
    CHECK(values == std::vector<bool>{true, true, true});
  }
}

TEST_CASE("argmax/argmin: NaN counts as the extreme, ties give the first index", "[ops-compare]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Seen {
    std::vector<int64_t> argmax, argmin;
    Shape keepdim_shape;
    std::vector<bool> eq, ne;
  };
  const auto seen = spsd_test::results_by_rank<Seen>(2, [&] {
    const Placement p = mesh_placement(Shape{2});
    const auto x = from_host(Tensor<float>::from_vector(Shape{2, 4}, {1, 3, 3, 0, 2, nan, 5, nan}), p,
                             NdSbp({sbp::split(1)}));
    return Seen{argmax(x, 1).full().to_vector(), argmin(x, 1).full().to_vector(),
                argmax(x, -1, true).shape(), (x == x).full().to_vector(), (x != x).full().to_vector()};
  });
  for (const Seen& s : seen) {
    CHECK(s.argmax == std::vector<int64_t>{1, 1});
    CHECK(s.argmin == std::vector<int64_t>{3, 1});
    CHECK(s.keepdim_shape == Shape{2, 1});
    // Comparisons with NaN: false, ne true.
    CHECK(s.eq == std::vector<bool>{true, true, true, true, true, false, true, false});
    CHECK(s.ne == std::vector<bool>{false, false, false, false, false, true, false, true});
  }
}

TEST_CASE("bool: a checkpoint round trip, resharded", "[ops-compare]") {
  const std::string dir = "/tmp/spsd_bool_ckpt_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::vector<bool> values = {true, false, false, true, true, true, false};
  const auto loaded = spsd_test::results_by_rank<std::vector<bool>>(2, [&] {
    const Placement p = mesh_placement(Shape{2});
    save_checkpoint(from_host(Tensor<bool>::from_vector(Shape{7}, values), p, NdSbp({sbp::split(0)})), dir);
    return load_checkpoint<bool>(dir, p, NdSbp({sbp::broadcast})).full().to_vector();
  });
  for (const std::vector<bool>& back : loaded) CHECK(back == values);
  std::filesystem::remove_all(dir);
}

namespace {
// A user-defined op whose table gives its bool output P(sum): refused when it resolves.
struct BoolPartialDef {
  static constexpr std::string_view name = "bool_partial";
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) { return in[0]; }
  static std::vector<Signature> signatures(std::span<const TensorMeta>, const OpAttrs&) {
    return {{{sbp::broadcast}, sbp::partial_sum}, uniform_signature(1, sbp::broadcast)};
  }
  template <Element T>
  static void kernel(const KernelArgs&) {}
};
}  // namespace

TEST_CASE("bool: an op table giving a bool output P(sum) is an error naming the op", "[ops-compare]") {
  const Placement p = mesh_placement(Shape{2});
  const auto errors = spsd_test::errors_by_rank(2, [&] {
    const auto b = from_host(Tensor<bool>::from_vector(Shape{2}, {true, false}), p, NdSbp({sbp::broadcast}));
    call_op<BoolPartialDef>({}, {}, b);
  });
  for (const std::string& e : errors)
    CHECK_THAT(e, Catch::Contains("bool_partial") && Catch::Contains("bool output") && Catch::Contains("P(sum)"));
}

TEST_CASE("argmax over a split axis moves the reduced tensors, never the axis", "[ops-compare]") {
  // (4, 1000) float S(1) on 4 ranks: gathering the axis would receive 3/4 * 16000 = 12000 B per
  // rank; the composition all-reduces 4 floats (24 B, ring) and 4 int64 (48 B).
  std::vector<float> v(4000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 1009) - (i == 2222 ? 2000.0f : 0.0f);
  std::vector<CommStats> stats(4);
  std::vector<std::vector<int64_t>> got(4);
  spsd::simulate(4, [&] {
    const Placement p = mesh_placement(Shape{4});
    const auto x = from_host(Tensor<float>::from_vector(Shape{4, 1000}, v), p, NdSbp({sbp::split(1)}));
    reset_comm_stats();
    const auto i = argmin(x, 1);
    stats[rank()] = comm_stats();
    got[rank()] = i.full().to_vector();
  });
  std::vector<int64_t> want(4);
  for (int64_t r = 0; r < 4; ++r)
    want[r] = std::min_element(v.begin() + r * 1000, v.begin() + (r + 1) * 1000) - (v.begin() + r * 1000);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << stats[r]);
    CHECK(got[r] == want);
    CHECK(stats[r].calls_of(CollectiveKind::kAllGather) == 0);
    CHECK(stats[r].calls_of(CollectiveKind::kAllReduce) == 2);
    CHECK(stats[r].bytes_received == 72);
  }
}
