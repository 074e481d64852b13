#pragma once
// Compiled steps (compile/compile.hpp) against eager, shared by the simulate and MPI tests: the
// character GPT of examples/08 (4 heads, dropout 0; one block, dim 16, context 8 unless given) trained a few
// Adam steps in each mode, eager and compiled, from the same initial parameters on the same
// batches.
#include <optional>
#include <string>
#include <vector>

#include <spsd/spsd.hpp>

namespace spsd_test {

struct CompiledRun {
  std::vector<double> losses;                  // per step, on the placement's ranks
  std::vector<std::vector<double>> parameters; // after the last step, whole, in model order
  std::string explanation;                     // the compiled step's explain() (compiled runs)
  size_t captures = 0;
  int64_t last_step_sent = 0;                  // bytes this rank sent in the last step (comm_stats)
};

struct GptSize {
  int64_t dim = 16, context = 8, batch = 4, layers = 1;
};

// Trains in mode ("data", "tensor", "2d", "sequence") on ranks; C: the compute type (float or
// bfloat16, float masters). compiled: through spsd::compile with options. plan: instead of the
// mode's (on the mode's placement). device: the placements' ("cpu" or "cuda"). Collective over
// the world.
template <class C>
CompiledRun gpt_compiled_run(const std::string& mode, const std::vector<int64_t>& ranks, int steps, bool compiled,
                             spsd::CompileOptions options = {}, GptSize size = {},
                             const std::optional<spsd::nn::Plan>& plan = std::nullopt,
                             const std::string& device = "cpu");

// nn::search_plan on that GPT in plan on mode's placement, one step captured. Collective.
spsd::nn::SearchedPlan search_gpt_plan(const std::string& mode, const std::vector<int64_t>& ranks,
                                       const spsd::nn::Plan& plan, const spsd::nn::PlanSearchOptions& options,
                                       GptSize size = {});

}  // namespace spsd_test
