// The layers of spsd/nn (docs/modules.md) under simulated ranks: the shared suite
// (test/common/nn_suite.hpp: every layer's forward and gradients against one rank, x in batch,
// sequence and feature splits, replicated and partial; a block against the ops by hand;
// dropout's masks in every layout; train/eval) on meshes 1, 2, 4 and 2x2; parameter names,
// initialization, bad input; state dicts through save/load_checkpoint across world sizes.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "nn_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
namespace suite = spsd_test::nn_suite;

TEST_CASE("nn layers on every mesh equal the single-process computation", "[nn]") {
  for (const Shape& mesh : {Shape{1}, Shape{2}, Shape{4}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      suite::run_nn_suite(spsd_test::mesh_placement(mesh), mine);
    });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("nn parameter names, initialization and bad input", "[nn]") {
  for (const Shape& mesh : {Shape{1}, Shape{2, 2}}) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(mesh.numel()), [&](Failures& mine) {
      const Placement p = spsd_test::mesh_placement(mesh);
      suite::check_names(p, mine);
      suite::check_init(p, mine);
      suite::check_bad_input(p, mine);
    });
    INFO("mesh " << mesh << "\n" << f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("nn state dicts round-trip through checkpoints across world sizes", "[nn]") {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "spsd-nn-XXXXXX").string();
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  // Saved on a 2x2 mesh, loaded on 1 and on 2 ranks; saved on 2 ranks, loaded on 4.
  const std::vector<std::pair<Shape, Shape>> cases = {{{2, 2}, {1}}, {{2, 2}, {2}}, {{2}, {4}}};
  for (auto& [from, to] : cases) {
    Failures f = spsd_test::on_simulated_ranks(4, [&](Failures& mine) {
      suite::check_state_dict_round_trip(spsd_test::mesh_placement(from), spsd_test::mesh_placement(to),
                                         dir + "/ckpt", mine);
    });
    INFO("saved on " << from << ", loaded on " << to << "\n" << f.report());
    CHECK(f.empty());
  }
  fs::remove_all(dir);
}
