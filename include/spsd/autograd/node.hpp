#pragma once
// The tape: while grad mode is on, every global op (and to_global) with an input that requires
// grad gives its output a GradNode: the op's name, attributes, scalar operand, its inputs and
// output (saved by reference: storage is shared, nothing is copied), which inputs want a
// gradient, and the op's backward rule for the element type. Nodes are numbered in program
// order; since every rank issues the same ops in the same order (SPSD), every rank builds the
// same graph and backward issues the same ops everywhere.
#include <functional>
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
  // A node whose backward is not an op's rule but code that captured state (checkpoint(),
  // autograd/recompute.hpp): backward is then closure_backward, which calls it.
  std::function<void(const GradNode& node, const GlobalData& grad_out, GradList& grad_in)> closure;
  uint64_t sequence = 0;                                  // program order on this rank
  std::optional<GlobalData> grad_out;                     // summed during a backward pass
  // The versions of the saved pieces (Storage::version) when the node was recorded, inputs then
  // the output (0 where this rank holds no piece): backward refuses a node whose saved tensor
  // was written in place since (autograd/saved_tensors.hpp).
  std::vector<uint64_t> saved_versions;
  // Set once backward ran through the node without retain_graph: its saved pieces are dropped
  // (memory back), and a second backward through it is an Error.
  bool freed = false;
};

inline void closure_backward(const GradNode& node, const GlobalData& grad_out, GradList& grad_in) {
  node.closure(node, grad_out, grad_in);
}

// While non-null (checkpoint()'s forward), ops record no node, as under NoGradGuard, but an op
// with an input that requires grad sets *grad_probe: whether the output will need a node.
inline thread_local bool* grad_probe = nullptr;

// The backward rule of op for an output of this (floating) dtype, or null when op has none or
// the dtype is an integer one: src/autograd/rules.cpp, compiled into the library.
BackwardFn backward_rule(std::string_view op, DType dtype);

// The recorders of the hooks table (tensor/hooks.hpp; src/autograd/record.cpp): while grad mode
// is on, out's autograd state becomes a node of op (or "to_global") over these inputs.
void record_op(std::string_view op, const OpAttrs& attrs, const Scalar& scalar, std::span<const InputRef> inputs,
               const GlobalData& out, std::shared_ptr<AutogradMeta>& out_meta);
void record_boxing(const GlobalData& in, const std::shared_ptr<AutogradMeta>& in_meta, const GlobalData& out,
                   std::shared_ptr<AutogradMeta>& out_meta);
// Makes node (its closure set, its inputs, input_meta and output filled) out's grad_fn, numbered
// in program order like the nodes of ops.
void record_closure(std::shared_ptr<GradNode> node, std::shared_ptr<AutogradMeta>& out_meta);

}  // namespace detail

// Grad mode: while off (NoGradGuard), ops record nothing (evaluation, optimizer updates).
inline bool is_grad_enabled() { return detail::grad_mode; }

// Turns grad mode off on this thread while it lives (as torch.no_grad), then restores the
// previous mode. Not copyable.
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
