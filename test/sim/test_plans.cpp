// Parallelization plans under simulated ranks: data, tensor and sequence parallelism on meshes
// {1}, {2}, {4} and their 2-d combinations on 2x2 give the unparallelized run's losses and
// gradients (test/common/plan_suite.hpp); sequence parallelism moves Megatron-SP's bytes; the
// name patterns; the errors of a plan that does not fit its model; and ([scale], area
// sim-scale-256) the same training on 256 simulated ranks.
#include <catch2/catch.hpp>

#include "plan_suite.hpp"
#include "sim_helpers.hpp"

using namespace spsd;
using spsd_test::Failures;
using spsd_test::mesh_placement;
using spsd_test::PlanCase;
using spsd_test::PlanRun;

namespace {

// The model on one rank, no plan: the single-process run.
PlanRun single_process(const PlanCase& c) {
  PlanRun ref;
  simulate(1, [&] { ref = spsd_test::run_plan(mesh_placement(Shape{1}), nn::AxisPlan{.name = "none"}, c); });
  return ref;
}

}  // namespace

TEST_CASE("name patterns match the last components of a dotted name", "[plans]") {
  CHECK(nn::name_matches("attn.q.weight", "blocks.0.attn.q.weight"));
  CHECK(nn::name_matches("attn.q.weight", "attn.q.weight"));
  CHECK(nn::name_matches("blocks.*.attn.q.weight", "blocks.12.attn.q.weight"));
  CHECK(nn::name_matches("*.bias", "blocks.0.mlp.fc1.bias"));
  CHECK(nn::name_matches("fc*.weight", "mlp.fc2.weight"));
  CHECK(nn::name_matches("*", "weight"));
  CHECK_FALSE(nn::name_matches("q.weight", "attn.qq.weight"));     // whole components
  CHECK_FALSE(nn::name_matches("attn.q", "attn.q.weight"));        // anchored at the end
  CHECK_FALSE(nn::name_matches("*.q.weight", "q.weight"));         // * is one component
  CHECK_FALSE(nn::name_matches("blocks.*.weight", "blocks.0.attn.weight"));
  CHECK_FALSE(nn::name_matches("attn", ""));
}

TEST_CASE("input_layout and the factories' layouts", "[plans]") {
  CHECK(nn::input_layout(nn::data_parallel()) == NdSbp{sbp::split(0)});
  CHECK(nn::input_layout(nn::tensor_parallel()) == NdSbp{sbp::broadcast});
  CHECK(nn::input_layout(nn::Plan{nn::data_parallel(), nn::sequence_parallel()}) ==
        NdSbp({sbp::split(0), sbp::split(1)}));
  CHECK(nn::Plan{nn::data_parallel(), nn::tensor_parallel()}.to_string() == "(data, tensor)");
}

TEST_CASE("data, tensor, sequence and 2-d plans give the single-process losses and gradients", "[plans]") {
  const PlanCase c;
  const PlanRun ref = single_process(c);
  REQUIRE(ref.losses.size() == 3);
  REQUIRE(ref.losses[2] < ref.losses[0]);  // it trains
  struct Case {
    Shape mesh;
    nn::Plan plan;
  };
  const std::vector<Case> cases = {
      {Shape{1}, nn::data_parallel()},     {Shape{1}, nn::sequence_parallel()},
      {Shape{2}, nn::data_parallel()},     {Shape{2}, nn::tensor_parallel()},
      {Shape{2}, nn::sequence_parallel()}, {Shape{4}, nn::data_parallel()},
      {Shape{4}, nn::tensor_parallel()},   {Shape{4}, nn::sequence_parallel()},
      {Shape{2, 2}, nn::Plan{nn::data_parallel(), nn::tensor_parallel()}},
      {Shape{2, 2}, nn::Plan{nn::data_parallel(), nn::sequence_parallel()}},
      {Shape{2, 2}, nn::Plan{nn::tensor_parallel(), nn::data_parallel()}},
  };
  for (const Case& k : cases) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(k.mesh.numel()), [&](Failures& mine) {
      spsd_test::expect_same_run(mine, k.plan.to_string(), spsd_test::run_plan(mesh_placement(k.mesh), k.plan, c), ref);
    });
    INFO("mesh " << k.mesh << ", plan " << k.plan.to_string() << "\n" << f.report());
    CHECK(f.empty());
  }
}

TEST_CASE("sequence and tensor parallelism move Megatron's bytes: 4 all-gathers and 4 reduce-scatters, or 4 all-reduces, a block", "[plans]") {
  const PlanCase c;
  struct Case {
    Shape mesh;
    nn::Plan plan;
    size_t axis;
  };
  const std::vector<Case> cases = {{Shape{2}, nn::sequence_parallel(), 0},
                                   {Shape{4}, nn::sequence_parallel(), 0},
                                   {Shape{2, 2}, nn::Plan{nn::data_parallel(), nn::sequence_parallel()}, 1},
                                   {Shape{2}, nn::tensor_parallel(), 0},
                                   {Shape{4}, nn::tensor_parallel(), 0},
                                   {Shape{2, 2}, nn::Plan{nn::data_parallel(), nn::tensor_parallel()}, 1}};
  for (const Case& k : cases) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(k.mesh.numel()), [&](Failures& mine) {
      spsd_test::check_megatron_bytes(mine, mesh_placement(k.mesh), k.plan, k.axis, c);
    });
    INFO("mesh " << k.mesh << "\n" << f.report());
    CHECK(f.empty());
  }
  // The formula itself, against the numbers: t = 4, (4, 8, 16) doubles, 2 blocks:
  // 2 * 8 * 3/4 * 512 elements * 8 B.
  CHECK(spsd_test::megatron_sp_bytes(2, 4, 4, 8, 16, 8) == 2 * 8 * 3 * 512 * 8 / 4);
}

TEST_CASE("parallelize slices replicated parameters locally and keeps them trainable leaves", "[plans]") {
  Failures f = spsd_test::on_simulated_ranks(4, [](Failures& mine) {
    spsd_test::plan_model::Model model(nn::Init{mesh_placement(Shape{4}), 7}, 1, 16, 4);
    reset_comm_stats();
    nn::parallelize(model, nn::tensor_parallel());
    if (comm_stats().bytes_sent != 0) mine.add("parallelize sent " + comm_stats().to_string());
    for (auto& [name, p] : model.named_parameters()) {
      if (!p.requires_grad() || !p.is_leaf()) mine.add(name + " is no trainable leaf after parallelize");
      const bool column = name.find("attn.out") == std::string::npos && (name.find("attn.") != std::string::npos || name.find("fc1") != std::string::npos);
      const bool row = name.find(".out.weight") != std::string::npos || name.find("fc2.weight") != std::string::npos;
      const NdSbp want = column ? NdSbp{sbp::split(name.ends_with("weight") ? 1 : 0)}
                         : row  ? NdSbp{sbp::split(0)}
                                : NdSbp{sbp::broadcast};
      if (p.nd_sbp() != want) mine.add(name + " is " + p.nd_sbp().to_string() + ", expected " + want.to_string());
    }
    const auto& attn = model.blocks[0].attn;
    if (attn.out.boundary_layouts().output != std::vector<std::optional<Sbp>>{sbp::broadcast})
      mine.add("attn.out's output is not pinned B");
    if (!attn.boundary_layouts().input.empty()) mine.add("attn's input is pinned under tensor parallelism");
  });
  INFO(f.report());
  CHECK(f.empty());
  // Sequence parallelism on the second axis of 2x2: attention and the MLP gather the sequence on
  // entry, the row-parallel Linears scatter it on exit; the data axis pins nothing.
  f = spsd_test::on_simulated_ranks(4, [](Failures& mine) {
    spsd_test::plan_model::Model model(nn::Init{mesh_placement(Shape{2, 2}), 7}, 1, 16, 4);
    nn::parallelize(model, nn::Plan{nn::data_parallel(), nn::sequence_parallel()});
    const auto& block = model.blocks[0];
    using Pins = std::vector<std::optional<Sbp>>;
    const Pins gather{std::nullopt, sbp::broadcast}, scatter{std::nullopt, sbp::split(1)};
    if (block.attn.boundary_layouts().input != gather || block.mlp.boundary_layouts().input != gather)
      mine.add("attn's or mlp's input is not pinned (-, B)");
    if (block.attn.out.boundary_layouts().output != scatter || block.mlp.fc2.boundary_layouts().output != scatter)
      mine.add("attn.out's or mlp.fc2's output is not pinned (-, S(1))");
    if (!block.attn.q.boundary_layouts().input.empty() || !block.attn.boundary_layouts().output.empty())
      mine.add("a module no rule names has pins");
    if (block.attn.q.weight.nd_sbp() != NdSbp({sbp::broadcast, sbp::split(1)}))
      mine.add("attn.q.weight is " + block.attn.q.weight.nd_sbp().to_string());
  });
  INFO(f.report());
  CHECK(f.empty());
}

TEST_CASE("a plan that does not fit its model is an Error naming the misfit", "[plans]") {
  const auto error_of = [](const Shape& mesh, const nn::Plan& plan) {
    const std::vector<std::string> e = spsd_test::errors_by_rank(static_cast<int>(mesh.numel()), [&] {
      spsd_test::plan_model::Model model(nn::Init{mesh_placement(mesh), 7}, 1, 16, 4);
      nn::parallelize(model, plan);
    });
    for (const std::string& r : e) CHECK(r == e[0]);  // the same on every rank
    return e[0];
  };
  // A parameter that does not exist: named, with names that do.
  std::string e = error_of(Shape{2}, nn::tensor_parallel().with_parameter("attn.query.weight", sbp::split(1)));
  CHECK_THAT(e, Catch::Contains("nn::parallelize") && Catch::Contains("\"attn.query.weight\"") &&
                    Catch::Contains("blocks.0.attn.q.weight"));
  // A module that does not exist, for a boundary.
  e = error_of(Shape{2}, nn::data_parallel().with_output("attention.out", sbp::broadcast));
  CHECK_THAT(e, Catch::Contains("\"attention.out\"") && Catch::Contains("blocks.0.attn"));
  // Axis counts.
  e = error_of(Shape{2, 2}, nn::data_parallel());
  CHECK_THAT(e, Catch::Contains("nn::parallelize") && Catch::Contains("has 1 mesh axes") && Catch::Contains("has 2"));
  e = error_of(Shape{2}, nn::Plan{nn::data_parallel(), nn::tensor_parallel()});
  CHECK_THAT(e, Catch::Contains("(data, tensor)") && Catch::Contains("has 2 mesh axes"));
  // A split past a parameter's axes, a partial layout.
  e = error_of(Shape{2}, nn::data_parallel().with_parameter("ln1.weight", sbp::split(1)));
  CHECK_THAT(e, Catch::Contains("blocks.0.ln1.weight") && Catch::Contains("axis 1"));
  e = error_of(Shape{2}, nn::data_parallel().with_parameter("*", sbp::partial(ReduceOp::kSum)));
  CHECK_THAT(e, Catch::Contains("S or B"));
  // Every rule optional and none matching: a plan for another model.
  e = error_of(Shape{2}, nn::AxisPlan{.name = "other"}.with_parameter("encoder.*", sbp::split(0), true));
  CHECK_THAT(e, Catch::Contains("matches a parameter or module") && Catch::Contains("(other)"));
}

TEST_CASE("256 simulated ranks: a data-parallel and a 2-d training run give the single-process run", "[scale]") {
  // Simulation at scale: 256 rank threads (and their communication workers) on this machine.
  const PlanCase c{.batch = 256, .seq = 4, .dim = 8, .heads = 2, .layers = 1, .steps = 2};
  const PlanRun ref = single_process(c);
  struct Case {
    Shape mesh;
    nn::Plan plan;
  };
  const std::vector<Case> cases = {{Shape{256}, nn::data_parallel()},
                                   {Shape{128, 2}, nn::Plan{nn::data_parallel(), nn::tensor_parallel()}}};
  for (const Case& k : cases) {
    Failures f = spsd_test::on_simulated_ranks(static_cast<int>(k.mesh.numel()), [&](Failures& mine) {
      spsd_test::expect_same_run(mine, k.plan.to_string(), spsd_test::run_plan(mesh_placement(k.mesh), k.plan, c), ref);
    });
    INFO("mesh " << k.mesh << ", plan " << k.plan.to_string() << "\n" << f.report());
    CHECK(f.empty());
  }
}
