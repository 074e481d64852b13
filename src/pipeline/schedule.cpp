// Pipeline schedules: the checks, the replay behind both the deadlock check and the cost model,
// and the four generators (which go through the same checks as a custom schedule).
#include "spsd/pipeline/schedule.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "spsd/core/error.hpp"

namespace spsd::pipeline {

const char* work_name(Work work) {
  switch (work) {
    case Work::kForward: return "F";
    case Work::kBackward: return "B";
    case Work::kBackwardInput: return "BI";
    case Work::kBackwardWeight: return "BW";
  }
  return "?";
}

std::string describe(const Action& action) {
  return work_name(action.work) + std::to_string(action.microbatch) + "@stage" + std::to_string(action.stage);
}

namespace {

constexpr const char* kScheduleOp = "pipeline::Schedule";

void check_count(const char* op, const char* what, int64_t value) {
  SPSD_CHECK(value >= 1, op, what, " is ", value, "; it must be >= 1");
}

// Where an action sits: actions(rank)[index].
struct Ref {
  int64_t rank, index;
};

// For each (stage, micro-batch), the index of its forward, its backward (B or BI) and its BW in
// the rank's list (-1: none): the dependencies are looked up here.
struct Positions {
  int64_t microbatches;
  std::vector<int64_t> forward, backward, weight;

  size_t at(int64_t stage, int64_t microbatch) const { return static_cast<size_t>(stage * microbatches + microbatch); }
};

// Everything but runnability: ranges, ranks, and one F plus one B or BI + BW per pair.
Positions locate(const Schedule& s) {
  const int64_t m = s.microbatches();
  const size_t pairs = static_cast<size_t>(s.stages() * m);
  Positions pos{m, std::vector<int64_t>(pairs, -1), std::vector<int64_t>(pairs, -1), std::vector<int64_t>(pairs, -1)};
  for (int64_t r = 0; r < s.ranks(); ++r) {
    const std::vector<Action>& list = s.actions(r);
    for (int64_t k = 0; k < static_cast<int64_t>(list.size()); ++k) {
      const Action& a = list[k];
      const int work = static_cast<int>(a.work);
      SPSD_CHECK(work >= 0 && work <= static_cast<int>(Work::kBackwardWeight), kScheduleOp, "rank ", r, "'s action ", k,
                 " has no Work kind (", work, ")");
      SPSD_CHECK(a.stage >= 0 && a.stage < s.stages(), kScheduleOp, "rank ", r, "'s action ", k, ", ", describe(a),
                 ", has a stage outside [0, ", s.stages(), ") (", s.ranks(), " ranks x ", s.chunks(), " chunks)");
      SPSD_CHECK(a.microbatch >= 0 && a.microbatch < m, kScheduleOp, "rank ", r, "'s action ", k, ", ", describe(a),
                 ", has a micro-batch outside [0, ", m, ")");
      SPSD_CHECK(s.rank_of(a.stage) == r, kScheduleOp, "rank ", r, "'s action ", k, ", ", describe(a),
                 ", belongs on rank ", s.rank_of(a.stage), " (stage ", a.stage, " % ", s.ranks(), " ranks)");
      std::vector<int64_t>& slot = a.work == Work::kForward          ? pos.forward
                                   : a.work == Work::kBackwardWeight ? pos.weight
                                                                     : pos.backward;
      const size_t at = pos.at(a.stage, a.microbatch);
      if (slot[at] >= 0) {
        const Action& before = list[slot[at]];
        SPSD_CHECK(before != a, kScheduleOp, "rank ", r, " has ", describe(a), " twice (its actions ", slot[at],
                   " and ", k, ")");
        detail::throw_error(kScheduleOp, "rank ", r, " has both ", describe(before), " and ", describe(a),
                            " (its actions ", slot[at], " and ", k, "); a stage runs one B or one BI per micro-batch");
      }
      slot[at] = k;
    }
  }
  for (int64_t v = 0; v < s.stages(); ++v) {
    for (int64_t i = 0; i < m; ++i) {
      const size_t at = pos.at(v, i);
      const auto name = [&](Work w) { return describe({w, v, i}); };
      const int64_t r = s.rank_of(v);
      SPSD_CHECK(pos.forward[at] >= 0, kScheduleOp, name(Work::kForward), " is missing from rank ", r, "'s list");
      SPSD_CHECK(pos.backward[at] >= 0, kScheduleOp, name(Work::kBackward), " is missing from rank ", r,
                 "'s list (or ", name(Work::kBackwardInput), " and ", name(Work::kBackwardWeight), ")");
      if (s.actions(r)[pos.backward[at]].work == Work::kBackward)
        SPSD_CHECK(pos.weight[at] < 0, kScheduleOp, "rank ", r, " has both ", name(Work::kBackward), " and ",
                   name(Work::kBackwardWeight), "; a stage runs one B or one BI and one BW per micro-batch");
      else
        SPSD_CHECK(pos.weight[at] >= 0, kScheduleOp, name(Work::kBackwardWeight), " is missing from rank ", r,
                   "'s list (", name(Work::kBackwardInput), " is there)");
    }
  }
  return pos;
}

// The actions `a` waits for (located and checked by locate): writes them to deps, returns how many.
int dependencies(const Schedule& s, const Positions& pos, const Action& a, std::array<Ref, 2>& deps) {
  const int64_t v = a.stage, i = a.microbatch;
  if (a.work == Work::kForward) {
    if (v == 0) return 0;
    deps[0] = {s.rank_of(v - 1), pos.forward[pos.at(v - 1, i)]};
    return 1;
  }
  if (a.work == Work::kBackwardWeight) {
    deps[0] = {s.rank_of(v), pos.backward[pos.at(v, i)]};
    return 1;
  }
  deps[0] = {s.rank_of(v), pos.forward[pos.at(v, i)]};
  if (v == s.stages() - 1) return 1;
  deps[1] = {s.rank_of(v + 1), pos.backward[pos.at(v + 1, i)]};
  return 2;
}

// Each action's duration, by Work.
using Durations = std::array<double, 4>;

struct Replay {
  std::vector<Step> order;  // as committed: by (start, rank) among the actions that can start
  std::vector<double> busy;  // per rank
  double makespan = 0;
};

// Runs every rank's list in order; an action starts when its rank is free and its dependencies
// have finished. Of the ranks whose next action can start, the one starting first (then the
// lowest rank) goes next, so the order is both topological and sorted by start. Throws on a
// deadlock, naming the lowest rank's stuck action and what it waits for.
Replay replay(const Schedule& s, const Positions& pos, const Durations& duration) {
  const int64_t p = s.ranks();
  std::vector<int64_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  std::vector<std::vector<double>> finish(p);
  size_t total = 0;
  for (int64_t r = 0; r < p; ++r) {
    finish[r].resize(s.actions(r).size());
    total += s.actions(r).size();
  }
  const auto done = [&](const Ref& d) { return d.index < next[d.rank]; };
  const auto at_end = [&](int64_t r) { return next[r] == static_cast<int64_t>(s.actions(r).size()); };
  Replay out;
  out.order.reserve(total);
  out.busy.assign(p, 0);
  std::array<Ref, 2> deps;
  while (out.order.size() < total) {
    int64_t best = -1;
    double best_start = 0;
    for (int64_t r = 0; r < p; ++r) {
      if (at_end(r)) continue;
      const int n = dependencies(s, pos, s.actions(r)[next[r]], deps);
      double start = free_at[r];
      bool ready = true;
      for (int d = 0; d < n && ready; ++d) {
        ready = done(deps[d]);
        if (ready) start = std::max(start, finish[deps[d].rank][deps[d].index]);
      }
      if (ready && (best < 0 || start < best_start)) best = r, best_start = start;
    }
    if (best < 0) {
      int64_t r = 0;
      while (at_end(r)) ++r;
      const Action& stuck = s.actions(r)[next[r]];
      const int n = dependencies(s, pos, stuck, deps);
      int d = 0;
      while (d < n && done(deps[d])) ++d;
      const Ref& wait = deps[d];
      const Action& waited = s.actions(wait.rank)[wait.index];
      const std::string where =
          wait.rank == r ? detail::concat("which rank ", r, " runs only later (its action ", wait.index, ")")
                         : detail::concat("which rank ", wait.rank, " has not reached (its action ", wait.index,
                                          "): rank ", wait.rank, "'s next action is ",
                                          describe(s.actions(wait.rank)[next[wait.rank]]), " (its action ",
                                          next[wait.rank], ")");
      detail::throw_error(kScheduleOp, "deadlock: rank ", r, "'s next action, ", describe(stuck), " (its action ",
                          next[r], "), waits for ", describe(waited), ", ", where);
    }
    const Action& a = s.actions(best)[next[best]];
    const double took = duration[static_cast<size_t>(a.work)];
    out.order.push_back({best, next[best], best_start});
    finish[best][next[best]] = free_at[best] = best_start + took;
    out.busy[best] += took;
    out.makespan = std::max(out.makespan, best_start + took);
    ++next[best];
  }
  return out;
}

// Per action, costs / chunks: Costs are a rank's whole share, an action one chunk of it.
Durations durations(const char* op, const Schedule& s, const Costs& c) {
  const std::array<std::pair<const char*, double>, 4> named{
      {{"forward", c.forward}, {"backward", c.backward}, {"backward_input", c.backward_input},
       {"backward_weight", c.backward_weight}}};
  Durations out;
  for (size_t k = 0; k < named.size(); ++k) {
    SPSD_CHECK(std::isfinite(named[k].second) && named[k].second >= 0, op, "costs.", named[k].first, " is ",
               named[k].second, "; costs must be finite and >= 0");
    out[k] = named[k].second / static_cast<double>(s.chunks());
  }
  return out;
}

}  // namespace

Schedule::Schedule(int64_t ranks, int64_t chunks, int64_t microbatches, std::vector<std::vector<Action>> per_rank)
    : ranks_(ranks), chunks_(chunks), microbatches_(microbatches), per_rank_(std::move(per_rank)) {
  check_count(kScheduleOp, "ranks", ranks);
  check_count(kScheduleOp, "chunks", chunks);
  check_count(kScheduleOp, "microbatches", microbatches);
  SPSD_CHECK(static_cast<int64_t>(per_rank_.size()) == ranks, kScheduleOp, "got ", per_rank_.size(),
             " action lists for ", ranks, " ranks");
  // Runnability does not depend on durations: any positive ones find every deadlock.
  replay(*this, locate(*this), Durations{1, 1, 1, 1});
}

const std::vector<Action>& Schedule::actions(int64_t pipeline_rank) const {
  SPSD_CHECK(pipeline_rank >= 0 && pipeline_rank < ranks_, "pipeline::Schedule::actions", "pipeline rank ",
             pipeline_rank, " is outside [0, ", ranks_, ")");
  return per_rank_[pipeline_rank];
}

std::string Schedule::to_string() const {
  std::string out;
  for (const std::vector<Action>& list : per_rank_) {
    for (size_t k = 0; k < list.size(); ++k) {
      out += (k ? " " : "") + std::string(work_name(list[k].work)) + std::to_string(list[k].microbatch);
      if (chunks_ > 1) out += "." + std::to_string(chunk_of(list[k].stage));
    }
    out += '\n';
  }
  return out;
}

Timeline simulate(const Schedule& schedule, const Costs& costs) {
  const Durations duration = durations("pipeline::simulate", schedule, costs);
  const Replay run = replay(schedule, locate(schedule), duration);
  Timeline t{run.makespan, 0, std::vector<int64_t>(schedule.ranks(), 0)};
  double idle = 0;
  for (double busy : run.busy) idle += run.makespan - busy;
  if (run.makespan > 0) t.bubble_fraction = idle / (static_cast<double>(schedule.ranks()) * run.makespan);
  // Held from the F until the B or the BW; a rank runs one action at a time, so its list order
  // alone decides how many it holds.
  for (int64_t r = 0; r < schedule.ranks(); ++r) {
    int64_t held = 0;
    for (const Action& a : schedule.actions(r)) {
      held += a.work == Work::kForward ? 1 : a.work == Work::kBackwardInput ? 0 : -1;
      t.peak_activations[r] = std::max(t.peak_activations[r], held);
    }
  }
  return t;
}

std::vector<Step> program_order(const Schedule& schedule, const Costs& costs) {
  const Durations duration = durations("pipeline::program_order", schedule, costs);
  return replay(schedule, locate(schedule), duration).order;
}

namespace {

// One chunk's lists under construction: rank r's stage is r (chunks == 1 schedules).
struct Lists {
  int64_t ranks;
  std::vector<std::vector<Action>> per_rank;
  explicit Lists(int64_t ranks) : ranks(ranks), per_rank(ranks) {}
  void add(int64_t r, Work work, int64_t microbatch) { per_rank[r].push_back({work, r, microbatch}); }
};

}  // namespace

Schedule gpipe(int64_t ranks, int64_t microbatches) {
  check_count("pipeline::gpipe", "ranks", ranks);
  check_count("pipeline::gpipe", "microbatches", microbatches);
  Lists lists(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    for (int64_t i = 0; i < microbatches; ++i) lists.add(r, Work::kForward, i);
    for (int64_t i = 0; i < microbatches; ++i) lists.add(r, Work::kBackward, i);
  }
  return Schedule(ranks, 1, microbatches, std::move(lists.per_rank));
}

Schedule one_f_one_b(int64_t ranks, int64_t microbatches) {
  check_count("pipeline::one_f_one_b", "ranks", ranks);
  check_count("pipeline::one_f_one_b", "microbatches", microbatches);
  Lists lists(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t f = 0, b = 0;
    // Enough forwards in flight that the first gradient comes back just as the last one leaves.
    while (f < std::min(ranks - 1 - r, microbatches)) lists.add(r, Work::kForward, f++);
    while (f < microbatches) {
      lists.add(r, Work::kForward, f++);
      lists.add(r, Work::kBackward, b++);
    }
    while (b < microbatches) lists.add(r, Work::kBackward, b++);
  }
  return Schedule(ranks, 1, microbatches, std::move(lists.per_rank));
}

Schedule interleaved_one_f_one_b(int64_t ranks, int64_t microbatches, int64_t chunks) {
  const char* op = "pipeline::interleaved_one_f_one_b";
  check_count(op, "ranks", ranks);
  check_count(op, "microbatches", microbatches);
  check_count(op, "chunks", chunks);
  if (chunks == 1) return one_f_one_b(ranks, microbatches);
  // Megatron's schedule for the next multiple of `ranks` micro-batches, with the extra ones left
  // out. Leaving out every action of a micro-batch cannot create a deadlock: dependencies never
  // cross micro-batches, so any cycle left would have been one before.
  const int64_t padded = (microbatches + ranks - 1) / ranks * ranks, total = padded * chunks;
  // Every rank's order of (chunk, micro-batch): groups of `ranks` micro-batches, each group
  // through all chunks before the next starts; backwards through the chunks in reverse.
  struct Slot {
    int64_t chunk, microbatch;
  };
  std::vector<Slot> forwards, backwards;
  for (int64_t first = 0; first < padded; first += ranks) {
    for (int64_t c = 0; c < chunks; ++c) {
      for (int64_t i = first; i < first + ranks; ++i) {
        forwards.push_back({c, i});
        backwards.push_back({chunks - 1 - c, i});
      }
    }
  }
  std::vector<std::vector<Action>> per_rank(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    const auto add = [&](Work work, const Slot& slot) {
      if (slot.microbatch < microbatches) per_rank[r].push_back({work, slot.chunk * ranks + r, slot.microbatch});
    };
    // The last rank can start backward once the first group has passed through chunks - 1
    // chunks; each earlier rank covers the gradient's round trip, two actions per rank.
    const int64_t warmup = std::min((chunks - 1) * ranks + 2 * (ranks - 1 - r), total);
    int64_t f = 0, b = 0;
    while (f < warmup) add(Work::kForward, forwards[f++]);
    while (f < total) {
      add(Work::kForward, forwards[f++]);
      add(Work::kBackward, backwards[b++]);
    }
    while (b < total) add(Work::kBackward, backwards[b++]);
  }
  return Schedule(ranks, chunks, microbatches, std::move(per_rank));
}

Schedule zero_bubble(int64_t ranks, int64_t microbatches) {
  check_count("pipeline::zero_bubble", "ranks", ranks);
  check_count("pipeline::zero_bubble", "microbatches", microbatches);
  Lists lists(ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t f = 0, b = 0, w = 0;
    const auto forward = [&] { lists.add(r, Work::kForward, f++); };
    const auto input = [&] { lists.add(r, Work::kBackwardInput, b++); };
    const auto weight = [&] { lists.add(r, Work::kBackwardWeight, w++); };
    // 1F1B's warm-up; then rank r defers r weight gradients, holding their activations: at most
    // min(ranks, m) micro-batches, what 1F1B's first rank holds ...
    while (f < std::min(ranks - 1 - r, microbatches)) forward();
    for (int64_t k = 0; k < r && f < microbatches; ++k) forward(), input();
    while (f < microbatches) forward(), input(), weight();
    while (b < microbatches) input(), weight();
    // ... and runs them where 1F1B's rank r waits for the last gradients.
    while (w < microbatches) weight();
  }
  return Schedule(ranks, 1, microbatches, std::move(lists.per_rank));
}

}  // namespace spsd::pipeline
