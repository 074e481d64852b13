#include "grad_scaler_suite.hpp"

#include <cmath>
#include <numeric>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

namespace spsd_test {

using namespace spsd;

namespace {

// One step of loss = sum(w * x) (so d loss / d w = x) under the scaler; returns whether it stepped.
bool scaled_step(GradScaler& scaler, SGD<float>& opt, const GlobalTensor<float>& w, const GlobalTensor<float>& x) {
  opt.zero_grad();
  backward(scaler.scale(sum(w * x, {0, 1})));
  const bool stepped = scaler.step(opt);
  scaler.update();
  return stepped;
}

// x: ones, but for a value 1e35 in one element, which the last rank of the placement holds
// (layout-independent: the last element of the tensor is in the last rank's piece for S(0)/S(1)
// layouts). 1e35 * 2^16 overflows float32; 1e35 itself does not.
Tensor<float> ones_with_spike(const Shape& shape, bool spike) {
  std::vector<float> v(shape.numel(), 1.0f);
  if (spike) v.back() = 1e35f;
  return Tensor<float>::from_vector(shape, v);
}

void check_on(Failures& failures, const Placement& p, const NdSbp& layout, const std::string& what) {
  const Shape shape{4, 6};
  GlobalTensor<float> w = ones<float>(shape, p, layout);
  w.requires_grad_();
  SGD<float> opt({w}, {.lr = 0.5});
  GradScaler scaler({.growth_interval = 2});
  const std::string on = what + " on rank " + std::to_string(rank());
  auto expect = [&](bool ok, const std::string& text) {
    if (!ok) failures.add(on + ": " + text);
  };
  auto w_values = [&] {  // the whole w on its placement's ranks, nothing elsewhere
    const Tensor<float> whole = w.detach().full();
    return p.contains(rank()) ? whole.to_vector() : std::vector<float>{};
  };

  // 1: the spike overflows on one rank only: nobody steps, the scale halves everywhere.
  expect(!scaled_step(scaler, opt, w, from_host(ones_with_spike(shape, true), p, layout)),
         "stepped although one rank's gradient piece overflowed");
  for (float v : w_values()) expect(v == 1.0f, "a parameter changed on a skipped step: " + std::to_string(v));
  expect(scaler.scale_value() == 32768.0, "scale after an overflow is " + std::to_string(scaler.scale_value()));

  // 2, 3: clean steps: the gradient is x, unscaled exactly; after growth_interval = 2 of them the
  // scale doubles.
  for (int step = 0; step < 2; ++step)
    expect(scaled_step(scaler, opt, w, from_host(ones_with_spike(shape, false), p, layout)), "a clean step was skipped");
  for (float v : w_values()) expect(v == 0.0f, "after two steps of lr 0.5 on gradient 1, w is " + std::to_string(v));
  expect(scaler.scale_value() == 65536.0, "scale after two clean steps is " + std::to_string(scaler.scale_value()));

  // A second step without update() is an error, on every rank alike.
  opt.zero_grad();
  backward(scaler.scale(sum(w * from_host(ones_with_spike(shape, false), p, layout), {0, 1})));
  scaler.step(opt);
  try {
    scaler.step(opt);
    failures.add(on + ": a second step() without update() did not throw");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("update()") != std::string::npos, std::string("message: ") + e.what());
  }
  scaler.update();
}

}  // namespace

void check_grad_scaler(Failures& failures) {
  const int64_t n = world_size();
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), int64_t{0});
  check_on(failures, Placement("cpu", all), {sbp::split(0)}, "w S(0) on every rank");
  if (n == 4) check_on(failures, Placement("cpu", all, Shape{2, 2}), {sbp::split(0), sbp::split(1)}, "w (S(0), S(1)) on 2x2");
  // Parameters on the first half of the world: the other ranks hold nothing, and still skip.
  if (n >= 2) {
    const std::vector<int64_t> half(all.begin(), all.begin() + n / 2);
    check_on(failures, Placement("cpu", half), {sbp::split(1)}, "w S(1) on the first half of the world");
  }
}

}  // namespace spsd_test
