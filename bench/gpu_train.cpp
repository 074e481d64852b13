// bench/gpu_train: one training step of an MLP on a GPU, spsd against PyTorch eager on the same
// GPU (bench/gpu_train_torch.py with the same flags, run in the same device call by
// tools/gpu-check), Adam:
//   - the MLPs 784 -> 4096 -> 4096 -> 10 and 784 -> 4096 x4 -> 10, batch 1024;
//   - float32 (exact: MatmulPrecision::kHighest), float32 with --tf32 (kHigh: TF32 tensor cores;
//     torch: allow_tf32), or --dtype bfloat16: mixed precision as a user writes it (docs/cuda.md):
//     float32 master parameters and Adam state; the forward casts the input, weights and biases
//     to bfloat16 with spsd::cast, runs matmul, add and relu there and casts the logits back to
//     float32 for cross-entropy (as torch.autocast(bfloat16) does); gradients flow back through
//     the casts into the float32 masters;
//   - per phase (forward with the loss, backward, optimizer step), each phase ended by a
//     synchronize; and the whole step without intermediate waits (the figure to compare);
//   - the device traffic of one steady step (device_traffic(): it should be the loss read alone);
//   - under mpirun -np N (ranks sharing the GPU: host-staged collectives), the data-parallel
//     step, with the share of communication hidden behind backward (comm_stream_stats:
//     1 - wait / busy).
//   tools/mpirun -np 1 build-gpu/bench/gpu_train [--quick | --small] [--tf32 | --dtype bfloat16]
// --small: a 32 -> 64 -> 10 MLP, batch 64, 2 steps: the training step tools/gpu-check runs under
// compute-sanitizer (memcheck, racecheck, synccheck).
// --gpt: instead of the MLPs, the character GPT of examples/08_gpt (train/gpt.hpp): 4 blocks of
// dim 512, 8 heads, context 256, vocabulary 96, batch 32, causal attention, layer norm, exact
// gelu, untied head, Adam; float32 or --dtype bfloat16 (forward in bfloat16 on float32
// masters). bench/gpu_train_torch.py --gpt runs the same model in PyTorch eager (nn.Linear,
// nn.LayerNorm, F.scaled_dot_product_attention) with the same flags. With --small: 1 block of
// dim 64, context 32, batch 4, for compute-sanitizer.
// Medians over steps after warm-up, host clock around a synchronize. Exits 77 without a GPU (and
// for --dtype bfloat16 in a build without spsd::cast).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "spsd/spsd.hpp"
#include "train/gpt.hpp"


namespace {

using namespace spsd;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

struct Mlp {
  std::vector<GlobalTensor<float>> weights, biases;
  Mlp(const std::vector<int64_t>& sizes, const Placement& p, const NdSbp& b) {
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      weights.push_back(randn<float>({sizes[i], sizes[i + 1]}, p, b, 10 + i) *
                        static_cast<float>(std::sqrt(2.0 / static_cast<double>(sizes[i]))));
      biases.push_back(zeros<float>({sizes[i + 1]}, p, b));
      weights.back().requires_grad_();
      biases.back().requires_grad_();
    }
  }
  std::vector<GlobalTensor<float>> parameters() const {
    std::vector<GlobalTensor<float>> all = weights;
    all.insert(all.end(), biases.begin(), biases.end());
    return all;
  }
  // The float32 logits, computed in C (float, or bfloat16 through casts of every operand).
  template <class C>
  GlobalTensor<float> logits(const GlobalTensor<float>& input) const {
    if constexpr (std::is_same_v<C, float>) {
      GlobalTensor<float> x = input;
      for (size_t i = 0; i < weights.size(); ++i) {
        x = matmul(x, weights[i]) + biases[i];
        if (i + 1 < weights.size()) x = relu(x);
      }
      return x;
    } else {
      GlobalTensor<C> x = cast<C>(input);
      for (size_t i = 0; i < weights.size(); ++i) {
        x = matmul(x, cast<C>(weights[i])) + cast<C>(biases[i]);
        if (i + 1 < weights.size()) x = relu(x);
      }
      return cast<float>(x);
    }
  }
};

struct StepTimes {
  double step, forward, backward, optimizer, hidden = -1;
  DeviceTraffic traffic;
};

// The whole step (forward, zero_grad, backward, Adam, the loss read) after 3 warm-ups, its
// device traffic, and each phase ended by a synchronize; medians over `steps`.
template <class Forward>
StepTimes time_phases(Forward&& forward, Adam<float>& adam, int steps) {
  auto step = [&] {
    GlobalTensor<float> loss = forward();
    adam.zero_grad();
    backward(loss);
    adam.step();
    return loss.item();
  };
  for (int k = 0; k < 3; ++k) step();
  synchronize();
  std::vector<double> whole, fwd, bwd, opt, hidden;
  for (int k = 0; k < steps; ++k) {
    reset_comm_stream_stats();
    Clock::time_point t = Clock::now();
    step();
    whole.push_back(ms_since(t));
    const CommStreamStats c = comm_stream_stats();
    if (c.busy_s > 0) hidden.push_back(std::max(0.0, 1 - c.wait_s / c.busy_s));
  }
  reset_device_traffic();
  step();
  StepTimes out{median(whole), 0, 0, 0};
  out.traffic = device_traffic();
  for (int k = 0; k < steps; ++k) {
    Clock::time_point t = Clock::now();
    GlobalTensor<float> loss = forward();
    synchronize();
    fwd.push_back(ms_since(t));
    t = Clock::now();
    adam.zero_grad();
    backward(loss);
    synchronize();
    bwd.push_back(ms_since(t));
    t = Clock::now();
    adam.step();
    synchronize();
    opt.push_back(ms_since(t));
  }
  out.forward = median(fwd), out.backward = median(bwd), out.optimizer = median(opt);
  if (!hidden.empty()) out.hidden = median(hidden);
  return out;
}

template <class C>
StepTimes time_steps(const std::vector<int64_t>& sizes, int64_t batch, int steps) {
  const int world = world_size();
  std::vector<int64_t> ranks(world);
  for (int r = 0; r < world; ++r) ranks[r] = r;
  const Placement p("cuda", ranks);
  const NdSbp b{sbp::broadcast}, s0{sbp::split(0)};
  Mlp model(sizes, p, b);
  Adam<float> adam(model.parameters(), AdamOptions{});
  const GlobalTensor<float> x = randn<float>({batch, sizes.front()}, p, s0, 1);
  std::vector<int64_t> label_values(batch);
  for (int64_t i = 0; i < batch; ++i) label_values[i] = (i * 7) % sizes.back();
  const GlobalTensor<int64_t> labels = from_host(Tensor<int64_t>::from_vector({batch}, label_values), p, s0);
  return time_phases([&] { return cross_entropy(model.logits<C>(x), labels); }, adam, steps);
}

// The GPT step (--gpt): whole step and per phase, like time_steps.
template <class C>
StepTimes time_gpt_steps(const examples::GptConfig& c, int64_t batch, int steps) {
  const nn::Plan plan = examples::gpt_plan("data");
  const Placement placement = examples::gpt_placement("data", world_size(), "cuda");
  examples::Gpt<float> model(c, {placement, 1000});
  nn::parallelize(model, plan);
  Adam<float> adam(model.parameters(), AdamOptions{});
  std::vector<int64_t> tokens(batch * c.context), next(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 31 + 7) % c.vocab);
  for (size_t i = 0; i < tokens.size(); ++i) next[i] = static_cast<int64_t>((i * 17 + 3) % c.vocab);
  const auto x = from_host(Tensor<int64_t>::from_vector({batch, c.context}, tokens), placement, nn::input_layout(plan));
  const auto y = from_host(Tensor<int64_t>::from_vector({batch, c.context}, next), placement, nn::input_layout(plan));
  return time_phases([&] { return cross_entropy(cast<float>(model.template forward<C>(x)), y); }, adam, steps);
}

std::string describe(const std::vector<int64_t>& sizes) {
  std::string s;
  for (int64_t v : sizes) s += (s.empty() ? "" : " -> ") + std::to_string(v);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  std::string mode, dtype = "float32";
  bool tf32 = false, gpt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick" || a == "--small") mode = a;
    else if (a == "--gpt") gpt = true;
    else if (a == "--tf32") tf32 = true;
    else if (a == "--dtype" && i + 1 < argc) dtype = argv[++i];
    else detail::throw_error("gpu_train", "unknown argument ", a);
  }
  SPSD_CHECK(dtype == "float32" || dtype == "bfloat16", "gpu_train", "--dtype must be float32 or bfloat16, got ", dtype);
  SPSD_CHECK(!(tf32 && dtype != "float32"), "gpu_train", "--tf32 applies to --dtype float32 only");
  if (!cuda_available()) {
    std::printf("SKIP: no usable CUDA device (%s)\n", runtime_info().c_str());
    return 77;
  }
  if (tf32) set_matmul_precision(MatmulPrecision::kHigh);
  const int steps = mode == "--small" ? 2 : mode == "--quick" ? 3 : 10;
  const int64_t batch = mode == "--small" ? 64 : 1024;
  const std::string precision = dtype == "bfloat16" ? "bfloat16 compute, float32 masters"
                                : tf32              ? "float32, TF32 matmuls"
                                                    : "float32, TF32 off";
  if (rank() == 0) {
    std::printf("bench/gpu_train, %d rank(s) on %s; %s, Adam\n", world_size(), runtime_info().c_str(),
                precision.c_str());
    std::printf("| spsd, %d rank(s), %s | batch | step ms | forward ms | backward ms | optimizer ms | hidden comm | "
                "host<->device per step |\n|---|---|---|---|---|---|---|---|\n",
                world_size(), precision.c_str());
  }
  if (gpt) {
    const bool small = mode == "--small";
    const examples::GptConfig c{96, small ? 32 : 256, small ? 64 : 512, 8, small ? 1 : 4};
    const int64_t gpt_batch = small ? 4 : 32;
    const StepTimes t = dtype == "bfloat16" ? time_gpt_steps<spsd::bfloat16>(c, gpt_batch, steps)
                                            : time_gpt_steps<float>(c, gpt_batch, steps);
    if (rank() == 0)
      std::printf("| GPT %lld blocks, dim %lld, context %lld | %lld | %.2f | %.2f | %.2f | %.2f | - | %lld copies, %lld B, "
                  "%lld syncs |\n",
                  static_cast<long long>(c.layers), static_cast<long long>(c.dim), static_cast<long long>(c.context),
                  static_cast<long long>(gpt_batch), t.step, t.forward, t.backward, t.optimizer,
                  static_cast<long long>(t.traffic.total.host_to_device_copies + t.traffic.total.device_to_host_copies),
                  static_cast<long long>(t.traffic.total.host_to_device_bytes + t.traffic.total.device_to_host_bytes),
                  static_cast<long long>(t.traffic.total.synchronizations));
    return 0;
  }
  const std::vector<std::vector<int64_t>> models =
      mode == "--small" ? std::vector<std::vector<int64_t>>{{32, 64, 10}}
                        : std::vector<std::vector<int64_t>>{{784, 4096, 4096, 10}, {784, 4096, 4096, 4096, 4096, 10}};
  for (const auto& sizes : models) {
    const StepTimes t = dtype == "bfloat16" ? time_steps<spsd::bfloat16>(sizes, batch, steps)
                                            : time_steps<float>(sizes, batch, steps);
    if (rank() == 0)
      std::printf("| MLP %s | %lld | %.2f | %.2f | %.2f | %.2f | %s | %lld copies, %lld B, %lld syncs |\n",
                  describe(sizes).c_str(), static_cast<long long>(batch), t.step, t.forward, t.backward, t.optimizer,
                  t.hidden < 0 ? "-" : (std::to_string(static_cast<int>(100 * t.hidden)) + "%").c_str(),
                  static_cast<long long>(t.traffic.total.host_to_device_copies + t.traffic.total.device_to_host_copies),
                  static_cast<long long>(t.traffic.total.host_to_device_bytes + t.traffic.total.device_to_host_bytes),
                  static_cast<long long>(t.traffic.total.synchronizations));
  }
  return 0;
}
