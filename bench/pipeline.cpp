// bench/pipeline: pipeline schedules (issue 39), one section per flag.
//   pipeline [--simulated]
//   OPENBLAS_NUM_THREADS=1 tools/mpirun -np P build/bench/pipeline --measured
//       [--steps 5] [--microbatches 2,4,8,16] [--rows 256] [--hidden 256] [--blocks 8]
//   --simulated   the cost model alone (spsd::pipeline::simulate, no ranks run, instant): for
//                 p in {2, 4, 8} pipeline ranks, m in {1, 2, 4, 8, 16, 32} micro-batches and each
//                 schedule (gpipe, 1f1b, interleaved with 2 chunks, zb-h1), the makespan and bubble
//                 fraction with the papers' formula beside it, and rank 0's peak activations; then
//                 the p = 4, m = 8 action lists. Costs: forward 1, backward 2 (zb-h1: backward
//                 input 1, backward weight 1), a rank's whole share per micro-batch.
//   --measured    the runner (pipeline::Pipeline::step) on real ranks, one stage per rank (P >= 2;
//                 fewer: it says so and skips), all on one machine: spans of different ranks are
//                 compared on the steady clock. The model's compute per rank is fixed: an input
//                 layer (16 features), `blocks` x P hidden x hidden nn::Linear + relu layers (`blocks`
//                 per rank, half per chunk when interleaved), a head (16 classes), cross-entropy;
//                 micro-batches of `rows` rows (a batch of m x rows), float32. Per m, each of 2
//                 warm-up + `steps` rounds runs one step of every schedule (their order rotating
//                 from round to round) and then the baseline, a barrier before each: a busy spell
//                 of the machine falls on all of them alike. 25 s on 2 ranks of a quiet 2-core
//                 machine, a minute or more on a busy one. Every figure but the baseline's comes
//                 from the runner's own execution: the spans of the trace's pipeline lane and the
//                 host thread's waits (SPSD_TRACE, docs/trace.md; a temporary file unless SPSD_TRACE
//                 is set, read after flush_trace()). Per schedule and m:
//                   F, B (BI + BW)  mean compute of each kind of action over all ranks and steps:
//                                  its span less the host thread's waits for the communication
//                                  stream inside it (a stage that reads an activation or gradient
//                                  not yet received blocks inside its action's span); a chunk's
//                                  action counts chunks times, a rank's whole share as in Costs;
//                   sim            pipeline::simulate of the same schedule with those costs
//                                  (transfers take no time there);
//                   measured       per rank and step 1 - (its compute) / (first action's start to
//                                  last action's end over all ranks), median over steps; max and
//                                  mean over ranks. "spans mean": the same with whole spans, waits
//                                  counted busy, which hides a stage's wait for its input;
//                   step ms        Pipeline::step to synchronize(), max over ranks, median;
//                   one rank ms    the baseline: the same model on rank 0 alone, no pipeline,
//                                  forward, loss and backward on the whole batch at once / on its m
//                                  micro-batches one after another (the pipeline's GEMM sizes);
//                   peak mb        rank 0's peak host tensor memory during a step above what it
//                                  held before (parameters, gradients, the batch), in units of one
//                                  micro-batch's activations of rank 0's layers (measured once, by
//                                  running them on one micro-batch); the simulated peak beside.
// With no flag, every section runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <spsd/spsd.hpp>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "machine.hpp"
#include "trace_reader.hpp"

namespace {

namespace pp = spsd::pipeline;

struct Generator {
  const char* name;
  std::function<pp::Schedule(int64_t p, int64_t m)> make;
  // The bubble fraction the papers give with the default Costs, and where it is exact.
  std::function<double(double p, double m)> formula;
  std::function<bool(int64_t p, int64_t m)> exact;
};

constexpr int64_t kChunks = 2;

std::vector<Generator> generators() {
  const auto always = [](int64_t, int64_t) { return true; };
  return {
      {"gpipe", pp::gpipe, [](double p, double m) { return (p - 1) / (m + p - 1); }, always},
      {"1f1b", pp::one_f_one_b, [](double p, double m) { return (p - 1) / (m + p - 1); }, always},
      // Megatron: (p - 1) / v micro-batch times idle per rank; exact for whole groups of p.
      {"interleaved-v2", [](int64_t p, int64_t m) { return pp::interleaved_one_f_one_b(p, m, kChunks); },
       [](double p, double m) { return (p - 1) / (kChunks * m + p - 1); },
       [](int64_t p, int64_t m) { return m % p == 0; }},
      // Zero bubble: (p - 1)(F + BI - BW) = p - 1 idle per rank against 3m of work.
      {"zb-h1", pp::zero_bubble, [](double p, double m) { return (p - 1) / (3 * m + p - 1); },
       [](int64_t p, int64_t m) { return m >= p; }},
  };
}

// The cost model's figures beside the formulas (a formula marked * is a bound, not exact, there).
void simulated() {
  std::printf("## Simulated schedules (forward 1, backward 2 = input 1 + weight 1)\n\n");
  std::printf("| p | m | schedule | makespan | bubble | formula | peak activations, rank 0 |\n");
  std::printf("|--:|--:|---|--:|--:|--:|--:|\n");
  for (int64_t p : {2, 4, 8}) {
    for (int64_t m : {1, 2, 4, 8, 16, 32}) {
      for (const Generator& g : generators()) {
        const pp::Timeline t = pp::simulate(g.make(p, m));
        std::printf("| %lld | %lld | %s | %.1f | %.3f | %.3f%s | %lld |\n", static_cast<long long>(p),
                    static_cast<long long>(m), g.name, t.makespan, t.bubble_fraction,
                    g.formula(static_cast<double>(p), static_cast<double>(m)), g.exact(p, m) ? "" : "*",
                    static_cast<long long>(t.peak_activations[0]));
      }
    }
  }
  std::printf("\n* m %% p != 0 (interleaved) or m < p (zb-h1): the formula is not exact there.\n");
  std::printf("Interleaved peaks count chunk activations, each half a micro-batch's on the rank.\n");
  std::printf("\n## Action lists, p = 4, m = 8 (one line per pipeline rank; F3.1: micro-batch 3, chunk 1)\n");
  for (const Generator& g : generators()) std::printf("\n%s:\n%s", g.name, g.make(4, 8).to_string().c_str());
}

// ---------------------------------------------------------------------------------------
// Measured: the runner on real ranks

using Clock = std::chrono::steady_clock;
using spsd::GlobalTensor;

struct MeasuredOptions {
  int64_t steps = 5, warmup = 2, rows = 256, hidden = 256, blocks = 8;
  std::vector<int64_t> microbatches{2, 4, 8, 16};
};

constexpr int64_t kFeatures = 16, kClasses = 16;

double reduce_over_ranks(double v, spsd::ReduceOp op) {
  double out = 0;
  spsd::world_communicator().all_reduce(&v, &out, 1, spsd::DType::kFloat64, op);
  return out;
}

// Element-wise over ranks, in place.
void reduce_over_ranks(std::vector<double>& v, spsd::ReduceOp op) {
  if (v.empty()) return;
  spsd::world_communicator().all_reduce(v.data(), v.data(), static_cast<int64_t>(v.size()), spsd::DType::kFloat64, op);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Every rank's queued work done, then all ranks together: steps never overlap across ranks.
void quiet() {
  spsd::synchronize();
  spsd::world_communicator().barrier();
}

// The input layer, p x blocks hidden x hidden layers, the head. Every hidden layer is the same
// GEMM, so a rank's compute per micro-batch is `blocks` of them forward and 2 x `blocks` backward
// (input and weight gradients); the input layer and head are small.
struct Net : spsd::nn::Module<float> {
  spsd::nn::Linear<float> inp;
  spsd::nn::ModuleList<float, spsd::nn::Linear<float>> blocks;
  spsd::nn::Linear<float> head;
  Net(spsd::nn::Init init, int64_t layers, int64_t hidden)
      : inp(init, kFeatures, hidden), head(init, hidden, kClasses) {
    for (int64_t k = 0; k < layers; ++k) blocks.emplace_back(init, hidden, hidden);
    register_module("inp", inp);
    register_module("blocks", blocks);
    register_module("head", head);
  }
  GlobalTensor<float> first(const GlobalTensor<float>& x) const { return spsd::relu(inp(x)); }
  GlobalTensor<float> block(size_t k, const GlobalTensor<float>& x) const { return spsd::relu(blocks[k](x)); }
  GlobalTensor<float> forward(const GlobalTensor<float>& x) const {
    GlobalTensor<float> h = first(x);
    for (size_t k = 0; k < blocks.size(); ++k) h = block(k, h);
    return head(h);
  }
};

pp::Layers<float, float, int64_t> layers_of(const Net& net) {
  pp::Layers<float, float, int64_t> layers;
  layers.first("inp", [&net](const GlobalTensor<float>& x) { return net.first(x); });
  for (size_t k = 0; k < net.blocks.size(); ++k)
    layers.then("blocks." + std::to_string(k), [&net, k](const GlobalTensor<float>& x) { return net.block(k, x); });
  layers.then("head", [&net](const GlobalTensor<float>& x) { return net.head(x); });
  layers.loss([](const GlobalTensor<float>& logits, const GlobalTensor<int64_t>& y) { return spsd::cross_entropy(logits, y); });
  return layers;
}

// p x chunks stages, stage v on rank v % p, each `blocks / chunks` hidden layers in order; the
// input layer with the first, the head with the last.
std::vector<pp::Stage> stages_of(int64_t p, int64_t chunks, int64_t blocks) {
  const int64_t stages = p * chunks, per = blocks / chunks;
  std::vector<pp::Stage> out;
  for (int64_t v = 0; v < stages; ++v) {
    pp::Stage s{{}, spsd::Placement("cpu", {v % p})};
    if (v == 0) s.patterns.push_back("inp");
    for (int64_t k = v * per; k < (v + 1) * per; ++k) s.patterns.push_back("blocks." + std::to_string(k));
    if (v == stages - 1) s.patterns.push_back("head");
    out.push_back(std::move(s));
  }
  return out;
}

spsd::NdSbp replicated() { return spsd::NdSbp(std::vector<spsd::Sbp>{spsd::sbp::broadcast}); }

GlobalTensor<int64_t> labels(int64_t rows, const spsd::Placement& placement) {
  std::vector<int64_t> y(rows);
  for (int64_t r = 0; r < rows; ++r) y[r] = (r * 7 + 3) % kClasses;
  return spsd::from_host(spsd::Tensor<int64_t>::from_vector({rows}, y), placement, replicated());
}

using bench_machine::env_or;
using bench_machine::load_average;

// One (schedule, m): what its measured steps recorded as they ran, then what the trace holds.
struct Config {
  std::string name;
  pp::Schedule schedule;
  int64_t runs = 0;                // steps run so far, warm-up included
  std::vector<double> step_ms;     // per measured step, Pipeline::step to synchronize(), max over ranks
  std::vector<double> peak_bytes;  // per measured step, rank 0's peak above what it held before
  // From this rank's trace, per measured step: its first action's start (negated) and last
  // action's end (ms), the sum of its action spans and of their compute (spans less waits).
  std::vector<double> begin, end, spans, compute;
  double kinds[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // F, B, BI, BW: compute ms, count
  bool ok = true;                              // the trace's actions are the schedule's
};

// A pipeline-lane span of this rank's trace, or a wait of its host thread: microseconds.
struct Span {
  std::string name;
  double begin, end;
};

// This rank's pipeline actions and its host thread's waits for the communication stream, each
// in start order.
void read_trace(const std::string& file, std::vector<Span>& actions, std::vector<Span>& waits) {
  for (const spsd_bench::TraceEvent& e : spsd_bench::read_trace_events(file)) {
    const bool action = e.lane == 4 && e.cat == "pipeline", wait = e.lane == 0 && e.cat == "wait";
    if (action || wait) (action ? actions : waits).push_back({e.name, e.begin, e.end});
  }
}

// "F", "B", "BI" or "BW": the kind of an action's span ("BI3@stage1").
int kind_of(const std::string& name) {
  if (name.rfind("BI", 0) == 0) return 2;
  if (name.rfind("BW", 0) == 0) return 3;
  return name[0] == 'F' ? 0 : 1;
}

// Time inside [begin, end) that the host thread spent in waits (they do not nest).
double waited(const std::vector<Span>& waits, size_t& from, double begin, double end) {
  while (from < waits.size() && waits[from].end <= begin) ++from;
  double total = 0;
  for (size_t k = from; k < waits.size() && waits[k].begin < end; ++k)
    total += std::min(end, waits[k].end) - std::max(begin, waits[k].begin);
  return total;
}

// Takes this rank's spans of one step of c (the next ones in `actions`) into c.
void take_step(Config& c, bool measured, const std::vector<Span>& actions, size_t& next, const std::vector<Span>& waits,
               size_t& wait_from) {
  const std::vector<pp::Action>& list = c.schedule.actions(spsd::rank());
  if (next + list.size() > actions.size()) {
    c.ok = false;
    return;
  }
  double spans = 0, compute = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    const Span& a = actions[next + k];
    if (a.name != pp::describe(list[k])) c.ok = false;
    const double ms = (a.end - a.begin) / 1e3, computed = ms - waited(waits, wait_from, a.begin, a.end) / 1e3;
    spans += ms;
    compute += computed;
    if (measured) {
      c.kinds[2 * kind_of(a.name)] += computed;
      c.kinds[2 * kind_of(a.name) + 1] += 1;
    }
  }
  if (measured) {
    c.begin.push_back(-actions[next].begin / 1e3);  // negated: a max over ranks is the earliest start
    c.end.push_back(actions[next + list.size() - 1].end / 1e3);
    c.spans.push_back(spans);
    c.compute.push_back(compute);
  }
  next += list.size();
}

struct Figures {
  // Mean F, B, BI, BW over all ranks, ms, a rank's whole share: the action's span less the waits
  // inside it, i.e. its compute (as the cost model means a cost).
  double cost[4] = {0, 0, 0, 0};
  double bubble_max = 0, bubble_mean = 0;  // idle: outside the actions' compute
  double spans_mean = 0;                   // idle: outside the actions' spans
  double actions_ms = 0;                   // first action's start to last's end over all ranks, median
  bool ok = true;
};

// One configuration's figures over all ranks. Collective.
Figures figures_of(Config& c) {
  Figures f;
  f.ok = reduce_over_ranks(c.ok && !c.begin.empty() ? 1.0 : 0.0, spsd::ReduceOp::kMin) == 1.0;
  if (!f.ok) return f;
  std::vector<double> begin = c.begin, end = c.end, kinds(std::begin(c.kinds), std::end(c.kinds));
  reduce_over_ranks(begin, spsd::ReduceOp::kMax);
  reduce_over_ranks(end, spsd::ReduceOp::kMax);
  reduce_over_ranks(kinds, spsd::ReduceOp::kSum);
  const size_t steps = begin.size();
  std::vector<double> bubble(steps), bubble_spans(steps), span(steps);
  for (size_t m = 0; m < steps; ++m) {
    span[m] = end[m] + begin[m];
    bubble[m] = 1 - c.compute[m] / span[m];
    bubble_spans[m] = 1 - c.spans[m] / span[m];
  }
  const double mine = median(bubble), p = spsd::world_size();
  f.bubble_max = reduce_over_ranks(mine, spsd::ReduceOp::kMax);
  f.bubble_mean = reduce_over_ranks(mine, spsd::ReduceOp::kSum) / p;
  f.spans_mean = reduce_over_ranks(median(bubble_spans), spsd::ReduceOp::kSum) / p;
  f.actions_ms = median(span);
  const double chunks = static_cast<double>(c.schedule.chunks());
  for (int k = 0; k < 4; ++k) f.cost[k] = kinds[2 * k + 1] > 0 ? chunks * kinds[2 * k] / kinds[2 * k + 1] : 0;
  return f;
}

// Bytes of activations rank 0 holds for one micro-batch of its layers (stage 0 of `net`, its
// parameters already there), what the peaks are counted in. Collective (others pass).
double microbatch_activation_bytes(const Net& net, const spsd::Placement& rank0, int64_t rows, int64_t blocks) {
  const GlobalTensor<float> x = spsd::randn<float>({rows, kFeatures}, rank0, replicated(), 3);
  quiet();
  const int64_t before = spsd::memory_stats(spsd::DeviceType::kCPU).current_bytes;
  GlobalTensor<float> h = net.first(x);
  for (int64_t k = 0; k < blocks; ++k) h = net.block(static_cast<size_t>(k), h);
  spsd::synchronize();
  return static_cast<double>(spsd::memory_stats(spsd::DeviceType::kCPU).current_bytes - before);
}

using Pipe = pp::Pipeline<float, float, float, int64_t>;

// One step of c on pipe; the loss is dropped and the gradients add up, held between steps.
void pipelined_step(Config& c, Pipe& pipe, int64_t warmup, const GlobalTensor<float>& x,
                    const GlobalTensor<int64_t>& y) {
  quiet();
  const int64_t held = spsd::memory_stats(spsd::DeviceType::kCPU).current_bytes;
  spsd::reset_peak_memory(spsd::DeviceType::kCPU);
  const Clock::time_point t0 = Clock::now();
  pipe.step(c.schedule, x, y);
  spsd::synchronize();
  const double ms = reduce_over_ranks(ms_since(t0), spsd::ReduceOp::kMax);
  const double peak = static_cast<double>(spsd::memory_stats(spsd::DeviceType::kCPU).peak_bytes - held);
  if (c.runs++ < warmup) return;
  c.step_ms.push_back(ms);
  c.peak_bytes.push_back(peak);
}

// The baseline: the same model on rank 0 alone, no pipeline, on the same batch: forward, loss and
// backward once on the whole batch, and m times on its micro-batches (gradient accumulation: the
// pipeline's own GEMM sizes). Milliseconds of each step.
struct OneRank {
  std::vector<std::vector<double>> batch_ms, microbatches_ms;  // per m, per measured step
};

double one_rank_step(const Net& net, const std::vector<GlobalTensor<float>>& xs, const std::vector<GlobalTensor<int64_t>>& ys) {
  quiet();
  const Clock::time_point t0 = Clock::now();
  for (size_t i = 0; i < xs.size(); ++i) spsd::backward(spsd::cross_entropy(net.forward(xs[i]), ys[i]));
  spsd::synchronize();
  return reduce_over_ranks(ms_since(t0), spsd::ReduceOp::kMax);
}

// Returns 1 when the trace did not hold the steps' actions as the schedules list them.
int measured(const MeasuredOptions& o) {
  const int64_t p = spsd::world_size();
  const bool root = spsd::rank() == 0;
  if (p < 2) {
    if (root) std::printf("\n## Measured: skipped, it needs >= 2 ranks (one per stage): tools/mpirun -np 2 ...\n");
    return 0;
  }
  if (root)
    std::printf("\n## Measured: the runner on %lld ranks, one stage per rank (interleaved: 2)\n\n"
                "micro-batch %lld rows, hidden %lld, %lld hidden layers per rank (float32); %lld warm-up + %lld "
                "steps per row; load %s; OPENBLAS_NUM_THREADS=%s\n",
                static_cast<long long>(p), static_cast<long long>(o.rows), static_cast<long long>(o.hidden),
                static_cast<long long>(o.blocks), static_cast<long long>(o.warmup), static_cast<long long>(o.steps),
                load_average().c_str(), env_or("OPENBLAS_NUM_THREADS", "(unset)").c_str());
  std::vector<int64_t> all(p);
  for (int64_t r = 0; r < p; ++r) all[r] = r;
  const spsd::Placement world("cpu", all), rank0("cpu", {0});
  // One pipeline per chunk count, and the model again on rank 0 alone; the same parameters.
  Net net1(spsd::nn::Init{world, 7}, p * o.blocks, o.hidden), net2(spsd::nn::Init{world, 7}, p * o.blocks, o.hidden),
      net0(spsd::nn::Init{rank0, 7}, p * o.blocks, o.hidden);
  Pipe pipe1(net1, layers_of(net1), stages_of(p, 1, o.blocks), 1);
  Pipe pipe2(net2, layers_of(net2), stages_of(p, kChunks, o.blocks), kChunks);
  const double unit_bytes = microbatch_activation_bytes(net1, pipe1.stage(0).placement, o.rows, o.blocks);
  const spsd::Placement& first = pipe1.stage(0).placement;  // pipe2's first and last stages are the same
  const spsd::Placement& last = pipe1.stage(pipe1.stages() - 1).placement;

  // Per m, each step runs every schedule once and then the baseline, the schedules' order rotating
  // from step to step: a busy spell of the machine falls on all of them alike.
  std::vector<Config> configs;
  std::vector<size_t> ran;  // the configuration of each pipelined step, in the order they ran
  OneRank one_rank;
  for (int64_t m : o.microbatches) {
    const size_t from = configs.size();
    for (const Generator& g : generators()) configs.push_back(Config{g.name, g.make(p, m)});
    const GlobalTensor<float> x = spsd::randn<float>({m * o.rows, kFeatures}, first, replicated(), 5);
    const GlobalTensor<int64_t> y = labels(m * o.rows, last);
    std::vector<GlobalTensor<float>> batch{spsd::randn<float>({m * o.rows, kFeatures}, rank0, replicated(), 5)}, pieces;
    std::vector<GlobalTensor<int64_t>> batch_labels{labels(m * o.rows, rank0)}, piece_labels;
    for (int64_t i = 0; i < m; ++i) {
      pieces.push_back(spsd::randn<float>({o.rows, kFeatures}, rank0, replicated(), 6 + i));
      piece_labels.push_back(labels(o.rows, rank0));
    }
    one_rank.batch_ms.emplace_back();
    one_rank.microbatches_ms.emplace_back();
    const size_t n = configs.size() - from;
    for (int64_t s = 0; s < o.warmup + o.steps; ++s) {
      for (size_t k = 0; k < n; ++k) {
        const size_t i = from + (k + static_cast<size_t>(s)) % n;
        pipelined_step(configs[i], configs[i].schedule.chunks() == 1 ? pipe1 : pipe2, o.warmup, x, y);
        ran.push_back(i);
      }
      const double whole = one_rank_step(net0, batch, batch_labels), accumulated = one_rank_step(net0, pieces, piece_labels);
      if (s < o.warmup) continue;
      one_rank.batch_ms.back().push_back(whole);
      one_rank.microbatches_ms.back().push_back(accumulated);
    }
  }

  // The spans, from this rank's trace.
  quiet();
  spsd::flush_trace();
  std::vector<Span> actions, waits;
  read_trace(spsd::trace_file(), actions, waits);
  size_t next = 0, wait_from = 0;
  std::vector<int64_t> seen(configs.size(), 0);
  for (size_t i : ran) take_step(configs[i], seen[i]++ >= o.warmup, actions, next, waits, wait_from);
  std::vector<Figures> figures;
  for (Config& c : configs) figures.push_back(figures_of(c));
  if (!root) return 0;

  std::printf("one micro-batch's activations on rank 0: %.2f MiB\n\n", unit_bytes / (1 << 20));
  std::printf("| schedule | m | F ms | B (BI + BW) ms | makespan ms sim / measured | bubble sim | measured max "
              "| mean | spans mean | step ms | one rank ms batch / mbs | speedup | peak mb (sim) |\n");
  std::printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  int failures = 0;
  const size_t per_m = generators().size();
  for (size_t g = 0; g < per_m; ++g) {
    for (size_t mi = 0; mi < o.microbatches.size(); ++mi) {
      const Config& c = configs[mi * per_m + g];
      const Figures& f = figures[mi * per_m + g];
      const long long m = static_cast<long long>(c.schedule.microbatches());
      if (!f.ok) {
        std::printf("| %s | %lld | the trace's actions are not the schedule's |\n", c.name.c_str(), m);
        ++failures;
        continue;
      }
      const bool split = f.cost[2] > 0;
      pp::Costs costs;
      costs.forward = f.cost[0];
      costs.backward = split ? f.cost[2] + f.cost[3] : f.cost[1];
      costs.backward_input = split ? f.cost[2] : f.cost[1] / 2;
      costs.backward_weight = split ? f.cost[3] : f.cost[1] / 2;
      const pp::Timeline t = pp::simulate(c.schedule, costs);
      char backward[64];
      if (split) std::snprintf(backward, sizeof backward, "%.2f + %.2f", f.cost[2], f.cost[3]);
      else std::snprintf(backward, sizeof backward, "%.2f", f.cost[1]);
      const double step = median(c.step_ms), whole = median(one_rank.batch_ms[mi]),
                   accumulated = median(one_rank.microbatches_ms[mi]);
      std::printf("| %s | %lld | %.2f | %s | %.1f / %.1f | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f / %.1f | %.2f / %.2f "
                  "| %.2f (%.1f) |\n",
                  c.name.c_str(), m, f.cost[0], backward, t.makespan, f.actions_ms, t.bubble_fraction, f.bubble_max,
                  f.bubble_mean, f.spans_mean, step, whole, accumulated, whole / step, accumulated / step,
                  median(c.peak_bytes) / unit_bytes,
                  static_cast<double>(t.peak_activations[0]) / static_cast<double>(c.schedule.chunks()));
    }
  }
  std::printf("\nF, B: mean compute per action over all ranks (its span less the host thread's waits for the "
              "communication stream inside it), a rank's whole share per micro-batch; the simulation uses them. "
              "Bubbles: per rank and step, 1 - compute / (first action's start to last action's end over all "
              "ranks), median over steps, then max and mean over ranks; spans mean: the same with whole spans, "
              "waits counted busy. one rank: the model on rank 0 alone, the whole batch at once / its m "
              "micro-batches one after another; speedup: one rank / step, each way. peak mb: rank 0's, in "
              "micro-batches of its activations.\nload at the end %s\n",
              load_average().c_str());
  return failures;
}

std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool want_simulated = false, want_measured = false;
  MeasuredOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench/pipeline: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--simulated") want_simulated = true;
    else if (a == "--measured") want_measured = true;
    else if (a == "--steps") o.steps = std::stoll(value());
    else if (a == "--microbatches") o.microbatches = parse_list(value());
    else if (a == "--rows") o.rows = std::stoll(value());
    else if (a == "--hidden") o.hidden = std::stoll(value());
    else if (a == "--blocks") o.blocks = std::stoll(value());
    else {
      std::fprintf(stderr,
                   "bench/pipeline: unknown option '%s' (usage: pipeline [--simulated] [--measured] [--steps N] "
                   "[--microbatches 2,4,8,16] [--rows R] [--hidden H] [--blocks L])\n",
                   a.c_str());
      return 2;
    }
  }
  if (!want_simulated && !want_measured) want_simulated = want_measured = true;
  if (o.steps < 1 || o.rows < 1 || o.hidden < 1 || o.blocks < kChunks || o.blocks % kChunks != 0) {
    std::fprintf(stderr, "bench/pipeline: --steps, --rows and --hidden must be >= 1, --blocks a multiple of %lld\n",
                 static_cast<long long>(kChunks));
    return 2;
  }
  // The measured figures are read from the trace: a temporary one unless the caller asked for one.
  std::string temporary;
  if (want_measured && !std::getenv("SPSD_TRACE")) {
    temporary = (std::filesystem::temp_directory_path() / ("spsd-bench-pipeline-" + std::to_string(getpid()) + ".json")).string();
    setenv("SPSD_TRACE", temporary.c_str(), 1);
  }
  int failures = 0;
  std::string file;
  {
    spsd::Runtime runtime(argc, argv);
    file = spsd::trace_file();
    if (want_simulated && spsd::rank() == 0) simulated();
    if (want_measured) failures = measured(o);
  }  // the Runtime writes the trace once more as it ends
  if (!temporary.empty()) std::filesystem::remove(file);
  return failures == 0 ? 0 : 1;
}
