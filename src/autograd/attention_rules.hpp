#pragma once
// The backward rule of scaled_dot_product_attention (op/attention.hpp), registered by
// src/autograd/rules.cpp.
#include "spsd/autograd/node.hpp"

namespace spsd::detail {

// Node inputs (q, k, v, lse), output out: dq, dk, dv for the inputs that want them.
template <FloatingElement T>
void attention_backward(const GradNode& node, const GlobalData& grad_out, GradList& grad_in);

}  // namespace spsd::detail
