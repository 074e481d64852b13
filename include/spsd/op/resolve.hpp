#pragma once
// The resolver: among an op's N-d candidate signatures, the one whose input boxing the planner
// prices cheapest, from the layouts the inputs have now. Results are cached.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spsd/boxing/plan.hpp"
#include "spsd/layout/placement.hpp"
#include "spsd/op/signature.hpp"
#include "spsd/runtime/consistency.hpp"

namespace spsd {

// What an op declares to the resolver (dtype-erased; the kernel is the typed part, see
// op/dispatch.hpp). Built from an op type by op_schema<Op>().
struct OpSchema {
  std::string_view name;
  // Output type of the op for these inputs; throws spsd::Error naming the op for invalid ones.
  TensorMeta (*infer)(std::span<const TensorMeta> inputs, const OpAttrs& attrs);
  // The 1-d table, in preference order; must contain the all-broadcast signature.
  std::vector<Signature> (*signatures)(std::span<const TensorMeta> inputs, const OpAttrs& attrs);
  // Whether an N-d candidate is exact for these shapes on this mesh (null: every product is).
  bool (*valid)(std::span<const TensorMeta> inputs, const OpAttrs& attrs, const Shape& mesh,
                const NdSignature& candidate) = nullptr;
  // The attributes as text for logs and errors ("axes=[1], keepdim=true"; null: the integers).
  std::string (*attrs_text)(const OpAttrs& attrs) = nullptr;
};

// One priced N-d candidate.
struct Candidate {
  NdSignature signature;
  double cost_us = 0;   // sum over inputs of the planned boxing cost
  int64_t bytes = 0;    // sum over inputs of the busiest rank's bytes per boxing step
  bool viable = true;   // false: needs an input boxed into a partial layout (never worth it)
};

// What the resolver chose for one op call, with every candidate it priced and the boxing plans.
struct Resolution {
  std::string op;                    // "matmul"
  std::vector<TensorMeta> inputs;
  std::vector<NdSbp> input_layouts;  // the layouts the inputs came with
  Placement placement;
  TensorMeta output;
  size_t chosen = 0;                 // index into candidates
  std::vector<Candidate> candidates; // every N-d candidate, in table order
  std::vector<std::shared_ptr<const Plan>> plans;  // per input; null when no boxing is needed
  std::shared_ptr<const detail::OpIdentity> identity;  // for the cross-rank check

  // The chosen candidate's signature, boxing cost (microseconds) and bytes (Candidate's fields).
  const NdSignature& signature() const { return candidates[chosen].signature; }
  double cost_us() const { return candidates[chosen].cost_us; }
  int64_t bytes() const { return candidates[chosen].bytes; }
  // Whether boxing some input calls the communicator (a plan of local steps does not).
  bool communicates() const;
  // Chosen signature, every candidate with its cost, and the boxing steps of the inputs.
  std::string to_string() const;
};

// Resolutions cached at most; when the cache is full it starts over.
inline constexpr size_t kMaxCachedResolutions = 4096;

// The cheapest candidate; ties go to the one without communication, then to table order
// (mesh axis 0 most significant). Cached by (op, attrs, placement, input metas and layouts).
// Throws spsd::Error naming the op, the inputs' layouts and the valid signatures when no
// candidate is valid.
std::shared_ptr<const Resolution> resolve(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                                          std::span<const TensorMeta> inputs, std::span<const NdSbp> layouts);

namespace detail {
// The resolver's view of one input, without copies (the dispatch fast path).
struct ResolveInput {
  const Shape* shape;
  DType dtype;
  const NdSbp* layout;
};
std::shared_ptr<const Resolution> resolve(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                                          std::span<const ResolveInput> inputs);

// "matmul(a: (4, 5) float32 (S(0)), b: (5, 8) float32 (B)) on placement(...)": the text
// ranks compare in the consistency check, and errors quote.
std::string describe_call(const OpSchema& op, const OpAttrs& attrs, const Placement& placement,
                          std::span<const TensorMeta> inputs, std::span<const NdSbp> layouts);
// The attrs as the op prints them (its attrs_text), else "attrs [1, 0]".
std::string attrs_description(const OpSchema& op, const OpAttrs& attrs);
}  // namespace detail

}  // namespace spsd
