#include "gpt_suite.hpp"

#include <random>
#include <spsd/spsd.hpp>

#include "train/gpt.hpp"
#include "train/text.hpp"

namespace spsd_test {

namespace {

const examples::Corpus& corpus() {
  static const examples::Corpus c = examples::have_fortunes() ? examples::read_fortunes(examples::kFortunesDir, 20000)
                                                              : examples::generated_corpus(20000, 3);
  return c;
}

}  // namespace

std::string gpt_text_source() { return corpus().source; }

template <class T>
TrainTrace gpt_trace(const std::string& mode, const std::vector<int64_t>& ranks, int steps, bool tied,
                     const std::string& device) {
  using namespace spsd;
  (void)corpus();  // read before any rank starts communicating
  const nn::Plan plan = examples::gpt_plan(mode);
  const Placement placement = examples::gpt_placement(mode, ranks, device);
  const NdSbp tokens = nn::input_layout(plan);
  const examples::GptConfig config{corpus().vocab_size(), /*context=*/8, /*dim=*/16, /*heads=*/4, /*layers=*/1,
                                   /*dropout=*/0.1, tied};
  examples::Gpt<T> model(config, {placement, 5000});
  nn::parallelize(model, plan);
  Adam<T> optimizer(model.parameters(), {.lr = 1e-2});
  std::mt19937_64 batches(11);
  TrainTrace trace;
  for (int s = 0; s < steps; ++s) {
    const examples::TextBatch b = examples::draw_batch(corpus(), 4, config.context, batches);
    manual_seed(static_cast<uint64_t>(s) + 1);  // every layout draws the same dropout masks
    const auto loss = cross_entropy(model.template forward<T>(from_host(b.inputs, placement, tokens)),
                                    from_host(b.targets, placement, tokens));
    optimizer.zero_grad();
    backward(loss);
    if (s == 0)
      for (const auto& p : model.parameters()) {
        const std::vector<T> g = p.grad().full().to_vector();  // collective: every rank
        if (placement.contains(rank())) trace.first_gradients.emplace_back(g.begin(), g.end());
      }
    optimizer.step();
    const double value = static_cast<double>(loss.item());
    if (placement.contains(rank())) trace.losses.push_back(value);
  }
  return trace;
}

template TrainTrace gpt_trace<float>(const std::string&, const std::vector<int64_t>&, int, bool, const std::string&);
template TrainTrace gpt_trace<double>(const std::string&, const std::vector<int64_t>&, int, bool, const std::string&);

}  // namespace spsd_test
