// bench/gpu_train: one training step of an MLP on a GPU, spsd against PyTorch eager on the same
// GPU (bench/gpu_train_torch.py, run in the same device call by tools/gpu-check), float32, TF32
// off on both sides, Adam:
//   - the MLP 784 -> 4096 -> 4096 -> 10, batch 1024, and a 4-layer MLP (784 -> 2048 x3 -> 10);
//   - per phase (forward with the loss, backward, optimizer step), each phase ended by a
//     synchronize; and the whole step without intermediate waits (the figure to compare);
//   - the device traffic of one steady step (device_traffic(): it should be the loss read alone);
//   - under mpirun -np N (ranks sharing the GPU: host-staged collectives), the data-parallel
//     step, with the share of communication hidden behind backward (comm_stream_stats:
//     1 - wait / busy).
//   tools/mpirun -np 1 build-gpu/bench/gpu_train [--quick | --small]
// --small: a 32 -> 64 -> 10 MLP, batch 64, 2 steps: the training step tools/gpu-check runs under
// compute-sanitizer (memcheck, racecheck, synccheck).
// Medians over steps after warm-up, host clock around a synchronize. Exits 77 without a GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "spsd/spsd.hpp"

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
  GlobalTensor<float> operator()(GlobalTensor<float> x) const {
    for (size_t i = 0; i < weights.size(); ++i) {
      x = matmul(x, weights[i]) + biases[i];
      if (i + 1 < weights.size()) x = relu(x);
    }
    return x;
  }
};

struct StepTimes {
  double step, forward, backward, optimizer, hidden = -1;
  DeviceTraffic traffic;
};

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
  auto forward = [&] { return cross_entropy(model(x), labels); };
  auto step = [&] {
    GlobalTensor<float> loss = forward();
    adam.zero_grad();
    backward(loss);
    adam.step();
    return loss.full().to_vector()[0];
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

std::string describe(const std::vector<int64_t>& sizes) {
  std::string s;
  for (int64_t v : sizes) s += (s.empty() ? "" : " -> ") + std::to_string(v);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  SPSD_CHECK(mode.empty() || mode == "--quick" || mode == "--small", "gpu_train", "unknown argument ", mode);
  if (!cuda_available()) {
    std::printf("SKIP: no usable CUDA device (%s)\n", runtime_info().c_str());
    return 77;
  }
  const int steps = mode == "--small" ? 2 : mode == "--quick" ? 3 : 10;
  const int64_t batch = mode == "--small" ? 64 : 1024;
  if (rank() == 0) {
    std::printf("bench/gpu_train, %d rank(s) on %s; float32, TF32 %s, Adam\n", world_size(), runtime_info().c_str(),
                std::getenv("SPSD_ALLOW_TF32") ? "as SPSD_ALLOW_TF32 says" : "off");
    std::printf("| spsd, %d rank(s) | batch | step ms | forward ms | backward ms | optimizer ms | hidden comm | "
                "host<->device per step |\n|---|---|---|---|---|---|---|---|\n",
                world_size());
  }
  const std::vector<std::vector<int64_t>> models =
      mode == "--small" ? std::vector<std::vector<int64_t>>{{32, 64, 10}}
                        : std::vector<std::vector<int64_t>>{{784, 4096, 4096, 10}, {784, 2048, 2048, 2048, 10}};
  for (const auto& sizes : models) {
    const StepTimes t = time_steps(sizes, batch, steps);
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
