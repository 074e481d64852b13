#pragma once
// GradScaler: loss scaling for float16 training (PyTorch's torch.amp.GradScaler, the same
// defaults). float16's smallest normal value is 6e-5, so small activation gradients underflow
// to zero; multiplying the loss by a large power of two keeps them representable. Before the
// optimizer steps, the gradients are divided by the scale again and checked: a gradient with
// inf or NaN anywhere (the scale was too large) skips the step and halves the scale; after
// growth_interval clean steps the scale doubles.
//
//   GradScaler scaler;
//   backward(scaler.scale(loss));   // loss in float32: cast float16 logits first
//   scaler.step(optimizer);         // unscale, check, step unless inf/NaN
//   scaler.update();                // adjust the scale
//
// The check spans the world: each rank looks at its own pieces of the (boxed) gradients, then
// one all-reduce of one float over every rank decides, so every rank of every placement skips
// or steps alike. unscale, step and update are collective over the world (all ranks call them,
// also ranks outside the parameters' placement). bfloat16 has float32's range and needs no
// scaler.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "spsd/autograd/node.hpp"
#include "spsd/kernel/any_device.hpp"
#include "spsd/op/elementwise.hpp"

namespace spsd {

// GradScaler's settings, torch.amp.GradScaler's defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps before the scale grows
};

namespace detail {

// Accumulates "some gradient piece held inf or NaN" per device type, without a host wait per
// tensor: one float flag where the pieces live, read once by found_anywhere().
class NonfiniteFlags {
 public:
  template <FloatingElement T>
  void check(const GlobalTensor<T>& g) {
    if (!g.placement().contains(rank())) return;
    const Tensor<T>& local = g.to_local();
    const DeviceType device = g.placement().device_type();
    kernel::note_nonfinite<T>(kernel::Target::of(device), local.data(), local.numel(), flag_on(device));
  }
  // Whether any rank of the world noted one: an all-reduce (max) of one float over the world.
  bool found_anywhere();

 private:
  float* flag_on(DeviceType device);
  std::vector<std::pair<DeviceType, Tensor<float>>> flags_;
};

}  // namespace detail

// Loss scaling for float16 training: scale the loss, then step and update through it (above).
class GradScaler {
 public:
  // Starts at options.init_scale. Error: init_scale not finite and positive, growth_factor not
  // finite and > 1, backoff_factor outside (0, 1), or growth_interval <= 0.
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale. A float32 (or float64) loss: scaled float16 values would overflow at 65504.
  template <class T>
    requires std::same_as<T, float> || std::same_as<T, double>
  GlobalTensor<T> scale(const GlobalTensor<T>& loss) const {
    detail::check_not_capturing("GradScaler::scale", "the scale changes between steps, and a replay would keep the "
                                "one captured; scale the loss outside a compiled step");
    return loss * static_cast<T>(scale_);
  }

  // Divides the gradients of opt's parameters by the scale, boxed to the parameters' layouts
  // (the boxing opt.step() would do: it then finds them boxed), and checks them for inf/NaN
  // across the world. Once per optimizer per step; step() calls it when the user has not (to
  // clip gradients, call it first).
  template <class Optimizer>
  void unscale(Optimizer& opt) {
    check_not_stepped("GradScaler::unscale", &opt);
    if (std::find(unscaled_.begin(), unscaled_.end(), static_cast<const void*>(&opt)) != unscaled_.end()) return;
    unscaled_.push_back(&opt);
    NoGradGuard no_grad;
    detail::NonfiniteFlags flags;
    for (auto p : opt.params()) {
      using T = typename decltype(p)::value_type;
      if (!p.has_grad()) continue;
      const GlobalTensor<T> g = p.grad().to_global(p.placement(), p.nd_sbp()) * static_cast<T>(1.0 / scale_);
      p.autograd_meta()->grad = g.data();
      flags.check(g);
    }
    found_nonfinite_ = flags.found_anywhere() || found_nonfinite_;
  }

  // opt.step() unless a gradient held inf or NaN on some rank; true when it stepped.
  template <class Optimizer>
  bool step(Optimizer& opt) {
    unscale(opt);
    stepped_.push_back(&opt);
    if (found_nonfinite_) return false;
    opt.step();
    return true;
  }

  // Ends the step: halves (backoff_factor) the scale after inf/NaN, doubles (growth_factor)
  // it after growth_interval clean steps in a row.
  void update();

  // The current scale (the loss multiplier).
  double scale_value() const { return scale_; }
  // Whether this step's gradients held inf or NaN (after unscale/step, before update).
  bool found_nonfinite() const { return found_nonfinite_; }

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t clean_steps_ = 0;
  bool found_nonfinite_ = false;
  std::vector<const void*> unscaled_, stepped_;  // optimizers unscaled, stepped in this step

  // A second step() (or unscale()) of one optimizer without update() in between would leave
  // the new gradients scaled: an error, not a silent wrong step.
  void check_not_stepped(const char* op, const void* opt) const;
};

}  // namespace spsd
