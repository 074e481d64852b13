// CompiledTapes (compile/compile.hpp): the tapes of a compiled step by key, and explain().
#include "spsd/compile/compile.hpp"

#include <numeric>

#include "spsd/boxing/to_layout.hpp"
#include "spsd/compile/layout_search.hpp"
#include "spsd/compile/tape_bytes.hpp"
#include "spsd/op/captured_op.hpp"
#include "spsd/runtime/consistency.hpp"

namespace spsd::detail {

namespace {

std::vector<int64_t> world_ranks() {
  std::vector<int64_t> ranks(static_cast<size_t>(world_size()));
  std::iota(ranks.begin(), ranks.end(), int64_t{0});
  return ranks;
}

// One line per entry of the tape: what runs, its signature and the boxing of its inputs.
std::string entry_lines(const Tape& tape) {
  std::string s;
  const int64_t me = rank();
  size_t k = 0;
  for (const Tape::Entry& e : tape.entries()) {
    s += concat("  ", k++, "  ");
    switch (e.kind) {
      case Tape::Entry::Kind::kHost: s += concat("host step ", e.name, "\n"); continue;
      case Tape::Entry::Kind::kGradient: s += concat("set gradient ", describe(*e.gradient), "\n"); continue;
      case Tape::Entry::Kind::kStep: break;
    }
    if (const auto* op = dynamic_cast<const CapturedOp*>(e.step.get())) {
      const Resolution& r = op->resolution();
      s += concat(r.op, " ", r.signature().to_string());
      for (size_t i = 0; i < r.plans.size(); ++i) {
        if (!r.plans[i] || r.plans[i]->steps.empty()) continue;
        s += concat("; input ", i, " ", r.plans[i]->from.nd_sbp, " -> ", r.plans[i]->to.nd_sbp, ":");
        for (const Step& step : r.plans[i]->steps) s += concat(" ", to_string(step.kind));
        s += concat(" (", r.plans[i]->bytes_sent(me), " B sent here)");
      }
    } else if (const auto* boxing = dynamic_cast<const CapturedBoxing*>(e.step.get())) {
      const Plan& p = *boxing->plan();
      s += concat("to_global ", p.shape, " ", p.from.nd_sbp, " -> ", p.to.nd_sbp, ":");
      for (const Step& step : p.steps) s += concat(" ", to_string(step.kind));
      s += concat(" (", p.bytes_sent(me), " B sent here)");
    } else {
      s += e.step->describe();
    }
    s += "\n";
  }
  return s;
}

}  // namespace

std::string CompiledTapes::key_of(std::span<const GlobalData> arguments) {
  std::string key;
  for (const GlobalData& a : arguments) key += describe(a) + "; ";
  return key;
}

Tape* CompiledTapes::find(const std::string& key) {
  const auto it = tapes_.find(key);
  if (it == tapes_.end()) return nullptr;
  last_ = &it->second;
  return it->second.tape.get();
}

std::unique_ptr<Tape> CompiledTapes::start(const std::string&) {
  auto tape = std::make_unique<Tape>();
  tape->begin_capture();
  return tape;
}

Tape& CompiledTapes::commit(const std::string& key, std::unique_ptr<Tape> tape) {
  Compiled c;
  const TapeBytes eager = tape_bytes(*tape);
  std::string search_text = "  layouts: eager's choices (search_layouts off)\n";
  if (options_.search_layouts) search_text = search_layouts(*tape, settings()).to_string();
  const TapeBytes compiled = tape_bytes(*tape);
  int64_t kernels = 0, boxings = 0, hosts = 0, gradients = 0;
  for (const Tape::Entry& e : tape->entries()) {
    if (e.kind == Tape::Entry::Kind::kHost) ++hosts;
    else if (e.kind == Tape::Entry::Kind::kGradient) ++gradients;
    else if (const auto* op = dynamic_cast<const CapturedOp*>(e.step.get())) {
      ++kernels;
      if (op->call().checks_indices) {
        const std::vector<int64_t>& ranks = op->resolution().placement.ranks();
        if (std::find(c.data_checks.begin(), c.data_checks.end(), ranks) == c.data_checks.end())
          c.data_checks.push_back(ranks);
      }
    } else {
      ++boxings;
    }
  }
  std::string replay_text = "  replay: op by op (";
  if (!tape->device_only()) replay_text += "steps on cpu placements: CUDA graphs are for a tape all on cuda ones)\n";
  else if (!options_.cuda_graph) replay_text += "cuda_graph off)\n";
  else {
    size_t runs = 0;  // runs of entries between host steps: one graph each
    bool in_run = false;
    for (const Tape::Entry& e : tape->entries()) {
      const bool host = e.kind == Tape::Entry::Kind::kHost;
      runs += !host && !in_run;
      in_run = !host;
    }
    replay_text = concat("  replay: as ", runs, " CUDA graph", runs == 1 ? "" : "s",
                         " (the runs of entries between host steps), captured at the second replay; the first "
                         "replays op by op\n");
  }
  c.identity = std::make_shared<const OpIdentity>("compiled step(" + key + ")");
  c.explanation = concat("compiled step for ", key, "\n  ", tape->entries().size(), " entries: ", kernels, " kernels, ",
                         boxings, " boxings, ", hosts, " host steps, ", gradients, " gradients set; pool ",
                         tape->pool_bytes(), " B on rank ", rank(), "; ", tape->external_count(),
                         " tensors made before the step, bound at capture\n", replay_text, search_text,
                         "  bytes sent per step, busiest rank: ", compiled.max_sent, " (eager's choices: ", eager.max_sent,
                         "); all ranks: ", compiled.total_sent, " (eager: ", eager.total_sent, ")\n", entry_lines(*tape));
  c.tape = std::move(tape);
  auto [it, inserted] = tapes_.insert_or_assign(key, std::move(c));
  last_ = &it->second;
  return *it->second.tape;
}

std::vector<GlobalData> CompiledTapes::replay(Tape& tape, std::span<const std::shared_ptr<Storage>> arguments) {
  const Compiled& c = *last_;
  // Every rank replays the same tape: a rank that came with another key (a bug in the program)
  // is found at the world's next check. Index errors are raised at the end, on every rank of
  // the op's placement, as eager raises them at its next check.
  static thread_local std::vector<int64_t> world;
  if (world.size() != static_cast<size_t>(world_size())) world = world_ranks();
  note_op(world, c.identity);
  for (const std::vector<int64_t>& ranks : c.data_checks)
    if (ranks != world) note_op(ranks, c.identity);
  std::vector<GlobalData> outputs;
  if (options_.cuda_graph && tape.replays() > 0 && tape.device_only()) {
    try {
      outputs = tape.replay_as_graphs(arguments);
    } catch (const Error& e) {
      throw_error("compile", "replaying as CUDA graphs: ", e.what(),
                  " (CompileOptions::cuda_graph = false replays op by op)");
    }
  } else {
    outputs = tape.replay(arguments);
  }
  for (const std::vector<int64_t>& ranks : c.data_checks) check_ops(ranks);
  return outputs;
}

SearchReport CompiledTapes::search_parameters(std::span<const FreeParameter> parameters) {
  SPSD_CHECK(last_ != nullptr, "search_plan", "the step has not been captured (call it once first)");
  return search_layouts(*last_->tape, settings(), parameters);
}

std::string CompiledTapes::explain() const {
  return last_ ? last_->explanation : "compiled step: not called yet (nothing captured)\n";
}

}  // namespace spsd::detail
