// Global element-wise ops and matmul under simulated ranks: the differential suite
// (test/common/op_suite.cpp) on meshes {1}, {2}, {3}, {4} and {2, 2}, every combination of input
// layouts (all op cases on the 1-d meshes; add, mul, matmul and relu in float32 on 2x2, with a
// deterministic sample of the rest there; bfloat16 every combination on the 1-d meshes and every
// 7th on 2x2, float16 every 5th / 37th); the placement check of the dispatch path; and the
// cross-rank consistency check catching ranks that issue different ops.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>

#include "op_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;

namespace {

void run_suite_on(const Shape& mesh, const spsd_test::OpSuiteOptions& options) {
  Placement p = mesh_placement(mesh);
  const int n = static_cast<int>(p.size());
  std::vector<spsd_test::OpSuiteCounts> counts(n);
  auto start = std::chrono::steady_clock::now();
  Failures f = spsd_test::on_simulated_ranks(n, [&](Failures& mine) {
    spsd_test::run_op_suite(p, options, mine, counts[spsd::rank()]);
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("ops differential suite on mesh %s: %s (full stride %lld, other stride %lld), %.1f s\n",
              mesh.to_string().c_str(), counts[0].to_string().c_str(), static_cast<long long>(options.full_stride),
              static_cast<long long>(options.other_stride), seconds);
  std::fflush(stdout);
  INFO("mesh " << mesh << "\n" << f.report());
  CHECK(f.empty());
  CHECK(counts[0].total() > 0);
}

// The full product for add, mul, matmul, relu (float32); every other op case (other ops, and the
// float64 / int64 cases) one combination in `other` (the phase varies per op case); the 16-bit
// cases of every op one in `bf16` / `fp16`.
spsd_test::OpSuiteOptions options_for(int64_t other, int64_t bf16, int64_t fp16) {
  spsd_test::OpSuiteOptions o;
  o.full_stride = 1;
  o.other_stride = other;
  o.bfloat16_stride = bf16;
  o.float16_stride = fp16;
  return o;
}

}  // namespace

TEST_CASE("ops differential: 1-d meshes of 1 to 4 ranks, every combination of every op case", "[ops-elementwise]") {
  for (int64_t n : {1, 2, 3, 4}) run_suite_on(Shape{n}, options_for(1, 1, 5));
}

TEST_CASE("ops differential: 2x2 mesh, every combination for add, mul, matmul, relu (float32)", "[ops-elementwise]") { run_suite_on(Shape{2, 2}, options_for(11, 7, 37)); }

TEST_CASE("ops: inputs on different placements give an error naming both", "[ops-elementwise]") {
  std::vector<std::string> errors = spsd_test::errors_by_rank(4, [] {
    Placement p01("cpu", {0, 1}), p23("cpu", {2, 3});
    auto a = spsd::ones<float>(Shape{4, 3}, p01, sbp::split(0));
    auto b = spsd::ones<float>(Shape{4, 3}, p23, sbp::split(0));
    auto c = spsd::add(a, b);
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("add") && Catch::Contains("ranks=[0, 1]") && Catch::Contains("ranks=[2, 3]"));
  }
  // The same for matmul, with the mesh shapes differing too.
  errors = spsd_test::errors_by_rank(4, [] {
    Placement line("cpu", {0, 1, 2, 3}), grid("cpu", {{0, 1}, {2, 3}});
    auto a = spsd::ones<double>(Shape{4, 3}, line, sbp::broadcast);
    auto b = spsd::ones<double>(Shape{3, 2}, grid, NdSbp{sbp::broadcast, sbp::broadcast});
    auto c = spsd::matmul(a, b);
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("matmul") && Catch::Contains("ranks=[0, 1, 2, 3]") &&
                              Catch::Contains("ranks=[[0, 1], [2, 3]]"));
  }
}

TEST_CASE("ops: integer division by zero held by one rank is an error on every rank", "[ops-elementwise]") {
  // Only rank 1 holds the zero; the ranks agree on it before anyone throws, so none is left
  // waiting in a later collective.
  std::vector<std::string> errors = spsd_test::errors_by_rank(2, [] {
    Placement p("cpu", {0, 1});
    auto a = spsd::from_host(Tensor<int64_t>::from_vector({4}, {1, 2, 3, 4}), p, sbp::split(0));
    auto b = spsd::from_host(Tensor<int64_t>::from_vector({4}, {1, 1, 1, 0}), p, sbp::split(0));
    (void)spsd::div(a, b).full();
  });
  for (const std::string& e : errors)
    CHECK(e == "div: integer division by zero: the divisor (input 1, (4,) int64 (S(0))) is 0 at [3]");

  // s / x with the zero on the last of 3 ranks.
  errors = spsd_test::errors_by_rank(3, [] {
    Placement p("cpu", {0, 1, 2});
    auto x = spsd::from_host(Tensor<int32_t>::from_vector({3, 2}, {1, 2, 3, 4, 5, 0}), p, sbp::split(0));
    (void)spsd::div(int32_t{6}, x).full();
  });
  for (const std::string& e : errors)
    CHECK(e == "rdiv_scalar: integer division by zero: the divisor (input 0, (3, 2) int32 (S(0))) is 0 at [2, 1]");

  // A broadcast divisor split on a 2x2 placement that leaves rank 0 out: ranks 1-4 throw, 0 not.
  errors = spsd_test::errors_by_rank(5, [] {
    Placement grid("cpu", {{1, 2}, {3, 4}});
    auto a = spsd::full<int64_t>(Shape{4, 3}, 7, grid, NdSbp{sbp::split(0), sbp::split(1)});
    auto b = spsd::from_host(Tensor<int64_t>::from_vector({3}, {2, 0, 5}), grid, NdSbp{sbp::broadcast, sbp::split(0)});
    (void)spsd::div(a, b).full();
  });
  CHECK(errors[0].empty());
  for (int r = 1; r < 5; ++r) {
    INFO("rank " << r);
    CHECK_THAT(errors[r], Catch::Contains("div: integer division by zero: the divisor (input 1, (3,) int64") &&
                              Catch::Contains("is 0 at [1]"));
  }
}

TEST_CASE("ops: the consistency check catches ranks that issue different ops", "[ops-elementwise]") {
  // Rank 1 calls add where the others call sub; add and sub communicate nothing, so the
  // divergence surfaces at the next communication (full()), on every rank, naming both ops.
  std::vector<std::string> errors = spsd_test::errors_by_rank(4, [] {
    Placement p("cpu", {0, 1, 2, 3});
    auto x = spsd::ones<float>(Shape{8, 3}, p, sbp::split(0));
    auto y = spsd::rank() == 1 ? spsd::add(x, x) : spsd::sub(x, x);
    auto z = y.full();
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("add(") && Catch::Contains("sub("));
  }

  // Same op, different metadata: rank 2 multiplies by another matrix (made on every rank, so
  // the factories agree). matmul with S(0) x B needs no boxing, so again full() finds it.
  errors = spsd_test::errors_by_rank(4, [] {
    Placement p("cpu", {0, 1, 2, 3});
    auto a = spsd::ones<float>(Shape{8, 3}, p, sbp::split(0));
    auto w4 = spsd::ones<float>(Shape{3, 4}, p, sbp::broadcast);
    auto w5 = spsd::ones<float>(Shape{3, 5}, p, sbp::broadcast);
    auto y = spsd::matmul(a, spsd::rank() == 2 ? w5 : w4);
    auto z = y.full();
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("matmul") && Catch::Contains("(3, 5)") && Catch::Contains("(3, 4)"));
  }

  // An op that boxes its input checks before communicating: relu on P(sum) reduce-scatters, and
  // rank 3 calls neg instead (neg keeps P(sum): no communication on rank 3, so rank 3 meets the
  // mismatch at full()).
  errors = spsd_test::errors_by_rank(4, [] {
    Placement p("cpu", {0, 1, 2, 3});
    auto x = spsd::ones<float>(Shape{8, 3}, p, sbp::partial_sum);
    auto y = spsd::rank() == 3 ? spsd::neg(x) : spsd::relu(x);
    auto z = y.full();
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("relu(") && Catch::Contains("neg("));
  }
}
