// Boxing reuse (tensor/boxed_copies.hpp) on 4 simulated ranks: the suite of reuse_suite.hpp.
#include <catch2/catch.hpp>

#include "reuse_suite.hpp"
#include "sim_helpers.hpp"
#include "spsd/spsd.hpp"

using spsd_test::Failures;

TEST_CASE("boxing reuse on 4 simulated ranks", "[boxing][reuse]") {
  const std::pair<const char*, void (*)(Failures&)> checks[] = {
      {"layer norm's backward reduce-scatters its P(sum) gradient once", spsd_test::reuse_layer_norm_backward},
      {"copy_ between two boxings boxes again", spsd_test::reuse_copy_invalidates},
      {"an optimizer step invalidates its parameters' entries", spsd_test::reuse_optimizer_invalidates},
      {"empty pieces and ranks outside decide alike", spsd_test::reuse_empty_pieces_and_outside_ranks},
      {"entries are freed with their tensor", spsd_test::reuse_entries_freed},
      {"eviction under a budget is the same on every rank", spsd_test::reuse_eviction},
      {"the GPT's losses and gradients are bitwise those of reuse off", spsd_test::reuse_gpt_bitwise},
  };
  for (const auto& [name, check] : checks)
    DYNAMIC_SECTION(name) {
      const Failures f = spsd_test::on_simulated_ranks(4, check);
      INFO(f.report());
      CHECK(f.empty());
    }
}

TEST_CASE("boxing reuse: one rank forced to miss is an Error on every rank", "[boxing][reuse]") {
  const std::vector<std::string> messages =
      spsd_test::results_by_rank<std::string>(4, spsd_test::reuse_planted_divergence);
  for (size_t r = 0; r < messages.size(); ++r) {
    INFO("rank " << r << ": " << messages[r]);
    CHECK(messages[r].find("relu") != std::string::npos);
    CHECK(messages[r].find("reusing the boxed input 0") != std::string::npos);
  }
}
