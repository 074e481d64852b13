// Training you can trust (issue 38) under mpirun (np 1..4, and the 2x2 mesh on 4): the misuse
// errors on every rank, optimizer state dicts, learning rates and schedulers, gradient clipping
// against one process's norms (test/common/training_checks.hpp).
#include <catch2/catch.hpp>

#include "training_checks.hpp"

TEST_CASE("training checks: misuse errors, state dicts, learning rates, clipping", "[mpi][training-checks]") {
  spsd_test::Failures failures;
  const int cases = spsd_test::run_training_checks(failures);
  INFO("world rank " << spsd::rank() << " of " << spsd::world_size() << "\n" << failures.report());
  CHECK(failures.empty());
  CHECK(cases > 0);
}
