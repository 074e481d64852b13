// scaled_dot_product_attention under mpirun: the attention suite (test/common/attention_suite.hpp,
// the plain-loop reference) on a deterministic sample of the layout combinations, on the world's
// 1-d mesh (uneven splits with -np 3) and on a 2x2 mesh with -np 4: the forward in float64,
// float32 and bfloat16, and the float64 gradients. Tolerances as in test/sim/test_attention.cpp.
// Every rank asserts its own findings.
#include <catch2/catch.hpp>

#include "attention_suite.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

void run_on(const Placement& p, int64_t stride) {
  Failures f;
  spsd_test::run_attention_forward_suite<double>(p, stride, 1e-11, 1e-11, f);
  spsd_test::run_attention_forward_suite<float>(p, 2 * stride + 1, 1e-5, 1e-5, f);
  spsd_test::run_attention_forward_suite<bfloat16>(p, 4 * stride + 1, 2e-2, 2e-2, f);
  spsd_test::run_attention_backward_suite(p, 2 * stride + 1, f);
  INFO(f.report());
  CHECK(f.empty());
}

}  // namespace

TEST_CASE("mpi attention: the world's 1-d mesh (sampled)", "[attention]") {
  std::vector<int64_t> ranks(world_size());
  for (int64_t r = 0; r < world_size(); ++r) ranks[r] = r;
  run_on(Placement("cpu", ranks), 3);
}

TEST_CASE("mpi attention: a 2x2 mesh (sampled)", "[attention]") {
  if (world_size() != 4) return;
  run_on(Placement("cpu", {{0, 1}, {2, 3}}), 5);
}
