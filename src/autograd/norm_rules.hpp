#pragma once
// The backward rules of layer_norm, rms_norm and dropout (norm_rules.cpp), which rules.cpp's
// table takes in by name.
#include <span>
#include <string_view>

#include "spsd/autograd/node.hpp"

namespace spsd::detail {

struct NamedBackward {
  std::string_view op;
  BackwardFn f32, f64, bf16, f16;
};

std::span<const NamedBackward> norm_backward_rules();

}  // namespace spsd::detail
