// Training you can trust (issue 38) under simulated ranks: the rank-side checks of
// test/common/training_checks.hpp on 1 to 4 ranks (and the 2x2 mesh), then what needs several
// worlds or a folder: training resumed from a checkpoint of model, optimizer and scheduler in
// another world size and plan gives the losses of an uninterrupted run; load_checkpoint counts
// as an in-place write; learning rates that differ between ranks are caught.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "sim_helpers.hpp"
#include "temp_dir.hpp"
#include "training_checks.hpp"

using namespace spsd;
using spsd_test::Failures;

TEST_CASE("training checks: misuse errors, state dicts, learning rates, clipping on 1-4 ranks and 2x2",
          "[training-checks]") {
  for (int n : {1, 2, 3, 4}) {
    int cases = 0;
    const Failures failures = spsd_test::on_simulated_ranks(n, [&](Failures& f) {
      const int k = spsd_test::run_training_checks(f);
      if (rank() == 0) cases = k;
    });
    INFO(n << " simulated ranks:\n" << failures.report());
    CHECK(failures.empty());
    CHECK(cases > 0);
  }
}

namespace {

// train_resumable on a simulated world of this size; rank 0's losses.
std::vector<float> train(int world, const std::string& mode, int64_t from, int64_t to, const std::string& resume,
                         const std::string& save, bool resume_optimizer = true) {
  std::vector<float> losses;
  spsd::simulate(world, [&] {
    const std::vector<float> mine = spsd_test::train_resumable(mode, from, to, resume, save, resume_optimizer);
    if (rank() == 0) losses = mine;
  });
  return losses;
}

}  // namespace

TEST_CASE("training resumed in another world size and plan continues an uninterrupted run's losses",
          "[training-checks]") {
  const std::vector<float> straight = train(4, "2d", 0, 6, "", "");
  for (auto [world, mode] : {std::pair{2, "tensor"}, std::pair{1, "data"}, std::pair{3, "data"}}) {
    spsd_test::TempDir tmp;
    const std::vector<float> first = train(4, "2d", 0, 3, "", tmp.path);
    const std::vector<float> second = train(world, mode, 3, 6, tmp.path, "");
    INFO("resumed on " << world << " ranks, plan " << mode);
    REQUIRE(first.size() == 3);
    REQUIRE(second.size() == 3);
    for (int s = 0; s < 3; ++s) CHECK(first[s] == straight[s]);
    // Other layouts sum in other orders: equal up to float rounding.
    for (int s = 0; s < 3; ++s) CHECK(second[s] == Approx(straight[3 + s]).epsilon(1e-5));
  }
  // Without the optimizer's and the scheduler's state the losses differ: the check above can fail.
  spsd_test::TempDir tmp;
  train(4, "2d", 0, 3, "", tmp.path);
  const std::vector<float> model_only = train(2, "tensor", 3, 6, tmp.path, "", false);
  REQUIRE(model_only.size() == 3);
  CHECK(model_only[1] != Approx(straight[4]).epsilon(1e-5));
}

TEST_CASE("load_checkpoint into a tensor a graph saved makes backward refuse the graph", "[training-checks]") {
  spsd_test::TempDir tmp;
  const std::vector<std::string> errors = spsd_test::errors_by_rank(2, [&] {
    const Placement p("cpu", {0, 1});
    auto w = randn<float>({4}, p, sbp::split(0), 1).requires_grad_();
    save_checkpoint(w, tmp.path);
    const GlobalTensor<float> loss = sum(exp(w));
    StateDict sd;
    sd.insert("tensor", w);
    load_checkpoint(tmp.path, sd);
    backward(loss);
  });
  for (const std::string& e : errors) {
    CHECK_THAT(e, Catch::Contains("input 0 of exp") && Catch::Contains("modified in place") &&
                      Catch::Contains("load_checkpoint"));
  }
}

TEST_CASE("a learning rate that differs between ranks, set by a scheduler, is caught", "[training-checks]") {
  const std::vector<std::string> errors = spsd_test::errors_by_rank(2, [] {
    const Placement p("cpu", {0, 1});
    auto w = ones<float>({4}, p, sbp::broadcast).requires_grad_();
    Adam<float> adam({w}, {.lr = 0.1});
    LambdaLR schedule(adam, [](int64_t) { return rank() == 1 ? 0.5 : 1.0; });
    backward(sum(w));
    adam.step();
    detail::check_ops(p.ranks());
  });
  for (const std::string& e : errors) CHECK_THAT(e, Catch::Contains("adam_step(") && Catch::Contains("scalar operand"));
}
