// The eager runtime's randomized differential test under mpirun (issue 7): every rank runs the
// same seeded random programs (test/common/async_suite.hpp) asynchronously and synchronously and
// asserts that its host reads are bit-identical. SPSD_ASYNC_PROGRAMS sets the count (default
// 300), SPSD_ASYNC_SEED the first seed (a failure names the seed and prints its program).
#include <catch2/catch.hpp>
#include <iostream>

#include "async_suite.hpp"

using namespace spsd;

TEST_CASE("async runtime under mpirun: random programs are bit-identical asynchronously and synchronously",
          "[async]") {
  const int count = spsd_test::async_program_count(300);
  const uint64_t first = spsd_test::async_first_seed(1);
  spsd_test::Failures f;
  const spsd_test::AsyncSummary s = spsd_test::check_async_programs(first, count, 30, f);
  // Summed over the world: the asynchronous runs really used the communication stream.
  int64_t mine = s.queued, queued = 0;
  world_communicator().all_reduce(&mine, &queued, 1, DType::kInt64, ReduceOp::kSum);
  if (rank() == 0)
    std::cout << "async suite on " << world_size() << " MPI rank(s), seeds " << first << ".." << first + count - 1
              << ", rank 0: " << s.to_string() << "; queued on all ranks: " << queued << std::endl;
  INFO(f.report());
  CHECK(f.empty());
  if (world_size() > 1) CHECK(queued > 0);
}
