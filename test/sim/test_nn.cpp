// test_nn (sim): the layers of spsd/nn (docs/modules.md).
#include <catch2/catch.hpp>

#include "sim_helpers.hpp"

using namespace spsd;

TEST_CASE("smoke: a TransformerBlock on 4 ranks with a batch-split input equals one rank", "[nn]") {
  const nn::TransformerConfig c{.dim = 8, .heads = 2, .hidden = 16};
  const Shape s{4, 3, 8};
  std::vector<double> single, parallel;
  std::vector<std::string> names;
  for (int world : {1, 4}) {
    spsd::simulate(world, [&] {
      const Placement p = spsd_test::mesh_placement(Shape{world});
      nn::Init init{p, 7};
      nn::TransformerBlock<double> block(init, c);
      auto x = randn<double>(s, p, NdSbp(world == 1 ? sbp::broadcast : sbp::split(0)), 3);
      auto y = block(x).full().to_vector();
      if (rank() == 0) {
        (world == 1 ? single : parallel) = y;
        names.clear();
        for (auto& [n, t] : block.named_parameters()) names.push_back(n);
      }
    });
  }
  REQUIRE(single.size() == parallel.size());
  for (size_t i = 0; i < single.size(); ++i) CHECK(std::abs(single[i] - parallel[i]) < 1e-12);
  CHECK(names == std::vector<std::string>{"ln1.weight", "ln1.bias", "attn.q.weight", "attn.q.bias", "attn.k.weight",
                                          "attn.k.bias", "attn.v.weight", "attn.v.bias", "attn.out.weight",
                                          "attn.out.bias", "ln2.weight", "ln2.bias", "mlp.fc1.weight", "mlp.fc1.bias",
                                          "mlp.fc2.weight", "mlp.fc2.bias"});
}
