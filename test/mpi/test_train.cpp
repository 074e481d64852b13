// Training parity under mpirun: 20 steps of the MLP data- and tensor-parallel on the whole
// world (and 2-d on an even one) against rank 0 alone (test/common/train_suite.hpp), and 3
// steps of examples/08's GPT under each of its plans (gpt_suite.hpp); rank 0
// compares, every rank takes part.
#include <catch2/catch.hpp>

#include "gpt_suite.hpp"
#include "grad_scaler_suite.hpp"
#include "train_suite.hpp"

using namespace spsd;

namespace {

template <class T>
void check_parity(int steps) {
  std::vector<int64_t> world(world_size());
  for (int r = 0; r < world_size(); ++r) world[r] = r;
  const spsd_test::TrainTrace single = spsd_test::train_trace<T>("data", {0}, steps);
  for (const std::string mode : {"data", "tensor", "2d"}) {
    if (mode == "2d" && world.size() % 2 != 0) continue;
    const spsd_test::TrainTrace t = spsd_test::train_trace<T>(mode, world, steps);
    spsd_test::Failures f;
    if (rank() == 0)
      spsd_test::expect_same_training<T>(f, mode + " on " + std::to_string(world.size()) + " ranks, " +
                                                std::string(to_string(dtype_of<T>)), t, single);
    INFO(f.report());
    CHECK(f.empty());
  }
}

}  // namespace

TEST_CASE("training under mpirun: every parallel mode gives the single-process losses and gradients", "[train]") {
  if (rank() == 0) WARN("training slice: " << spsd_test::train_data_source());
  check_parity<float>(20);
  check_parity<double>(20);
  check_parity<spsd::bfloat16>(8);  // bfloat16 compute on float32 masters
}

TEST_CASE("GradScaler under mpirun: one rank's overflow skips the step on every rank", "[train][scaler]") {
  spsd_test::Failures f;
  spsd_test::check_grad_scaler(f);
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("GPT under mpirun: every parallel mode gives the single-process losses and gradients", "[train][gpt]") {
  std::vector<int64_t> world(world_size());
  for (int r = 0; r < world_size(); ++r) world[r] = r;
  if (rank() == 0) WARN("GPT text: " << spsd_test::gpt_text_source());
  const spsd_test::TrainTrace single = spsd_test::gpt_trace<double>("data", {0}, 3, false);
  for (const std::string mode : {"data", "sequence", "tensor", "2d", "2d-sequence"}) {
    if (mode.starts_with("2d") && world.size() % 2 != 0) continue;
    const spsd_test::TrainTrace t = spsd_test::gpt_trace<double>(mode, world, 3, false);
    spsd_test::Failures f;
    if (rank() == 0) spsd_test::expect_same_training<double>(f, mode + " on " + std::to_string(world.size()) + " ranks", t, single);
    INFO(f.report());
    CHECK(f.empty());
  }
}
