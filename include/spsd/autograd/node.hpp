#pragma once
// The tape: while grad mode is on, every global op (and to_global) with an input that requires
// grad gives its output a GradNode: the op's name, attributes, scalar operand, its inputs and
// output (saved by reference: storage is shared, nothing is copied), which inputs want a
// gradient, and the op's backward rule for the element type. Nodes are numbered in program
// order; since every rank issues the same ops in the same order (SPSD), every rank builds the
// same graph and backward issues the same ops everywhere.
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "spsd/op/dispatch.hpp"

namespace spsd {

namespace detail {

inline thread_local bool grad_mode = true;  // per thread: simulated ranks are threads

using GradList = std::vector<std::optional<GlobalData>>;
// Writes d loss / d input i into grad_in[i] for the inputs that want one (may leave others empty).
using BackwardFn = void (*)(const GradNode& node, const GlobalData& grad_out, GradList& grad_in);

struct GradNode {
  std::string_view op;  // static names: Op::name, "to_global"
  OpAttrs attrs;
  Scalar scalar;
  std::vector<GlobalData> inputs;
  GlobalData output;
  std::vector<std::shared_ptr<AutogradMeta>> input_meta;  // null where no gradient is wanted
  BackwardFn backward = nullptr;                          // null: the op has no rule
  uint64_t sequence = 0;                                  // program order on this rank
  std::optional<GlobalData> grad_out;                     // summed during a backward pass
};

// The backward rule of op for an output of this dtype (the double one for kFloat64, else the
// float one), or null when op has none: src/autograd/rules.cpp, compiled into the library.
BackwardFn backward_rule(std::string_view op, DType dtype);

inline uint64_t next_sequence() {
  thread_local uint64_t n = 0;
  return ++n;
}

inline void attach_node(std::shared_ptr<GradNode> node, std::shared_ptr<AutogradMeta>& out_meta) {
  node->backward = backward_rule(node->op, node->output.dtype);
  node->sequence = next_sequence();
  out_meta = std::make_shared<AutogradMeta>();
  out_meta->requires_grad = true;
  out_meta->grad_fn = std::move(node);
}

inline std::shared_ptr<AutogradMeta> wanting_grad(const std::shared_ptr<AutogradMeta>& m) {
  return m && m->requires_grad ? m : nullptr;
}

inline void record_op(std::string_view op, const OpAttrs& attrs, const Scalar& scalar, std::span<const InputRef> inputs,
                      const GlobalData& out, std::shared_ptr<AutogradMeta>& out_meta) {
  if (!grad_mode) return;
  auto node = std::make_shared<GradNode>(GradNode{.op = op, .attrs = attrs, .scalar = scalar, .output = out});
  for (const InputRef& in : inputs) {
    node->inputs.push_back({*in.shape, in.dtype, *in.placement, *in.nd_sbp, *in.local});
    node->input_meta.push_back(wanting_grad(*in.autograd));
  }
  attach_node(std::move(node), out_meta);
}

inline void record_boxing(const GlobalData& in, const std::shared_ptr<AutogradMeta>& in_meta, const GlobalData& out,
                          std::shared_ptr<AutogradMeta>& out_meta) {
  if (!grad_mode) return;
  attach_node(std::make_shared<GradNode>(
                  GradNode{.op = "to_global", .inputs = {in}, .output = out, .input_meta = {wanting_grad(in_meta)}}),
              out_meta);
}

// Installs the recorders before main (any program that includes autograd records).
inline const bool recorders_installed = [] {
  op_recorder = &record_op;
  boxing_recorder = &record_boxing;
  return true;
}();

}  // namespace detail

// Grad mode: while off (NoGradGuard), ops record nothing (evaluation, optimizer updates).
inline bool is_grad_enabled() { return detail::grad_mode; }

class NoGradGuard {
 public:
  NoGradGuard() : previous_(detail::grad_mode) { detail::grad_mode = false; }
  ~NoGradGuard() { detail::grad_mode = previous_; }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace spsd
