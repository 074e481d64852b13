// Activation checkpointing, the host memory counter and gradient accumulation under mpirun:
// the shared suite (test/common/recompute_suite.hpp) on the world's 1-d mesh and, with -np 4,
// on a 2x2 mesh. Every rank asserts its own findings.
#include <catch2/catch.hpp>

#include "recompute_suite.hpp"

using namespace spsd;
namespace rc = spsd_test::recompute;

namespace {
Placement world_placement() {
  std::vector<int64_t> ranks(world_size());
  for (int64_t i = 0; i < world_size(); ++i) ranks[i] = i;
  return Placement("cpu", ranks);
}
}  // namespace

TEST_CASE("mpi checkpoint gives the plain chain's gradients", "[recompute]") {
  spsd_test::Failures f;
  rc::run_checkpoint_suite(world_placement(), f);
  if (world_size() == 4) rc::run_checkpoint_suite(Placement("cpu", {{0, 1}, {2, 3}}), f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi checkpointing lowers this process's peak host memory", "[recompute]") {
  const int64_t plain = rc::peak_bytes_of(world_placement(), rc::Checkpointing::kNone);
  const int64_t ckpt = rc::peak_bytes_of(world_placement(), rc::Checkpointing::kEachLayer);
  CHECK(static_cast<double>(ckpt) < 0.9 * static_cast<double>(plain));
}

TEST_CASE("mpi gradient accumulation under NoGradSync reduces once per step", "[recompute]") {
  spsd_test::Failures f;
  rc::run_accumulation_suite(world_placement(), f);
  if (world_size() == 4) rc::run_accumulation_suite(Placement("cpu", {{0, 1}, {2, 3}}), f);
  rc::run_counter_suite(f);
  INFO(f.report());
  CHECK(f.empty());
}
