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
//   tools/mpirun -np 1 build-gpu/bench/gpu_train [--quick | --small] [--tf32 | --dtype bfloat16] [--gpt [--compile]]
// --small: a 32 -> 64 -> 10 MLP, batch 64, 2 steps: the training step tools/gpu-check runs under
// compute-sanitizer (memcheck, racecheck, synccheck).
// --gpt: instead of the MLPs, the character GPT of examples/08_gpt (train/gpt.hpp): 4 blocks of
// dim 512, 8 heads, context 256, vocabulary 96, batch 32, causal attention, layer norm, exact
// gelu, untied head, Adam; float32 or --dtype bfloat16 (forward in bfloat16 on float32
// masters). bench/gpu_train_torch.py --gpt runs the same model in PyTorch eager (nn.Linear,
// nn.LayerNorm, F.scaled_dot_product_attention) with the same flags. With --small: 1 block of
// dim 64, context 32, batch 4, for compute-sanitizer.
// --gpt --compile: issue 41's host-bound GPT (2 blocks, dim 128, context 64, batch 32) eager, through
// spsd::compile op by op and as CUDA graphs (bench/gpu_train_torch.py --gpt --compile: eager and
// torch.compile(mode="reduce-overhead")).
// --profile: instead of the timings, the device time of each op kind in one step after 3 warm-ups
// (any model and dtype above): the trace (SPSD_TRACE, docs/trace.md; a temporary file unless
// SPSD_TRACE is set) times each op's work on the cuda compute stream with CUDA events (lane 2);
// rank 0's spans of that step, grouped by op and phase (forward, backward, Adam.step), become a
// table: calls, total ms, share of the device time in ops, mean us (bench/trace_reader.hpp).
// bench/gpu_train_torch.py --profile prints torch.profiler's table for the same step.
// Medians over steps after warm-up, host clock around a synchronize. Exits 77 without a GPU (and
// for --dtype bfloat16 in a build without spsd::cast).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "spsd/spsd.hpp"
#include "trace_reader.hpp"
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

struct Options {
  int steps = 10;
  bool profile = false;
};

// One training step: forward with the loss, zero_grad, backward, Adam, the loss read.
template <class Forward>
float train_step(Forward& forward, Adam<float>& adam) {
  GlobalTensor<float> loss = forward();
  adam.zero_grad();
  backward(loss);
  adam.step();
  return loss.item();
}

// --profile: one step after 3 warm-ups, its ops' device time (trace lane 2) printed by rank 0.
template <class Forward>
void profile_step(Forward& forward, Adam<float>& adam, const std::string& model) {
  for (int k = 0; k < 3; ++k) train_step(forward, adam);
  synchronize();
  const double from = spsd_bench::trace_now_us();
  const Clock::time_point t = Clock::now();
  train_step(forward, adam);  // the loss read waits for the device
  const double step_ms = ms_since(t), to = spsd_bench::trace_now_us();
  flush_trace();
  if (rank() != 0) return;
  const std::vector<spsd_bench::TraceEvent> events = spsd_bench::read_trace_events(trace_file());
  const spsd_bench::OpProfile device = spsd_bench::op_profile(events, 2, from, to);
  const spsd_bench::OpProfile host = spsd_bench::op_profile(events, 0, from, to);
  std::printf("\n%s: one step %.2f ms (host clock, traced); device time in ops %.2f ms over %lld ops, from the "
              "first op's start to the last one's end %.2f ms on the compute stream; the host thread spent %.2f ms "
              "in the same ops (dispatch and launch)\n",
              model.c_str(), step_ms, device.ops_us / 1e3, static_cast<long long>(device.calls),
              (device.last - device.first) / 1e3, host.ops_us / 1e3);
  spsd_bench::print_op_profile(device, ("spsd op (device), " + model).c_str(), 40);
}

// The whole step (forward, zero_grad, backward, Adam, the loss read) after 3 warm-ups, its
// device traffic, and each phase ended by a synchronize; medians over `steps`. With --profile,
// the profile of one step instead (and no times).
template <class Forward>
StepTimes time_phases(Forward&& forward, Adam<float>& adam, const Options& o, const std::string& model) {
  if (o.profile) {
    profile_step(forward, adam, model);
    return {};
  }
  const int steps = o.steps;
  auto step = [&] { return train_step(forward, adam); };
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

std::string describe(const std::vector<int64_t>& sizes) {
  std::string s;
  for (int64_t v : sizes) s += (s.empty() ? "" : " -> ") + std::to_string(v);
  return s;
}

template <class C>
StepTimes time_steps(const std::vector<int64_t>& sizes, int64_t batch, const Options& o) {
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
  return time_phases([&] { return cross_entropy(model.logits<C>(x), labels); }, adam, o, "MLP " + describe(sizes));
}

// The GPT step (--gpt): whole step and per phase, like time_steps.
template <class C>
StepTimes time_gpt_steps(const examples::GptConfig& c, int64_t batch, const Options& o) {
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
  const std::string model_name = "GPT " + std::to_string(c.layers) + " blocks, dim " + std::to_string(c.dim) +
                                 ", context " + std::to_string(c.context) + ", batch " + std::to_string(batch);
  return time_phases([&] { return cross_entropy(cast<float>(model.template forward<C>(x)), y); }, adam, o, model_name);
}

// --gpt --compile: the character GPT of examples/08 as issue 41 sizes it (2 blocks, dim 128,
// 4 heads, context 64, batch 32: host-bound), the whole step with its loss read, eagerly, through
// spsd::compile op by op (cuda_graph off) and as CUDA graphs; medians over steps after 3 calls
// (the graphs are captured at the third); and whether the three gave the same losses, bit for bit.
void time_compiled_gpt(const Options& o) {
  const examples::GptConfig c{96, 64, 128, 4, 2};
  const int64_t batch = 32;
  const nn::Plan plan = examples::gpt_plan("data");
  const Placement placement = examples::gpt_placement("data", world_size(), "cuda");
  std::vector<int64_t> tokens(batch * c.context), next(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 31 + 7) % c.vocab);
  for (size_t i = 0; i < tokens.size(); ++i) next[i] = static_cast<int64_t>((i * 17 + 3) % c.vocab);
  const auto x = from_host(Tensor<int64_t>::from_vector({batch, c.context}, tokens), placement, nn::input_layout(plan));
  const auto y = from_host(Tensor<int64_t>::from_vector({batch, c.context}, next), placement, nn::input_layout(plan));
  struct Row {
    const char* name;
    int how;  // 0 eager, 1 compiled op by op, 2 compiled as CUDA graphs
    double ms = 0;
    std::vector<float> losses;
  } rows[] = {{"eager", 0}, {"spsd::compile, op by op", 1}, {"spsd::compile, CUDA graphs", 2}};
  for (Row& r : rows) {
    examples::Gpt<float> model(c, {placement, 1000});
    nn::parallelize(model, plan);
    Adam<float> adam(model.parameters(), AdamOptions{});
    auto step = [&](const GlobalTensor<int64_t>& in, const GlobalTensor<int64_t>& out) {
      adam.zero_grad();
      GlobalTensor<float> loss = cross_entropy(model.template forward<float>(in), out);
      backward(loss);
      adam.step();
      return loss;
    };
    auto compiled = spsd::compile(step, CompileOptions{.cuda_graph = r.how == 2});
    std::vector<double> times;
    for (int s = 0; s < o.steps + 3; ++s) {
      const auto t = Clock::now();
      r.losses.push_back((r.how == 0 ? step(x, y) : compiled(x, y)).item());
      if (s >= 3) times.push_back(ms_since(t));
    }
    r.ms = median(times);
  }
  if (rank() != 0) return;
  std::printf("| GPT 2 blocks, dim 128, context 64, batch 32 (host-bound) | step ms | eager / this | losses as eager's |\n"
              "|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %.3f | %.2f | %s |\n", r.name, r.ms, rows[0].ms / r.ms,
                r.losses == rows[0].losses ? "bit for bit" : "DIFFER");
}

struct Args {
  std::string mode, dtype = "float32";
  bool tf32 = false, gpt = false, profile = false, compile = false;
};

// trace: set to this rank's trace file.
int run(int argc, char** argv, const Args& args, std::string& trace) {
  Runtime runtime(argc, argv);
  trace = trace_file();
  const std::string& mode = args.mode;
  const std::string& dtype = args.dtype;
  if (!cuda_available()) {
    std::printf("SKIP: no usable CUDA device (%s)\n", runtime_info().c_str());
    return 77;
  }
  if (args.tf32) set_matmul_precision(MatmulPrecision::kHigh);
  Options o;
  o.steps = mode == "--small" ? 2 : mode == "--quick" ? 3 : 10;
  o.profile = args.profile;
  const int64_t batch = mode == "--small" ? 64 : 1024;
  const std::string precision = dtype == "bfloat16" ? "bfloat16 compute, float32 masters"
                                : args.tf32         ? "float32, TF32 matmuls"
                                                    : "float32, TF32 off";
  if (rank() == 0) {
    std::printf("bench/gpu_train%s, %d rank(s) on %s; %s, Adam\n", o.profile ? " --profile" : "", world_size(),
                runtime_info().c_str(), precision.c_str());
    if (!o.profile)
      std::printf("| spsd, %d rank(s), %s | batch | step ms | forward ms | backward ms | optimizer ms | hidden comm | "
                  "host<->device per step |\n|---|---|---|---|---|---|---|---|\n",
                  world_size(), precision.c_str());
  }
  if (args.gpt && args.compile) {
    time_compiled_gpt(o);
    return 0;
  }
  if (args.gpt) {
    const bool small = mode == "--small";
    const examples::GptConfig c{96, small ? 32 : 256, small ? 64 : 512, 8, small ? 1 : 4};
    const int64_t gpt_batch = small ? 4 : 32;
    const StepTimes t = dtype == "bfloat16" ? time_gpt_steps<spsd::bfloat16>(c, gpt_batch, o)
                                            : time_gpt_steps<float>(c, gpt_batch, o);
    if (rank() == 0 && !o.profile)
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
    const StepTimes t = dtype == "bfloat16" ? time_steps<spsd::bfloat16>(sizes, batch, o)
                                            : time_steps<float>(sizes, batch, o);
    if (rank() == 0 && !o.profile)
      std::printf("| MLP %s | %lld | %.2f | %.2f | %.2f | %.2f | %s | %lld copies, %lld B, %lld syncs |\n",
                  describe(sizes).c_str(), static_cast<long long>(batch), t.step, t.forward, t.backward, t.optimizer,
                  t.hidden < 0 ? "-" : (std::to_string(static_cast<int>(100 * t.hidden)) + "%").c_str(),
                  static_cast<long long>(t.traffic.total.host_to_device_copies + t.traffic.total.device_to_host_copies),
                  static_cast<long long>(t.traffic.total.host_to_device_bytes + t.traffic.total.device_to_host_bytes),
                  static_cast<long long>(t.traffic.total.synchronizations));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick" || a == "--small") args.mode = a;
    else if (a == "--gpt") args.gpt = true;
    else if (a == "--compile") args.compile = true;
    else if (a == "--tf32") args.tf32 = true;
    else if (a == "--profile") args.profile = true;
    else if (a == "--dtype" && i + 1 < argc) args.dtype = argv[++i];
    else detail::throw_error("gpu_train", "unknown argument ", a);
  }
  SPSD_CHECK(args.dtype == "float32" || args.dtype == "bfloat16", "gpu_train",
             "--dtype must be float32 or bfloat16, got ", args.dtype);
  SPSD_CHECK(!(args.tf32 && args.dtype != "float32"), "gpu_train", "--tf32 applies to --dtype float32 only");
  // The profile is read from the trace: a temporary one (per rank: trace_file()) unless the
  // caller asked for one, read when the Runtime starts.
  std::string temporary;
  if (args.profile && !std::getenv("SPSD_TRACE")) {
    const std::string name = "spsd-gpu-train-" + std::to_string(getpid()) + ".json";
    temporary = (std::filesystem::temp_directory_path() / name).string();
    setenv("SPSD_TRACE", temporary.c_str(), 1);
  }
  std::string trace;
  const int rc = run(argc, argv, args, trace);  // the Runtime writes the trace once more as it ends
  if (!temporary.empty() && !trace.empty()) std::filesystem::remove(trace);
  return rc;
}
