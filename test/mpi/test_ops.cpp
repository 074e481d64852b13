// Global element-wise ops and matmul under mpirun: the shared differential suite
// (test/common/op_suite.cpp) on a deterministic sample of the input-layout combinations, on the
// world's 1-d mesh (uneven splits with -np 3), on a 2x2 mesh with -np 4, and on a sub-placement
// that leaves a rank out. Every rank asserts its own findings.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>

#include "compare_suite.hpp"
#include "op_suite.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

std::vector<int64_t> first_ranks(int64_t n) {
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

// bf16 / fp16: the stride of the 16-bit cases (0: none).
void run_on(const Placement& p, int64_t full_stride, int64_t other_stride, int64_t bf16, int64_t fp16) {
  spsd_test::OpSuiteOptions options;
  options.full_stride = full_stride;
  options.other_stride = other_stride;
  options.bfloat16_stride = bf16;
  options.float16_stride = fp16;
  Failures f;
  spsd_test::OpSuiteCounts counts;
  auto start = std::chrono::steady_clock::now();
  spsd_test::run_op_suite(p, options, f, counts);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (spsd::rank() == p.ranks().front())
    std::printf("ops differential suite on %s: %s (strides %lld/%lld, 16-bit %lld/%lld), %.1f s\n",
                p.to_string().c_str(), counts.to_string().c_str(), static_cast<long long>(full_stride),
                static_cast<long long>(other_stride), static_cast<long long>(bf16), static_cast<long long>(fp16), seconds);
  INFO(f.report());
  CHECK(f.empty());
  if (p.contains(spsd::rank())) CHECK(counts.total() > 0);  // an empty sample would pass the check above
}

}  // namespace

TEST_CASE("mpi ops differential: the world's 1-d mesh (sampled)", "[ops]") {
  run_on(Placement("cpu", first_ranks(world_size())), 1, 2, 3, 17);
}

TEST_CASE("mpi ops differential: a 2x2 mesh (sampled)", "[ops]") {
  if (world_size() != 4) return;
  run_on(Placement("cpu", {{0, 1}, {2, 3}}), 13, 101, 41, 0);
}

TEST_CASE("mpi ops differential: a placement without rank 0 (sampled)", "[ops]") {
  const int64_t n = world_size();
  if (n < 2) return;
  std::vector<int64_t> ranks;
  for (int64_t r = n - 1; r >= 1; --r) ranks.push_back(r);  // reversed order too
  run_on(Placement("cpu", ranks), 3, 11, 23, 0);
}

// Issue 25: comparisons, masks, argmax/argmin and bool casts (test/common/compare_suite.cpp),
// sampled, on the world's 1-d mesh and on 2x2 with -np 4.
TEST_CASE("mpi compare suite: comparisons, masks, argmax (sampled)", "[ops]") {
  Failures f;
  spsd_test::CompareSuiteCounts counts;
  spsd_test::run_compare_suite(Placement("cpu", first_ranks(world_size())), 5, f, counts);
  if (world_size() == 4) spsd_test::run_compare_suite(Placement("cpu", {{0, 1}, {2, 3}}), 41, f, counts);
  if (spsd::rank() == 0) std::printf("compare suite: %lld cases on rank 0\n", static_cast<long long>(counts.cases));
  INFO(f.report());
  CHECK(f.empty());
  CHECK(counts.cases > 0);
}
