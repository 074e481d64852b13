// Pipeline parallelism under mpirun (test/common/pipeline_checks.hpp): on 4 ranks, 2 and 4
// pipeline ranks, stages of 1 and 2 ranks; one micro-batch count per schedule and size (the
// simulator runs them all).
#include <catch2/catch.hpp>

#include "pipeline_checks.hpp"

TEST_CASE("pipeline: one step of every schedule equals one process's", "[mpi][pipeline]") {
  spsd_test::Failures failures;
  const int cases = spsd_test::run_pipeline_checks(failures, /*quick=*/true);
  INFO("world rank " << spsd::rank() << " of " << spsd::world_size() << "\n" << failures.report());
  CHECK(failures.empty());
  if (spsd::world_size() >= 2) CHECK(cases > 0);  // one rank holds no pipeline
}
