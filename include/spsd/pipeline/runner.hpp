#pragma once
// The pipeline runner: a model written once, split into stages (pipeline/stage.hpp), trained
// one step at a time under a schedule (pipeline/schedule.hpp). docs/pipeline.md.
//
//   pipeline::Layers<float> layers;                 // the model's forward, as named layers
//   layers.first("tok", [&](const GlobalTensor<int64_t>& t) { return model.embed(t); })
//         .then("blocks.0", [&](const GlobalTensor<float>& x) { return model.blocks[0](x); })
//         ...
//         .loss([&](const GlobalTensor<float>& logits, const GlobalTensor<int64_t>& y) { ... });
//   pipeline::Pipeline<float> pipe(model, layers, {{{"tok", "positions", "blocks.0"}, first},
//                                                  {{"blocks.1", "lnf", "head"}, second}});
//   Adam opt(model.named_parameters(), ...);        // after: the parameters moved to their stages
//   GlobalTensor<float> loss = pipe.step(pipeline::one_f_one_b(2, 4), tokens, targets);
//   opt.step();
//
// How a step runs. spsd programs are single-program: every rank issues the same global ops in
// the same order, and a rank outside an op's placement returns from it at once, holding
// nothing. The runner issues the schedule's actions in program_order (each action after what
// it depends on, ordered by the schedule's simulated start times), so each rank runs its own
// stages' actions in the schedule's order and passes over the others' (resolution only: no
// data, no wait). An activation moves to the next stage's placement as soon as its forward
// ends, by a to_global queued on the communication stream (AlwaysQueueComm: even a small one
// never holds the sender), and its gradient moves back the same way, so a stage computes
// micro-batch i + 1 while i is in flight and blocks only when it reads what it has not received.
// Each stage's backward starts from a leaf: the received activation, detached.
//
// Gradients: the loss of micro-batch i (rows n_i of N) is scaled by n_i / N, so the gradients
// and the returned loss are those of the whole batch's mean loss, whatever the micro-batches.
// They accumulate unreduced (NoGradSync) through the step, then each parameter's gradient is
// boxed into the parameter's layout once: one data-parallel reduction per parameter per step.
//
// Tied weights (Layers::tie): a parameter used by a layer of another stage (a head sharing the
// token table) gets a copy on that stage's placement, refreshed from the parameter at the start
// of each step; the copy's gradient is added to the parameter's before its reduction.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spsd/autograd/backward.hpp"
#include "spsd/autograd/split_backward.hpp"
#include "spsd/boxing/to_layout.hpp"
#include "spsd/nn/module.hpp"
#include "spsd/nn/parallelize.hpp"
#include "spsd/op/elementwise.hpp"
#include "spsd/pipeline/microbatch.hpp"
#include "spsd/pipeline/schedule.hpp"
#include "spsd/pipeline/stage.hpp"
#include "spsd/runtime/scheduler.hpp"
#include "spsd/runtime/trace.hpp"
#include "spsd/tensor/factory.hpp"

namespace spsd::pipeline {

// A model's forward pass as named layers in order: the first takes the micro-batch's inputs
// (element type In), each next one the activation before it; then the loss of the last
// activation against the micro-batch's targets (a mean over the micro-batch's rows). C is the
// compute type of the activations.
template <FloatingElement C, Element In = int64_t, Element Tgt = int64_t>
class Layers {
 public:
  using Activation = GlobalTensor<C>;
  using First = std::function<Activation(const GlobalTensor<In>&)>;
  using Next = std::function<Activation(const Activation&)>;
  using Loss = std::function<Activation(const Activation&, const GlobalTensor<Tgt>&)>;

  // Adds the first layer (f takes the inputs). spsd::Error when a layer was added before.
  Layers& first(std::string name, First f) {
    SPSD_CHECK(names_.empty(), "pipeline::Layers::first", "the first layer must be given first; \"", name,
               "\" comes after \"", names_.back(), "\"");
    first_ = std::move(f);
    return add(std::move(name), nullptr);
  }
  // Adds the next layer (f takes the activation before it). spsd::Error without a first layer
  // before it, or for a name given twice.
  Layers& then(std::string name, Next f) {
    SPSD_CHECK(!names_.empty(), "pipeline::Layers::then", "the layer \"", name, "\" needs a first layer before it");
    return add(std::move(name), std::move(f));
  }
  // Sets the loss of the last activation against the targets (a later call replaces it).
  Layers& loss(Loss f) {
    loss_ = std::move(f);
    return *this;
  }
  // The parameter (its name in the model) is used by the layer too; see the runner's ties above.
  Layers& tie(std::string parameter, std::string layer) {
    ties_.emplace_back(std::move(parameter), std::move(layer));
    return *this;
  }

  // What the calls above gave: the layer names in order, the first layer, layer k's function,
  // the loss and the ties (parameter, layer).
  const std::vector<std::string>& names() const { return names_; }
  const First& first_layer() const { return first_; }
  const Next& layer(size_t k) const { return next_.at(k); }  // k >= 1
  const Loss& loss_function() const { return loss_; }
  const std::vector<std::pair<std::string, std::string>>& ties() const { return ties_; }

 private:
  Layers& add(std::string name, Next f) {
    for (const std::string& n : names_)
      SPSD_CHECK(n != name, "pipeline::Layers", "the layer name \"", name, "\" is given twice");
    names_.push_back(std::move(name));
    next_.push_back(std::move(f));
    return *this;
  }
  std::vector<std::string> names_;
  First first_;
  std::vector<Next> next_;  // next_[0] unused: the first layer is first_
  Loss loss_;
  std::vector<std::pair<std::string, std::string>> ties_;
};

// T: the parameters' type; C: the activations' (compute) type; In, Tgt: the element types of the
// inputs and targets.
template <FloatingElement T, FloatingElement C = T, Element In = int64_t, Element Tgt = int64_t>
class Pipeline {
 public:
  using Parameter = GlobalTensor<T>;
  using Activation = GlobalTensor<C>;

  // Splits model into stages: stages[v] is virtual stage v, on pipeline rank v % (stages /
  // chunks) (interleaved schedules: chunks > 1). Each parameter moves to its stage's placement and
  // is laid out by the stage's plan; parameters keep their names. Collective over every rank of
  // the model's placement and of the stages'. An optimizer must be made after (as after
  // nn::parallelize; one made before refuses to step).
  Pipeline(nn::Module<T>& model, Layers<C, In, Tgt> layers, std::vector<Stage> stages, int64_t chunks = 1)
      : layers_(std::move(layers)), stages_(std::move(stages)), chunks_(chunks) {
    check_stages();
    assign_layers();
    assign_parameters(model);
    place_parameters(model);
    make_tied_copies();
  }

  // The virtual stages, chunks per pipeline rank, pipeline ranks (stages() / chunks()), and
  // stage v as given (std::out_of_range outside [0, stages())).
  int64_t stages() const { return static_cast<int64_t>(stages_.size()); }
  int64_t chunks() const { return chunks_; }
  int64_t pipeline_ranks() const { return stages() / chunks_; }
  const Stage& stage(int64_t v) const { return stages_.at(v); }
  // The stage that holds a layer, or a parameter, by name.
  int64_t stage_of_layer(const std::string& layer) const { return layer_stage_.at(index_of_layer(layer)); }
  int64_t stage_of_parameter(const std::string& name) const {
    for (const Held& h : held_)
      if (h.name == name) return h.stage;
    detail_fail("stage_of_parameter", "the model has no parameter \"", name, "\"");
  }
  // Every rank of the stages, as a line: where step() returns the loss.
  const Placement& all_ranks() const { return *all_ranks_; }
  // One line per stage: its placement, layers and parameters.
  std::string describe() const {
    std::string s;
    for (int64_t v = 0; v < stages(); ++v) {
      s += "stage " + std::to_string(v) + " on " + stages_[v].placement.to_string() + ": layers";
      for (size_t k = 0; k < layer_stage_.size(); ++k)
        if (layer_stage_[k] == v) s += " " + layers_.names()[k];
      s += "; parameters";
      for (const Held& h : held_)
        if (h.stage == v) s += " " + h.name;
      for (const Tied& t : tied_)
        if (t.stage == v) s += " " + t.name + " (tied copy)";
      s += "\n";
    }
    return s;
  }

  // One training step on a batch: inputs on stage 0's placement, targets on the last stage's,
  // with as many rows (axis 0); schedule.microbatches() micro-batches (at most the rows). Adds
  // the gradients of the batch's mean loss into the parameters' grad() (each in its parameter's
  // layout) and returns that loss, broadcast on all_ranks(). Collective over all_ranks().
  Activation step(const Schedule& schedule, const GlobalTensor<In>& inputs, const GlobalTensor<Tgt>& targets) {
    check_step(schedule, inputs, targets);
    refresh_tied_copies();
    const int64_t m = schedule.microbatches(), rows = inputs.shape()[0];
    const RowSplit split = split_rows(inputs, targets, m);
    Run run(stages(), m);
    for (int64_t i = 0; i < m; ++i) {
      run.inputs[i] = microbatch(inputs, split, i);
      run.targets[i] = microbatch(targets, split, i);
      run.scale[i] = static_cast<double>(run.inputs[i].shape()[0]) / static_cast<double>(rows);
    }
    {
      NoGradSync accumulate;  // one reduction per parameter, after the last micro-batch
      for (const Step& s : program_order(schedule)) {
        const Action& a = schedule.actions(s.rank)[s.index];
        // The stage lane of the trace: this rank's own actions only (the others pass at once),
        // from when what the action receives has arrived, so the gaps are the rank's bubble.
        const bool mine = stages_[a.stage].placement.contains(rank());
        if (mine && spsd::detail::tls_trace_recorder) await_received(run, a);
        const spsd::detail::OpenSpan span =
            mine ? spsd::detail::pipeline_span(pipeline::describe(a)) : spsd::detail::OpenSpan();
        switch (a.work) {
          case Work::kForward: forward(run, a.stage, a.microbatch); break;
          case Work::kBackward:
          case Work::kBackwardInput: backward(run, a.stage, a.microbatch, a.work == Work::kBackwardInput); break;
          case Work::kBackwardWeight: run.weights[a.stage][a.microbatch].run(); break;
        }
      }
    }
    reduce_gradients();
    NoGradGuard no_grad;
    Activation loss = run.losses[0] * static_cast<C>(run.scale[0]);
    for (int64_t i = 1; i < m; ++i) loss = loss + run.losses[i] * static_cast<C>(run.scale[i]);
    return loss.to_global(all_ranks(), NdSbp(std::vector<Sbp>{sbp::broadcast}));
  }

 private:
  struct Held {  // a parameter of the model and the stage holding it
    std::string name;
    Parameter* slot;
    int64_t stage;
  };
  struct Tied {  // a copy of a parameter for a layer of another stage
    std::string name;
    Parameter* slot;
    int64_t stage;
    Parameter copy;
  };
  // One step's tensors, by [stage][micro-batch].
  struct Run {
    Run(int64_t stages, int64_t m)
        : inputs(m), targets(m), scale(m), losses(m), received(stages, std::vector<Activation>(m)),
          outputs(stages, std::vector<Activation>(m)), gradients(stages, std::vector<Activation>(m)),
          weights(stages, std::vector<WeightGradients>(m)) {}
    std::vector<GlobalTensor<In>> inputs;
    std::vector<GlobalTensor<Tgt>> targets;
    std::vector<double> scale;             // n_i / N
    std::vector<Activation> losses;        // each micro-batch's mean loss, detached
    std::vector<std::vector<Activation>> received;   // a stage's input (a leaf that requires grad)
    std::vector<std::vector<Activation>> outputs;    // its output (the last stage: the loss)
    std::vector<std::vector<Activation>> gradients;  // d loss / d output, received from the next
    std::vector<std::vector<WeightGradients>> weights;  // the deferred half of a split backward
  };

  template <class... A>
  [[noreturn]] static void detail_fail(const char* what, const A&... a) {
    spsd::detail::throw_error(std::string("pipeline::Pipeline::") + what, a...);
  }

  size_t index_of_layer(const std::string& layer) const {
    const auto& names = layers_.names();
    for (size_t k = 0; k < names.size(); ++k)
      if (names[k] == layer) return k;
    detail_fail("stage_of_layer", "no layer is named \"", layer, "\"; the layers: ", nn::detail::some_names(names));
  }

  void check_stages() {
    SPSD_CHECK(!stages_.empty(), "pipeline::Pipeline", "needs at least one stage");
    SPSD_CHECK(chunks_ >= 1 && stages() % chunks_ == 0, "pipeline::Pipeline", "chunks must be >= 1 and divide the ",
               stages(), " stages, got ", chunks_);
    SPSD_CHECK(!layers_.names().empty() && layers_.first_layer() && layers_.loss_function(), "pipeline::Pipeline",
               "the layers need a first layer and a loss (Layers::first, Layers::loss)");
    const int64_t p = pipeline_ranks();
    std::vector<int64_t> ranks;
    for (int64_t v = 0; v < stages(); ++v) {
      const Placement& pv = stages_[v].placement;
      SPSD_CHECK(pv.device_type() == stages_[0].placement.device_type(), "pipeline::Pipeline", "stage ", v, " is on ",
                 pv, ", stage 0 on ", stages_[0].placement, ": every stage needs the same device type");
      for (int64_t u = 0; u < v; ++u) {
        if (u % p == v % p) continue;  // chunks of one pipeline rank may share ranks
        for (int64_t r : pv.ranks())
          SPSD_CHECK(!stages_[u].placement.contains(r), "pipeline::Pipeline", "stage ", v, "'s placement ", pv,
                     " overlaps stage ", u, "'s ", stages_[u].placement, " (rank ", r,
                     " is in both); stages of different pipeline ranks need disjoint placements");
      }
      for (int64_t r : pv.ranks())
        if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
      SPSD_CHECK(!stages_[v].patterns.empty(), "pipeline::Pipeline", "stage ", v, " names no layer (its patterns are empty)");
    }
    std::sort(ranks.begin(), ranks.end());
    all_ranks_.emplace(std::string(to_string(stages_[0].placement.device_type())), ranks);
  }

  // The stage whose patterns match name; -1 when none. Two stages matching is an Error.
  int64_t matching_stage(const std::string& name, const char* kind, std::vector<std::vector<bool>>& used) const {
    int64_t found = -1;
    for (int64_t v = 0; v < stages(); ++v)
      for (size_t k = 0; k < stages_[v].patterns.size(); ++k) {
        if (!stage_matches(stages_[v].patterns[k], name)) continue;
        used[v][k] = true;
        SPSD_CHECK(found == -1 || found == v, "pipeline::Pipeline", "the ", kind, " ", name, " matches stage ", found,
                   " and stage ", v, " (pattern \"", stages_[v].patterns[k], "\"); a ", kind, " belongs to one stage");
        found = v;
      }
    return found;
  }

  std::vector<std::vector<bool>> unused_patterns() const {
    std::vector<std::vector<bool>> used;
    for (const Stage& s : stages_) used.emplace_back(s.patterns.size(), false);
    return used;
  }

  void assign_layers() {
    used_ = unused_patterns();
    const auto& names = layers_.names();
    for (const std::string& name : names) {
      const int64_t v = matching_stage(name, "layer", used_);
      SPSD_CHECK(v >= 0, "pipeline::Pipeline", "the layer ", name, " matches no stage's patterns");
      SPSD_CHECK(layer_stage_.empty() || v == layer_stage_.back() || v == layer_stage_.back() + 1,
                 "pipeline::Pipeline", "the layer ", name, " is in stage ", v, " but the layer before it, ",
                 names[layer_stage_.size() - 1], ", is in stage ", layer_stage_.empty() ? 0 : layer_stage_.back(),
                 ": stages hold consecutive layers, in stage order");
      SPSD_CHECK(!layer_stage_.empty() || v == 0, "pipeline::Pipeline", "the first layer, ", name,
                 ", must be in stage 0; it matches stage ", v);
      layer_stage_.push_back(v);
    }
    SPSD_CHECK(layer_stage_.back() == stages() - 1, "pipeline::Pipeline", "stage ", layer_stage_.back() + 1,
               " holds no layer: the last layer, ", names.back(), ", is in stage ", layer_stage_.back(), " of ", stages());
  }

  void assign_parameters(nn::Module<T>& model) {
    for (auto& [name, slot] : model.parameter_slots()) {
      const int64_t v = matching_stage(name, "parameter", used_);
      SPSD_CHECK(v >= 0, "pipeline::Pipeline", "the parameter ", name,
                 " matches no stage's patterns (name the layer holding it, or the parameter, in one stage)");
      held_.push_back({name, slot, v});
    }
    for (int64_t v = 0; v < stages(); ++v)
      for (size_t k = 0; k < stages_[v].patterns.size(); ++k)
        SPSD_CHECK(used_[v][k], "pipeline::Pipeline", "stage ", v, "'s pattern \"", stages_[v].patterns[k],
                   "\" matches no layer and no parameter; the layers: ", nn::detail::some_names(layers_.names()));
    for (const auto& [parameter, layer] : layers_.ties()) {
      const int64_t owner = stage_of_parameter(parameter), user = stage_of_layer(layer);
      if (owner == user) continue;  // the same stage: nothing to copy
      for (const Held& h : held_)
        if (h.name == parameter) tied_.push_back({parameter, h.slot, user, Parameter()});
    }
  }

  // The layout stage v's plan gives a parameter: B where no rule (or no plan) names it.
  NdSbp planned_layout(int64_t v, const std::string& name) const {
    const Placement& p = stages_[v].placement;
    std::vector<Sbp> nd(p.mesh().ndim(), sbp::broadcast);
    if (const auto& plan = stages_[v].plan)
      for (size_t a = 0; a < nd.size() && a < plan->axes.size(); ++a)
        for (const nn::Rule& r : plan->axes[a].parameters)
          if (nn::name_matches(r.pattern, name)) nd[a] = r.layout;
    return NdSbp(std::move(nd));
  }

  void place_parameters(nn::Module<T>& model) {
    auto modules = model.named_modules();
    std::vector<std::string> parameter_names, module_names;
    for (const Held& h : held_) parameter_names.push_back(h.name);
    for (auto& [path, m] : modules)
      if (!path.empty()) module_names.push_back(path);
    // Each plan's rules must match in some stage that has it (a stage of embeddings alone matches
    // no block rule): uses are gathered per plan.
    std::map<std::string, std::pair<const nn::Plan*, nn::detail::PlanUse>> uses;
    for (int64_t v = 0; v < stages(); ++v) {
      const Placement& pv = stages_[v].placement;
      std::vector<std::pair<std::string, Parameter*>> slots;
      for (const Held& h : held_) {
        if (h.stage != v) continue;
        const std::shared_ptr<spsd::detail::AutogradMeta> old_meta = h.slot->autograd_meta();
        *h.slot = h.slot->detach().to_global(pv, NdSbp(std::vector<Sbp>(pv.mesh().ndim(), sbp::broadcast)));
        h.slot->requires_grad_();
        if (old_meta)
          old_meta->replaced_by = spsd::detail::concat("pipeline::Pipeline (the model's ", h.name, " is now ",
                                                       h.slot->describe(), ", in stage ", v, ")");
        slots.emplace_back(h.name, h.slot);
      }
      if (!stages_[v].plan) continue;
      const nn::Plan& plan = *stages_[v].plan;
      nn::detail::check_plan(plan, pv);
      std::vector<std::pair<std::string, nn::Module<T>*>> stage_modules;
      for (auto& [path, m] : modules)
        for (const std::string& pattern : stages_[v].patterns)
          if (!path.empty() && stage_matches(pattern, path)) {
            stage_modules.emplace_back(path, m);
            break;
          }
      auto [it, fresh] = uses.try_emplace(plan.to_string(), &plan, nn::detail::PlanUse(plan));
      nn::detail::apply_plan<T>(slots, stage_modules, pv, plan, it->second.second);
    }
    for (auto& [text, use] : uses) nn::detail::check_plan_used(*use.first, use.second, parameter_names, module_names);
  }

  void make_tied_copies() {
    for (Tied& t : tied_) {
      t.copy = t.slot->detach().to_global(stages_[t.stage].placement, planned_layout(t.stage, t.name));
      t.copy.requires_grad_();
    }
  }

  void refresh_tied_copies() {
    NoGradGuard no_grad;
    for (Tied& t : tied_) t.copy.copy_(t.slot->detach());
  }

  void check_step(const Schedule& schedule, const GlobalTensor<In>& inputs, const GlobalTensor<Tgt>& targets) const {
    SPSD_CHECK(schedule.stages() == stages() && schedule.ranks() == pipeline_ranks(), "pipeline::Pipeline::step",
               "the schedule is for ", schedule.stages(), " stages on ", schedule.ranks(),
               " pipeline ranks; the pipeline has ", stages(), " stages on ", pipeline_ranks());
    SPSD_CHECK(inputs.placement() == stages_.front().placement, "pipeline::Pipeline::step", "the inputs ",
               inputs.describe(), " must be on stage 0's placement ", stages_.front().placement);
    SPSD_CHECK(targets.placement() == stages_.back().placement, "pipeline::Pipeline::step", "the targets ",
               targets.describe(), " must be on the last stage's placement ", stages_.back().placement);
    SPSD_CHECK(inputs.shape().ndim() >= 1 && targets.shape().ndim() >= 1 && inputs.shape()[0] == targets.shape()[0],
               "pipeline::Pipeline::step", "inputs and targets need as many rows (axis 0): inputs ", inputs.describe(),
               ", targets ", targets.describe());
    SPSD_CHECK(schedule.microbatches() <= inputs.shape()[0], "pipeline::Pipeline::step", "the schedule has ",
               schedule.microbatches(), " micro-batches but the batch only ", inputs.shape()[0], " rows");
  }

  // The layout an activation (or gradient) x takes on stage v's placement: its own where the
  // meshes have as many axes (a data-parallel S(0) stays S(0); a partial gradient moves as it is
  // and is reduced where it is used), else replicated.
  NdSbp layout_on(const Activation& x, int64_t v) const {
    const Placement& p = stages_[v].placement;
    if (x.nd_sbp().size() == static_cast<size_t>(p.mesh().ndim())) return x.nd_sbp();
    return NdSbp(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  }

  // Runs layer k, with the tied copies of its stage in place of their parameters.
  Activation run_layer(size_t k, const Activation& x, const GlobalTensor<In>& input) {
    std::vector<std::pair<Parameter*, Parameter>> swapped;
    for (const auto& [parameter, layer] : layers_.ties())
      if (layer == layers_.names()[k])
        for (Tied& t : tied_)
          if (t.name == parameter && t.stage == layer_stage_[k]) swapped.emplace_back(t.slot, std::exchange(*t.slot, t.copy));
    struct Restore {
      std::vector<std::pair<Parameter*, Parameter>>& s;
      ~Restore() {
        for (auto& [slot, original] : s) *slot = std::move(original);
      }
    } restore{swapped};
    return k == 0 ? layers_.first_layer()(input) : layers_.layer(k)(x);
  }

  void forward(Run& run, int64_t v, int64_t i) {
    Activation x;
    if (v > 0) {
      SPSD_CHECK(run.received[v][i].defined(), "pipeline::Pipeline::step", "stage ", v, " runs micro-batch ", i,
                 " before stage ", v - 1, " sent it (the schedule was checked: this is a bug)");
      x = run.received[v][i].requires_grad_();  // the leaf whose gradient goes back to stage v - 1
    }
    for (size_t k = 0; k < layer_stage_.size(); ++k)
      if (layer_stage_[k] == v) x = run_layer(k, x, run.inputs[i]);
    if (v == stages() - 1) {
      x = layers_.loss_function()(x, run.targets[i]);
      SPSD_CHECK(x.shape().numel() == 1, "pipeline::Pipeline::step", "the loss must be a scalar, got ", x.describe());
      run.losses[i] = x.detach();
      run.targets[i] = GlobalTensor<Tgt>();
    } else {
      spsd::detail::AlwaysQueueComm queued;  // the sender goes on with its next action
      run.received[v + 1][i] = x.detach().to_global(stages_[v + 1].placement, layout_on(x, v + 1));
    }
    if (v == 0) run.inputs[i] = GlobalTensor<In>();
    run.outputs[v][i] = std::move(x);
  }

  void backward(Run& run, int64_t v, int64_t i, bool split) {
    Activation& y = run.outputs[v][i];
    const Activation seed = v == stages() - 1
                                ? full<C>(y.shape(), static_cast<compute_t<C>>(run.scale[i]), y.placement(),
                                          NdSbp(std::vector<Sbp>(y.placement().mesh().ndim(), sbp::broadcast)))
                                : run.gradients[v][i];
    SPSD_CHECK(seed.defined(), "pipeline::Pipeline::step", "stage ", v, " runs the backward of micro-batch ", i,
               " before stage ", v + 1, " sent its gradient (the schedule was checked: this is a bug)");
    Activation& x = run.received[v][i];
    if (split) {
      std::vector<Activation> leaves;
      if (v > 0) leaves.push_back(x);
      run.weights[v][i] = backward_input<C>(y, seed, std::span<const Activation>(leaves));
    } else {
      BackwardOptions options;
      options.reduce_gradients_early = false;
      spsd::backward(y, seed, options);
    }
    if (v > 0) {
      const Activation g = x.grad();
      spsd::detail::AlwaysQueueComm queued;
      run.gradients[v - 1][i] = g.to_global(stages_[v - 1].placement, layout_on(g, v - 1));
    }
    y = Activation();
    x = Activation();
    run.gradients[v][i] = Activation();
  }

  // Waits until the activation (a forward) or the gradient (a backward) that action a receives
  // from another stage is here.
  void await_received(const Run& run, const Action& a) const {
    const Activation* t = nullptr;
    if (a.work == Work::kForward && a.stage > 0) t = &run.received[a.stage][a.microbatch];
    if ((a.work == Work::kBackward || a.work == Work::kBackwardInput) && a.stage < stages() - 1)
      t = &run.gradients[a.stage][a.microbatch];
    if (t && t->defined() && t->to_local().storage()) (void)std::as_const(*t->to_local().storage()).data();
  }

  // The copies' gradients into their parameters', then each parameter's into its own layout.
  void reduce_gradients() {
    NoGradGuard no_grad;
    for (Tied& t : tied_) {
      auto& copy_grad = t.copy.autograd_meta()->grad;
      if (!copy_grad) continue;
      auto& grad = t.slot->autograd_meta()->grad;
      const spsd::detail::GlobalData moved = spsd::detail::to_layout(*copy_grad, t.slot->placement(), t.slot->nd_sbp());
      copy_grad.reset();
      spsd::detail::accumulate(grad, moved);
    }
    for (const Held& h : held_) {
      auto& grad = h.slot->autograd_meta()->grad;
      if (grad) grad = spsd::detail::to_layout(*grad, h.slot->placement(), h.slot->nd_sbp());
    }
  }

  Layers<C, In, Tgt> layers_;
  std::vector<Stage> stages_;
  int64_t chunks_;
  std::optional<Placement> all_ranks_;
  std::vector<int64_t> layer_stage_;  // per layer
  std::vector<Held> held_;
  std::vector<Tied> tied_;
  std::vector<std::vector<bool>> used_;  // which stage patterns matched a layer or a parameter
};

}  // namespace spsd::pipeline
