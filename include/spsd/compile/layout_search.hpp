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
// each taken when it lowers the objective, until none does; then the same again from a restart
// per mesh axis (every split on that axis turned into a split of dimension 0, the batch: a
// change of the whole step that no sequence of small moves makes when each step of it costs
// more), the best kept. The result is never worse than eager's. A lower bound (every op and edge
// at its own cheapest, independently) gives the gap. The problem is also a 0-1 integer programme
// with the same objective (compile/integer_programme.hpp): written for any MIP solver to check
// the search, or solved with CBC for a time limit, which improves the plan and proves it optimal
// where it can (and tightens the bound where it cannot). A programme too large for CBC whole, on a
// chain of repeated blocks, is solved by block: one block solved and reused, bounded by windows
// of neighbouring parts (src/compile/layout_exact.cpp).
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
  int64_t restarts = 0, restarts_kept = 0;  // restarts searched, and whether one gave the plan kept (0 or 1)
  bool exact = false;          // the exact solver ran (SearchSettings::exact_seconds)
  bool exact_optimal = false;  // it proved the plan kept optimal on the objective
  bool exact_kept = false;     // its plan was cheaper than the search's, and kept
  double exact_seconds = 0;    // its wall time
  bool asked_exact = false;    // SearchSettings::exact_seconds > 0 (the solver may still not run: too large)
  int64_t exact_columns = 0;   // the whole programme's columns (counted)
  size_t exact_max_columns = 0;  // the most it is given whole (SearchSettings::exact_max_columns)
  // Over that, on a chain of repeated blocks (one solved and reused): the blocks found, the
  // columns of the programme whose plans repeat one block and whether its optimum was proven, the
  // windows of the lower bound (each of exact_window_width neighbouring parts of the chain) and
  // the distinct ones solved.
  int64_t exact_blocks = 0, exact_tied_columns = 0, exact_windows = 0, exact_windows_solved = 0, exact_window_width = 0;
  bool exact_tied_optimal = false;
  // Before the windows, the dynamic programme over the chain's seams: its stages (0: the step is
  // no row of stages), its seams' most states (over exact_chain_states, the most it takes: not
  // run), the stages and programmes it solved, and whether it finished (then the bound is the
  // step's optimum).
  int64_t exact_chain_stages = 0, exact_seam_states = 0, exact_chain_stages_solved = 0, exact_chain_solves = 0;
  size_t exact_chain_states = 0;
  bool exact_chain_exact = false;
  double eager_us = 0, found_us = 0, lower_bound_us = 0;  // the objective
  int64_t result_bytes = 0, eager_result_bytes = 0;       // per rank, the bytes of all results
  int64_t memory_budget_bytes = 0;                         // asked for (0: none)
  std::string priced_as;   // the device whose cost model priced the search, when not the placements'
  std::vector<NdSbp> parameter_layouts;  // per free parameter: the layout chosen (empty: the step reads none)
  double seconds = 0;      // wall time of the whole search, with the rewrite and the broadcast
  double cpu_seconds = 0;  // rank 0's thread CPU time searching (what other threads on its core leave out)
  std::string to_string() const;
  std::string exact_report() const;  // to_string's part on the exact solver (empty when not asked)
};

// A parameter whose layout the search chooses too (nn::search_plan): its piece on this rank (how
// the tape knows it) and its autograd record (whose gradient the step sets, then boxed to the
// layout chosen). Its memory counts kParameterCopies times (it, its gradient, Adam's moments).
struct FreeParameter {
  const Storage* piece;
  const AutogradMeta* meta;
};

// A chain of at least this many repeated blocks whose seams the dynamic programme over the chain
// takes is solved by block even where the whole programme fits in exact_max_columns. On one mesh
// axis CBC proves a GPT of 6 blocks whole in 2 s, of 8 in about 20, of 16 in 13, but not of 12,
// 24 or 48 in 60 s; the chain's programme proves each in 15-30 s (docs/compile.md).
inline constexpr int64_t kChainFirstBlocks = 8;

// What the search runs under: CompileOptions' fields of the same names.
struct SearchSettings {
  int64_t memory_budget_bytes = 0;      // per rank, on the results' bytes; 0: none
  std::optional<DeviceType> price_as;   // price work and boxing with that device's cost model
  std::string problem_file;             // where rank 0 writes the problem as an integer programme; empty: nowhere
  double exact_seconds = 0;             // > 0: then CBC improves and proves the plan for at most that long
  // The largest programme CBC is given whole, in columns. CBC's time limit binds its branch and
  // bound, not the linear programme at its root, which runs to its end first: 92k columns (the
  // 2-block GPT of bench/train on (2, 2)) take CBC about 12 s on the 2-core VM, 180k (4 blocks on
  // (2, 4)) 37 s with a limit of 5 s. Over it, a chain of repeated blocks is solved by block.
  size_t exact_max_columns = 120000;
  // Over it, the most states of a seam between blocks for the dynamic programme over the chain
  // (0: none); the bound is by windows otherwise.
  size_t exact_chain_states = 256;
};

// Searches and rewrites tape's steps with the chosen signatures (and re-plans their boxing).
// With free parameters, their layouts are chosen too and reported, and the tape is left as
// captured (a plan for parameters re-laid before another capture). Collective over the world
// (rank 0 searches); a problem file that cannot be written is an Error on every rank.
SearchReport search_layouts(Tape& tape, const SearchSettings& settings, std::span<const FreeParameter> free_parameters = {});

}  // namespace spsd::detail
