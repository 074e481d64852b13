// SPSD_TRACE under mpirun: each process writes its own rank's file (pid = the MPI rank); the
// test flushes it mid-run and checks it like the simulated one (test/unit/test_trace.cpp).
// meson sets SPSD_TRACE for the job.
#include <catch2/catch.hpp>

#include <spsd/spsd.hpp>

#include "trace_program.hpp"

TEST_CASE("SPSD_TRACE under MPI: each process writes its rank's trace", "[trace]") {
  REQUIRE(spsd::world_size() == 2);
  REQUIRE_FALSE(spsd::trace_file().empty());
  spsd::test::run_traced_program();
  spsd::flush_trace();
  spsd::test::check_traced_program(spsd::trace_file(), spsd::rank());
}
