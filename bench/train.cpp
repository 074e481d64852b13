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
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <spsd/spsd.hpp>
#include <string>

#include "train/fashion_mnist.hpp"
#include "train/gpt.hpp"
#include "train/mlp.hpp"
#include "train/text.hpp"

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
  return ring(d) * 4 * (params - split_params / 2) + ring(2) * ((4 * L + 2) * act + 2 * rows) / d;
}

void gpt_table(int64_t steps) {
  const int n = world_size();
  const examples::Corpus corpus = examples::have_fortunes() ? examples::read_fortunes(examples::kFortunesDir, 200000)
                                                            : examples::generated_corpus(200000, 1);
  const examples::GptConfig c{corpus.vocab_size(), /*context=*/64, /*dim=*/128, /*heads=*/4, /*layers=*/2};
  const int64_t batch = 16;
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
  for (const std::string mode : {"data", "sequence", "tensor", "2d"}) {
    if (mode == "2d" && n % 2 != 0) continue;
    const nn::Plan plan = examples::gpt_plan(mode);
    examples::Gpt<float> model(c, {examples::gpt_placement(mode, n), 1000});
    nn::parallelize(model, plan);
    const Placement& placement = model.tok.weight.placement();
    Adam<float> adam(model.parameters(), {});
    double params = 0, split_params = 0;
    for (const auto& p : model.parameters()) {
      const double size = static_cast<double>(p.shape().numel());
      params += size;
      if (std::any_of(p.nd_sbp().begin(), p.nd_sbp().end(), [](const Sbp& s) { return s.is_split(); }))
        split_params += size;
    }
    const auto x = from_host(b.inputs, placement, nn::input_layout(plan)),
               y = from_host(b.targets, placement, nn::input_layout(plan));
    const auto [median, bytes] = measure(steps, [&] {
      adam.zero_grad();
      backward(cross_entropy(model.forward<float>(x), y));
      adam.step();
    });
    const double minimum = gpt_minimum_bytes(mode, n, c, batch, params, split_params);
    if (rank() == 0)
      std::printf("| %s | %.1f | %.0f | %lld | %.0f | %s |\n", mode.c_str(), median * 1e3,
                  static_cast<double>(batch * c.context) / median, static_cast<long long>(bytes), minimum,
                  ratio_text(static_cast<double>(bytes), minimum).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  int64_t hidden = 1024, batch = 128, steps = 10;
  bool gpt_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--gpt-only") {
      gpt_only = true;
      continue;
    }
    SPSD_CHECK(i + 1 < argc, "bench/train", "option ", a, " needs a value");
    const int64_t v = std::stoll(argv[++i]);
    if (a == "--hidden") hidden = v;
    else if (a == "--batch") batch = v;
    else if (a == "--steps") steps = v;
    else SPSD_CHECK(false, "bench/train", "unknown option ", a);
  }
  if (gpt_only) {
    gpt_table(steps);
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
  gpt_table(steps);
  return 0;
}
