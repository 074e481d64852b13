// GlobalTensor::item() and distribute under mpirun (np 1..4): every layout on the world, the
// 2x2 mesh and subsets of ranks, values and bytes checked on each rank (misc_suite.hpp).
#include <catch2/catch.hpp>

#include "misc_suite.hpp"

TEST_CASE("item(): a one-element tensor's value on every rank, every layout", "[mpi][item]") {
  spsd_test::Failures failures;
  spsd_test::run_item_suite(failures);
  INFO("world rank " << spsd::rank() << " of " << spsd::world_size() << "\n" << failures.report());
  CHECK(failures.empty());
}

TEST_CASE("distribute: each rank receives its piece of src's tensor, every layout", "[mpi][distribute]") {
  spsd_test::Failures failures;
  spsd_test::run_distribute_suite(failures);
  INFO("world rank " << spsd::rank() << " of " << spsd::world_size() << "\n" << failures.report());
  CHECK(failures.empty());
}
