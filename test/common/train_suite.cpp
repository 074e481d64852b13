#include "train_suite.hpp"

#include <array>
#include <cmath>
#include <numeric>

#include "train/fashion_mnist.hpp"
#include "train/mlp.hpp"

namespace spsd_test {

using namespace spsd;

namespace {

constexpr int64_t kSlice = 200, kBatch = 20, kHidden = 32;

const examples::Dataset& slice() {
  static const examples::Dataset d = examples::have_fashion_mnist()
                                         ? examples::read_idx(examples::kFashionMnistDir, "train", kSlice)
                                         : examples::generated_dataset(kSlice, 3);
  return d;
}

template <class T>
auto make_optimizer(const std::vector<GlobalTensor<T>>& params) {
  if constexpr (std::is_same_v<T, float>) return SGD<float>(params, {.lr = 0.05, .momentum = 0.9});
  else return Adam<double>(params, {.lr = 1e-3});
}

// {loss rtol, gradient atol, gradient rtol}: the header's table.
template <class C>
std::array<double, 3> training_tolerance() {
  if constexpr (std::is_same_v<C, double>) return {1e-10, 1e-12, 1e-9};
  else if constexpr (std::is_same_v<C, float>) return {1e-4, 1e-5, 1e-4};
  else return {2e-2, 2e-3, 5e-2};
}

}  // namespace

std::string train_data_source() {
  return examples::have_fashion_mnist() ? "the first 200 Fashion-MNIST training samples"
                                        : "a generated 200-sample stand-in (dataset-fashion-mnist is not installed)";
}

// C: the compute type; T: the parameters' (float32 masters for 16-bit compute).
template <class C>
TrainTrace train_trace(const std::string& mode, const std::vector<int64_t>& ranks, int steps, const std::string& device) {
  using T = std::conditional_t<is_half_v<C>, float, C>;
  (void)slice();  // read before any rank starts communicating
  const nn::Plan plan = examples::mlp_plan(mode);
  const Placement placement = examples::mlp_placement(mode, ranks, device);
  const NdSbp batch = nn::input_layout(plan);
  examples::Mlp<T> model({placement, 5}, examples::kPixels, kHidden, examples::kClasses);
  nn::parallelize(model, plan);
  auto optimizer = make_optimizer<T>(model.parameters());
  const bool member = placement.contains(rank());
  TrainTrace trace;
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> rows(kBatch);
    std::iota(rows.begin(), rows.end(), (s * kBatch) % kSlice);
    // The loss in T: 16-bit logits are cast up first (as torch.autocast runs cross-entropy in float32).
    GlobalTensor<T> loss = cross_entropy(cast<T>(model(examples::image_batch<C>(slice(), rows, placement, batch))),
                                         examples::label_batch(slice(), rows, placement, batch));
    optimizer.zero_grad();
    backward(loss);
    if (s == 0)
      for (const GlobalTensor<T>& p : model.parameters()) {
        const std::vector<T> g = p.grad().full().to_vector();
        if (member) trace.first_gradients.emplace_back(g.begin(), g.end());
      }
    optimizer.step();
    const std::vector<T> value = loss.full().to_vector();
    if (member) trace.losses.push_back(value[0]);
  }
  return trace;
}

template <class C>
void expect_same_training(Failures& failures, const std::string& what, const TrainTrace& got, const TrainTrace& want) {
  const auto [loss_rtol, grad_atol, grad_rtol] = training_tolerance<C>();
  // Two empty traces (ranks outside the placement, a run of no steps) would compare equal.
  if (want.losses.empty() || want.first_gradients.empty())
    return failures.add(what + ": the reference recorded " + std::to_string(want.losses.size()) + " losses and " +
                        std::to_string(want.first_gradients.size()) + " gradients: nothing to compare");
  if (got.losses.size() != want.losses.size() || got.first_gradients.size() != want.first_gradients.size())
    return failures.add(what + ": recorded " + std::to_string(got.losses.size()) + " losses and " +
                        std::to_string(got.first_gradients.size()) + " gradients, expected " +
                        std::to_string(want.losses.size()) + " and " + std::to_string(want.first_gradients.size()));
  for (size_t p = 0; p < want.first_gradients.size(); ++p)
    if (got.first_gradients[p].size() != want.first_gradients[p].size() || want.first_gradients[p].empty())
      return failures.add(what + ": the gradient of parameter " + std::to_string(p) + " has " +
                          std::to_string(got.first_gradients[p].size()) + " elements, expected " +
                          std::to_string(want.first_gradients[p].size()));
  for (size_t s = 0; s < want.losses.size(); ++s)
    if (!(std::abs(got.losses[s] - want.losses[s]) <= loss_rtol * std::abs(want.losses[s])))
      return failures.add(what + ": step " + std::to_string(s + 1) + " loss " + std::to_string(got.losses[s]) +
                          ", single process " + std::to_string(want.losses[s]));
  for (size_t p = 0; p < want.first_gradients.size(); ++p)
    for (size_t i = 0; i < want.first_gradients[p].size(); ++i) {
      const double g = got.first_gradients[p][i], w = want.first_gradients[p][i];
      if (!(std::abs(g - w) <= grad_atol + grad_rtol * std::abs(w)))
        return failures.add(what + ": gradient of parameter " + std::to_string(p) + " element " + std::to_string(i) +
                            " is " + std::to_string(g) + ", single process " + std::to_string(w));
    }
}

#define SPSD_TRAIN_SUITE_INSTANCES(prefix, C)                                                                \
  template TrainTrace train_trace<C>(const std::string&, const std::vector<int64_t>&, int, const std::string&); \
  template void expect_same_training<C>(Failures&, const std::string&, const TrainTrace&, const TrainTrace&);
SPSD_TRAIN_SUITE_INSTANCES(, float)
SPSD_TRAIN_SUITE_INSTANCES(, double)
SPSD_TRAIN_SUITE_INSTANCES(, spsd::bfloat16)

}  // namespace spsd_test
