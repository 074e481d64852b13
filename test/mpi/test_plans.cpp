// Parallelization plans under mpirun: on the world's 1-d mesh, data, tensor and sequence
// parallelism give the losses and gradients of the unparallelized model (every rank computing
// all of it, B everywhere: the single-process arithmetic); with -np 4 the 2x2 combinations too,
// and sequence (tensor) parallelism's bytes are (at most) Megatron's (test/common/plan_suite.hpp).
#include <catch2/catch.hpp>

#include "plan_suite.hpp"

using namespace spsd;

namespace {

Placement world_mesh(const Shape& mesh) {
  std::vector<int64_t> ranks(world_size());
  for (int64_t i = 0; i < world_size(); ++i) ranks[i] = i;
  return Placement("cpu", ranks, mesh);
}

}  // namespace

TEST_CASE("mpi plans: data, tensor, sequence and 2-d give the unparallelized losses and gradients", "[plans]") {
  const spsd_test::PlanCase c;
  const Placement line = world_mesh(Shape{world_size()});
  const spsd_test::PlanRun ref = spsd_test::run_plan(line, nn::AxisPlan{.name = "none"}, c);
  spsd_test::Failures f;
  for (const nn::Plan& plan : {nn::Plan{nn::data_parallel()}, nn::Plan{nn::tensor_parallel()}, nn::Plan{nn::sequence_parallel()}})
    spsd_test::expect_same_run(f, plan.to_string(), spsd_test::run_plan(line, plan, c), ref);
  if (world_size() == 4) {
    const Placement square = world_mesh(Shape{2, 2});
    for (const nn::Plan& plan : {nn::Plan{nn::data_parallel(), nn::tensor_parallel()},
                                 nn::Plan{nn::data_parallel(), nn::sequence_parallel()}})
      spsd_test::expect_same_run(f, plan.to_string(), spsd_test::run_plan(square, plan, c), ref);
  }
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("mpi plans: sequence and tensor parallelism move Megatron's bytes", "[plans]") {
  const spsd_test::PlanCase c;
  spsd_test::Failures f;
  if (c.seq % world_size() == 0) {
    spsd_test::check_megatron_bytes(f, world_mesh(Shape{world_size()}), nn::sequence_parallel(), 0, c);
    spsd_test::check_megatron_bytes(f, world_mesh(Shape{world_size()}), nn::tensor_parallel(), 0, c);
  }
  if (world_size() == 4) {
    spsd_test::check_megatron_bytes(f, world_mesh(Shape{2, 2}), nn::Plan{nn::data_parallel(), nn::sequence_parallel()},
                                    1, c);
    spsd_test::check_megatron_bytes(f, world_mesh(Shape{2, 2}), nn::Plan{nn::data_parallel(), nn::tensor_parallel()},
                                    1, c);
  }
  INFO(f.report());
  CHECK(f.empty());
}
