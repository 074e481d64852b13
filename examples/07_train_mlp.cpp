// 07_train_mlp: a 784 -> hidden -> 10 MLP trained on Fashion-MNIST with Adam, data-, tensor- or
// 2-d-parallel. The model (train/mlp.hpp, two nn::Linear) and the training loop are written as
// for one device; --parallel picks a plan (examples::mlp_plan), which nn::parallelize applies:
//   --parallel data     x S(0), weights B: gradients come out P(sum), the optimizer's boxing to B
//                       is the all-reduce of data parallelism
//   --parallel tensor   Megatron: fc1.weight S(1), fc2.weight S(0); the P(sum) logits are reduced once
//   --parallel 2d       (world/2, 2) mesh: data parallel on mesh axis 0, tensor on axis 1
// --device cuda|cpu: where the placement is (default: cuda when a GPU is usable, else cpu; the
// choice is printed at start). Several ranks on one GPU share it (host-staged collectives).
// --dtype float32|bfloat16|float16: the compute type. The parameters stay float32 (masters);
// the forward pass runs in the 16-bit type (each layer casts its weights on use) and the loss
// in float32, so gradients flow back through the casts into float32 and Adam steps the masters.
// float16 adds a GradScaler (loss scaling; a step with inf/NaN gradients is skipped).
// Options: --epochs N (3), --batch N (100), --hidden N (1024), --lr X (1e-3), --seed N (1),
// --train-limit N (all), --test-limit N (all), --csv FILE (loss per step), --compile 0|1 (1: the
// step captured once and replayed, docs/compile.md), --data DIR,
// --steps N (stop after N steps in all), --save DIR (checkpoint at the end: parameters, Adam's
// state, the step), --resume DIR (continue from such a checkpoint, on any number of ranks and
// with any --parallel: the loss curve of a run that never stopped, bit for bit on the same ranks
// and mode, up to rounding on others; docs/checkpoints.md).
// Without the dataset-fashion-mnist package it trains on a small generated stand-in.
//   tools/mpirun -np 4 build/examples/07_train_mlp --parallel 2d
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <random>
#include <spsd/spsd.hpp>
#include <string>

#include "train/checkpoint.hpp"
#include "train/fashion_mnist.hpp"
#include "train/mlp.hpp"
#include "train/options.hpp"

using namespace spsd;
using examples::Dataset;

namespace {

struct Options {
  std::string parallel = "2d", csv, data = examples::kFashionMnistDir, save, resume, device, dtype = "float32";
  int64_t epochs = 3, batch = 100, hidden = 1024, train_limit = -1, test_limit = -1, max_steps = -1;
  uint64_t seed = 1;
  double lr = 1e-3;
  bool compile = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    SPSD_CHECK(i + 1 < argc, "07_train_mlp", "option ", a, " needs a value");
    const std::string v = argv[++i];
    if (a == "--parallel") o.parallel = v;
    else if (a == "--csv") o.csv = v;
    else if (a == "--device") o.device = v;
    else if (a == "--dtype") o.dtype = v;
    else if (a == "--data") o.data = v;
    else if (a == "--save") o.save = v;
    else if (a == "--resume") o.resume = v;
    else if (a == "--steps") o.max_steps = std::stoll(v);
    else if (a == "--epochs") o.epochs = std::stoll(v);
    else if (a == "--batch") o.batch = std::stoll(v);
    else if (a == "--hidden") o.hidden = std::stoll(v);
    else if (a == "--train-limit") o.train_limit = std::stoll(v);
    else if (a == "--test-limit") o.test_limit = std::stoll(v);
    else if (a == "--seed") o.seed = std::stoull(v);
    else if (a == "--lr") o.lr = std::stod(v);
    else if (a == "--compile") o.compile = v != "0";
    else SPSD_CHECK(false, "07_train_mlp", "unknown option ", a);
  }
  o.device = examples::checked_device("07_train_mlp", o.device);
  examples::check_dtype("07_train_mlp", o.dtype);
  SPSD_CHECK(!o.compile || o.dtype != "float16", "07_train_mlp", "--compile 1 takes float32 or bfloat16 (float16's "
             "loss scale changes between steps; docs/compile.md)");
  return o;
}

// The model's logits for a batch, computed in --dtype (16-bit: mixed precision), as float32.
// batch: the input layout of the plan.
GlobalTensor<float> logits(const std::string& dtype, const examples::Mlp<float>& model, const Dataset& d,
                           const std::vector<int64_t>& rows, const NdSbp& batch) {
  return examples::with_compute_type(dtype, [&]<FloatingElement C>() {
    return cast<float>(model(examples::image_batch<C>(d, rows, model.fc1.weight.placement(), batch)));
  });
}

// done: the epoch's samples so far; rate: those this run trained on (fewer in a resumed epoch).
void progress(int64_t epoch, int64_t done, int64_t total, int64_t rate, double seconds, double loss, bool last) {
  if (rank() != 0) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total, 1));
  std::printf("\repoch %lld [%s%s] %lld/%lld  %.0f samples/s  loss %.4f", static_cast<long long>(epoch),
              std::string(filled, '=').c_str(), std::string(kWidth - filled, ' ').c_str(), static_cast<long long>(done),
              static_cast<long long>(total), rate / std::max(seconds, 1e-9), loss);
  std::printf(last ? "\n" : "");
  std::fflush(stdout);
}

// Share of test samples whose largest logit is the label (forward only, no graph recorded).
double accuracy(const examples::Mlp<float>& model, const Dataset& test, const NdSbp& batch, const std::string& dtype) {
  NoGradGuard no_grad;
  int64_t correct = 0;
  for (int64_t start = 0; start < test.size(); start += 1000) {
    std::vector<int64_t> rows(std::min<int64_t>(1000, test.size() - start));
    std::iota(rows.begin(), rows.end(), start);
    const std::vector<float> values = logits(dtype, model, test, rows, batch).full().to_vector();
    for (size_t i = 0; i < rows.size(); ++i) {
      const float* row = values.data() + i * examples::kClasses;
      correct += std::max_element(row, row + examples::kClasses) - row == test.labels[rows[i]];
    }
  }
  return static_cast<double>(correct) / static_cast<double>(test.size());
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const Options o = parse(argc, argv);
  const bool real = examples::have_fashion_mnist(o.data);
  const Dataset train = real ? examples::read_idx(o.data, "train", o.train_limit)
                             : examples::generated_dataset(o.train_limit > 0 ? o.train_limit : 6000, 7);
  const Dataset test = real ? examples::read_idx(o.data, "t10k", o.test_limit)
                            : examples::generated_dataset(o.test_limit > 0 ? o.test_limit : 1000, 8);
  const nn::Plan plan = examples::mlp_plan(o.parallel);
  const NdSbp batch = nn::input_layout(plan);
  const Placement placement = examples::mlp_placement(o.parallel, world_size(), o.device);
  examples::Mlp<float> model({placement, o.seed}, examples::kPixels, o.hidden, examples::kClasses);
  nn::parallelize(model, plan);
  if (rank() == 0) {
    std::printf("%s: %lld train / %lld test samples; --device %s --dtype %s --parallel %s on %s\n  x %s",
                real ? "Fashion-MNIST" : "generated stand-in (dataset-fashion-mnist is not installed)",
                static_cast<long long>(train.size()), static_cast<long long>(test.size()), o.device.c_str(),
                o.dtype.c_str(), o.parallel.c_str(), placement.to_string().c_str(), batch.to_string().c_str());
    for (const auto& [name, p] : model.named_parameters()) std::printf(", %s %s", name.c_str(), p.nd_sbp().to_string().c_str());
    std::printf("\n");
  }
  Adam<float> optimizer(model.named_parameters(), {.lr = o.lr});
  GradScaler scaler;  // float16 only
  int64_t skipped = 0;
  const int64_t first = o.resume.empty() ? 0 : examples::resume_training(o.resume, model, optimizer);
  if (rank() == 0 && !o.resume.empty())
    std::printf("resumed from %s after step %lld\n", o.resume.c_str(), static_cast<long long>(first));
  std::vector<float> curve;
  std::mt19937_64 shuffle(o.seed);  // the same permutation on every rank
  std::vector<int64_t> order(train.size());
  std::iota(order.begin(), order.end(), 0);
  const int64_t steps = train.size() / o.batch;  // full batches only: one shape, cached plans
  const int64_t last = o.max_steps >= 0 ? std::min(o.epochs * steps, o.max_steps) : o.epochs * steps;
  // --compile 1: the step captured once and replayed (docs/compile.md); the images come in as an
  // argument (float32, cast to --dtype inside), as everything a replay must read anew.
  auto compiled_step = spsd::compile([&](const GlobalTensor<float>& images, const GlobalTensor<int64_t>& labels) {
    const GlobalTensor<float> loss = cross_entropy(examples::with_compute_type(o.dtype, [&]<FloatingElement C>() {
      return cast<float>(model(cast<C>(images)));
    }), labels);
    optimizer.zero_grad();
    backward(loss);
    optimizer.step();
    return loss;
  });
  const auto start = std::chrono::steady_clock::now();
  for (int64_t epoch = 1; epoch <= o.epochs && first + static_cast<int64_t>(curve.size()) < last; ++epoch) {
    std::shuffle(order.begin(), order.end(), shuffle);  // replayed for resumed epochs: the same batches
    const auto epoch_start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t taken = 0;
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t step = (epoch - 1) * steps + s;
      if (step < first) continue;
      if (step >= last) break;
      const std::vector<int64_t> rows(order.begin() + s * o.batch, order.begin() + (s + 1) * o.batch);
      const GlobalTensor<int64_t> labels = examples::label_batch(train, rows, placement, batch);
      GlobalTensor<float> loss;
      if (o.compile) {
        loss = compiled_step(examples::image_batch<float>(train, rows, placement, batch), labels);
      } else {
        loss = cross_entropy(logits(o.dtype, model, train, rows, batch), labels);
        optimizer.zero_grad();
        if (o.dtype == "float16") {
          backward(scaler.scale(loss));
          skipped += !scaler.step(optimizer);
          scaler.update();
        } else {
          backward(loss);
          optimizer.step();
        }
      }
      curve.push_back(loss.full().to_vector()[0]);
      loss_sum += curve.back();
      ++taken;
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
      const bool end = s + 1 == steps || step + 1 == last;
      if (end || s % 20 == 0) progress(epoch, (s + 1) * o.batch, steps * o.batch, taken * o.batch, t, loss_sum / taken, end);
    }
  }
  if (!o.save.empty()) {
    examples::save_training(o.save, model, optimizer, first + static_cast<int64_t>(curve.size()));
    if (rank() == 0) std::printf("saved the training state after step %lld to %s\n",
                                 static_cast<long long>(first + curve.size()), o.save.c_str());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double acc = accuracy(model, test, batch, o.dtype);
  if (rank() == 0) {
    std::printf("trained %lld steps in %.1f s; test accuracy %.4f\n", static_cast<long long>(curve.size()), seconds, acc);
    if (o.dtype == "float16")
      std::printf("loss scale %g; %lld steps skipped for inf/NaN gradients\n", scaler.scale_value(),
                  static_cast<long long>(skipped));
    if (!o.csv.empty()) {
      std::ofstream csv(o.csv);
      csv << "step,loss\n" << std::setprecision(9);  // enough digits to tell any two floats apart
      for (size_t i = 0; i < curve.size(); ++i) csv << first + static_cast<int64_t>(i) + 1 << "," << curve[i] << "\n";
      std::printf("loss curve: %s\n", o.csv.c_str());
    }
  }
  return 0;
}
