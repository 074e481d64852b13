// The user-defined op of examples/custom/bias_gelu.hpp under mpirun: the shared differential
// suite (test/common/custom_op_suite.hpp: every layout of x, output and gradients against plain
// loops in double) on the world's 1-d mesh (uneven splits with -np 3) and on a 2x2 mesh with
// -np 4. Every rank asserts its own findings.
#include <catch2/catch.hpp>
#include <numeric>

#include "custom_op_suite.hpp"

using namespace spsd;

TEST_CASE("mpi custom op: bias_gelu on the world's 1-d mesh", "[custom-ops]") {
  std::vector<int64_t> ranks(world_size());
  std::iota(ranks.begin(), ranks.end(), 0);
  spsd_test::Failures f;
  spsd_test::run_custom_op_suite(Placement("cpu", ranks), 1, f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi custom op: bias_gelu on a 2x2 mesh", "[custom-ops]") {
  if (world_size() != 4) return;
  spsd_test::Failures f;
  spsd_test::run_custom_op_suite(Placement("cpu", {{0, 1}, {2, 3}}), 1, f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi custom op: with SPSD_CHECK_OPS a wrong rule is an Error at its first dispatch, on every rank",
          "[custom-ops]") {
  const bool validating = op_validation();
  set_op_validation(true);
  std::vector<int64_t> ranks(world_size());
  std::iota(ranks.begin(), ranks.end(), 0);
  spsd_test::Failures f;
  spsd_test::check_planted_rule_refused(Placement("cpu", ranks), f);
  set_op_validation(validating);
  INFO(f.report());
  CHECK(f.empty());
}
