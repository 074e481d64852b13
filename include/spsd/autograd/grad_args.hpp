#pragma once
// What a backward rule sees of its op's node: the inputs, the output, the gradient of the output,
// which inputs want a gradient; and where it puts their gradients. The library's rules
// (src/autograd/rules.cpp) and a user op's backward (docs/custom_ops.md) take the same GradArgs:
//
//   struct MyOp {
//     ...
//     template <FloatingElement T>
//     static void backward(const GradArgs<T>& a) {   // y = x0 * x1
//       if (a.wants(0)) a.set(0, sum_to(a.g() * a.x(1), a.shape(0)));
//       if (a.wants(1)) a.set(1, sum_to(a.g() * a.x(0), a.shape(1)));
//     }
//   };
//
// A backward is written with global ops, so the gradients' layouts follow from the signatures the
// resolver picks, as forward results do; it runs on every rank, in the same order. An op's
// backward is added to the rule table on the op's first call (op_schema, op/dispatch.hpp), for
// the four floating types: it must compile for float, double, bfloat16 and float16.
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "spsd/autograd/node.hpp"
#include "spsd/op/reduce.hpp"
#include "spsd/op/shape_ops.hpp"

namespace spsd {

// A backward rule's view of its node (above): read the inputs, output and output gradient; set
// the gradient of each input that wants() one.
template <FloatingElement T>
struct GradArgs {
  using value_type = T;
  const detail::GradNode& node;
  const detail::GlobalData& grad_out;
  detail::GradList& grad_in;

  // Input i as the op saw it (by reference: nothing was copied).
  GlobalTensor<T> x(size_t i) const { return GlobalTensor<T>::from_data(node.inputs[i]); }
  // Input i of another element type (integer indices, a bool mask).
  template <Element U>
  GlobalTensor<U> x_as(size_t i) const { return GlobalTensor<U>::from_data(node.inputs[i]); }
  const Shape& shape(size_t i) const { return node.inputs[i].shape; }
  size_t num_inputs() const { return node.inputs.size(); }
  GlobalTensor<T> y() const { return GlobalTensor<T>::from_data(node.output); }  // the output
  GlobalTensor<T> g() const { return GlobalTensor<T>::from_data(grad_out); }     // d loss / d output
  // The scalar operand in the op's compute type (float for the 16-bit types): for arithmetic.
  compute_t<T> scalar() const { return node.scalar.as<compute_t<T>>(); }
  // The scalar operand as U, exactly as the op was given it when U is an integer type (a seed,
  // int64_t or uint64_t: scalar() would round it to float's 24 bits) or double.
  template <class U>
    requires std::is_arithmetic_v<U>
  U scalar_as() const {
    if constexpr (std::is_integral_v<U>) return static_cast<U>(node.scalar.i);
    else return static_cast<U>(node.scalar.f);
  }
  // The op's integer attributes, exact (OpAttrs is int64).
  const OpAttrs& attrs() const { return node.attrs; }
  // Whether input i wants a gradient (requires grad, or leads to one that does).
  bool wants(size_t i) const { return node.input_meta[i] != nullptr; }
  // d loss / d input i: the input's shape and element type (any layout, placement of the op).
  void set(size_t i, const GlobalTensor<T>& grad) const { set_as(i, grad); }
  template <Element U>
  void set_as(size_t i, const GlobalTensor<U>& grad) const {
    SPSD_CHECK(grad.shape() == node.inputs[i].shape && dtype_of<U> == node.inputs[i].dtype, node.op,
               "backward: the gradient of input ", i, " must be ", node.inputs[i].shape, " ", node.inputs[i].dtype,
               " like the input, got ", grad.shape(), " ", dtype_of<U>);
    grad_in[i] = grad.data();
  }
};

// g summed over the axes numpy broadcasting stretched, back to an input of this shape (the
// gradient of a broadcast operand): one reduction. Only leading axes (a bias (C) under (N, C)):
// drop them (keepdim off); only stretched size-1 axes: keep them. Both at once needs a reshape
// (a copy) after the sum.
template <Element T>
GlobalTensor<T> sum_to(const GlobalTensor<T>& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.shape().ndim() - shape.ndim();
  std::vector<int64_t> axes;
  bool stretched = false;
  for (int64_t d = 0; d < g.shape().ndim(); ++d) {
    const bool s = d >= lead && shape[d - lead] == 1 && g.shape()[d] != 1;
    if (d < lead || s) axes.push_back(d);
    stretched = stretched || s;
  }
  GlobalTensor<T> r = axes.empty() ? g : spsd::sum(g, axes, /*keepdim=*/stretched);
  return r.shape() == shape ? r : spsd::reshape(r, shape);
}

namespace detail {

// An op's backward per floating type (rules.cpp's table entry).
struct BackwardRule {
  BackwardFn f32 = nullptr, f64 = nullptr, bf16 = nullptr, f16 = nullptr;
};

// Adds a rule for an op outside the library's table; a second rule for one name (or a library
// op's name) is an Error naming it. src/autograd/rules.cpp.
void add_backward_rule(std::string_view op, const BackwardRule& rule);

template <class Op, FloatingElement T>
void run_backward(const GradNode& node, const GlobalData& grad_out, GradList& grad_in) {
  Op::template backward<T>(GradArgs<T>{node, grad_out, grad_in});
}

// Declared in op/dispatch.hpp, called by op_schema<Op>() for an op with a backward.
template <class Op>
void register_backward() {
  add_backward_rule(Op::name, {&run_backward<Op, float>, &run_backward<Op, double>, &run_backward<Op, bfloat16>,
                               &run_backward<Op, float16>});
}

}  // namespace detail

}  // namespace spsd
