// GPT parity under simulated ranks: the character GPT of examples/08_gpt, with dropout, on 4
// ranks under each of its plans (data, Megatron sequence, tensor, 2d and 2d-sequence; and
// sequence-parallel on 3 ranks and tensor-parallel on 2: uneven splits), against one rank
// (test/common/gpt_suite.hpp).
#include <catch2/catch.hpp>

#include "gpt_suite.hpp"
#include "train/gpt.hpp"
#include "train/mlp.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

template <class T>
void check_gpt_parity(int steps, bool tied) {
  spsd_test::TrainTrace single;
  spsd::simulate(1, [&] { single = spsd_test::gpt_trace<T>("data", {0}, steps, tied); });
  const std::vector<std::pair<std::string, int>> runs = {{"data", 4}, {"sequence", 4}, {"tensor", 4}, {"2d", 4},
                                                         {"2d-sequence", 4}, {"sequence", 3}, {"tensor", 2}};
  for (const auto& [mode, n] : runs) {
    std::vector<int64_t> ranks(n);
    for (int r = 0; r < n; ++r) ranks[r] = r;
    Failures failures = spsd_test::on_simulated_ranks(n, [&](Failures& f) {
      const spsd_test::TrainTrace t = spsd_test::gpt_trace<T>(mode, ranks, steps, tied);
      spsd_test::expect_same_training<T>(f, mode + " on " + std::to_string(n) + " ranks, " +
                                                std::string(to_string(dtype_of<T>)) + (tied ? ", tied head" : ""),
                                         t, single);
    });
    INFO(failures.report());
    CHECK(failures.empty());
  }
}

}  // namespace

TEST_CASE("GPT: every parallel mode gives the single-process losses and gradients", "[train][gpt]") {
  WARN("GPT text: " << spsd_test::gpt_text_source());
  check_gpt_parity<double>(4, false);
  check_gpt_parity<float>(4, true);
}

TEST_CASE("GPT: an unknown --parallel mode, or a 2-d one on an odd world, is an Error naming it", "[train][gpt]") {
  CHECK_THROWS_WITH(examples::gpt_plan("pipeline"), Catch::Contains("gpt_plan") && Catch::Contains("\"pipeline\""));
  CHECK_THROWS_WITH(examples::gpt_placement("2d", 3), Catch::Contains("gpt_placement") && Catch::Contains("even"));
  CHECK_THROWS_WITH(examples::mlp_plan("sequence"), Catch::Contains("mlp_plan") && Catch::Contains("\"sequence\""));
}
