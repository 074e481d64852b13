#pragma once
// Learning-rate schedules: a scheduler sets its optimizer's learning rate to base_lr * f(step),
// base_lr the optimizer's lr when the scheduler was made, step the number of step() calls so
// far. As torch's LRScheduler: the constructor applies f(0), and each step(), called after the
// optimizer's step(), advances and applies the next value.
//
//   Adam<float> adam(model.named_parameters(), {.lr = 3e-4});
//   CosineWithWarmup schedule(adam, {.warmup_steps = 100, .total_steps = 10000});
//   for (...) { backward(loss); adam.step(); schedule.step(); adam.zero_grad(); }
//
// The four schedules: LinearWarmup (0 -> 1 over the warmup, then 1), CosineWithWarmup (the
// warmup, then half a cosine down to min_factor at total_steps, then min_factor), StepDecay
// (gamma^(step / step_size)) and LambdaLR (a user function of the step). f is evaluated in
// double on every rank; the learning rate must come out the same on every rank, which the
// optimizers' cross-rank check verifies at each update (a LambdaLR reading rank() would be
// caught there). The step count is state: state_dict()/load_state_dict() save and resume it
// with the optimizer's (io/checkpoint.hpp), so a resumed run continues the schedule.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "spsd/autograd/optim.hpp"

namespace spsd {

// The base of the schedules: sets optimizer.lr() to base_lr() * factor(step) (above). Holds a
// reference to its optimizer, which must outlive it; not copyable.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one step and sets the optimizer's learning rate for the next update.
  void step() {
    const detail::HostStep replayed(name_, [this] { step(); });  // a compiled step runs it again
    go_to(step_ + 1);
  }
  int64_t last_step() const { return step_; }
  double base_lr() const { return base_lr_; }
  // The learning rate this schedule gives at a step (what the optimizer has after that many step() calls).
  double lr_at(int64_t step) const { return base_lr_ * checked_factor(step); }

  // prefix + "last_step": a 0-d int64 on the optimizer's placement.
  StateDict state_dict(const std::string& prefix = "") const;
  // Continues from the step sd holds (and sets the optimizer's lr for it). Collective over the world.
  void load_state_dict(const StateDict& sd, const std::string& prefix = "");

 protected:
  // Takes optimizer.lr() as base_lr; the derived constructor calls start() once its own
  // parameters are checked (factor() reads them).
  LRScheduler(std::string_view name, OptimizerBase& optimizer);
  void start() { go_to(0); }
  // The multiplier of base_lr at step (>= 0).
  virtual double factor(int64_t step) const = 0;
  std::string_view name_;

 private:
  double checked_factor(int64_t step) const;
  void go_to(int64_t step);
  OptimizerBase& optimizer_;
  double base_lr_;
  int64_t step_ = 0;
};

// factor(s) = start_factor + (1 - start_factor) * min(s, warmup_steps) / warmup_steps: from
// start_factor (0: the first update takes no step, as Hugging Face's warmup) up to 1.
struct LinearWarmupOptions {
  int64_t warmup_steps = 0;  // >= 1
  double start_factor = 0;   // in [0, 1]
};
// Linear warmup to base_lr over warmup_steps, then base_lr (LinearWarmupOptions).
class LinearWarmup final : public LRScheduler {
 public:
  // Sets the optimizer's lr for step 0. Error: warmup_steps < 1 or start_factor outside [0, 1].
  LinearWarmup(OptimizerBase& optimizer, LinearWarmupOptions options);

 private:
  double factor(int64_t step) const override;
  LinearWarmupOptions options_;
};

// The linear warmup (from 0), then min_factor + (1 - min_factor) (1 + cos(pi p)) / 2 with p the
// fraction of the steps after the warmup up to total_steps (clamped to 1): Megatron-LM's and
// Hugging Face's cosine decay with warmup.
struct CosineWithWarmupOptions {
  int64_t warmup_steps = 0;  // >= 0
  int64_t total_steps = 0;   // > warmup_steps
  double min_factor = 0;     // in [0, 1]: the learning rate at the end, as a fraction of base_lr
};
// Linear warmup, then cosine decay to min_factor * base_lr (CosineWithWarmupOptions).
class CosineWithWarmup final : public LRScheduler {
 public:
  // Sets the optimizer's lr for step 0. Error: warmup_steps < 0, total_steps <= warmup_steps,
  // or min_factor outside [0, 1].
  CosineWithWarmup(OptimizerBase& optimizer, CosineWithWarmupOptions options);

 private:
  double factor(int64_t step) const override;
  CosineWithWarmupOptions options_;
};

// factor(s) = gamma^floor(s / step_size): torch's StepLR.
struct StepDecayOptions {
  int64_t step_size = 0;  // >= 1
  double gamma = 0.1;     // in [0, 1]
};
// Multiplies the learning rate by gamma every step_size steps (StepDecayOptions).
class StepDecay final : public LRScheduler {
 public:
  // Sets the optimizer's lr for step 0. Error: step_size < 1 or gamma outside [0, 1].
  StepDecay(OptimizerBase& optimizer, StepDecayOptions options);

 private:
  double factor(int64_t step) const override;
  StepDecayOptions options_;
};

// factor(s) = f(s), any function of the step: torch's LambdaLR. f must give a finite value >= 0
// (an Error otherwise, naming the step), the same on every rank.
class LambdaLR final : public LRScheduler {
 public:
  // Sets the optimizer's lr for step 0 (f(0)). Error: f is empty.
  LambdaLR(OptimizerBase& optimizer, std::function<double(int64_t step)> f);

 private:
  double factor(int64_t step) const override;
  std::function<double(int64_t)> f_;
};

}  // namespace spsd
