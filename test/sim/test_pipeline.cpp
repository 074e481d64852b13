// Pipeline parallelism under simulated ranks (test/common/pipeline_checks.hpp): every schedule,
// 2 and 4 pipeline ranks, 1 to 8 micro-batches, stages of 1 and 2 ranks, on 2, 4 and 8 ranks.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "pipeline_checks.hpp"
#include "sim_helpers.hpp"
#include "temp_dir.hpp"
#include "train/gpt.hpp"

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

namespace {

// The values of every tensor of sd, by name, on every rank (B over the world).
std::map<std::string, std::vector<float>> values_of(const StateDict& sd) {
  std::vector<int64_t> ranks(world_size());
  for (int64_t r = 0; r < world_size(); ++r) ranks[r] = r;
  const Placement world("cpu", ranks);
  std::map<std::string, std::vector<float>> out;
  for (const std::string& name : sd.names())
    out[name] = sd.at<float>(name).to_global(world, NdSbp(std::vector<Sbp>{sbp::broadcast})).to_local().to_vector();
  return out;
}

// A 2-block GPT's forward as the runner's layers.
pipeline::Layers<float> gpt_layers(const examples::Gpt<float>& model) {
  pipeline::Layers<float> layers;
  layers.first("tok", [&](const GlobalTensor<int64_t>& t) { return model.tok.forward<float>(t) + model.positions; })
      .then("blocks.0", [&](const GlobalTensor<float>& x) { return model.blocks[0](x); })
      .then("blocks.1", [&](const GlobalTensor<float>& x) { return model.blocks[1](x); })
      .then("head", [&](const GlobalTensor<float>& x) { return (*model.head)(model.lnf(x)); })
      .loss([](const GlobalTensor<float>& logits, const GlobalTensor<int64_t>& y) { return cross_entropy(logits, y); });
  return layers;
}

}  // namespace

// Parameters keep their names in a pipeline: a checkpoint of a pipelined GPT loads into the same
// GPT unpipelined in another world size and plan, and back.
TEST_CASE("pipeline: checkpoints of a pipelined model load unpipelined and back, across world sizes", "[pipeline]") {
  spsd_test::TempDir piped, plain;
  const examples::GptConfig config{.vocab = 11, .context = 8, .dim = 16, .heads = 2, .layers = 2};
  std::map<std::string, std::vector<float>> saved_piped, loaded_plain, saved_plain, loaded_piped;
  // 4 ranks: 2 stages x 2 data-parallel ranks; one step of Adam moves the parameters off their seed.
  spsd::simulate(4, [&] {
    const Placement world("cpu", {0, 1, 2, 3});
    examples::Gpt<float> model(config, nn::Init{world, 7});
    const pipeline::Layers<float> layers = gpt_layers(model);
    const Placement first("cpu", {0, 1}), second("cpu", {2, 3});
    pipeline::Pipeline<float> pipe(model, layers, {{{"tok", "positions", "blocks.0"}, first}, {{"blocks.1", "lnf", "head"}, second}});
    Adam<float> opt(model.named_parameters(), AdamOptions{.lr = 0.01f});
    const NdSbp rows(std::vector<Sbp>{sbp::split(0)});
    const GlobalTensor<int64_t> tokens = zeros<int64_t>({4, 8}, first, rows) + int64_t{3};
    const GlobalTensor<int64_t> targets = zeros<int64_t>({4, 8}, second, rows) + int64_t{5};
    pipe.step(pipeline::one_f_one_b(2, 2), tokens, targets);
    opt.step();
    save_checkpoint(model.state_dict(), piped.path);
    const auto v = values_of(model.state_dict());
    if (rank() == 0) saved_piped = v;
  });
  // 2 ranks, tensor parallel, no pipeline: loads it, saves it again.
  spsd::simulate(2, [&] {
    examples::Gpt<float> model(config, nn::Init{Placement("cpu", {0, 1}), 99});
    nn::parallelize(model, examples::gpt_plan("tensor"));
    StateDict sd = model.state_dict();
    load_checkpoint(piped.path, sd);
    const auto v = values_of(sd);
    if (rank() == 0) loaded_plain = v;
    save_checkpoint(sd, plain.path);
  });
  // 3 ranks: 3 stages of one rank; loads what the unpipelined model saved.
  spsd::simulate(3, [&] {
    examples::Gpt<float> model(config, nn::Init{Placement("cpu", {0, 1, 2}), 98});
    const pipeline::Layers<float> layers = gpt_layers(model);
    pipeline::Pipeline<float> pipe(model, layers,
                                   {{{"tok", "positions"}, Placement("cpu", {0})},
                                    {{"blocks.0", "blocks.1"}, Placement("cpu", {1})},
                                    {{"lnf", "head"}, Placement("cpu", {2})}});
    StateDict sd = model.state_dict();
    load_checkpoint(plain.path, sd);
    const auto v = values_of(sd);
    if (rank() == 0) loaded_piped = v;
  });
  REQUIRE(!saved_piped.empty());
  CHECK(loaded_plain == saved_piped);  // bitwise: a checkpoint moves values, it does not compute
  CHECK(loaded_piped == saved_piped);
}
