// The schedules of autograd/lr_scheduler.hpp.
#include "spsd/autograd/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace spsd {

LRScheduler::LRScheduler(std::string_view name, OptimizerBase& optimizer)
    : name_(name), optimizer_(optimizer), base_lr_(optimizer.lr()) {}

double LRScheduler::checked_factor(int64_t step) const {
  SPSD_CHECK(step >= 0, name_, "the step must be >= 0, got ", step);
  const double f = factor(step);
  SPSD_CHECK(std::isfinite(f) && f >= 0, name_, "the factor at step ", step, " is ", f,
             "; it must be finite and >= 0");
  return f;
}

void LRScheduler::go_to(int64_t step) {
  optimizer_.set_lr(lr_at(step));
  step_ = step;
}

StateDict LRScheduler::state_dict(const std::string& prefix) const {
  StateDict sd;
  sd.insert(prefix + "last_step", optimizer_.scalar_entry<int64_t>(step_));
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd, const std::string& prefix) {
  const std::string key = prefix + "last_step";
  SPSD_CHECK(sd.contains(key), detail::concat(name_, ".load_state_dict"), "the state dict has no \"", key, "\"");
  const GlobalTensor<int64_t> t = sd.at<int64_t>(key);
  SPSD_CHECK(t.shape().numel() == 1, detail::concat(name_, ".load_state_dict"), "\"", key, "\" must hold one value, it is ", t.describe());
  const int64_t step = t.item();
  SPSD_CHECK(step >= 0, detail::concat(name_, ".load_state_dict"), "\"", key, "\" must be >= 0, got ", step);
  go_to(step);
}

namespace {
void check_fraction(std::string_view op, std::string_view what, double v) {
  SPSD_CHECK(v >= 0 && v <= 1, op, what, " must be in [0, 1], got ", v);
}
}  // namespace

LinearWarmup::LinearWarmup(OptimizerBase& optimizer, LinearWarmupOptions options)
    : LRScheduler("LinearWarmup", optimizer), options_(options) {
  SPSD_CHECK(options.warmup_steps >= 1, name_, "warmup_steps must be >= 1, got ", options.warmup_steps);
  check_fraction(name_, "start_factor", options.start_factor);
  start();
}

double LinearWarmup::factor(int64_t step) const {
  const double done = static_cast<double>(std::min(step, options_.warmup_steps)) / static_cast<double>(options_.warmup_steps);
  return options_.start_factor + (1 - options_.start_factor) * done;
}

CosineWithWarmup::CosineWithWarmup(OptimizerBase& optimizer, CosineWithWarmupOptions options)
    : LRScheduler("CosineWithWarmup", optimizer), options_(options) {
  SPSD_CHECK(options.warmup_steps >= 0, name_, "warmup_steps must be >= 0, got ", options.warmup_steps);
  SPSD_CHECK(options.total_steps > options.warmup_steps, name_, "total_steps (", options.total_steps,
             ") must be greater than warmup_steps (", options.warmup_steps, ")");
  check_fraction(name_, "min_factor", options.min_factor);
  start();
}

double CosineWithWarmup::factor(int64_t step) const {
  const auto [warmup, total, end_factor] = options_;
  if (step < warmup) return static_cast<double>(step) / static_cast<double>(warmup);
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  return end_factor + (1 - end_factor) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

StepDecay::StepDecay(OptimizerBase& optimizer, StepDecayOptions options)
    : LRScheduler("StepDecay", optimizer), options_(options) {
  SPSD_CHECK(options.step_size >= 1, name_, "step_size must be >= 1, got ", options.step_size);
  check_fraction(name_, "gamma", options.gamma);
  start();
}

double StepDecay::factor(int64_t step) const {
  return std::pow(options_.gamma, static_cast<double>(step / options_.step_size));
}

LambdaLR::LambdaLR(OptimizerBase& optimizer, std::function<double(int64_t)> f)
    : LRScheduler("LambdaLR", optimizer), f_(std::move(f)) {
  SPSD_CHECK(f_ != nullptr, name_, "needs a function of the step");
  start();
}

double LambdaLR::factor(int64_t step) const { return f_(step); }

}  // namespace spsd
