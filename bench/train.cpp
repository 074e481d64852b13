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
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <spsd/spsd.hpp>
#include <string>

#include "train/fashion_mnist.hpp"
#include "train/mlp.hpp"

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

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  int64_t hidden = 1024, batch = 128, steps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int64_t v = std::stoll(argv[i + 1]);
    if (a == "--hidden") hidden = v;
    else if (a == "--batch") batch = v;
    else if (a == "--steps") steps = v;
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
    const examples::MlpLayouts l = examples::mlp_layouts(mode, n);
    examples::Mlp<float> model(examples::kPixels, hidden, examples::kClasses, l, 1);
    Adam<float> adam(model.parameters(), {});
    const GlobalTensor<float> x = examples::image_batch<float>(data, rows, l.placement, l.x);
    const GlobalTensor<int64_t> y = examples::label_batch(data, rows, l.placement, l.labels);
    std::vector<double> times;
    int64_t bytes = 0;
    for (int64_t s = 0; s < steps + 3; ++s) {
      world_communicator().barrier();
      reset_comm_stats();
      const auto t0 = std::chrono::steady_clock::now();
      adam.zero_grad();
      backward(cross_entropy(model(x), y));
      adam.step();
      synchronize();
      const double t = max_over_ranks(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      bytes = max_over_ranks(comm_stats().bytes_sent);
      if (s >= 3) times.push_back(t);
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    const double median = times[times.size() / 2], minimum = minimum_bytes(mode, n, hidden, batch);
    if (rank() == 0)
      std::printf("| %s | %.2f | %.0f | %lld | %.0f | %s |\n", mode.c_str(), median * 1e3, batch / median,
                  static_cast<long long>(bytes), minimum,
                  minimum > 0 ? (std::to_string(bytes / minimum).substr(0, 4)).c_str() : "-");
  }
  return 0;
}
