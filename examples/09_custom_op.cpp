// 09_custom_op: a model trained with a user-defined global op, bias_gelu (custom/bias_gelu.hpp,
// defined outside the library: docs/custom_ops.md). A 16 -> 64 -> 1 MLP learns a fixed random
// teacher by mean squared error, with Adam:
//   h = bias_gelu(x W1, b1),  y = h W2,  loss = mean((y - t)^2)
// --parallel data     x and t S(0), the parameters B: bias_gelu runs on its (S(0), B) rule
// --parallel tensor   Megatron: W1 S(1) and b1 S(0), so x W1 is S(1) and bias_gelu runs on its
//                     (S(1), S(0)) rule with no communication; W2 S(0) makes y P(sum)
// Options: --steps N (60), --lr X (1e-2), --batch N (256). The values are the same in any
// layout (randn draws by global index), so every mode and world size prints the same losses,
// up to float rounding.
//   tools/mpirun -np 4 build/examples/09_custom_op --parallel tensor
#include <cstdio>
#include <numeric>
#include <spsd/spsd.hpp>
#include <string>

#include "custom/bias_gelu.hpp"

using namespace spsd;

namespace {

struct Options {
  std::string parallel = "tensor";
  int64_t steps = 60, batch = 256;
  double lr = 1e-2;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    SPSD_CHECK(i + 1 < argc, "09_custom_op", "option ", a, " needs a value");
    const std::string v = argv[++i];
    if (a == "--parallel") o.parallel = v;
    else if (a == "--steps") o.steps = std::stoll(v);
    else if (a == "--batch") o.batch = std::stoll(v);
    else if (a == "--lr") o.lr = std::stod(v);
    else SPSD_CHECK(false, "09_custom_op", "unknown option ", a);
  }
  SPSD_CHECK(o.parallel == "data" || o.parallel == "tensor", "09_custom_op", "--parallel must be data or tensor, got ",
             o.parallel);
  return o;
}

constexpr int64_t kIn = 16, kHidden = 64;

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  const Options o = parse(argc, argv);
  std::vector<int64_t> ranks(world_size());
  std::iota(ranks.begin(), ranks.end(), 0);
  const Placement p("cpu", ranks);
  const bool tp = o.parallel == "tensor";
  const NdSbp B(sbp::broadcast), rows(sbp::split(0)), cols(sbp::split(1));
  const NdSbp data = tp ? B : rows;

  // The parameters (leaves: made from no tensor that requires grad) and a fixed teacher.
  GlobalTensor<float> w1 = randn<float>(Shape{kIn, kHidden}, p, tp ? cols : B, 1) * 0.25f;
  GlobalTensor<float> b1 = zeros<float>(Shape{kHidden}, p, tp ? rows : B);
  GlobalTensor<float> w2 = randn<float>(Shape{kHidden, 1}, p, tp ? rows : B, 2) * 0.125f;
  const GlobalTensor<float> x = randn<float>(Shape{o.batch, kIn}, p, data, 3);
  const GlobalTensor<float> t = tanh(matmul(x, randn<float>(Shape{kIn, 1}, p, B, 4)));
  for (GlobalTensor<float>* param : {&w1, &b1, &w2}) param->requires_grad_();
  Adam<float> optimizer({w1, b1, w2}, {.lr = o.lr});

  if (rank() == 0)
    std::printf("09_custom_op: --parallel %s on %s; W1 %s, b1 %s, W2 %s\n", o.parallel.c_str(),
                p.to_string().c_str(), w1.nd_sbp().to_string().c_str(), b1.nd_sbp().to_string().c_str(),
                w2.nd_sbp().to_string().c_str());
  float first = 0, last = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    const GlobalTensor<float> h = examples::bias_gelu(matmul(x, w1), b1);
    const GlobalTensor<float> d = matmul(h, w2) - t;
    const GlobalTensor<float> loss = mean(d * d);
    optimizer.zero_grad();
    backward(loss);  // bias_gelu's backward (global ops) runs here like any library op's
    optimizer.step();
    last = loss.full().to_vector()[0];
    if (step == 0) first = last;
    if (rank() == 0 && (step % 10 == 0 || step + 1 == o.steps))
      std::printf("step %3lld  loss %.6f\n", static_cast<long long>(step), last);
  }
  if (rank() == 0) std::printf("loss %.6f -> %.6f after %lld steps\n", first, last, static_cast<long long>(o.steps));
  SPSD_CHECK(last < first, "09_custom_op", "the loss did not go down: ", first, " -> ", last);
  return 0;
}
