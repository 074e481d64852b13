#include "spsd/autograd/grad_scaler.hpp"

#include <algorithm>
#include <numeric>

namespace spsd {

namespace detail {

float* NonfiniteFlags::flag_on(DeviceType device) {
  for (auto& [d, t] : flags_)
    if (d == device) return t.data();
  Tensor<float> flag(Shape{1}, Storage::allocate_uninitialized(sizeof(float), device));
  kernel::fill<float>(kernel::Target::of(device), flag.data(), 1, 0.0f);
  flags_.emplace_back(device, flag);
  return flags_.back().second.data();
}

bool NonfiniteFlags::found_anywhere() {
  float found = 0;
  for (auto& [device, flag] : flags_) found = std::max(found, flag.to(DeviceType::kCPU).data()[0]);
  std::vector<int64_t> world(static_cast<size_t>(world_size()));
  std::iota(world.begin(), world.end(), int64_t{0});
  communicator(world).all_reduce(&found, &found, 1, DType::kFloat32, ReduceOp::kMax);
  return found != 0;
}

}  // namespace detail

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  const auto finite_positive = [](double v) { return std::isfinite(v) && v > 0; };
  SPSD_CHECK(finite_positive(options.init_scale), "GradScaler", "init_scale must be finite and positive, got ",
             options.init_scale);
  SPSD_CHECK(std::isfinite(options.growth_factor) && options.growth_factor > 1, "GradScaler",
             "growth_factor must be finite and greater than 1, got ", options.growth_factor);
  SPSD_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1, "GradScaler",
             "backoff_factor must be in (0, 1), got ", options.backoff_factor);
  SPSD_CHECK(options.growth_interval > 0, "GradScaler", "growth_interval must be positive, got ",
             options.growth_interval);
}

void GradScaler::update() {
  if (found_nonfinite_) {
    scale_ *= options_.backoff_factor;
    clean_steps_ = 0;
  } else if (++clean_steps_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    clean_steps_ = 0;
  }
  found_nonfinite_ = false;
  unscaled_.clear();
  stepped_.clear();
}

void GradScaler::check_not_stepped(const char* op, const void* opt) const {
  SPSD_CHECK(std::find(stepped_.begin(), stepped_.end(), opt) == stepped_.end(), op,
             "this optimizer already stepped since the last update(): call update() once after each step");
}

}  // namespace spsd
