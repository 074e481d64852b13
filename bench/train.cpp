// bench/train: one training step of the MLP of examples/07_train_mlp (784 -> hidden -> 10,
// Adam, forward + backward + optimizer step; the loss is not read) in every parallel mode on
// the world, and the bytes each step communicates against the analytic minimum of that mode.
//
//   tools/mpirun -np 1|2|4 build-rel/bench/train [--hidden 1024] [--batch 128] [--steps 10]
//
// Time: median over `steps` timed steps after 3 warm-up steps (the first resolves and plans),
// a barrier before each, the max over ranks. Bytes: the most any rank sent in one step
// (comm_stats), and the minimum a ring algorithm needs for that mode's communication, per
// rank, with n ranks, P parameters, N samples, C = 10 classes, 4-byte floats:
//   data    all-reduce of every gradient:              2 (n-1)/n * 4P
//   tensor  all-reduce of the (N, C) logits (Megatron's one reduction per MLP; its backward
//           needs none when the logits' gradient is replicated): 2 (n-1)/n * 4NC
//   2d      (d, t) mesh: all-reduce over d of the 1/t of the gradients a rank holds, plus the
//           tensor all-reduce over t of its N/d rows:   2 (d-1)/d * 4P/t + 2 (t-1)/t * 4NC/d
// (biases split on t are counted as 1/t; b2, replicated, in full).
//
// Then the same for the character GPT of examples/08_gpt (--gpt-only skips the MLP): L blocks
// of dim E, context T, batch N, vocabulary V, P parameters, in data, sequence, tensor and 2d
// modes. For the GPT the reference column is each mode's textbook scheme rather than a proven
// minimum (spsd can move less: a P(sum) gradient that flows through linear backward ops is
// reduced once, later). Per rank (ring collectives, 4-byte floats, A = 4NTE the bytes of one
// activation (N, T, E)):
//   data      all-reduce of every gradient:                          2 (n-1)/n * 4P
//   sequence  Megatron-SP (docs/modules.md, "Sequence parallelism's bytes"): per block 4
//             all-gathers and 4 reduce-scatters of an activation, each (n-1)/n * A, plus the
//             all-reduce of the gradients of the R parameters it leaves replicated (table,
//             positions, layer norms, biases after a reduction, head):
//                                                                    2 (n-1)/n * 4R + 8L (n-1)/n * A
//   tensor    Megatron: per block 2 all-reduces of an activation in forward (attention output,
//             MLP output) and 2 in backward (the inputs of q/k/v and of the first MLP weight),
//             plus the vocab-parallel embedding's all-reduce and the head input's gradient, and
//             cross_entropy's two all-reduces of N*T row statistics:
//                                                2 (n-1)/n * ((4L + 2) A + 2 * 4NT)
//   2d        (d, 2) mesh: data all-reduce over d of what a rank holds (split weights 1/2,
//             replicated ones whole) + tensor traffic over 2 of N/d rows.
// The measured figure includes what the minimum leaves out (e.g. boxings the resolver picks
// around the attention op), so a ratio above 1 shows where a mode pays more than its scheme.
//
//   tools/mpirun -np 4 build/bench/train --gpt-only [--compile | --explain] [--variant fc1-b-pins-s0]
//
// --compile adds, per mode, the step through spsd::compile three times: replaying eager's layouts,
// with the layouts searched for the whole step (docs/compile.md), and searched on a GPU's cost
// model (CompileOptions::price_as: what a GPU cluster's compile would choose); --explain also
// prints the searched steps' explain() on stderr. On an even world --compile also adds
// 2d-sequence (Megatron-SP on (n/2, 2)) and "2d searched plan": the parameters' layouts chosen by
// nn::search_plan under Megatron-SP's memory, against Megatron-SP's bytes (searched_2d_plan;
// --explain prints what it chose). --variant runs the tensor and 2d modes with a
// what-if plan of --per-op's (below) instead of examples::gpt_plan. --exact-seconds S gives the
// searched rows (and the plan search) S seconds of the exact solver (CompileOptions::exact_seconds).
//
//   tools/mpirun -np 4 build/bench/train --gpt-only --per-op [--modes tensor,2d] [--variant fc1-b]
//
// --per-op prints, instead of the tables, one GPT step of each mode op by op (after warm-up, read
// from SPSD_TRACE: namespace per_op below): every op or to_global that boxed an input or sent
// bytes, with its module, each input's conversion and the bytes the busiest rank sent; then the
// sums per kind (phase, module kind, op) and per (phase, module kind) beside Megatron's scheme.
// --variant runs a what-if plan (variant_plan). docs/benchmarks.md, "Per-op bytes against
// Megatron", reads the output.
//
//   tools/mpirun -np 1 build-bench/bench/train --profile
//
// --profile prints, instead of the tables, the host time of each op kind in one data-parallel GPT
// step after 3 warm-ups, read from SPSD_TRACE (bench/trace_reader.hpp): the per-op table that
// bench/train_torch.py --profile prints for PyTorch from torch.profiler.
#include <algorithm>
#include <optional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <spsd/spsd.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "train/fashion_mnist.hpp"
#include "train/gpt.hpp"
#include "train/mlp.hpp"
#include "train/text.hpp"
#include "trace_events.hpp"
#include "trace_reader.hpp"

using namespace spsd;

namespace {

int64_t max_over_ranks(int64_t v) {
  int64_t out = 0;
  world_communicator().all_reduce(&v, &out, 1, DType::kInt64, ReduceOp::kMax);
  return out;
}

double max_over_ranks(double v) {
  double out = 0;
  world_communicator().all_reduce(&v, &out, 1, DType::kFloat64, ReduceOp::kMax);
  return out;
}

double minimum_bytes(const std::string& mode, int64_t n, int64_t hidden, int64_t batch) {
  const double C = examples::kClasses, in = examples::kPixels, H = static_cast<double>(hidden);
  const double logits = 4.0 * batch * C;
  auto ring = [](double parts) { return parts > 1 ? 2 * (parts - 1) / parts : 0.0; };
  if (mode == "data") return ring(n) * 4 * (in * H + H + H * C + C);
  if (mode == "tensor") return ring(n) * logits;
  const double d = n / 2.0, t = 2;
  return ring(d) * 4 * ((in * H + H + H * C) / t + C) + ring(t) * logits / d;
}

// Times `step` (median of `steps` after 3 warm-ups, the max over ranks) and the most bytes any
// rank sent in one step.
template <class Step>
std::pair<double, int64_t> measure(int64_t steps, Step&& step) {
  std::vector<double> times;
  int64_t bytes = 0;
  for (int64_t s = 0; s < steps + 3; ++s) {
    world_communicator().barrier();
    reset_comm_stats();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    synchronize();
    const double t = max_over_ranks(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    bytes = max_over_ranks(comm_stats().bytes_sent);
    if (s >= 3) times.push_back(t);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return {times[times.size() / 2], bytes};
}

std::string ratio_text(double bytes, double minimum) {
  return minimum > 0 ? std::to_string(bytes / minimum).substr(0, 4) : "-";
}

// The GPT's textbook-scheme bytes (header comment); params: the parameter count, split_params: those
// of the weights the plan splits.
double gpt_minimum_bytes(const std::string& mode, int64_t n, const examples::GptConfig& c, int64_t batch,
                         double params, double split_params) {
  auto ring = [](double parts) { return parts > 1 ? 2 * (parts - 1) / parts : 0.0; };
  const double act = 4.0 * batch * c.context * c.dim, L = static_cast<double>(c.layers);
  const double rows = 4.0 * batch * c.context;
  if (mode == "data") return ring(n) * 4 * params;
  if (mode == "sequence") return ring(n) * 4 * (params - split_params) + 8 * L * (n - 1.0) / n * act;
  if (mode == "tensor") return ring(n) * ((4 * L + 2) * act + 2 * rows);
  const double d = n / 2.0;
  // Megatron-SP on (d, 2): the replicated parameters' gradients all-reduced over every rank, the
  // split ones' halves over d, and sequence parallelism's 4 all-gathers and 4 reduce-scatters
  // per block of an activation's N/d rows over the tensor axis.
  if (mode == "2d-sequence")
    return ring(n) * 4 * (params - split_params) + ring(d) * 4 * split_params / 2 + 8 * L * 0.5 * act / d;
  return ring(d) * 4 * (params - split_params / 2) + ring(2) * ((4 * L + 2) * act + 2 * rows) / d;
}

// The GPT of the table (and of --per-op): its text, its shape, its batch.
examples::Corpus gpt_corpus() {
  return examples::have_fortunes() ? examples::read_fortunes(examples::kFortunesDir, 200000)
                                   : examples::generated_corpus(200000, 1);
}
examples::GptConfig gpt_config(const examples::Corpus& corpus) {
  return {corpus.vocab_size(), /*context=*/64, /*dim=*/128, /*heads=*/4, /*layers=*/2};
}
constexpr int64_t kGptBatch = 16;

// The parameter count of a model, and that of the weights its plan splits.
std::pair<double, double> parameter_counts(const std::vector<GlobalTensor<float>>& parameters) {
  double params = 0, split_params = 0;
  for (const auto& p : parameters) {
    const double size = static_cast<double>(p.shape().numel());
    params += size;
    if (std::any_of(p.nd_sbp().begin(), p.nd_sbp().end(), [](const Sbp& s) { return s.is_split(); }))
      split_params += size;
  }
  return {params, split_params};
}

// --compile: each mode's step also through spsd::compile, replaying eager's layouts and the
// searched ones (docs/compile.md); --explain: the searched step's explain() too (rank 0, stderr).
struct GptCompile {
  bool rows = false, explain = false;
  double exact_seconds = 0;  // --exact-seconds S: CompileOptions::exact_seconds of the searched rows
};

namespace per_op {
nn::Plan variant_plan(const std::string& mode, const std::string& variant);  // below
}

// --compile on an even world: the parameters' layouts left to nn::search_plan on the (n/2, 2)
// mesh, from data parallelism with every parameter replicated on the tensor axis, under the
// memory of Megatron-SP's plan (2d-sequence) as the search measures it (parameters x 4 plus the
// step's results).
nn::SearchedPlan searched_2d_plan(const examples::GptConfig& c, const examples::TextBatch& b, int n, double exact_seconds) {
  auto search = [&](const nn::Plan& plan, int64_t budget) {
    examples::Gpt<float> model(c, {examples::gpt_placement("2d", n), 1000});
    nn::parallelize(model, plan);
    Adam<float> adam(model.parameters(), {});
    const Placement& placement = model.tok.weight.placement();
    const auto x = from_host(b.inputs, placement, nn::input_layout(plan)),
               y = from_host(b.targets, placement, nn::input_layout(plan));
    return nn::search_plan(
        model, plan,
        [&](const GlobalTensor<int64_t>& tokens, const GlobalTensor<int64_t>& targets) {
          adam.zero_grad();
          backward(cross_entropy(model.forward<float>(tokens), targets));
          adam.step();
        },
        {.memory_budget_bytes = budget, .exact_seconds = exact_seconds}, x, y);
  };
  const int64_t megatron_sp = search(examples::gpt_plan("2d-sequence"), 0).start_memory_bytes;
  nn::SearchedPlan found = search({nn::data_parallel(), nn::AxisPlan{.name = "tensor"}}, megatron_sp);
  if (rank() == 0)
    std::printf("plan search on (%d, 2): budget %lld B per rank (Megatron-SP's), found %lld B, %zu parameters "
                "re-laid; predicted %.0f us against %.0f us for the replicated start\n",
                n / 2, static_cast<long long>(megatron_sp), static_cast<long long>(found.memory_bytes),
                found.changed.size(), found.predicted_us, found.start_predicted_us);
  return found;
}

// variant: a what-if plan of per_op::variant_plan for the tensor and 2d modes (the others skipped).
void gpt_table(int64_t steps, GptCompile compiled, const std::string& variant) {
  const int n = world_size();
  const examples::Corpus corpus = gpt_corpus();
  const examples::GptConfig c = gpt_config(corpus);
  const int64_t batch = kGptBatch;
  if (rank() == 0)
    std::printf("\nGPT: %lld blocks, dim %lld, %lld heads, context %lld, vocabulary %lld, batch %lld, Adam, %d rank(s); "
                "median of %lld steps\n"
                "| mode | step ms | tokens/s | bytes sent per step (max rank) | textbook scheme | ratio |\n"
                "|---|---|---|---|---|---|\n",
                static_cast<long long>(c.layers), static_cast<long long>(c.dim), static_cast<long long>(c.heads),
                static_cast<long long>(c.context), static_cast<long long>(c.vocab), static_cast<long long>(batch), n,
                static_cast<long long>(steps));
  std::mt19937_64 g(1);
  const examples::TextBatch b = examples::draw_batch(corpus, batch, c.context, g);
  double megatron_sp = 0;  // 2d-sequence's textbook bytes, the searched plan's reference
  for (const std::string mode : {"data", "sequence", "tensor", "2d", "2d-sequence", "2d searched plan"}) {
    const bool two_d = mode.rfind("2d", 0) == 0, extra = mode == "2d-sequence" || mode == "2d searched plan";
    if ((two_d && n % 2 != 0) || (!variant.empty() && mode != "tensor" && mode != "2d") || (extra && !compiled.rows))
      continue;
    std::optional<nn::SearchedPlan> searched_plan;
    if (mode == "2d searched plan") {
      searched_plan = searched_2d_plan(c, b, n, compiled.exact_seconds);
      if (compiled.explain && rank() == 0) std::fprintf(stderr, "%s\n", searched_plan->explanation.c_str());
    }
    const nn::Plan plan = searched_plan ? searched_plan->plan : per_op::variant_plan(mode, variant);
    examples::Gpt<float> model(c, {examples::gpt_placement(two_d ? "2d" : mode, n), 1000});
    nn::parallelize(model, plan);
    const Placement& placement = model.tok.weight.placement();
    Adam<float> adam(model.parameters(), {});
    const auto [params, split_params] = parameter_counts(model.parameters());
    const auto x = from_host(b.inputs, placement, nn::input_layout(plan)),
               y = from_host(b.targets, placement, nn::input_layout(plan));
    auto step = [&](const GlobalTensor<int64_t>& tokens, const GlobalTensor<int64_t>& targets) {
      adam.zero_grad();
      backward(cross_entropy(model.forward<float>(tokens), targets));
      adam.step();
    };
    const double minimum = searched_plan ? megatron_sp : gpt_minimum_bytes(mode, n, c, batch, params, split_params);
    if (mode == "2d-sequence") megatron_sp = minimum;
    auto row = [&](const std::string& name, std::pair<double, int64_t> figures) {
      const auto [median, bytes] = figures;
      if (rank() == 0)
        std::printf("| %s | %.1f | %.0f | %lld | %.0f | %s |\n", name.c_str(), median * 1e3,
                    static_cast<double>(batch * c.context) / median, static_cast<long long>(bytes), minimum,
                    ratio_text(static_cast<double>(bytes), minimum).c_str());
    };
    row(mode, measure(steps, [&] { step(x, y); }));
    if (!compiled.rows) continue;
    auto replayed = spsd::compile(step, {.search_layouts = false});
    row(mode + " compiled", measure(steps, [&] { replayed(x, y); }));
    auto searched = spsd::compile(step, {.exact_seconds = compiled.exact_seconds});
    row(mode + " compiled, searched", measure(steps, [&] { searched(x, y); }));
    if (compiled.explain && rank() == 0) std::fprintf(stderr, "%s\n", searched.explain().c_str());
    // The plan a GPU cluster's compile would choose (NCCL's bandwidth, a GPU's flops), run here.
    auto for_gpus = spsd::compile(step, {.price_as = DeviceType::kCUDA});
    row(mode + " compiled, searched as on GPUs", measure(steps, [&] { for_gpus(x, y); }));
    if (compiled.explain && rank() == 0) std::fprintf(stderr, "%s\n", for_gpus.explain().c_str());
  }
}

// --profile: one data-parallel GPT step after 3 warm-ups, its ops' host time (trace lane 0: on the
// cpu every op runs on the rank's thread), printed by rank 0.
void profile_gpt_step() {
  const examples::Corpus corpus = gpt_corpus();
  const examples::GptConfig c = gpt_config(corpus);
  std::mt19937_64 g(1);
  const examples::TextBatch b = examples::draw_batch(corpus, kGptBatch, c.context, g);
  const nn::Plan plan = examples::gpt_plan("data");
  examples::Gpt<float> model(c, {examples::gpt_placement("data", world_size()), 1000});
  nn::parallelize(model, plan);
  Adam<float> adam(model.parameters(), {});
  const Placement& placement = model.tok.weight.placement();
  const auto x = from_host(b.inputs, placement, nn::input_layout(plan)),
             y = from_host(b.targets, placement, nn::input_layout(plan));
  const auto step = [&] {
    adam.zero_grad();
    backward(cross_entropy(model.forward<float>(x), y));
    adam.step();
    synchronize();
  };
  for (int k = 0; k < 3; ++k) step();
  world_communicator().barrier();
  const double from = spsd_bench::trace_now_us();
  step();
  const double to = spsd_bench::trace_now_us();
  flush_trace();
  if (rank() != 0) return;
  const spsd_bench::OpProfile p = spsd_bench::op_profile(spsd_bench::read_trace_events(trace_file()), 0, from, to);
  std::printf("GPT step (data, %d rank(s)), rank 0: %.2f ms (traced), %.2f ms of it in %lld ops\n", world_size(),
              (to - from) / 1e3, p.ops_us / 1e3, static_cast<long long>(p.calls));
  spsd_bench::print_op_profile(p, "spsd op", 30);
}

// --per-op: one GPT step, op by op (docs/benchmarks.md, "Per-op bytes against Megatron").
//
// The step runs synchronously (set_synchronous: every communication instruction inline on the
// rank's thread) under SPSD_TRACE, so each collective of the trace lies inside the span of what
// issued it: an op (boxing its inputs: the op's `boxing` instructions, one per input whose
// conversion communicates, in input order), a `boxing` instruction outside any op (a
// to_global: a module's pinned boundary, to_global's backward, a parameter's gradient reduced
// in backward), or the consistency check. Each collective's bytes_sent is what comm_stats
// counts, so the rows add up to the step's bytes exactly. Module paths come from an identity
// op (bench_train_mark) that the bench's copy of Gpt::forward puts after each module: its
// forward notes the time after the module's ops, its backward the time before their backward
// ops (backward runs the nodes latest first).
namespace per_op {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Mark {
  int64_t ns, label;
};
std::vector<std::string> labels;  // by id, made in program order: the same on every rank
std::vector<Mark> forward_marks, backward_marks;

int64_t label_id(const std::string& label) {
  const auto it = std::find(labels.begin(), labels.end(), label);
  if (it != labels.end()) return it - labels.begin();
  labels.push_back(label);
  return static_cast<int64_t>(labels.size()) - 1;
}

// The identity, in every layout (no boxing, no communication); attrs[0] is the label's id.
struct MarkOp {
  static constexpr std::string_view name = "bench_train_mark";
  static TensorMeta infer(std::span<const TensorMeta> in, const OpAttrs&) { return in[0]; }
  static std::vector<Signature> signatures(std::span<const TensorMeta> in, const OpAttrs&) {
    std::vector<Signature> t;
    for (int64_t d = 0; d < in[0].shape.ndim(); ++d) t.push_back({{sbp::split(d)}, sbp::split(d)});
    t.push_back({{sbp::partial_sum}, sbp::partial_sum});
    t.push_back({{sbp::broadcast}, sbp::broadcast});
    return t;
  }
  template <FloatingElement T>
  static void cpu_kernel(const KernelArgs& k) {
    std::copy_n(k.in<T>(0), k.out_shape.numel(), k.out_as<T>());
  }
  template <FloatingElement T>
  static void backward(const GradArgs<T>& a) {
    backward_marks.push_back({now_ns(), a.attrs()[0]});
    if (a.wants(0)) a.set(0, a.g());
  }
};

GlobalTensor<float> mark(const GlobalTensor<float>& x, const std::string& label) {
  const int64_t id = label_id(label);
  GlobalTensor<float> y = call_op<MarkOp>(OpAttrs{id}, Scalar{}, x);
  forward_marks.push_back({now_ns(), id});
  return y;
}

// examples::Gpt::forward<float> and nn::TransformerBlock::forward as they are written, with a
// mark after each module (dropout is 0 here: the identity, as in the model).
GlobalTensor<float> labelled_forward(const examples::Gpt<float>& m, const GlobalTensor<int64_t>& tokens) {
  SPSD_CHECK(tokens.shape()[1] == m.config.context && m.config.dropout == 0, "bench/train --per-op",
             "copies Gpt::forward for full-context batches without dropout");
  GlobalTensor<float> x = mark(m.tok.forward<float>(tokens), "tok");
  x = mark(x + cast<float>(m.positions), "positions");
  int64_t i = 0;
  for (const auto& b : m.blocks) {
    const std::string p = "blocks." + std::to_string(i++) + ".";
    const GlobalTensor<float> a = mark(b.attn(mark(b.ln1(x), p + "ln1")), p + "attn");
    const GlobalTensor<float> h = mark(x + b.drop(a), p + "add1");
    const GlobalTensor<float> f = mark(b.mlp(mark(b.ln2(h), p + "ln2")), p + "mlp");
    x = mark(h + b.drop(f), p + "add2");
  }
  x = mark(m.lnf(x), "lnf");
  return mark(m.head ? (*m.head)(x) : matmul(x, transpose(cast<float>(m.tok.weight), 0, 1)), "head");
}

// "blocks.1.attn" -> "blocks.*.attn": a module's kind, the same in every block.
std::string role_of(const std::string& label) {
  if (label.rfind("blocks.", 0) != 0) return label;
  const size_t dot = label.find('.', 7);
  return "blocks.*" + (dot == std::string::npos ? std::string() : label.substr(dot));
}

// The top-level items of a parenthesized list: "((S(0), B), (B)) " -> "(S(0), B)", "(B)".
std::vector<std::string> items(const std::string& list) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char ch : list) {
    if (ch == '(' && depth++ == 0) continue;
    if (ch == ')' && --depth == 0) break;
    if (depth == 1 && ch == ',') {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    if (depth == 1 && ch == ' ' && cur.empty()) continue;
    cur += ch;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// "(16, 64, 128) float32 (S(0), B)": the shape, and the layout (the last group).
std::string shape_part(const std::string& described) { return described.substr(0, described.find(')') + 1); }
std::string layout_part(const std::string& described) {
  const size_t shape_end = described.find(')');
  return described.substr(described.find('(', shape_end + 1));
}

// Whether converting a piece from one layout to the other communicates: some mesh axis
// changes from something other than B (B -> S and B -> P are local).
bool communicates(const std::string& from, const std::string& to) {
  const std::vector<std::string> f = items(from), t = items(to);
  for (size_t a = 0; a < f.size() && a < t.size(); ++a)
    if (f[a] != t[a] && f[a] != "B") return true;
  return false;
}

// One row of the step: an op (its inputs as they came and as its signature takes them) or a
// to_global outside any op, with the bytes this rank sent for it.
struct Row {
  std::string phase, label, op;
  std::vector<std::string> inputs, to;
  std::string signature;
  int64_t begin = 0;
  std::vector<int64_t> instructions;  // bytes sent by each boxing instruction inside, in order
  int64_t loose = 0;                  // sent inside but outside an instruction
  std::vector<int64_t> input_bytes;   // per input, once matched
  int64_t other = 0;                  // not matched to an input (a to_global's own bytes)
  bool boxed(size_t i) const { return i < to.size() && layout_part(inputs[i]) != to[i]; }
};

struct Step {
  std::vector<Row> rows;
  int64_t checks = 0;   // the consistency check's collectives
  int64_t outside = 0;  // collectives outside any op or instruction
};

// This rank's rows of the step that ran in [begin, end] (steady clock, ns), from its trace.
Step read_step(const std::string& file, int64_t begin, int64_t end) {
  std::ifstream in(file);
  SPSD_CHECK(in.good(), "bench/train --per-op", "cannot read the trace file ", file);
  struct Open {
    int64_t begin, end;
    std::string cat, name;
    int64_t row = -1;  // the row it belongs to
    bool instruction = false, check = false;
  };
  Step step;
  std::vector<Open> stack;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"ph\":\"X\"") == std::string::npos || bench_trace::field(line, "tid") != "0") continue;
    const int64_t b = bench_trace::nanoseconds(bench_trace::field(line, "ts"));
    const int64_t e = b + bench_trace::nanoseconds(bench_trace::field(line, "dur"));
    if (b < begin || e > end) continue;
    while (!stack.empty() && !(b >= stack.back().begin && e <= stack.back().end)) stack.pop_back();
    const std::string cat = bench_trace::field(line, "cat"), name = bench_trace::field(line, "name");
    Open o{b, e, cat, name};
    const Open* outer = stack.empty() ? nullptr : &stack.back();
    auto phase = [&] {
      for (auto it = stack.rbegin(); it != stack.rend(); ++it)
        if (it->cat == "phase") return it->name == "backward" ? std::string("backward") : std::string("optimizer");
      return std::string("forward");
    };
    if (outer) o.row = outer->row, o.check = outer->check;
    if (cat == "op" && name != MarkOp::name) {
      Row r{phase(), "", name, bench_trace::string_list(line, "inputs"), {}, bench_trace::field(line, "signature"), b};
      r.to = items(r.signature.substr(0, r.signature.find(" -> ")));
      o.row = static_cast<int64_t>(step.rows.size());
      step.rows.push_back(std::move(r));
    } else if (cat == "instruction" && name == "consistency check") {
      o.check = true;
    } else if (cat == "instruction" && name == "boxing") {
      if (o.row < 0) {
        step.rows.push_back({phase(), "", "to_global", {}, {}, "", b});
        o.row = static_cast<int64_t>(step.rows.size()) - 1;
      } else {
        step.rows[o.row].instructions.push_back(0);
        o.instruction = true;
      }
    } else if (cat == "collective") {
      const int64_t sent = std::stoll(bench_trace::field(line, "bytes_sent"));
      const bool in_instruction = outer && outer->instruction;
      if (o.check || bench_trace::field(line, "purpose") == "consistency check") step.checks += sent;
      else if (o.row < 0) step.outside += sent;
      else if (in_instruction) step.rows[o.row].instructions.back() += sent;
      else step.rows[o.row].loose += sent;
    }
    stack.push_back(std::move(o));
  }
  // Each op's instructions, one per input whose conversion communicates, in input order.
  for (Row& r : step.rows) {
    r.input_bytes.assign(r.inputs.size(), 0);
    std::vector<size_t> moving, changed;
    for (size_t i = 0; i < r.inputs.size(); ++i)
      if (r.boxed(i)) {
        changed.push_back(i);
        if (communicates(layout_part(r.inputs[i]), r.to[i])) moving.push_back(i);
      }
    const std::vector<size_t>& match = r.instructions.size() == moving.size() ? moving : changed;
    int64_t sum = r.loose;
    for (int64_t v : r.instructions) sum += v;
    if (r.instructions.size() == match.size()) {
      for (size_t k = 0; k < match.size(); ++k) r.input_bytes[match[k]] = r.instructions[k];
      r.other = r.loose;
    } else {
      r.other = sum;
    }
  }
  return step;
}

int64_t total(const Row& r) { return std::accumulate(r.input_bytes.begin(), r.input_bytes.end(), r.other); }

// The label of each row: forward ops belong to the module of the next mark, backward ops to
// that of the last mark before them; what has none is the loss.
void label_rows(Step& step) {
  for (Row& r : step.rows) {
    if (r.phase == "forward") {
      const auto it = std::find_if(forward_marks.begin(), forward_marks.end(),
                                   [&](const Mark& m) { return m.ns > r.begin; });
      r.label = it == forward_marks.end() ? "loss" : labels[it->label];
    } else if (r.phase == "backward") {
      const Mark* last = nullptr;
      for (const Mark& m : backward_marks)
        if (m.ns < r.begin) last = &m;
      r.label = last ? labels[last->label] : "loss";
    } else {
      r.label = "-";
    }
  }
}

std::vector<int64_t> max_over_ranks(std::vector<int64_t> v) {
  std::vector<int64_t> out(v.size());
  if (!v.empty())
    world_communicator().all_reduce(v.data(), out.data(), static_cast<int64_t>(v.size()), DType::kInt64,
                                    ReduceOp::kMax);
  return out;
}

// Megatron's bytes per (phase, module kind) on this mode (bench/train's header comment): the
// tensor-parallel all-reduces where Megatron's f and g operators put them, and on the 2-d mesh
// the data-parallel all-reduce of each module's gradients (split weights 1/2).
std::map<std::string, double> megatron(const std::string& mode, int n, const examples::GptConfig& c, int64_t batch,
                                       const std::vector<std::pair<std::string, GlobalTensor<float>>>& params) {
  auto ring = [](double parts) { return parts > 1 ? 2 * (parts - 1) / parts : 0.0; };
  const double d = mode == "2d" ? n / 2.0 : 1, t = mode == "2d" ? 2 : n, L = static_cast<double>(c.layers);
  const double act = 4.0 * batch * c.context * c.dim / d, rows = 4.0 * batch * c.context / d;
  std::map<std::string, double> m;
  m["forward|tok"] = ring(t) * act;                 // the vocab-parallel embedding's output
  m["forward|blocks.*.attn"] = L * ring(t) * act;   // g after attn.out
  m["forward|blocks.*.mlp"] = L * ring(t) * act;    // g after mlp.fc2
  m["forward|loss"] = 2 * ring(t) * rows;           // cross_entropy's row max and sum
  m["backward|blocks.*.attn"] = L * ring(t) * act;  // f before q, k, v: their input's gradient
  m["backward|blocks.*.mlp"] = L * ring(t) * act;   // f before fc1
  m["backward|head"] = ring(t) * act;               // the head input's gradient
  if (mode == "2d")
    for (const auto& [name, p] : params) {
      std::string best;
      for (const std::string& l : labels)
        if (name.rfind(l + ".", 0) == 0 && l.size() > best.size()) best = l;
      if (name == "positions") best = "positions";
      const bool split = p.nd_sbp()[1].is_split();
      m["backward|" + role_of(best)] += ring(d) * 4.0 * static_cast<double>(p.shape().numel()) / (split ? 2 : 1);
    }
  return m;
}

// The plan of mode, or a what-if variant of it (tensor and 2d; docs/benchmarks.md):
//   fc1-b          mlp.fc1's input pinned B on the tensor axis: the signature Megatron's
//                  column-parallel fc1 has, which the greedy resolver does not pick;
//   fc1-b-pins-s0  the same, with attn.out's and mlp.fc2's outputs pinned S(0) (reduce-scatter,
//                  to the batch-split residual stream the resolver keeps) instead of B.
nn::Plan variant_plan(const std::string& mode, const std::string& variant) {
  if (variant.empty()) return examples::gpt_plan(mode);
  SPSD_CHECK(mode == "tensor" || mode == "2d", "bench/train", "--variant applies to tensor and 2d, not ", mode);
  SPSD_CHECK(variant == "fc1-b" || variant == "fc1-b-pins-s0", "bench/train",
             "--variant takes fc1-b or fc1-b-pins-s0, got \"", variant, "\"");
  nn::AxisPlan t = variant == "fc1-b" ? nn::tensor_parallel()
                                      : nn::detail::megatron_parameters("tensor", std::nullopt)
                                            .with_output("attn.out", sbp::split(0), true)
                                            .with_output("mlp.fc2", sbp::split(0), true);
  t = t.with_parameter("tok.weight", sbp::split(0))
          .with_parameter("head.weight", sbp::split(1), true)
          .with_input("mlp.fc1", sbp::broadcast, true);
  return mode == "2d" ? nn::Plan{nn::data_parallel(), t} : nn::Plan{t};
}

void table(const std::string& mode, const std::string& variant) {
  const int n = world_size();
  const examples::Corpus corpus = gpt_corpus();
  const examples::GptConfig c = gpt_config(corpus);
  const int64_t batch = kGptBatch;
  std::mt19937_64 g(1);
  const examples::TextBatch tb = examples::draw_batch(corpus, batch, c.context, g);
  const nn::Plan plan = variant_plan(mode, variant);
  examples::Gpt<float> model(c, {examples::gpt_placement(mode, n), 1000});
  nn::parallelize(model, plan);
  const Placement& placement = model.tok.weight.placement();
  Adam<float> adam(model.parameters(), {});
  const auto x = from_host(tb.inputs, placement, nn::input_layout(plan)),
             y = from_host(tb.targets, placement, nn::input_layout(plan));
  // The model's own step (as the table measures it), 3 warm-up steps and one counted.
  int64_t model_bytes = 0;
  for (int s = 0; s < 4; ++s) {
    world_communicator().barrier();
    reset_comm_stats();
    adam.zero_grad();
    backward(cross_entropy(model.forward<float>(x), y));
    adam.step();
    synchronize();
    model_bytes = ::max_over_ranks(comm_stats().bytes_sent);
  }
  // The labelled step: once to warm up its caches, once traced.
  auto labelled_step = [&] {
    adam.zero_grad();
    backward(cross_entropy(labelled_forward(model, x), y));
    adam.step();
  };
  labelled_step();
  synchronize();
  set_synchronous(true);
  world_communicator().barrier();
  forward_marks.clear(), backward_marks.clear();
  reset_comm_stats();
  const int64_t begin = now_ns();
  labelled_step();
  synchronize();
  const int64_t end = now_ns();
  const int64_t labelled_bytes = comm_stats().bytes_sent;
  set_synchronous(false);
  flush_trace();
  Step step = read_step(trace_file(), begin, end);
  label_rows(step);

  // The same rows on every rank (the same ops in the same order): take each figure's max.
  const int64_t count = static_cast<int64_t>(step.rows.size());
  SPSD_CHECK(::max_over_ranks(count) == -::max_over_ranks(-count), "bench/train --per-op",
             "the ranks' traces hold different numbers of rows");
  std::vector<int64_t> slots;
  for (const Row& r : step.rows) {
    slots.insert(slots.end(), r.input_bytes.begin(), r.input_bytes.end());
    slots.push_back(r.other);
  }
  // Per kind (phase, module kind, op) and per (phase, module kind): this rank's sums.
  std::vector<std::string> kinds, parts;
  std::map<std::string, size_t> kind_at, part_at;
  std::vector<int64_t> kind_ops, kind_boxings;
  std::vector<std::map<std::string, int64_t>> kind_conversions;
  std::vector<int64_t> rank_figures;  // kinds, then parts, then the step's sum, checks, outside, labelled
  for (const Row& r : step.rows) {
    const std::string part = r.phase + "|" + role_of(r.label), kind = part + "|" + r.op;
    if (kind_at.emplace(kind, kinds.size()).second) {
      kinds.push_back(kind);
      kind_ops.push_back(0), kind_boxings.push_back(0), kind_conversions.emplace_back();
    }
    if (part_at.emplace(part, parts.size()).second) parts.push_back(part);
    const size_t k = kind_at[kind];
    ++kind_ops[k];
    for (size_t i = 0; i < r.inputs.size(); ++i)
      if (r.boxed(i)) {
        ++kind_boxings[k];
        ++kind_conversions[k]["in" + std::to_string(i) + " " + layout_part(r.inputs[i]) + "->" + r.to[i]];
      }
    if (r.op == "to_global") ++kind_boxings[k];
  }
  rank_figures.assign(kinds.size() + parts.size() + 4, 0);
  int64_t sum = 0;
  for (const Row& r : step.rows) {
    const std::string part = r.phase + "|" + role_of(r.label);
    rank_figures[kind_at[part + "|" + r.op]] += total(r);
    rank_figures[kinds.size() + part_at[part]] += total(r);
    sum += total(r);
  }
  const size_t tail = kinds.size() + parts.size();
  rank_figures[tail] = sum, rank_figures[tail + 1] = step.checks, rank_figures[tail + 2] = step.outside;
  // comm_stats leaves the consistency check's own exchanges out: 0 when every counted byte is placed.
  rank_figures[tail + 3] = labelled_bytes - (sum + step.outside);
  const std::vector<int64_t> slot_max = max_over_ranks(slots), fig = max_over_ranks(rank_figures);
  const int64_t step_max = ::max_over_ranks(labelled_bytes);
  if (rank() != 0) return;

  const bool two_d = mode == "2d";
  std::printf("\n### %s%s on %s: one GPT step op by op\n\n", mode.c_str(),
              variant.empty() ? "" : (" (variant " + variant + ")").c_str(),
              two_d ? ("a (" + std::to_string(n / 2) + ", 2) mesh").c_str() : (std::to_string(n) + " ranks").c_str());
  std::printf("bytes sent per step (max rank, comm_stats): the model's step %lld, this labelled step %lld (ops and "
              "to_globals %lld, elsewhere %lld, not placed %lld); the consistency check's exchanges, which comm_stats "
              "leaves out: %lld\n\n",
              static_cast<long long>(model_bytes), static_cast<long long>(step_max),
              static_cast<long long>(fig[tail]), static_cast<long long>(fig[tail + 2]),
              static_cast<long long>(fig[tail + 3]), static_cast<long long>(fig[tail + 1]));
  std::printf("Ops and to_globals that boxed an input or sent bytes (bytes: the busiest rank's), in program order:\n\n"
              "| # | phase | module | op | boxing: input shape from -> to (bytes sent) | signature |\n"
              "|---|---|---|---|---|---|\n");
  size_t at = 0;
  std::map<std::string, int64_t> ops_per_phase, shown_per_phase;
  for (size_t k = 0; k < step.rows.size(); ++k) {
    const Row& r = step.rows[k];
    std::string boxing;
    bool any = false;
    for (size_t i = 0; i < r.inputs.size(); ++i, ++at) {
      if (!r.boxed(i) && slot_max[at] == 0) continue;
      any = true;
      boxing += (boxing.empty() ? "" : "; ") + std::string("in") + std::to_string(i) + " " + shape_part(r.inputs[i]) +
                " " + layout_part(r.inputs[i]) + " -> " + r.to[i] + " (" + std::to_string(slot_max[at]) + ")";
    }
    const int64_t other = slot_max[at++];
    if (other > 0) {
      any = true;
      boxing += (boxing.empty() ? "" : "; ") + std::string(r.op == "to_global" ? "" : "not matched to an input ") +
                "(" + std::to_string(other) + ")";
    }
    ++ops_per_phase[r.phase];
    if (!any) continue;
    ++shown_per_phase[r.phase];
    std::printf("| %zu | %s | %s | %s | %s | %s |\n", k, r.phase.c_str(), r.label.c_str(), r.op.c_str(), boxing.c_str(),
                r.signature.c_str());
  }
  std::printf("\n(rows: forward %lld of %lld ops and to_globals, backward %lld of %lld, optimizer %lld of %lld)\n",
              static_cast<long long>(shown_per_phase["forward"]), static_cast<long long>(ops_per_phase["forward"]),
              static_cast<long long>(shown_per_phase["backward"]), static_cast<long long>(ops_per_phase["backward"]),
              static_cast<long long>(shown_per_phase["optimizer"]), static_cast<long long>(ops_per_phase["optimizer"]));

  std::printf("\nPer kind (phase, module kind, op), the kinds that boxed or sent bytes:\n\n"
              "| phase | module | op | ops | boxed inputs: conversion x count | bytes sent (max rank) | share |\n"
              "|---|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kind_boxings[k] == 0 && fig[k] == 0) continue;
    const std::string& kind = kinds[k];
    const size_t p1 = kind.find('|'), p2 = kind.find('|', p1 + 1);
    std::string conv;
    for (const auto& [text, times] : kind_conversions[k])
      conv += (conv.empty() ? "" : "; ") + text + " x" + std::to_string(times);
    if (conv.empty()) conv = "-";
    std::printf("| %s | %s | %s | %lld | %s | %lld | %.1f%% |\n", kind.substr(0, p1).c_str(),
                kind.substr(p1 + 1, p2 - p1 - 1).c_str(), kind.substr(p2 + 1).c_str(),
                static_cast<long long>(kind_ops[k]), conv.c_str(), static_cast<long long>(fig[k]),
                fig[tail] ? 100.0 * static_cast<double>(fig[k]) / static_cast<double>(fig[tail]) : 0.0);
  }

  const std::map<std::string, double> mega = megatron(mode, n, c, batch, model.named_parameters());
  std::printf("\nAgainst Megatron's scheme, per (phase, module kind) (bench/train's header comment; Megatron's\n"
              "bytes where its f and g operators and, on the mesh, its data-parallel all-reduce put them):\n\n"
              "| phase | module | spsd bytes (max rank) | Megatron | spsd - Megatron |\n|---|---|---|---|---|\n");
  double spsd_total = 0, mega_total = 0;
  std::vector<std::string> shown;
  for (size_t p = 0; p < parts.size(); ++p) shown.push_back(parts[p]);
  for (const auto& [part, bytes] : mega)
    if (std::find(shown.begin(), shown.end(), part) == shown.end()) shown.push_back(part);
  for (const std::string& part : shown) {
    const auto pi = part_at.find(part);
    const double s = pi == part_at.end() ? 0 : static_cast<double>(fig[kinds.size() + pi->second]);
    const auto mi = mega.find(part);
    const double m = mi == mega.end() ? 0 : mi->second;
    if (s == 0 && m == 0) continue;
    spsd_total += s, mega_total += m;
    const size_t bar = part.find('|');
    std::printf("| %s | %s | %.0f | %.0f | %+.0f |\n", part.substr(0, bar).c_str(), part.substr(bar + 1).c_str(), s, m,
                s - m);
  }
  std::printf("| all | (ops and to_globals) | %.0f | %.0f | %+.0f |\n", spsd_total, mega_total,
              spsd_total - mega_total);
  std::printf("\n(the table's textbook scheme for this mode: %.0f)\n",
              gpt_minimum_bytes(mode, n, c, batch, parameter_counts(model.parameters()).first,
                                parameter_counts(model.parameters()).second));
}

}  // namespace per_op

int run(int argc, char** argv) {
  int64_t hidden = 1024, batch = 128, steps = 10;
  bool gpt_only = false, by_op = false, profile = false;
  GptCompile compiled;
  std::vector<std::string> modes{"tensor", "2d"};
  std::string variant;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gpt-only") {
      gpt_only = true;
      continue;
    }
    if (a == "--per-op") {
      by_op = true;
      continue;
    }
    if (a == "--compile" || a == "--explain") {
      compiled.rows = true;
      compiled.explain = compiled.explain || a == "--explain";
      continue;
    }
    if (a == "--profile") {
      profile = true;
      continue;
    }
    SPSD_CHECK(i + 1 < argc, "bench/train", "option ", a, " needs a value");
    if (a == "--variant") {
      variant = argv[++i];
      continue;
    }
    if (a == "--exact-seconds") {
      compiled.exact_seconds = std::stod(argv[++i]);
      continue;
    }
    if (a == "--modes") {
      const std::string list = argv[++i];
      modes.clear();
      for (size_t from = 0; from <= list.size();) {
        const size_t comma = std::min(list.find(',', from), list.size());
        modes.push_back(list.substr(from, comma - from));
        SPSD_CHECK(modes.back() == "data" || modes.back() == "sequence" || modes.back() == "tensor" ||
                       modes.back() == "2d",
                   "bench/train", "--modes takes data, sequence, tensor and 2d, got \"", modes.back(), "\"");
        from = comma + 1;
      }
      continue;
    }
    const int64_t v = std::stoll(argv[++i]);
    if (a == "--hidden") hidden = v;
    else if (a == "--batch") batch = v;
    else if (a == "--steps") steps = v;
    else SPSD_CHECK(false, "bench/train", "unknown option ", a);
  }
  if (profile) {
    profile_gpt_step();
    return 0;
  }
  if (by_op) {
    for (const std::string& mode : modes)
      if (mode != "2d" || world_size() % 2 == 0) per_op::table(mode, variant);
    return 0;
  }
  if (gpt_only) {
    gpt_table(steps, compiled, variant);
    return 0;
  }
  const examples::Dataset data = examples::generated_dataset(batch, 1);  // values do not change the time
  std::vector<int64_t> rows(batch);
  std::iota(rows.begin(), rows.end(), 0);
  const int n = world_size();
  if (rank() == 0)
    std::printf("MLP 784 -> %lld -> 10, batch %lld, Adam, %d rank(s); median of %lld steps\n"
                "| mode | step ms | samples/s | bytes sent per step (max rank) | analytic minimum | ratio |\n"
                "|---|---|---|---|---|---|\n",
                static_cast<long long>(hidden), static_cast<long long>(batch), n, static_cast<long long>(steps));
  for (const std::string mode : {"data", "tensor", "2d"}) {
    if (mode == "2d" && n % 2 != 0) continue;
    const nn::Plan plan = examples::mlp_plan(mode);
    const Placement placement = examples::mlp_placement(mode, n);
    examples::Mlp<float> model({placement, 1}, examples::kPixels, hidden, examples::kClasses);
    nn::parallelize(model, plan);
    Adam<float> adam(model.parameters(), {});
    const GlobalTensor<float> x = examples::image_batch<float>(data, rows, placement, nn::input_layout(plan));
    const GlobalTensor<int64_t> y = examples::label_batch(data, rows, placement, nn::input_layout(plan));
    const auto [median, bytes] = measure(steps, [&] {
      adam.zero_grad();
      backward(cross_entropy(model(x), y));
      adam.step();
    });
    const double minimum = minimum_bytes(mode, n, hidden, batch);
    if (rank() == 0)
      std::printf("| %s | %.2f | %.0f | %lld | %.0f | %s |\n", mode.c_str(), median * 1e3, batch / median,
                  static_cast<long long>(bytes), minimum, ratio_text(static_cast<double>(bytes), minimum).c_str());
  }
  gpt_table(steps, compiled, variant);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --per-op and --profile read the step from the trace: a temporary one unless SPSD_TRACE names one (set
  // before the Runtime starts, which opens the file; removed after it ends, which writes it).
  std::string temporary, file;
  if (std::any_of(argv + 1, argv + argc,
                  [](const char* a) { return std::string(a) == "--per-op" || std::string(a) == "--profile"; }) &&
      !std::getenv("SPSD_TRACE")) {
    temporary =
        (std::filesystem::temp_directory_path() / ("spsd-bench-train-" + std::to_string(getpid()) + ".json")).string();
    setenv("SPSD_TRACE", temporary.c_str(), 1);
  }
  int rc = 0;
  try {
    Runtime runtime(argc, argv);
    file = trace_file();
    rc = run(argc, argv);
  } catch (...) {  // the Runtime has written the file on its way out; the error goes on as before
    if (!temporary.empty() && !file.empty()) std::filesystem::remove(file);
    throw;
  }
  if (!temporary.empty()) std::filesystem::remove(file);
  return rc;
}
