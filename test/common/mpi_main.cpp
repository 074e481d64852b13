// Runner for suites under mpirun: every rank runs every test case; a failing assertion on
// any rank makes the whole job fail.
#include <spsd/spsd.hpp>

#include "catch_runner.hpp"

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  int failed = run_catch_session(argc, argv);
  // Ranks agree on the verdict before leaving, so no rank finalizes while another still runs.
  int64_t mine = failed ? 1 : 0, any = 0;
  spsd::world_communicator().all_reduce(&mine, &any, 1, spsd::DType::kInt64, spsd::ReduceOp::kMax);
  return any ? 1 : 0;
}
