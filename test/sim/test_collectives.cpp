// The shared collective suite under spsd::simulate with 1..8 ranks, plus what only shared memory
// can observe (barrier ordering).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>

#include "collective_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd_test;

TEST_CASE("every collective, dtype and reduce op on the world and mesh sub-communicators", "[sim][collectives]") {
  const int n = GENERATE(range(1, 9));
  const Family family = GENERATE(from_range(kAllFamilies.begin(), kAllFamilies.end()));
  INFO(to_string(family) << " on " << n << " simulated ranks");
  Failures failures = on_simulated_ranks(n, [&](Failures& f) { run_collective_suite(family, f); });
  INFO(failures.report());
  CHECK(failures.empty());
}

// 16-bit reductions under both settings (process-wide, so set outside simulate): sums round once,
// within the stated bound; 2 bytes per element, 4 on the float32 wire. 4 ranks include 2x2 rows
// and columns.
TEST_CASE("bfloat16 and float16 reductions: float32 sums rounded once, 2 bytes per element or 4 on the float32 wire",
          "[sim][collectives]") {
  const int n = GENERATE(1, 2, 3, 4);
  const spsd::HalfReduction mode = GENERATE(spsd::HalfReduction::kNative, spsd::HalfReduction::kFloat32Wire);
  INFO(n << " simulated ranks, " << mode);
  struct Restore {
    ~Restore() { spsd::set_half_reduction(spsd::HalfReduction::kNative); }
  } restore;
  spsd::set_half_reduction(mode);
  Failures failures = on_simulated_ranks(n, [&](Failures& f) { run_half_reduction_suite(f); });
  INFO(failures.report());
  CHECK(failures.empty());
}

// Boxing a bfloat16 P(sum): the plan's predicted bytes equal the counters in both settings, the
// result is the float32 sum of the pieces in rank order rounded once, and the wire setting is
// what changes the bytes (the planner may then pick another plan; see docs/boxing.md).
TEST_CASE("bfloat16 P(sum) boxing: predictions equal the counters under either setting", "[sim][collectives]") {
  using spsd::bfloat16;
  const spsd::HalfReduction mode = GENERATE(spsd::HalfReduction::kNative, spsd::HalfReduction::kFloat32Wire);
  INFO(mode);
  struct Restore {
    ~Restore() { spsd::set_half_reduction(spsd::HalfReduction::kNative); }
  } restore;
  spsd::set_half_reduction(mode);
  const spsd::Shape shape{6, 5};
  Failures failures = on_simulated_ranks(4, [&](Failures& f) {
    const spsd::Placement line("cpu", {0, 1, 2, 3});
    const int64_t me = spsd::rank();
    auto piece = [](int64_t r, int64_t i) { return bfloat16(static_cast<float>((i * 7 + r * 3) % 11) * 1.1f + 100.0f); };
    std::vector<bfloat16> mine(shape.numel());
    for (int64_t i = 0; i < shape.numel(); ++i) mine[i] = piece(me, i);
    const auto x = spsd::to_global(spsd::Tensor<bfloat16>::from_vector(shape, mine), line, spsd::sbp::partial_sum, shape);
    for (const spsd::Sbp& to : {spsd::sbp::broadcast, spsd::sbp::split(0)}) {
      const auto plan = spsd::plan_boxing(shape, spsd::DType::kBFloat16, {line, spsd::sbp::partial_sum}, {line, to});
      spsd::synchronize();
      spsd::reset_comm_stats();
      const auto y = x.to_global(line, to);
      spsd::synchronize();
      const std::string what = "P(sum) -> " + to.to_string() + " on rank " + std::to_string(me);
      const spsd::CommStats got = spsd::comm_stats();
      if (got.bytes_received != plan->bytes_received(me) || got.bytes_sent != plan->bytes_sent(me))
        f.add(what + ": counters {" + got.to_string() + "}, the plan predicts " + std::to_string(plan->bytes_sent(me)) +
              " B sent, " + std::to_string(plan->bytes_received(me)) + " B received");
      const spsd::Box box = spsd::box_of(shape, line, to, me);
      std::vector<bfloat16> want;
      for (int64_t i = box.begin[0] * 5; i < box.end[0] * 5; ++i) {
        float sum = piece(0, i);
        for (int64_t r = 1; r < 4; ++r) sum += static_cast<float>(piece(r, i));
        want.push_back(bfloat16(sum));
      }
      expect_elements(f, what, y.to_local().to_vector().data(), want);
    }
  });
  INFO(failures.report());
  CHECK(failures.empty());
}

TEST_CASE("set_half_reduction: a value that names no mode throws, naming it", "[sim][collectives]") {
  CHECK_THROWS_WITH(spsd::set_half_reduction(static_cast<spsd::HalfReduction>(7)),
                    Catch::Contains("set_half_reduction") && Catch::Contains("got the value 7"));
  CHECK(spsd::half_reduction() == spsd::HalfReduction::kNative);
  CHECK(spsd::to_string(spsd::HalfReduction::kFloat32Wire) == "float32 wire");
}

// The suite is only as good as its communicator list: meshes must show up where the size allows.
TEST_CASE("the suite covers rows, columns and planes of the meshes", "[sim][collectives]") {
  auto groups_of = [](int64_t rank, int64_t world) {
    std::vector<std::vector<int64_t>> g;
    for (const SuiteComm& s : suite_communicators(rank, world)) g.push_back(s.world_ranks);
    return g;
  };
  using G = std::vector<int64_t>;
  auto has = [](const std::vector<G>& gs, const G& g) { return std::find(gs.begin(), gs.end(), g) != gs.end(); };
  CHECK(groups_of(0, 1) == std::vector<G>{{0}});
  auto four = groups_of(3, 4);  // 2x2: row [2, 3], column [1, 3]
  CHECK(has(four, {0, 1, 2, 3}));
  CHECK(has(four, {3, 2, 1, 0}));
  CHECK(has(four, {2, 3}));
  CHECK(has(four, {1, 3}));
  auto six = groups_of(4, 6);  // 2x3: row [3, 4, 5], column [1, 4]; 3x2: row [4, 5], column [0, 2, 4]
  CHECK(has(six, {3, 4, 5}));
  CHECK(has(six, {1, 4}));
  CHECK(has(six, {4, 5}));
  CHECK(has(six, {0, 2, 4}));
  // 2x4: row [4..7], column [1, 5]; 4x2: column [1, 3, 5, 7]; 2x2x2 (5 at (1, 0, 1)): axis 1 [5, 7],
  // plane over axes 0 and 2 [0, 1, 4, 5].
  auto eight = groups_of(5, 8);
  CHECK(has(eight, {4, 5, 6, 7}));
  CHECK(has(eight, {1, 5}));
  CHECK(has(eight, {1, 3, 5, 7}));
  CHECK(has(eight, {5, 7}));
  CHECK(has(eight, {0, 1, 4, 5}));
  CHECK(!has(eight, {0, 2, 4, 6}));  // 5 is not even
}

TEST_CASE("barrier: no member leaves before every member arrived", "[sim][collectives]") {
  const int n = GENERATE(2, 5, 8);
  constexpr int kRounds = 50;
  std::atomic<int> arrived{0};
  std::vector<int> early(n, 0);
  spsd::simulate(n, [&] {
    spsd::Communicator& c = spsd::world_communicator();
    for (int round = 0; round < kRounds; ++round) {
      arrived.fetch_add(1);
      c.barrier();
      if (arrived.load() < (round + 1) * n) ++early[spsd::rank()];
    }
  });
  CHECK(early == std::vector<int>(n, 0));
}
