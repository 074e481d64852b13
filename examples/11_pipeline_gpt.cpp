// 11_pipeline_gpt: the character GPT of 08_gpt (train/gpt.hpp) trained pipeline-parallel: its
// forward written as named layers ("tok", "blocks.0", ..., "head"), the layers dealt in order
// to --stages stages, each stage a placement of world/stages ranks with a plan inside it
// (docs/pipeline.md). The model and the layers are written once, as for one device.
//   --stages S           pipeline stages (2); with --schedule interleaved each pipeline rank
//                        holds 2 stages (chunks), so the model is cut into 2S pieces
//   --schedule NAME      gpipe, 1f1b (default), interleaved or zb-h1
//   --microbatches M     micro-batches per step (4); any M up to --batch
//   --parallel MODE      inside each stage: data (tokens split on the batch), tensor (Megatron)
//                        or 2d (a (n/2, 2) mesh: data on axis 0, tensor on axis 1)
//   --simulate N         run on N simulated ranks (threads) instead of MPI's
// On 4 ranks: 2 stages x 2-way data or tensor; on 8: 2 stages x (2, 2) meshes, 3-D parallelism.
// The first step is also run unpipelined (the same GPT, same seed, data parallel on all ranks):
// the end of the output puts its loss and gradients beside the pipelined ones (float32: equal
// to rounding). Dropout makes them differ (the masks are drawn per micro-batch).
// Options as 08's: --steps N (200: about a minute on 4 ranks of a 2-core machine), --batch N
// (32), --context N (64), --dim N (128), --heads N (4), --layers N (2), --lr X (3e-3), --dropout
// P (0), --tied 0|1 (0), --seed N (1), --text DIR, --text-limit N, --csv FILE, --log-every N
// (10), --device cuda|cpu; and --save DIR (the training state at the end, under the unpipelined
// model's names: docs/checkpoints.md loads it into any split or none).
//   tools/mpirun -np 4 build/examples/11_pipeline_gpt --parallel tensor --schedule zb-h1
//   build/examples/11_pipeline_gpt --simulate 8 --parallel 2d
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <random>
#include <spsd/spsd.hpp>
#include <string>
#include <vector>

#include "train/checkpoint.hpp"
#include "train/gpt.hpp"
#include "train/gpt_options.hpp"
#include "train/options.hpp"
#include "train/text.hpp"

using namespace spsd;

namespace {

struct Options : examples::GptOptions {
  std::string schedule = "1f1b", save;
  int64_t stages = 2, microbatches = 4, simulate = 0;
  Options() { steps = 200; }
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    SPSD_CHECK(i + 1 < argc, "11_pipeline_gpt", "option ", a, " needs a value");
    const std::string v = argv[++i];
    if (examples::read_gpt_option(o, a, v)) continue;
    if (a == "--schedule") o.schedule = v;
    else if (a == "--save") o.save = v;
    else if (a == "--stages") o.stages = std::stoll(v);
    else if (a == "--microbatches") o.microbatches = std::stoll(v);
    else if (a == "--simulate") o.simulate = std::stoll(v);
    else SPSD_CHECK(false, "11_pipeline_gpt", "unknown option ", a);
  }
  SPSD_CHECK(o.parallel == "data" || o.parallel == "tensor" || o.parallel == "2d", "11_pipeline_gpt",
             "--parallel must be data, tensor or 2d, got \"", o.parallel, "\"");
  SPSD_CHECK(o.stages >= 1 && o.simulate >= 0, "11_pipeline_gpt", "--stages must be >= 1 and --simulate >= 0");
  return o;
}

pipeline::Schedule make_schedule(const Options& o) {
  if (o.schedule == "gpipe") return pipeline::gpipe(o.stages, o.microbatches);
  if (o.schedule == "1f1b") return pipeline::one_f_one_b(o.stages, o.microbatches);
  if (o.schedule == "interleaved") return pipeline::interleaved_one_f_one_b(o.stages, o.microbatches, 2);
  if (o.schedule == "zb-h1") return pipeline::zero_bubble(o.stages, o.microbatches);
  throw Error("11_pipeline_gpt: --schedule must be gpipe, 1f1b, interleaved or zb-h1, got \"" + o.schedule + "\"");
}

// The model's forward as the runner's layers: what Gpt::forward does, cut between blocks.
pipeline::Layers<float> gpt_layers(const examples::Gpt<float>& model) {
  pipeline::Layers<float> layers;
  layers.first("tok", [&model](const GlobalTensor<int64_t>& tokens) {
    return model.tok.forward<float>(tokens) + model.positions;  // windows are always `context` long
  });
  for (size_t k = 0; k < model.blocks.size(); ++k)
    layers.then("blocks." + std::to_string(k), [&model, k](const GlobalTensor<float>& x) { return model.blocks[k](x); });
  layers.then("head", [&model](const GlobalTensor<float>& x) {
    const GlobalTensor<float> h = model.lnf(x);
    return model.head ? (*model.head)(h) : matmul(h, transpose(model.tok.weight, 0, 1));
  });
  layers.loss([](const GlobalTensor<float>& logits, const GlobalTensor<int64_t>& y) { return cross_entropy(logits, y); });
  // The tied head reads the token table, which lives on the first stage: the runner gives the
  // last stage a copy and adds the copy's gradient back.
  if (!model.head) layers.tie("tok.weight", "head");
  return layers;
}

// Stage v gets a consecutive share of the layers (the first ones one more when they do not
// divide), on pipeline rank v % stages: ranks [r * n, (r + 1) * n) with n = world / stages.
// "positions" goes with "tok" and "lnf" with "head", the layers that use them.
std::vector<pipeline::Stage> make_stages(const Options& o, int64_t chunks) {
  const int64_t world = world_size(), n = world / o.stages, count = o.stages * chunks;
  SPSD_CHECK(world % o.stages == 0, "11_pipeline_gpt", "--stages ", o.stages, " must divide the ", world, " ranks");
  std::vector<std::string> names{"tok"};
  for (int64_t k = 0; k < o.layers; ++k) names.push_back("blocks." + std::to_string(k));
  names.push_back("head");
  SPSD_CHECK(count <= static_cast<int64_t>(names.size()), "11_pipeline_gpt", "the ", names.size(),
             " layers cannot fill ", count, " stages: give more --layers");
  std::vector<pipeline::Stage> stages;
  for (int64_t v = 0; v < count; ++v) {
    const int64_t r = v % o.stages;
    std::vector<int64_t> ranks;
    for (int64_t k = 0; k < n; ++k) ranks.push_back(r * n + k);
    pipeline::Stage s{{}, examples::gpt_placement(o.parallel, ranks, o.device), examples::gpt_plan(o.parallel)};
    const Range share = balanced_range(static_cast<int64_t>(names.size()), count, v);
    for (int64_t k = share.begin; k < share.end; ++k) {
      s.patterns.push_back(names[k]);
      if (names[k] == "tok") s.patterns.push_back("positions");
      if (names[k] == "head") s.patterns.push_back("lnf");
    }
    stages.push_back(std::move(s));
  }
  return stages;
}

Placement all_ranks(const std::string& device) { return Placement(device, examples::first_ranks(world_size())); }

// x's values on every rank (for the comparison with the unpipelined step).
std::vector<float> everywhere(const GlobalTensor<float>& x, const std::string& device) {
  const Placement p = all_ranks(device);
  return x.to_global(p, NdSbp(std::vector<Sbp>{sbp::broadcast})).to_local().to_vector();
}

// The first step without a pipeline: the same GPT (same seed, so the same weights) data
// parallel on all ranks, forward and backward on the same batch. Its loss and gradients by name.
struct Reference {
  float loss;
  std::vector<std::pair<std::string, std::vector<float>>> grads;
};

Reference unpipelined(const examples::GptConfig& config, const Options& o, const examples::TextBatch& b) {
  examples::Gpt<float> model(config, {all_ranks(o.device), o.seed * 1000});
  const nn::Plan plan = examples::gpt_plan("data");
  nn::parallelize(model, plan);
  const Placement& p = model.tok.weight.placement();
  manual_seed(o.seed * 1000003 + 1);  // step 1's dropout masks, as in the loop
  const GlobalTensor<float> loss = cross_entropy(model.forward<float>(from_host(b.inputs, p, nn::input_layout(plan))),
                                                 from_host(b.targets, p, nn::input_layout(plan)));
  backward(loss);
  Reference r{loss.item(), {}};
  for (const auto& [name, w] : model.named_parameters()) r.grads.emplace_back(name, everywhere(w.grad(), o.device));
  return r;
}

// The largest |pipelined - unpipelined| over every gradient element, over the largest
// |unpipelined| one (per parameter would not do: attn.k.bias's gradient is zero up to rounding,
// as softmax ignores a shift of every score).
double gradient_difference(const examples::Gpt<float>& model, const Reference& ref, const std::string& device) {
  double diff = 0, scale = 0;
  const auto named = model.named_parameters();
  for (size_t k = 0; k < named.size(); ++k) {
    const std::vector<float> got = everywhere(named[k].second.grad(), device), &want = ref.grads.at(k).second;
    SPSD_CHECK(named[k].first == ref.grads[k].first && got.size() == want.size(), "11_pipeline_gpt",
               "the parameters differ from the unpipelined model's at ", named[k].first);
    for (size_t i = 0; i < got.size(); ++i) {
      diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
      scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    }
  }
  return scale > 0 ? diff / scale : diff;
}

void train(Options o, const examples::Corpus& corpus) {
  o.device = examples::checked_device("11_pipeline_gpt", o.device);  // asks the rank's runtime
  const examples::GptConfig config{corpus.vocab_size(), o.context, o.dim, o.heads, o.layers, o.dropout, o.tied};
  const pipeline::Schedule schedule = make_schedule(o);
  std::vector<pipeline::Stage> stages = make_stages(o, schedule.chunks());
  std::mt19937_64 batches(o.seed);  // the same windows on every rank
  std::mt19937_64 first_batch = batches;
  const Reference ref = unpipelined(config, o, examples::draw_batch(corpus, o.batch, o.context, first_batch));

  examples::Gpt<float> model(config, {all_ranks(o.device), o.seed * 1000});
  pipeline::Pipeline<float> pipe(model, gpt_layers(model), std::move(stages), schedule.chunks());
  Adam<float> optimizer(model.named_parameters(), {.lr = o.lr});  // after: the parameters are on their stages
  const pipeline::Stage &first = pipe.stage(0), &last = pipe.stage(pipe.stages() - 1);
  const NdSbp tokens = nn::input_layout(*first.plan);
  if (rank() == 0) {
    const auto layout = [&](const std::string& name) { return model.state_dict().at<float>(name).nd_sbp().to_string(); };
    std::printf("%s: %zu characters, vocabulary %lld, unigram entropy %.3f nats/char\n"
                "GPT: %lld layers, dim %lld, %lld heads, context %lld%s; %lld pipeline ranks x --parallel %s on %d ranks, "
                "--device %s\n",
                corpus.source.c_str(), corpus.text.size(), static_cast<long long>(corpus.vocab_size()),
                corpus.unigram_entropy(), static_cast<long long>(o.layers), static_cast<long long>(o.dim),
                static_cast<long long>(o.heads), static_cast<long long>(o.context), o.tied ? ", tied head" : "",
                static_cast<long long>(pipe.pipeline_ranks()), o.parallel.c_str(), world_size(), o.device.c_str());
    const std::vector<std::string> names = gpt_layers(model).names();
    for (int64_t v = 0; v < pipe.stages(); ++v) {
      std::string held;
      int64_t parameters = 0;
      for (const std::string& name : names)
        if (pipe.stage_of_layer(name) == v) held += " " + name;
      for (const auto& [name, w] : model.named_parameters())
        if (pipe.stage_of_parameter(name) == v) parameters += w.shape().numel();
      std::printf("  stage %lld on %s:%s (%lld parameters)\n", static_cast<long long>(v),
                  pipe.stage(v).placement.to_string().c_str(), held.c_str(), static_cast<long long>(parameters));
    }
    std::printf("  tokens %s, attn.q %s, attn.out %s, token table %s\n", tokens.to_string().c_str(),
                layout("blocks.0.attn.q.weight").c_str(), layout("blocks.0.attn.out.weight").c_str(),
                layout("tok.weight").c_str());
    std::printf("schedule %s, %lld micro-batches of the batch of %lld (cost model: bubble %.3f), per pipeline rank:\n%s",
                o.schedule.c_str(), static_cast<long long>(o.microbatches), static_cast<long long>(o.batch),
                pipeline::simulate(schedule).bubble_fraction, schedule.to_string().c_str());
  }

  std::vector<float> curve;
  double first_gradients = 0, recent = 0;
  int64_t recent_n = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= o.steps; ++step) {
    const examples::TextBatch b = examples::draw_batch(corpus, o.batch, o.context, batches);
    manual_seed(o.seed * 1000003 + static_cast<uint64_t>(step));  // this step's dropout masks
    optimizer.zero_grad();
    const GlobalTensor<float> loss =
        pipe.step(schedule, from_host(b.inputs, first.placement, tokens), from_host(b.targets, last.placement, tokens));
    if (step == 1) first_gradients = gradient_difference(model, ref, o.device);
    optimizer.step();
    curve.push_back(loss.item());
    recent += curve.back();
    ++recent_n;
    const bool end = step == o.steps;
    if (end || step % o.log_every == 0) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      examples::progress(step, o.steps, static_cast<double>(step * o.batch * o.context) / std::max(s, 1e-9),
               recent / static_cast<double>(recent_n), end);
      recent = 0;
      recent_n = 0;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.save.empty()) examples::save_training(o.save, model, optimizer, o.steps);
  if (rank() != 0 || curve.empty()) return;
  std::printf("trained %lld steps in %.1f s; last loss %.4f (unigram entropy %.3f)\n", static_cast<long long>(o.steps),
              seconds, curve.back(), corpus.unigram_entropy());
  // float32 sums in another order (micro-batches, other layouts): equal to about 1e-7.
  const double loss_diff = std::abs(static_cast<double>(curve[0]) - ref.loss) / std::abs(static_cast<double>(ref.loss));
  const bool noisy = o.dropout > 0;
  std::printf("first step, pipelined vs unpipelined (data parallel on all ranks):\n"
              "  loss %.7f vs %.7f, relative difference %.1e %s\n"
              "  gradients: largest difference %.1e of the largest gradient %s\n",
              curve[0], ref.loss, loss_diff,
              noisy ? "(dropout: masks differ)" : loss_diff <= 1e-6 ? "(ok)" : "(NOT EQUAL)", first_gradients,
              noisy ? "(dropout: masks differ)" : first_gradients <= 1e-5 ? "(ok)" : "(NOT EQUAL)");
  if (!o.save.empty())
    std::printf("saved the training state after step %lld to %s\n", static_cast<long long>(o.steps), o.save.c_str());
  if (!o.csv.empty()) {
    std::ofstream csv(o.csv);
    csv << "step,loss\n" << std::setprecision(9);
    for (size_t i = 0; i < curve.size(); ++i) csv << i + 1 << "," << curve[i] << "\n";
    std::printf("loss curve: %s\n", o.csv.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  // One corpus for all simulated ranks (they share the process); under MPI each rank reads it.
  const examples::Corpus corpus = examples::have_fortunes(o.text) ? examples::read_fortunes(o.text, o.text_limit)
                                                                  : examples::generated_corpus(o.text_limit > 0 ? o.text_limit : 200000, 7);
  if (o.simulate > 0) {
    simulate(static_cast<int>(o.simulate), [&] { train(o, corpus); });
  } else {
    Runtime runtime(argc, argv);
    train(o, corpus);
  }
  return 0;
}
