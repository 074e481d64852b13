// Pipeline parallelism under simulated ranks (test/common/pipeline_checks.hpp): every schedule,
// 2 and 4 pipeline ranks, 1 to 8 micro-batches, stages of 1 and 2 ranks, on 2, 4 and 8 ranks.
#include <catch2/catch.hpp>

#include "pipeline_checks.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;

TEST_CASE("pipeline: one step of every schedule equals one process's, on 2, 4 and 8 ranks", "[pipeline]") {
  for (int n : {2, 4, 8}) {
    int cases = 0;
    const Failures failures = spsd_test::on_simulated_ranks(n, [&](Failures& f) {
      const int k = spsd_test::run_pipeline_checks(f);
      if (rank() == 0) cases = k;
    });
    INFO(n << " simulated ranks:\n" << failures.report());
    CHECK(failures.empty());
    CHECK(cases > 0);
  }
}
