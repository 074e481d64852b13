#pragma once
// nn::Plan: how a model is parallelized, as layouts (docs/modules.md, "Parallelization plans").
// One AxisPlan per mesh axis says, for that axis, the layout of the data, of each parameter (by
// name pattern) and of module boundaries (by module path pattern); nn::parallelize (nn/
// parallelize.hpp) applies it. Nothing else is special: the layers stay single-device code, and
// Megatron's column/row-parallel layers and sequence parallelism are the layouts below.
//
//   nn::parallelize(model, nn::data_parallel());                                  // 1-d mesh
//   nn::parallelize(model, nn::Plan{nn::data_parallel(), nn::sequence_parallel()});  // 2-d mesh
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spsd/layout/nd_sbp.hpp"
#include "spsd/layout/sbp.hpp"

namespace spsd::nn {

// Whether the dotted name ("blocks.0.attn.q.weight") matches pattern: pattern's components
// match the name's last components one for one ("attn.q.weight" matches it, and the same
// parameter of a lone block, "attn.q.weight"); `*` in a component matches any characters
// except '.' ("blocks.*.mlp.fc1.weight", "*.bias"). Anchoring at the end only lets one plan
// serve a block, a stack of blocks and a whole model.
inline bool name_matches(std::string_view pattern, std::string_view name) {
  // Glob of one component (no dots on either side).
  const auto component = [](std::string_view p, std::string_view s) {
    size_t pi = 0, si = 0, star = std::string_view::npos, resume = 0;
    while (si < s.size()) {
      if (pi < p.size() && p[pi] == '*') star = pi++, resume = si;
      else if (pi < p.size() && p[pi] == s[si]) ++pi, ++si;
      else if (star != std::string_view::npos) pi = star + 1, si = ++resume;
      else return false;
    }
    while (pi < p.size() && p[pi] == '*') ++pi;
    return pi == p.size();
  };
  const auto split = [](std::string_view s) {
    std::vector<std::string_view> parts;
    for (size_t b = 0;;) {
      const size_t e = s.find('.', b);
      parts.push_back(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
      if (e == std::string_view::npos) return parts;
      b = e + 1;
    }
  };
  if (pattern.empty()) return name.empty();
  if (name.empty()) return false;
  const std::vector<std::string_view> p = split(pattern), n = split(name);
  if (p.size() > n.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (!component(p[p.size() - 1 - i], n[n.size() - 1 - i])) return false;
  return true;
}

// A layout for what a pattern names. A rule that matches nothing is an error in parallelize()
// (a misspelt name), unless optional: the factories' rules are, since a model may lack a layer
// kind (an MLP without attention).
struct Rule {
  std::string pattern;
  Sbp layout;
  bool optional = false;
};

// One mesh axis's part of a plan. Parameters no rule names are B; where several rules match,
// the last one wins, so with_parameter() refines a factory's plan. inputs / outputs pin a
// module's boundary (nn::Module::BoundaryLayouts) on this axis.
struct AxisPlan {
  std::string name;          // for messages: "data", "tensor", "sequence"
  std::optional<Sbp> data;   // the batch tensors' layout on this axis; none: B
  std::vector<Rule> parameters, inputs, outputs;

  // A copy with one more rule, appended (so it wins over earlier matches), for the parameters
  // pattern names (name_matches) or the inputs or outputs of the modules module_pattern names;
  // with_data: a copy with the data's layout set. parallelize() refuses a partial rule layout.
  AxisPlan with_parameter(std::string pattern, Sbp layout, bool optional = false) const {
    AxisPlan p = *this;
    p.parameters.push_back({std::move(pattern), layout, optional});
    return p;
  }
  AxisPlan with_input(std::string module_pattern, Sbp layout, bool optional = false) const {
    AxisPlan p = *this;
    p.inputs.push_back({std::move(module_pattern), layout, optional});
    return p;
  }
  AxisPlan with_output(std::string module_pattern, Sbp layout, bool optional = false) const {
    AxisPlan p = *this;
    p.outputs.push_back({std::move(module_pattern), layout, optional});
    return p;
  }
  AxisPlan with_data(Sbp layout) const {
    AxisPlan p = *this;
    p.data = layout;
    return p;
  }
};

// A plan: one AxisPlan per mesh axis of the model's placement, in mesh-axis order.
struct Plan {
  std::vector<AxisPlan> axes;

  Plan(AxisPlan axis) : axes{std::move(axis)} {}  // NOLINT: a 1-d plan is its axis
  // One AxisPlan per mesh axis, in mesh-axis order.
  Plan(std::initializer_list<AxisPlan> a) : axes(a) {}
  explicit Plan(std::vector<AxisPlan> a) : axes(std::move(a)) {}

  // The axes' names: "(data, tensor)".
  std::string to_string() const {
    std::string s = "(";
    for (size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + axes[i].name;
    return s + ")";
  }
};

// The layout batch tensors (inputs, targets) are given in under plan: each axis's data layout.
inline NdSbp input_layout(const Plan& plan) {
  std::vector<Sbp> axes;
  for (const AxisPlan& a : plan.axes) axes.push_back(a.data.value_or(sbp::broadcast));
  return NdSbp(std::move(axes));
}

// Data parallel: the batch split on its first axis, every parameter replicated (its gradient is
// partial, and the optimizer all-reduces it).
inline AxisPlan data_parallel() { return AxisPlan{.name = "data", .data = sbp::split(0)}; }

namespace detail {

// Megatron's column- and row-parallel Linears of the nn layers (q, k, v and fc1 split on their
// output features, their bias with them; out and fc2 split on their input features, so their
// product is partial), the weights being (in, out).
inline AxisPlan megatron_parameters(std::string name, std::optional<Sbp> data) {
  AxisPlan p{.name = std::move(name), .data = data};
  for (const char* column : {"attn.q", "attn.k", "attn.v", "mlp.fc1"}) {
    p = p.with_parameter(std::string(column) + ".weight", sbp::split(1), true);
    p = p.with_parameter(std::string(column) + ".bias", sbp::split(0), true);
  }
  for (const char* row : {"attn.out", "mlp.fc2"}) p = p.with_parameter(std::string(row) + ".weight", sbp::split(0), true);
  return p;
}

}  // namespace detail

// Megatron tensor parallelism: heads and hidden units split; the row-parallel products are
// pinned B at attn.out and mlp.fc2 (all-reduce of the partial sum, before the bias). The batch
// is replicated on this axis.
inline AxisPlan tensor_parallel() {
  return detail::megatron_parameters("tensor", std::nullopt)
      .with_output("attn.out", sbp::broadcast, true)
      .with_output("mlp.fc2", sbp::broadcast, true);
}

// Megatron sequence parallelism (Korthikanti et al. 2022): tensor parallelism whose activations
// between the attention and MLP are split on the sequence (axis 1 of (batch, seq, features)),
// so layer norms, dropout and residuals run on 1/t of the tokens. attn's and mlp's inputs are
// pinned B (all-gather before the column-parallel matmuls), attn.out's and mlp.fc2's outputs S(1)
// (reduce-scatter of the row-parallel partial sums). Backward mirrors each (autograd's to_global
// rule): reduce-scatter of the input gradient, all-gather of the output gradient.
inline AxisPlan sequence_parallel() {
  return detail::megatron_parameters("sequence", sbp::split(1))
      .with_input("attn", sbp::broadcast, true)
      .with_input("mlp", sbp::broadcast, true)
      .with_output("attn.out", sbp::split(1), true)
      .with_output("mlp.fc2", sbp::split(1), true);
}

}  // namespace spsd::nn
