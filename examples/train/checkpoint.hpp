#pragma once
// Saving and resuming the training of examples/07_train_mlp (and of its test), or of any nn
// module trained with Adam: the parameters ("model." + their names), the optimizer's state
// ("optim.": step count, learning rate, moments by parameter name) and the loop's step count as
// one checkpoint (docs/checkpoints.md). Loading reshards: a run saved on some ranks and layouts
// resumes on others. On the same ranks and layouts a resumed run continues the loss curve of an
// uninterrupted one bit for bit. Make the optimizer from model.named_parameters().
#include <concepts>
#include <cstdint>
#include <spsd/spsd.hpp>
#include <string>

namespace examples {

namespace detail {
// The state of a training run, sharing storage with the model and the optimizer: loading into
// it writes them in place.
template <std::floating_point T>
spsd::StateDict training_state(const spsd::nn::Module<T>& model, spsd::Adam<T>& optimizer, int64_t step) {
  spsd::StateDict state = model.state_dict("model.");
  state.merge(optimizer.state_dict("optim."));
  state.insert("step", optimizer.scalar_entry(step));
  return state;
}
}  // namespace detail

// Collective over the world: writes the training state after `step` steps into dir.
template <std::floating_point T>
void save_training(const std::string& dir, const spsd::nn::Module<T>& model, spsd::Adam<T>& optimizer, int64_t step) {
  spsd::save_checkpoint(detail::training_state(model, optimizer, step), dir);
}

// Collective over the world: loads what save_training wrote into the model's parameters and the
// optimizer (in their own layouts, in place); returns the step count to continue from.
template <std::floating_point T>
int64_t resume_training(const std::string& dir, spsd::nn::Module<T>& model, spsd::Adam<T>& optimizer) {
  spsd::StateDict state = detail::training_state(model, optimizer, 0);
  spsd::load_checkpoint(dir, state);
  optimizer.load_state_dict(state, "optim.");
  return state.at<int64_t>("step").item();
}

}  // namespace examples
