#pragma once
// A pipeline stage: a placement (any mesh), the part of a model it holds, named by patterns,
// and the plan that lays that part out inside the stage (nn/plan.hpp). Stages on different
// placements of one model are pipeline parallelism; a plan inside each stage adds data, tensor
// or sequence parallelism: 3-D parallelism is stages whose placements are 2-d meshes.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spsd/layout/placement.hpp"
#include "spsd/nn/plan.hpp"

namespace spsd::pipeline {

// A pipeline stage: the layers it holds (by name), its placement, and its plan inside.
struct Stage {
  // Layers and parameters by their leading name components (stage_matches): "tok", "positions",
  // "blocks.0", "blocks.*" (every block), "lnf", "head".
  std::vector<std::string> patterns;
  Placement placement;
  // Inside the stage; none: every parameter replicated (B) on the stage's mesh, so a batch split
  // on axis 0 makes it data parallel.
  std::optional<nn::Plan> plan = std::nullopt;
};

// Whether pattern names `name` or a module it lies in: pattern's components match name's first
// components one for one, `*` in a component matching any characters except '.' ("blocks.1"
// matches "blocks.1" and "blocks.1.attn.q.weight", not "blocks.10"; "blocks.*" every block).
// Anchored at the start, unlike a plan's rules (anchored at the end), since a stage holds
// whole subtrees of the model.
inline bool stage_matches(std::string_view pattern, std::string_view name) {
  if (pattern.empty() || name.empty()) return false;
  size_t components = 1;
  for (char c : pattern) components += c == '.';
  size_t end = 0;
  for (size_t k = 0; k < components; ++k) {
    if (k) {
      if (end == name.size()) return false;  // the name has fewer components
      ++end;
    }
    end = std::min(name.find('.', end), name.size());
  }
  // Same number of components: nn::name_matches compares them one for one.
  return nn::name_matches(pattern, name.substr(0, end));
}

}  // namespace spsd::pipeline
