#pragma once
// Pipeline schedules as values: the actions each pipeline rank runs, in order, checked to be
// complete and runnable, and priced by a simple cost model. Nothing here touches the runtime:
// the pipeline runner executes these lists, so they can be built and tested like split.hpp.
//
// Stages. A schedule has ranks() x chunks() virtual stages; stage v runs on pipeline rank
// v % ranks(), so with chunks() > 1 (interleaved) rank r holds stages r, r + ranks(), ... and
// its chunk c is stage c * ranks() + r. Micro-batch i flows forward through stages 0, 1, ...
// and its gradient flows back.
//
// Dependencies, the only ordering between ranks:
//   F(v, i)            needs F(v - 1, i), for v > 0
//   B(v, i), BI(v, i)  need F(v, i) and, for v < stages() - 1, the B or BI of (v + 1, i)
//   BW(v, i)           needs BI(v, i)
// Each (stage, micro-batch) has exactly one F and either one B or one BI and one BW: BI is the
// input gradient (what the stage before waits for), BW the weight gradient, which nothing else
// waits for and which a schedule may defer to fill idle time.
//
// Notation. Work is written F, B, BI, BW followed by the micro-batch: "B3". to_string's lines
// name the chunk after a dot when chunks() > 1 ("F3.1": micro-batch 3 of the rank's chunk 1);
// messages, which cross ranks, name the stage instead ("B3@stage5", describe()).
#include <cstdint>
#include <string>
#include <vector>

namespace spsd::pipeline {

// What a pipeline action computes: a forward, a whole backward, or its input or weight half.
enum class Work { kForward, kBackward, kBackwardInput, kBackwardWeight };

// One entry of a pipeline rank's list: which work, for which stage and micro-batch.
struct Action {
  Work work;
  int64_t stage;       // the (virtual) stage; it runs on pipeline rank stage % ranks
  int64_t microbatch;
  // The same work, stage and micro-batch.
  friend bool operator==(const Action&, const Action&) = default;
};

// "F", "B", "BI" or "BW".
const char* work_name(Work work);
// "B3@stage5": an action named without a schedule, as the error messages name them.
std::string describe(const Action& action);

// The actions each pipeline rank runs, in order, checked complete and runnable.
class Schedule {
 public:
  // A custom schedule: per_rank[r] is what pipeline rank r runs, in order. Throws spsd::Error
  // unless ranks, chunks and microbatches are >= 1, there is one list per rank, every action's
  // stage and micro-batch are in range and on rank stage % ranks, each (stage, micro-batch) has
  // one F and one B or one BI and one BW, and the lists are runnable: with every rank running
  // its list in order and each action starting once its dependencies are done (sends never
  // block), all actions finish. A deadlock names the first stuck action (the lowest rank that
  // cannot go on) and what it waits for.
  Schedule(int64_t ranks, int64_t chunks, int64_t microbatches, std::vector<std::vector<Action>> per_rank);

  // The pipeline ranks, chunks per rank, virtual stages (ranks() x chunks()) and micro-batches.
  int64_t ranks() const { return ranks_; }
  int64_t chunks() const { return chunks_; }
  int64_t stages() const { return ranks_ * chunks_; }
  int64_t microbatches() const { return microbatches_; }
  // The pipeline rank that runs stage, and which of that rank's chunks it is.
  int64_t rank_of(int64_t stage) const { return stage % ranks_; }
  int64_t chunk_of(int64_t stage) const { return stage / ranks_; }

  // In the order that rank runs them. Throws spsd::Error for a rank outside [0, ranks()).
  const std::vector<Action>& actions(int64_t pipeline_rank) const;
  // One line per pipeline rank, each ending in '\n': "F0 F1 B0 F2 B1 B2" (notation above).
  std::string to_string() const;

  // The same sizes and the same lists of actions.
  friend bool operator==(const Schedule&, const Schedule&) = default;

 private:
  int64_t ranks_, chunks_, microbatches_;
  std::vector<std::vector<Action>> per_rank_;
};

// Every rank does all its forwards, then all its backwards (micro-batch order both times).
// Peak activations: all m micro-batches.
Schedule gpipe(int64_t ranks, int64_t microbatches);

// Rank r does min(ranks - 1 - r, m) warm-up forwards, then alternates one forward and one
// backward, then drains the rest of the backwards: at most min(ranks - r, m) micro-batches held.
Schedule one_f_one_b(int64_t ranks, int64_t microbatches);

// Interleaved 1F1B (Megatron-LM, Narayanan et al. 2021) with `chunks` stages per rank. Every
// rank runs its forwards in one order: micro-batches in groups of `ranks`, each group through
// chunk 0, then chunk 1, ...; its backwards in the same order with the chunks reversed. Rank r
// warms up with (chunks - 1) x ranks + 2 (ranks - 1 - r) forwards (at most all of them), then
// alternates forward and backward, then drains. Megatron needs m % ranks == 0; any other m
// (m < ranks too) gets the schedule of the next multiple of ranks with the extra micro-batches'
// actions left out. That cannot deadlock (dependencies never cross micro-batches, so a cycle
// left would have been one before). Its bubble is then above Megatron's formula, and in the
// tests (ranks <= 8, m <= 32, chunks <= 4) never above 1F1B's.
// chunks == 1 is one_f_one_b.
Schedule interleaved_one_f_one_b(int64_t ranks, int64_t microbatches, int64_t chunks);

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2023): the backward is split into BI
// and BW. Rank r warms up with min(ranks - 1 - r, m) forwards as 1F1B does, then runs r steps of
// forward + BI with the BW deferred, then forward + BI + BW, then BI + BW while backwards remain,
// then its r deferred BWs, which fill the time 1F1B's rank r waits at the end. Every rank holds
// up to min(ranks, m) micro-batches, the peak of 1F1B's first rank. With forward =
// backward_input = backward_weight, each rank idles (ranks - 1) x forward at m >= ranks: a third
// of 1F1B's idle time (the bubble fraction falls less, as the makespan shrinks too).
Schedule zero_bubble(int64_t ranks, int64_t microbatches);

// Durations of one pipeline rank's whole share of the model for one micro-batch. In a
// schedule with chunks() > 1 each action covers one chunk and takes cost / chunks().
struct Costs {
  double forward = 1, backward = 2, backward_input = 1, backward_weight = 1;
};

// What simulate() predicts for a schedule: its makespan, bubble and activations held.
struct Timeline {
  double makespan;                        // finish time of the last action
  double bubble_fraction;                 // idle time / (ranks() x makespan); 0 when makespan is 0
  std::vector<int64_t> peak_activations;  // per pipeline rank: (stage, micro-batch) pairs held at once
};

// A deterministic replay: each rank runs its list in order, an action starts when the rank is
// free and its dependencies have finished, transfers take no time. A (stage, micro-batch) holds
// its activations from its F until its B, or in the split form until its BW (the weight
// gradient still reads the stage's inputs), as the zero-bubble paper counts them; with chunks()
// > 1 each pair is one chunk's activations, 1 / chunks() of a micro-batch's on that rank.
// Throws spsd::Error for a negative or non-finite cost.
Timeline simulate(const Schedule& schedule, const Costs& costs = {});

// One action of a single-program run: actions(rank)[index], which the replay starts at `start`.
struct Step {
  int64_t rank;
  int64_t index;
  double start;
};

// Every action of every rank once, by simulated start time, ties to the lower rank, except that
// an action never comes before one it depends on (a tie that only zero costs make). A
// topological order, then: a single-program runner issues the steps in this order, each rank
// running its own and skipping the others'. Throws as simulate.
std::vector<Step> program_order(const Schedule& schedule, const Costs& costs = {});

}  // namespace spsd::pipeline
