// Recording the tape (autograd/node.hpp): what the hooks table's record_op and record_boxing do.
#include "spsd/autograd/node.hpp"

namespace spsd::detail {

namespace {

uint64_t next_sequence() {
  thread_local uint64_t n = 0;
  return ++n;
}

uint64_t version_of(const GlobalData& t) { return t.local ? t.local->version() : 0; }

void attach_node(std::shared_ptr<GradNode> node, std::shared_ptr<AutogradMeta>& out_meta) {
  node->backward = node->closure ? &closure_backward : backward_rule(node->op, node->output.dtype);
  node->sequence = next_sequence();
  node->saved_versions.reserve(node->inputs.size() + 1);
  for (const GlobalData& in : node->inputs) node->saved_versions.push_back(version_of(in));
  node->saved_versions.push_back(version_of(node->output));
  out_meta = std::make_shared<AutogradMeta>();
  out_meta->requires_grad = true;
  out_meta->grad_fn = std::move(node);
}

std::shared_ptr<AutogradMeta> wanting_grad(const std::shared_ptr<AutogradMeta>& m) {
  return m && m->requires_grad ? m : nullptr;
}

// Called only for an input that requires grad (dispatch.hpp, GlobalTensor::to_global).
bool probed() {
  if (!grad_probe) return false;
  *grad_probe = true;
  return true;
}

}  // namespace

void record_op(std::string_view op, const OpAttrs& attrs, const Scalar& scalar, std::span<const InputRef> inputs,
               const GlobalData& out, std::shared_ptr<AutogradMeta>& out_meta) {
  if (!grad_mode || probed()) return;
  auto node = std::make_shared<GradNode>(GradNode{.op = op, .attrs = attrs, .scalar = scalar, .output = out});
  for (const InputRef& in : inputs) {
    node->inputs.push_back({*in.shape, in.dtype, *in.placement, *in.nd_sbp, *in.local, *in.boxed});
    node->input_meta.push_back(wanting_grad(*in.autograd));
  }
  attach_node(std::move(node), out_meta);
}

void record_boxing(const GlobalData& in, const std::shared_ptr<AutogradMeta>& in_meta, const GlobalData& out,
                   std::shared_ptr<AutogradMeta>& out_meta) {
  if (!grad_mode || probed()) return;
  attach_node(std::make_shared<GradNode>(
                  GradNode{.op = "to_global", .inputs = {in}, .output = out, .input_meta = {wanting_grad(in_meta)}}),
              out_meta);
}

void record_closure(std::shared_ptr<GradNode> node, std::shared_ptr<AutogradMeta>& out_meta) {
  attach_node(std::move(node), out_meta);
}

}  // namespace spsd::detail
