// Training parity under simulated ranks: 20 steps of the MLP on 4 ranks, data-, tensor- and
// 2-d-parallel, against one rank (test/common/train_suite.hpp has the model, data and tolerances).
#include <catch2/catch.hpp>

#include "sim_helpers.hpp"
#include "train_suite.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

template <class T>
void check_parity(int steps) {
  spsd_test::TrainTrace single;
  spsd::simulate(1, [&] { single = spsd_test::train_trace<T>("data", {0}, steps); });
  for (const std::string mode : {"data", "tensor", "2d"}) {
    Failures failures = spsd_test::on_simulated_ranks(4, [&](Failures& f) {
      const spsd_test::TrainTrace t = spsd_test::train_trace<T>(mode, {0, 1, 2, 3}, steps);
      spsd_test::expect_same_training<T>(f, mode + " on 4 ranks, " + std::string(to_string(dtype_of<T>)), t, single);
    });
    INFO(failures.report());
    CHECK(failures.empty());
  }
}

}  // namespace

TEST_CASE("training: data-, tensor- and 2d-parallel give the single-process losses and gradients", "[train]") {
  WARN("training slice: " << spsd_test::train_data_source());
  check_parity<float>(20);
  check_parity<double>(20);
}
