// The shared collective suite on every rank of the mpirun job (np 1..4: world, reversed world,
// even ranks, rows and columns of the 2x2 mesh at np 4).
#include <catch2/catch.hpp>

#include "collective_suite.hpp"

using namespace spsd_test;

TEST_CASE("every collective, dtype and reduce op on the world and mesh sub-communicators", "[mpi][collectives]") {
  const Family family = GENERATE(from_range(kAllFamilies.begin(), kAllFamilies.end()));
  Failures failures;
  run_collective_suite(family, failures);
  INFO(to_string(family) << " on world rank " << spsd::rank() << " of " << spsd::world_size() << "\n"
                         << failures.report());
  CHECK(failures.empty());
}
