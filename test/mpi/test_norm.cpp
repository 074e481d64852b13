// layer_norm, rms_norm and dropout under mpirun: the shared differential suite
// (test/common/norm_suite.hpp) on a deterministic sample of x's layouts, on the world's 1-d
// mesh (uneven splits with -np 3) and on a 2x2 mesh with -np 4. Every rank asserts its own
// findings.
#include <catch2/catch.hpp>

#include "norm_suite.hpp"

using namespace spsd;

TEST_CASE("mpi norms and dropout: the world's 1-d mesh (sampled)", "[ops][norm]") {
  std::vector<int64_t> ranks(world_size());
  for (int64_t i = 0; i < world_size(); ++i) ranks[i] = i;
  spsd_test::Failures f;
  spsd_test::run_norm_suite(Placement("cpu", ranks), {.stride = 2, .grads = true, .half = true}, f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi norms and dropout: a 2x2 mesh (sampled)", "[ops][norm]") {
  if (world_size() != 4) return;
  spsd_test::Failures f;
  spsd_test::run_norm_suite(Placement("cpu", {{0, 1}, {2, 3}}), {.stride = 3, .grads = true, .half = false}, f);
  INFO(f.report());
  CHECK(f.empty());
}
