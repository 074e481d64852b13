// The eager runtime's randomized differential test under simulated ranks (issue 7): seeded random
// programs (test/common/async_suite.hpp) give bit-identical host reads asynchronously and
// synchronously on 1, 2, 3 and 4 ranks (1-d meshes, a 2x2 mesh and sub-placements of fewer
// ranks). SPSD_ASYNC_PROGRAMS sets the total over the four cases (default 2000),
// SPSD_ASYNC_SEED the first seed (a failure names the seed and prints its program).
#include <catch2/catch.hpp>
#include <iostream>

#include "async_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::AsyncSummary;
using spsd_test::Failures;

namespace {

constexpr int kSteps = 30;

// share: this case's part of the total, in thousandths.
void check_on(int ranks, int share) {
  const int count = std::max(1, spsd_test::async_program_count(2000) * share / 1000);
  const uint64_t first = spsd_test::async_first_seed(1);
  std::vector<Failures> failures(ranks);
  std::vector<AsyncSummary> summaries(ranks);
  std::string error;
  try {
    spsd::simulate(ranks, [&] {
      summaries[rank()] = spsd_test::check_async_programs(first, count, kSteps, failures[rank()]);
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  Failures all;
  AsyncSummary total;
  for (int r = 0; r < ranks; ++r) {
    all.merge(failures[r]);
    total.merge(summaries[r]);
  }
  std::cout << "async suite on " << ranks << " simulated rank(s), seeds " << first << ".." << first + count - 1
            << ", summed over the ranks: " << total.to_string() << std::endl;
  INFO(all.report());
  CHECK(error == "");
  CHECK(all.empty());
  CHECK(total.programs == static_cast<int64_t>(count) * ranks);
  // The asynchronous runs really used the communication stream (one rank communicates with nobody).
  if (ranks > 1) CHECK(total.queued > 0);
}

}  // namespace

TEST_CASE("async runtime: random programs are bit-identical asynchronously and synchronously on 1 rank", "[async]") {
  check_on(1, 100);
}

TEST_CASE("async runtime: random programs are bit-identical asynchronously and synchronously on 2 ranks", "[async]") {
  check_on(2, 250);
}

TEST_CASE("async runtime: random programs are bit-identical asynchronously and synchronously on 3 ranks", "[async]") {
  check_on(3, 250);
}

TEST_CASE("async runtime: random programs are bit-identical asynchronously and synchronously on 4 ranks (1-d, 2x2)",
          "[async]") {
  check_on(4, 400);
}
