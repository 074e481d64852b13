#pragma once
// The joint layout search of a compiled step (docs/compile.md, "How the search works"): every
// op's signature chosen for the whole step at once, on the planner's cost model, where eager
// chose each one greedily from the layouts its inputs happened to have.
//
// The step is a graph: op nodes with their N-d candidate signatures, to_global nodes whose
// result nothing outside the step sees (their candidates are layouts: a to_global inside a step,
// e.g. a plan's pin to B, fixes only a layout nobody observes, not a value), values flowing
// between them, and fixed ends (arguments and parameters come in their own layouts; gradients,
// the step's outputs and to_globals between placements stay as captured). The objective is the
// step's predicted time: each conversion's alpha-beta cost (what the planner charges), once per
// value and layout (the tape boxes a value once per layout its consumers need), plus each op's
// local work (the bytes of its pieces at the cost model's copy bandwidth, and a matmul's
// multiply-adds, so that a signature computing the whole tensor on every rank is not free), plus,
// under a memory budget, a penalty on the bytes of the results (what backward keeps alive at most).
// Search: from eager's choices, moves of one op and of a producer with each of its consumers,
// each taken when it lowers the objective, until none does. The result is never worse than
// eager's. A lower bound (every op and edge at its own cheapest, independently) gives the gap.
// Only where every op and boxing of the step spans the whole world (so every rank captured
// the same graph); rank 0 searches and the others take its choices.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "spsd/compile/tape.hpp"

namespace spsd::detail {

struct SearchReport {
  bool searched = false;
  std::string why_not;            // when not searched
  int64_t ops = 0, changed = 0;   // nodes (ops, free to_globals, parameters), and how many changed their choice
  int64_t rounds = 0;             // sweeps until no move helped
  double eager_us = 0, found_us = 0, lower_bound_us = 0;  // the objective
  int64_t result_bytes = 0, eager_result_bytes = 0;       // per rank, the bytes of all results
  int64_t memory_budget_bytes = 0;                         // asked for (0: none)
  std::string priced_as;   // the device whose cost model priced the search, when not the placements'
  std::vector<NdSbp> parameter_layouts;  // per free parameter: the layout chosen (empty: the step reads none)
  double seconds = 0;      // wall time of the whole search, with the rewrite and the broadcast
  double cpu_seconds = 0;  // rank 0's thread CPU time searching (what other threads on its core leave out)
  std::string to_string() const;
};

// A parameter whose layout the search chooses too (nn::search_plan): its piece on this rank (how
// the tape knows it) and its autograd record (whose gradient the step sets, then boxed to the
// layout chosen). Its memory counts kParameterCopies times (it, its gradient, Adam's moments).
struct FreeParameter {
  const Storage* piece;
  const AutogradMeta* meta;
};

// Searches and rewrites tape's steps with the chosen signatures (and re-plans their boxing).
// price_as: price work and boxing with that device's cost model instead of the placements' own.
// With free parameters, their layouts are chosen too and reported, and the tape is left as
// captured (a plan for parameters re-laid before another capture). Collective over the world
// (rank 0 searches).
SearchReport search_layouts(Tape& tape, int64_t memory_budget_bytes, std::optional<DeviceType> price_as = std::nullopt,
                            std::span<const FreeParameter> free_parameters = {});

}  // namespace spsd::detail
