// The layers of spsd/nn under mpirun (-np 1, 2, 4): the shared suite (test/common/nn_suite.hpp)
// on the world's 1-d mesh and, with 4 ranks, on a 2x2 mesh; names, initialization and bad input
// on every rank; state dicts saved on the world and loaded on rank 0 alone, and back. Every rank
// asserts its own findings.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "nn_suite.hpp"

using namespace spsd;
namespace suite = spsd_test::nn_suite;

namespace {

Placement world_line() {
  std::vector<int64_t> ranks(world_size());
  for (int64_t i = 0; i < world_size(); ++i) ranks[i] = i;
  return Placement("cpu", ranks);
}

}  // namespace

TEST_CASE("mpi nn layers: the world's 1-d mesh and 2x2 equal rank 0 alone", "[nn]") {
  spsd_test::Failures f;
  suite::run_nn_suite(world_line(), f);
  if (world_size() == 4) suite::run_nn_suite(Placement("cpu", {{0, 1}, {2, 3}}), f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi nn names, initialization and bad input", "[nn]") {
  spsd_test::Failures f;
  suite::check_names(world_line(), f);
  suite::check_init(world_line(), f);
  suite::check_bad_input(world_line(), f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi nn state dicts round-trip between the world and one rank", "[nn]") {
  namespace fs = std::filesystem;
  // Rank 0 makes the directory; its pid names it on every rank (item() is collective).
  const auto pid = full<int64_t>({}, static_cast<int64_t>(getpid()), Placement("cpu", {0}), NdSbp(sbp::broadcast)).item();
  const std::string dir = (fs::temp_directory_path() / ("spsd-nn-mpi-" + std::to_string(pid))).string();
  spsd_test::Failures f;
  suite::check_state_dict_round_trip(world_line(), Placement("cpu", {0}), dir + "/a", f);
  suite::check_state_dict_round_trip(Placement("cpu", {0}), world_line(), dir + "/b", f);
  if (world_size() == 4)
    suite::check_state_dict_round_trip(Placement("cpu", {{0, 1}, {2, 3}}), Placement("cpu", {0, 1}), dir + "/c", f);
  INFO(f.report());
  CHECK(f.empty());
  world_communicator().barrier();  // every rank done reading before rank 0 removes it
  if (rank() == 0) fs::remove_all(dir);
}
