// The shared misuse catalogue on every rank of the mpirun job. Cross-rank mismatches are left
// to the simulate tests: the MPI backend does not detect them (MPIEXEC_TIMEOUT bounds a hang).
#include <catch2/catch.hpp>

#include "misuse_catalogue.hpp"

using namespace spsd_test;

TEST_CASE("misuse catalogue: each invalid call throws spsd::Error naming op, argument and values", "[mpi][errors]") {
  Failures failures;
  const int cases = run_misuse_catalogue(failures);
  INFO("world rank " << spsd::rank() << " of " << spsd::world_size() << "\n" << failures.report());
  CHECK(failures.empty());
  CHECK(cases >= 40);
}
