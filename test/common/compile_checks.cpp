#include "compile_checks.hpp"

#include <random>

#include "train/gpt.hpp"
#include "train/text.hpp"

namespace spsd_test {

namespace {
const examples::Corpus& compile_corpus() {
  static const examples::Corpus c = examples::generated_corpus(4000, 5);
  return c;
}
}  // namespace

template <class C>
CompiledRun gpt_compiled_run(const std::string& mode, const std::vector<int64_t>& ranks, int steps, bool compiled,
                             spsd::CompileOptions options, GptSize size, const std::optional<spsd::nn::Plan>& given,
                             const std::string& device) {
  using namespace spsd;
  const examples::Corpus& text = compile_corpus();
  const nn::Plan plan = given ? *given : examples::gpt_plan(mode);
  const Placement placement = examples::gpt_placement(mode, ranks, device);
  const NdSbp tokens = nn::input_layout(plan);
  const examples::GptConfig config{text.vocab_size(), size.context, size.dim, /*heads=*/4, /*layers=*/size.layers,
                                   /*dropout=*/0, /*tied=*/false};
  examples::Gpt<float> model(config, {placement, 5000});
  nn::parallelize(model, plan);
  Adam<float> optimizer(model.parameters(), {.lr = 1e-2});
  auto step = [&](const GlobalTensor<int64_t>& x, const GlobalTensor<int64_t>& y) {
    optimizer.zero_grad();
    const GlobalTensor<float> loss = cast<float>(cross_entropy(model.template forward<C>(x), y));
    backward(loss);
    optimizer.step();
    return loss;
  };
  auto compiled_step = spsd::compile(step, options);
  std::mt19937_64 batches(11);
  CompiledRun run;
  for (int s = 0; s < steps; ++s) {
    const examples::TextBatch b = examples::draw_batch(text, size.batch, config.context, batches);
    const GlobalTensor<int64_t> x = from_host(b.inputs, placement, tokens), y = from_host(b.targets, placement, tokens);
    reset_comm_stats();
    const GlobalTensor<float> loss = compiled ? compiled_step(x, y) : step(x, y);
    synchronize();
    run.last_step_sent = comm_stats().bytes_sent;
    const double value = loss.item();
    if (placement.contains(rank())) run.losses.push_back(value);
  }
  for (const auto& p : model.parameters()) {
    const std::vector<float> v = p.full().to_vector();  // collective over the placement
    if (placement.contains(rank())) run.parameters.emplace_back(v.begin(), v.end());
  }
  if (compiled) run.explanation = compiled_step.explain(), run.captures = compiled_step.captures();
  return run;
}

template CompiledRun gpt_compiled_run<float>(const std::string&, const std::vector<int64_t>&, int, bool,
                                             spsd::CompileOptions, GptSize, const std::optional<spsd::nn::Plan>&,
                                             const std::string&);
template CompiledRun gpt_compiled_run<spsd::bfloat16>(const std::string&, const std::vector<int64_t>&, int, bool,
                                                      spsd::CompileOptions, GptSize, const std::optional<spsd::nn::Plan>&,
                                                      const std::string&);

spsd::nn::SearchedPlan search_gpt_plan(const std::string& mode, const std::vector<int64_t>& ranks,
                                       const spsd::nn::Plan& plan, const spsd::nn::PlanSearchOptions& options,
                                       GptSize size) {
  using namespace spsd;
  const examples::Corpus& text = compile_corpus();
  const Placement placement = examples::gpt_placement(mode, ranks, "cpu");
  const examples::GptConfig config{text.vocab_size(), size.context, size.dim, /*heads=*/4, /*layers=*/size.layers,
                                   /*dropout=*/0, /*tied=*/false};
  examples::Gpt<float> model(config, {placement, 5000});
  nn::parallelize(model, plan);
  Adam<float> optimizer(model.parameters(), {.lr = 1e-2});
  std::mt19937_64 batches(11);
  const examples::TextBatch b = examples::draw_batch(text, size.batch, config.context, batches);
  const NdSbp tokens = nn::input_layout(plan);
  const GlobalTensor<int64_t> x = from_host(b.inputs, placement, tokens), y = from_host(b.targets, placement, tokens);
  return nn::search_plan(
      model, plan,
      [&](const GlobalTensor<int64_t>& xs, const GlobalTensor<int64_t>& ys) {
        optimizer.zero_grad();
        backward(cross_entropy(model.forward<float>(xs), ys));
        optimizer.step();
      },
      options, x, y);
}

}  // namespace spsd_test
