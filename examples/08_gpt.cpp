// 08_gpt: a character-level GPT trained on the fortunes Debian ships, data-, sequence-,
// tensor- or 2-d-parallel. The model (train/gpt.hpp, nn layers) and this loop are written as for
// one device; --parallel picks a plan (examples::gpt_plan), which nn::parallelize applies:
//   --parallel data         tokens split on the batch, parameters B
//   --parallel sequence     Megatron-SP: tensor parallelism with the residual stream, layer norms
//                           and dropout split on the sequence
//   --parallel tensor       Megatron: heads and MLP hidden units split, vocab-parallel table, head and loss
//   --parallel 2d           (world/2, 2) mesh: data parallel on mesh axis 0, tensor on axis 1
//   --parallel 2d-sequence  (world/2, 2) mesh: data parallel on mesh axis 0, sequence on axis 1
// --device cuda|cpu (default: cuda when a GPU is usable), --dtype float32|bfloat16|float16 (the
// forward in that type on float32 master weights; float16 adds a GradScaler).
// Options: --steps N (1500: about 2 minutes on 4 ranks of a 2-core machine), --batch N (32), --context N (64), --dim N (128), --heads N (4),
// --layers N (2), --lr X (3e-3), --dropout P (0), --tied 0|1 (0: a separate head), --seed N (1),
// --sample N (generate N characters at the end; 0: none), --text DIR (fortunes directory),
// --text-limit N (characters read), --csv FILE (loss per step), --log-every N (10), --compile 0|1
// (1: the step captured once and replayed, its layouts searched for the whole step; docs/compile.md).
// The progress line shows the loss (mean over the last steps) and tokens per second; the
// unigram entropy printed at start is the loss of a model that ignores context.
//   tools/mpirun -np 4 build/examples/08_gpt --parallel 2d --sample 300
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <random>
#include <spsd/spsd.hpp>
#include <string>

#include "train/gpt.hpp"
#include "train/gpt_options.hpp"
#include "train/options.hpp"
#include "train/text.hpp"

using namespace spsd;

namespace {

struct Options : examples::GptOptions {
  std::string dtype = "float32";
  int64_t sample = 0;
  bool compile = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    SPSD_CHECK(i + 1 < argc, "08_gpt", "option ", a, " needs a value");
    const std::string v = argv[++i];
    if (examples::read_gpt_option(o, a, v)) continue;
    if (a == "--dtype") o.dtype = v;
    else if (a == "--sample") o.sample = std::stoll(v);
    else if (a == "--compile") o.compile = v != "0";
    else SPSD_CHECK(false, "08_gpt", "unknown option ", a);
  }
  o.device = examples::checked_device("08_gpt", o.device);
  examples::check_dtype("08_gpt", o.dtype);
  SPSD_CHECK(!o.compile || o.dtype != "float16", "08_gpt", "--compile 1 takes float32 or bfloat16 (float16's loss "
             "scale changes between steps; docs/compile.md)");
  SPSD_CHECK(!o.compile || o.dropout == 0, "08_gpt", "--compile 1 needs --dropout 0 (a replay would repeat the "
             "captured masks; docs/compile.md)");
  return o;
}

// The loss of a batch: the forward in --dtype, the loss in float32.
GlobalTensor<float> loss_of(const std::string& dtype, const examples::Gpt<float>& model,
                            const GlobalTensor<int64_t>& inputs, const GlobalTensor<int64_t>& targets) {
  return examples::with_compute_type(dtype, [&]<FloatingElement C>() {
    return cross_entropy(cast<float>(model.template forward<C>(inputs)), targets);
  });
}

// n characters after a newline, sampled at temperature 0.8 from the model's next-token
// distribution. Every rank draws the same numbers (one seeded generator), so all agree on
// the text. The window is always `context` tokens (the prompt padded at its end: causal
// attention keeps the padding out of the positions read), so every step reuses one plan.
std::string generate(const examples::Gpt<float>& model, const examples::Corpus& corpus, int64_t n, uint64_t seed) {
  NoGradGuard no_grad;
  const int64_t context = model.config.context, v = corpus.vocab_size();
  const Placement& placement = model.tok.weight.placement();
  const NdSbp replicated(std::vector<Sbp>(placement.mesh().ndim(), sbp::broadcast));
  std::mt19937_64 g(seed);
  std::vector<int64_t> text = {corpus.id['\n'] >= 0 ? corpus.id['\n'] : 0};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t begin = std::max<int64_t>(0, static_cast<int64_t>(text.size()) - context);
    std::vector<int64_t> window(text.begin() + begin, text.end());
    const int64_t at = static_cast<int64_t>(window.size()) - 1;
    window.resize(static_cast<size_t>(context), 0);
    const auto tokens = from_host(Tensor<int64_t>::from_vector({1, context}, window), placement, replicated);
    const std::vector<float> logits = slice(model.forward<float>(tokens), 1, at, at + 1).full().to_vector();
    const float top = *std::max_element(logits.begin(), logits.end());
    std::vector<double> p(static_cast<size_t>(v));
    for (int64_t j = 0; j < v; ++j) p[j] = std::exp((logits[j] - top) / 0.8);
    text.push_back(std::discrete_distribution<int64_t>(p.begin(), p.end())(g));
  }
  return corpus.decode(text);
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const Options o = parse(argc, argv);
  const examples::Corpus corpus = examples::have_fortunes(o.text) ? examples::read_fortunes(o.text, o.text_limit)
                                                                  : examples::generated_corpus(o.text_limit > 0 ? o.text_limit : 200000, 7);
  const nn::Plan plan = examples::gpt_plan(o.parallel);
  const NdSbp tokens = nn::input_layout(plan);
  const examples::GptConfig config{corpus.vocab_size(), o.context, o.dim, o.heads, o.layers, o.dropout, o.tied};
  examples::Gpt<float> model(config, {examples::gpt_placement(o.parallel, world_size(), o.device), o.seed * 1000});
  nn::parallelize(model, plan);
  const Placement& placement = model.tok.weight.placement();
  int64_t parameters = 0;
  for (const auto& p : model.parameters()) parameters += p.shape().numel();
  const auto layout = [&](const std::string& name) { return model.state_dict().at<float>(name).nd_sbp().to_string(); };
  if (rank() == 0)
    std::printf("%s: %zu characters, vocabulary %lld, unigram entropy %.3f nats/char\n"
                "GPT: %lld layers, dim %lld, %lld heads, context %lld, %lld parameters%s; --parallel %s on %s, "
                "--device %s --dtype %s\n  tokens %s, attn.q %s, attn.out %s, token table %s\n",
                corpus.source.c_str(), corpus.text.size(), static_cast<long long>(corpus.vocab_size()),
                corpus.unigram_entropy(), static_cast<long long>(o.layers), static_cast<long long>(o.dim),
                static_cast<long long>(o.heads), static_cast<long long>(o.context), static_cast<long long>(parameters),
                o.tied ? " (tied head)" : "", o.parallel.c_str(), placement.to_string().c_str(), o.device.c_str(),
                o.dtype.c_str(), tokens.to_string().c_str(), layout("blocks.0.attn.q.weight").c_str(),
                layout("blocks.0.attn.out.weight").c_str(), layout("tok.weight").c_str());

  Adam<float> optimizer(model.named_parameters(), {.lr = o.lr});
  GradScaler scaler;  // float16 only
  int64_t skipped = 0;
  std::mt19937_64 batches(o.seed);  // the same windows on every rank
  std::vector<float> curve;
  double recent = 0;
  int64_t recent_n = 0;
  const auto start = std::chrono::steady_clock::now();
  // --compile 1: the same step captured once and replayed (docs/compile.md).
  auto compiled_step = spsd::compile([&](const GlobalTensor<int64_t>& inputs, const GlobalTensor<int64_t>& targets) {
    GlobalTensor<float> loss = loss_of(o.dtype, model, inputs, targets);
    optimizer.zero_grad();
    backward(loss);
    optimizer.step();
    return loss;
  });
  for (int64_t step = 1; step <= o.steps; ++step) {
    const examples::TextBatch b = examples::draw_batch(corpus, o.batch, o.context, batches);
    manual_seed(o.seed * 1000003 + static_cast<uint64_t>(step));  // this step's dropout masks
    const GlobalTensor<int64_t> inputs = from_host(b.inputs, placement, tokens);
    const GlobalTensor<int64_t> targets = from_host(b.targets, placement, tokens);
    GlobalTensor<float> loss;
    if (o.compile) {
      loss = compiled_step(inputs, targets);
    } else if (o.dtype == "float16") {
      loss = loss_of(o.dtype, model, inputs, targets);
      optimizer.zero_grad();
      backward(scaler.scale(loss));
      skipped += !scaler.step(optimizer);
      scaler.update();
    } else {
      loss = loss_of(o.dtype, model, inputs, targets);
      optimizer.zero_grad();
      backward(loss);
      optimizer.step();
    }
    curve.push_back(loss.item());
    recent += curve.back();
    ++recent_n;
    const bool last = step == o.steps;
    if (last || step % o.log_every == 0) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      examples::progress(step, o.steps, static_cast<double>(step * o.batch * o.context) / std::max(s, 1e-9),
               recent / static_cast<double>(recent_n), last);
      recent = 0;
      recent_n = 0;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rank() == 0) {
    std::printf("trained %lld steps in %.1f s; last loss %.4f (unigram entropy %.3f)\n", static_cast<long long>(o.steps),
                seconds, curve.empty() ? NAN : curve.back(), corpus.unigram_entropy());
    if (o.dtype == "float16")
      std::printf("loss scale %g; %lld steps skipped for inf/NaN gradients\n", scaler.scale_value(),
                  static_cast<long long>(skipped));
    if (!o.csv.empty()) {
      std::ofstream csv(o.csv);
      csv << "step,loss\n" << std::setprecision(9);
      for (size_t i = 0; i < curve.size(); ++i) csv << i + 1 << "," << curve[i] << "\n";
      std::printf("loss curve: %s\n", o.csv.c_str());
    }
  }
  if (o.sample > 0) {
    model.eval();  // no dropout
    const std::string text = generate(model, corpus, o.sample, o.seed);
    if (rank() == 0) std::printf("--- sample (%lld characters) ---\n%s\n---\n", static_cast<long long>(o.sample), text.c_str());
  }
  return 0;
}
