#pragma once
// spsd::compile(step): a training (or any) step captured once and replayed (docs/compile.md).
//
//   auto train_step = spsd::compile([&](const GlobalTensor<int64_t>& x, const GlobalTensor<int64_t>& y) {
//     opt.zero_grad();
//     GlobalTensor<float> loss = cross_entropy(model.forward(x), y);
//     backward(loss);
//     opt.step();
//     return loss;
//   });
//   for (...) float l = train_step(x, y).item();
//
// The first call with given argument shapes, dtypes and layouts runs the step eagerly and
// records, on each rank, every kernel with its resolution and input boxing, every to_global,
// the gradients backward sets, and the host steps that must run again (optimizer updates,
// zero_grad, schedulers, gradient clipping). With search_layouts, it then chooses every op's
// signature for the whole step (compile/layout_search.hpp). Later calls with the same key
// replay the record: no dispatch, no resolution, no consistency check per op (the capture made
// them all), and intermediate results in buffers decided at capture. Another key captures again.
//
// What a step may do: global ops, to_global, backward, optimizers, schedulers, clip_grad_*.
// What it may not (an Error at capture naming the op): read values on the host (item(),
// full(), to_vector()), dropout with p > 0, copy_, checkpoints, GradScaler, set_lr outside a
// scheduler. Everything that is not a tensor argument is fixed at capture: scalar operands,
// the tensors it reads besides its arguments (parameters are read as they are at each replay,
// so updates in place are seen, but a tensor replaced by another object is not), and its
// control flow. Arguments are GlobalTensors; outputs carry no autograd history.
// Collective like any op: every rank calls the compiled step with the same keys, and each rank
// (each thread under simulate) makes its own CompiledStep.
#include <concepts>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "spsd/compile/layout_search.hpp"
#include "spsd/compile/step_outputs.hpp"
#include "spsd/compile/tape.hpp"
#include "spsd/runtime/consistency.hpp"

namespace spsd {

// How spsd::compile captures and replays (docs/compile.md).
struct CompileOptions {
  bool search_layouts = true;       // choose every op's signature jointly (false: eager's choices)
  bool cuda_graph = true;           // on cuda placements, replay as CUDA graphs, one per run between host steps (docs/compile.md)
  int64_t memory_budget_bytes = 0;  // per rank, for the search; 0: no budget
  // The device whose cost model prices the search (work and boxing), where not the placements'
  // own: e.g. a dry run on cpu placements planning for GPUs (docs/compile.md).
  std::optional<DeviceType> price_as;
  // Where the search writes the problem it solved as a 0-1 integer programme (CPLEX LP form, the
  // same objective), for an exact solver to check it (docs/compile.md); empty: not written.
  std::string search_problem_file;
  // Seconds for an exact solver (COIN-OR CBC, loaded at run time: Debian's coinor-libcbc3) to
  // improve the searched plan and prove it optimal on the cost model (docs/compile.md); 0: the
  // search alone.
  double exact_seconds = 0;
  // The largest programme the exact solver takes whole, in columns (CBC's root alone outgrows
  // its time limit above it); a larger step that is a chain of repeated blocks is solved by
  // block: one block solved and reused, then proven by a dynamic programme over the chain's
  // seams, else bounded by windows of parts (docs/compile.md).
  size_t exact_max_columns = 120000;
  // The most states a seam between two blocks may have for that dynamic programme (one block
  // programme is solved per state and block; the layouts of a value on one mesh axis, not two):
  // over it, or 0, the lower bound is by windows. A chain of 8 blocks or more that it takes goes
  // to it before the whole programme (0: the whole programme where it fits).
  size_t exact_chain_states = 256;
};

namespace detail {

// The tapes of one compiled step, by key, with what their capture decided.
class CompiledTapes {
 public:
  explicit CompiledTapes(CompileOptions options) : options_(options) {}
  // The key of these arguments: "(4, 8) int64 (S(0)) on placement(...); ...".
  static std::string key_of(std::span<const GlobalData> arguments);
  // The tape of key, or null before its capture.
  Tape* find(const std::string& key);
  // A tape to capture key into; commit() it after the capture, drop it on an error.
  std::unique_ptr<Tape> start(const std::string& key);
  Tape& commit(const std::string& key, std::unique_ptr<Tape> tape);
  // Replays the tape of key; note for the consistency check first.
  std::vector<GlobalData> replay(Tape& tape, std::span<const std::shared_ptr<Storage>> arguments);
  std::string explain() const;
  size_t captures() const { return tapes_.size(); }
  // The search over the last tape used with these parameters free (compile/layout_search.hpp).
  SearchReport search_parameters(std::span<const FreeParameter> parameters);
  const CompileOptions& options() const { return options_; }
  SearchSettings settings() const {
    return {options_.memory_budget_bytes, options_.price_as, options_.search_problem_file, options_.exact_seconds,
            options_.exact_max_columns, options_.exact_chain_states};
  }

 private:
  struct Compiled {
    std::unique_ptr<Tape> tape;
    std::shared_ptr<const OpIdentity> identity;     // what ranks compare per call
    std::vector<std::vector<int64_t>> data_checks;  // rank sets whose index errors a replay raises
    std::string explanation;
  };
  CompileOptions options_;
  std::map<std::string, Compiled> tapes_;
  const Compiled* last_ = nullptr;
};

template <class A>
concept StepArgument = requires { typename std::remove_cvref_t<A>::value_type; } &&
                       std::same_as<std::remove_cvref_t<A>, GlobalTensor<typename std::remove_cvref_t<A>::value_type>>;

}  // namespace detail

// A step and its tapes, one per key of arguments (what spsd::compile returns).
template <class F>
class CompiledStep {
 public:
  // step: called as step(args...) with GlobalTensor arguments, at each capture.
  CompiledStep(F step, CompileOptions options) : step_(std::move(step)), tapes_(options) {}

  // The step on args: captured on the first call with their key, replayed after. Collective.
  template <class... Args>
    requires(detail::StepArgument<Args> && ...)
  auto operator()(const Args&... args) {
    using R = std::invoke_result_t<F&, const Args&...>;
    const std::vector<detail::GlobalData> data{args.data()...};
    const std::string key = detail::CompiledTapes::key_of(data);
    std::vector<std::shared_ptr<Storage>> pieces;
    for (const detail::GlobalData& d : data) pieces.push_back(d.local);
    if (detail::Tape* tape = tapes_.find(key)) {
      const std::vector<detail::GlobalData> outputs = tapes_.replay(*tape, pieces);
      if constexpr (!std::is_void_v<R>) {
        size_t next = 0;
        return detail::StepOutputs<R>::rebuild(outputs, next);
      }
    } else {
      std::unique_ptr<detail::Tape> captured = tapes_.start(key);
      try {
        for (const std::shared_ptr<Storage>& p : pieces) captured->bind_argument(p);
        if constexpr (std::is_void_v<R>) {
          step_(args...);
          captured->end_capture({});
          tapes_.commit(key, std::move(captured));
        } else {
          const R result = step_(args...);
          std::vector<detail::GlobalData> outputs;
          detail::StepOutputs<R>::flatten(result, outputs);
          captured->end_capture(outputs);
          tapes_.commit(key, std::move(captured));
          size_t next = 0;
          return detail::StepOutputs<R>::rebuild(outputs, next);
        }
      } catch (...) {
        if (captured) captured->abandon_capture();  // null once committed (the search threw)
        throw;
      }
    }
  }

  // Each op's chosen signature and boxing in the last tape used, bytes per step beside eager's.
  std::string explain() const { return tapes_.explain(); }
  // How many keys were captured.
  size_t captures() const { return tapes_.captures(); }
  // nn::search_plan's: the layout search over the last tape used, with these parameters' layouts
  // chosen too (with the options' budget and pricing); the tape is left as it is. An Error before
  // any capture. Collective.
  detail::SearchReport search_parameters(std::span<const detail::FreeParameter> parameters) {
    return tapes_.search_parameters(parameters);
  }

 private:
  F step_;
  detail::CompiledTapes tapes_;
};

// step as a compiled step: see the top of this file and docs/compile.md.
template <class F>
CompiledStep<F> compile(F step, CompileOptions options = {}) {
  return CompiledStep<F>(std::move(step), options);
}

}  // namespace spsd
