#pragma once
// Saving and resuming the training of examples/07_train_mlp (and of its test), or of any nn
// module trained with Adam: the parameters (state_dict()), Adam's state and the loop's step count
// as one checkpoint (docs/checkpoints.md). A resumed run continues the loss curve of an uninterrupted one bit for bit, on the same ranks and layouts.
#include <algorithm>
#include <optional>
#include <spsd/spsd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace examples {

namespace detail {
// A 0-d int64 on the model's placement, replicated.
template <std::floating_point T>
spsd::GlobalTensor<int64_t> scalar(const spsd::nn::Module<T>& model, int64_t value) {
  const spsd::Placement p = model.parameters().front().placement();
  return spsd::full<int64_t>(spsd::Shape{}, value, p, spsd::NdSbp(std::vector<spsd::Sbp>(p.mesh().ndim(), spsd::sbp::broadcast)));
}
}  // namespace detail

// Collective over the world: writes the training state after `step` steps into dir: the
// model's state_dict(), Adam's moments by parameter index, the step counts.
template <std::floating_point T>
void save_training(const std::string& dir, const spsd::nn::Module<T>& model, const spsd::Adam<T>& optimizer,
                   int64_t step) {
  spsd::StateDict state = model.state_dict();
  const spsd::AdamState<T> adam = optimizer.state();
  for (size_t i = 0; i < adam.exp_avg.size(); ++i) {
    if (adam.exp_avg[i]) state.insert("adam.exp_avg." + std::to_string(i), *adam.exp_avg[i]);
    if (adam.exp_avg_sq[i]) state.insert("adam.exp_avg_sq." + std::to_string(i), *adam.exp_avg_sq[i]);
  }
  state.insert("adam.steps", detail::scalar(model, adam.steps));
  state.insert("step", detail::scalar(model, step));
  spsd::save_checkpoint(state, dir);
}

// Collective over the world: loads what save_training wrote into the model's parameters (in
// their own layouts, in place) and the optimizer; returns the step count to continue from.
template <std::floating_point T>
int64_t resume_training(const std::string& dir, spsd::nn::Module<T>& model, spsd::Adam<T>& optimizer) {
  std::vector<std::string> stored;
  for (const spsd::CheckpointEntry& e : spsd::checkpoint_contents(dir)) stored.push_back(e.name);
  auto holds = [&](const std::string& name) { return std::find(stored.begin(), stored.end(), name) != stored.end(); };

  spsd::StateDict state = model.state_dict();
  const std::vector<spsd::GlobalTensor<T>> params = model.parameters();
  spsd::AdamState<T> adam{0, std::vector<std::optional<spsd::GlobalTensor<T>>>(params.size()),
                          std::vector<std::optional<spsd::GlobalTensor<T>>>(params.size())};
  for (size_t i = 0; i < params.size(); ++i) {
    const spsd::GlobalTensor<T>& p = params[i];
    // Moments exist once a parameter was updated; loaded into fresh tensors of its layout.
    for (auto [name, moment] : {std::pair{"adam.exp_avg." + std::to_string(i), &adam.exp_avg[i]},
                                std::pair{"adam.exp_avg_sq." + std::to_string(i), &adam.exp_avg_sq[i]}})
      if (holds(name)) {
        *moment = spsd::zeros<T>(p.shape(), p.placement(), p.nd_sbp());
        state.insert(name, **moment);
      }
  }
  state.insert("adam.steps", detail::scalar(model, 0));
  state.insert("step", detail::scalar(model, 0));
  spsd::load_checkpoint(dir, state);
  adam.steps = state.at<int64_t>("adam.steps").full().to_vector()[0];
  optimizer.load_state(std::move(adam));
  return state.at<int64_t>("step").full().to_vector()[0];
}

}  // namespace examples
