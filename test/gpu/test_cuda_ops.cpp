// gpu-ops: cuda placements give the results of cpu placements. On this process's ranks (1 rank:
// NCCL; several ranks under mpirun sharing a GPU: host-staged over MPI) and, when run alone, on
// 2 and 4 simulated ranks (host-staged, threads sharing the GPU):
//   - the op differential suite (test/common/op_suite.cpp) on a cuda placement, sampled;
//   - the boxing suite between cuda layouts, and between cpu and cuda layouts in both directions;
//   - every op on the same random inputs on a cpu and a cuda placement, compared element by
//     element (relative tolerance per op; a NaN where the cpu has none fails);
//   - gradients of a small model (every backward rule's helper op) equal to the cpu ones;
//   - rand/randn bit-equal to the cpu values;
//   - the fused optimizer steps (SGD, Adam, AdamW) giving the cpu parameters and state;
//   - a steady state of ops that makes no new device allocations;
//   - the examples' MLP trained 5 steps (data, tensor and, on even rank counts, 2-d parallel) on
//     cuda giving the cpu loss curve and first gradients;
//   - a steady training step (MLP with an embedding, cross-entropy, Adam) that touches the host
//     only to read its loss: no other host<->device copy, at most one synchronization, no
//     device allocation (device_traffic(), device_allocator_stats()).
// Exits 77 (meson: SKIP) where no CUDA device is usable.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../sim/sim_helpers.hpp"
#include "spsd/autograd/softmax_grad.hpp"
#include "boxing_suite.hpp"
#include "op_suite.hpp"
#include "train_suite.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {

Placement on(const Placement& p, const char* type) { return Placement(type, p.ranks(), p.mesh()); }

template <class T>
void expect_close(Failures& f, const std::string& what, const std::vector<T>& got, const std::vector<T>& want,
                  double rtol) {
  if (got.size() != want.size()) {
    f.add(what + ": " + std::to_string(got.size()) + " elements, expected " + std::to_string(want.size()));
    return;
  }
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const bool ok = std::isnan(w) ? std::isnan(g) : !std::isnan(g) && std::abs(g - w) <= rtol * (1 + std::abs(w));
    if (!ok && bad++ < 3)
      f.add(what + ": element " + std::to_string(i) + ": cuda " + spsd_test::show(got[i]) + ", cpu " +
            spsd_test::show(want[i]));
  }
}

// One op on float inputs: x (6, 10), y (6, 10), w (10, 4), labels (6,) in [0, 10), ids (5,) in [0, 6).
struct FloatInputs {
  GlobalTensor<float> x, y, w;
  GlobalTensor<int64_t> labels, ids;
};
struct OpCase {
  std::string name;
  double rtol;
  std::function<GlobalTensor<float>(const FloatInputs&)> run;
};

FloatInputs make_inputs(const Placement& p, const NdSbp& rows) {
  const NdSbp b(std::vector<Sbp>(p.mesh().ndim(), sbp::broadcast));
  FloatInputs in{randn<float>({6, 10}, p, rows, 1), randn<float>({6, 10}, p, rows, 2), randn<float>({10, 4}, p, b, 3),
                 GlobalTensor<int64_t>({6}, p, b, Tensor<int64_t>()), GlobalTensor<int64_t>({5}, p, b, Tensor<int64_t>())};
  in.labels = from_host(Tensor<int64_t>::from_vector({6}, {0, 3, 9, 1, 7, 3}), p, b);
  in.ids = from_host(Tensor<int64_t>::from_vector({5}, {5, 0, 2, 2, 4}), p, b);
  return in;
}

std::vector<OpCase> op_cases() {
  const double e = 1e-5, r = 1e-4;  // element-wise; reductions, matmul and softmax (other summation order)
  using In = const FloatInputs&;
  return {
      {"add", e, [](In i) { return i.x + i.y; }},
      {"sub", e, [](In i) { return i.x - i.y; }},
      {"mul", e, [](In i) { return i.x * i.y; }},
      {"div", e, [](In i) { return i.x / (abs(i.y) + 0.5f); }},
      {"broadcast add", e, [](In i) { return i.x + sum(i.y, {0}, true); }},
      {"scalar forms", e, [](In i) { return (2.0f - i.x) * 3.0f / 4.0f + 1.0f; }},
      {"neg", e, [](In i) { return -i.x; }},
      {"relu", e, [](In i) { return relu(i.x); }},
      {"gelu", e, [](In i) { return gelu(i.x); }},
      {"exp", e, [](In i) { return exp(i.x); }},
      {"log", e, [](In i) { return log(abs(i.x) + 0.1f); }},
      {"tanh", e, [](In i) { return tanh(i.x); }},
      {"sigmoid", e, [](In i) { return sigmoid(i.x); }},
      {"sqrt", e, [](In i) { return sqrt(abs(i.x)); }},
      {"sum rows", r, [](In i) { return sum(i.x, {1}); }},
      {"sum cols", r, [](In i) { return sum(i.x, {0}); }},
      {"sum all", r, [](In i) { return sum(i.x); }},
      {"mean", r, [](In i) { return mean(i.x, {1}, true); }},
      {"max", e, [](In i) { return max(i.x, {1}); }},
      {"min", e, [](In i) { return min(i.x, {0}); }},
      {"softmax rows", r, [](In i) { return softmax(i.x, 1); }},
      {"softmax cols", r, [](In i) { return softmax(i.x, 0); }},
      {"log_softmax", r, [](In i) { return log_softmax(i.x, 1); }},
      {"transpose", e, [](In i) { return transpose(i.x, 0, 1); }},
      {"permute 3-d", e, [](In i) { return permute(reshape(i.x, {3, 2, 10}), {2, 0, 1}); }},
      {"reshape", e, [](In i) { return reshape(i.x, {10, 6}); }},
      {"slice", e, [](In i) { return slice(i.x, 1, 2, 7); }},
      {"concat", e, [](In i) { return concat({i.x, i.y}, 1); }},
      {"matmul", r, [](In i) { return matmul(i.x, i.w); }},
      {"batched matmul", r, [](In i) { return matmul(reshape(i.x, {2, 3, 10}), i.w); }},
      {"embedding", e, [](In i) { return embedding(i.x, i.ids); }},
      {"pick", e, [](In i) { return pick(i.x, i.labels); }},
      {"cross_entropy", r, [](In i) { return cross_entropy(i.x, i.labels); }},
      // Backward-only forms (cuBLAS OP_T, the fused softmax / cross-entropy backward kernels).
      {"matmul a^T", r, [](In i) { return detail::matmul_transposed(i.x, i.y, true, false); }},
      {"matmul b^T", r, [](In i) { return detail::matmul_transposed(i.x, i.y, false, true); }},
      {"matmul a^T b^T", r, [](In i) { return detail::matmul_transposed(i.w, i.x, true, true); }},
      {"softmax_grad", r, [](In i) { return detail::softmax_grad(softmax(i.x, 1), i.y, 1); }},
      {"log_softmax_grad", r, [](In i) { return detail::log_softmax_grad(log_softmax(i.x, 0), i.y, 0); }},
      {"cross_entropy_grad", r, [](In i) { return detail::cross_entropy_grad(i.x, i.labels, sum(i.y)); }},
  };
}

void every_op_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const Placement cpu = on(cuda, "cpu");
  std::vector<NdSbp> layouts = {NdSbp(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast)),
                                NdSbp(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)))};
  for (const NdSbp& rows : layouts) {
    const FloatInputs a = make_inputs(cpu, rows), b = make_inputs(cuda, rows);
    for (const OpCase& c : op_cases()) {
      const std::string what = c.name + " on " + cuda.to_string() + " " + rows.to_string();
      try {
        GlobalTensor<float> want = c.run(a), got = c.run(b);
        if (got.placement() != cuda) f.add(what + ": result placed on " + got.placement().to_string());
        expect_close(f, what, got.full().to_vector(), want.full().to_vector(), c.rtol);
      } catch (const Error& e) {
        f.add(what + ": " + e.what());
      }
    }
  }
  // Integers: exact.
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  auto ints = [&](const Placement& p) { return arange<int64_t>(24, p, s0); };
  auto int_ops = [](const GlobalTensor<int64_t>& v) {
    GlobalTensor<int64_t> m = reshape(v, {4, 6});
    return concat({sum(matmul(transpose(m, 0, 1), m) * int64_t{3}, {0}), sum(div(m * int64_t{7}, m + int64_t{1}), {0}),
                   sum(detail::matmul_transposed(m, m, true, false), {0}),
                   sum(detail::matmul_transposed(m, m, false, true), {0})},
                  0);
  };
  const std::vector<int64_t> want = int_ops(ints(cpu)).full().to_vector(), got = int_ops(ints(cuda)).full().to_vector();
  if (got != want) f.add("int64 ops on " + cuda.to_string() + ": cuda and cpu differ");
}

// Gradients of a small model (matmul, relu, sigmoid, max, sum, cross_entropy, embedding: every
// backward helper op) on a cuda placement against the same on the cpu.
void backward_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  auto grads = [&](const Placement& p) {
    GlobalTensor<float> x = randn<float>({6, 10}, p, s0, 1), w = randn<float>({10, 4}, p, b, 3),
                        table = randn<float>({7, 10}, p, b, 4);
    w.requires_grad_();
    table.requires_grad_();
    const GlobalTensor<int64_t> labels = from_host(Tensor<int64_t>::from_vector({6}, {0, 3, 1, 2, 3, 0}), p, b);
    const GlobalTensor<int64_t> ids = from_host(Tensor<int64_t>::from_vector({6}, {6, 0, 2, 2, 5, 1}), p, b);
    const GlobalTensor<float> h = relu(x + embedding(table, ids));
    const GlobalTensor<float> logits = matmul(h, w) * sigmoid(matmul(x, w)) + max(h, {1}, true);
    backward(cross_entropy(logits, labels) + sum(logits) * 0.01f);
    return std::make_pair(w.grad().full().to_vector(), table.grad().full().to_vector());
  };
  try {
    const auto want = grads(on(cuda, "cpu")), got = grads(cuda);
    expect_close(f, "backward: grad of w on " + cuda.to_string(), got.first, want.first, 1e-4);
    expect_close(f, "backward: grad of the embedding table on " + cuda.to_string(), got.second, want.second, 1e-4);
  } catch (const Error& e) {
    f.add("backward on " + cuda.to_string() + ": " + e.what());
  }
}

// SGD (Nesterov, weight decay), Adam and AdamW with weight decay, float and double: 3 steps on
// the same gradients on a cpu and a cuda placement (a B and an S(0) parameter); parameters and
// state must agree (the cuda kernel may contract into fused multiply-adds: a few ulps).
template <class T>
void optimizers_cpu_vs_cuda(const Placement& cuda, Failures& f) {
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  const double rtol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  // Parameters, then state tensors, as host vectors.
  auto train = [&](const Placement& p, int which) {
    std::vector<GlobalTensor<T>> params = {randn<T>({6, 5}, p, b, 1).requires_grad_(),
                                           randn<T>({7, 3}, p, s0, 2).requires_grad_()};
    SGD<T> sgd(params, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
    Adam<T> adam(params, {.lr = 0.01, .weight_decay = 0.01});
    AdamW<T> adamw(params, {.lr = 0.01, .weight_decay = 0.1});
    for (int t = 1; t <= 3; ++t) {
      for (size_t i = 0; i < params.size(); ++i)
        params[i].autograd_meta()->grad = randn<T>(params[i].shape(), p, params[i].nd_sbp(), 10 * t + i).data();
      which == 0 ? sgd.step() : which == 1 ? adam.step() : adamw.step();
    }
    std::vector<std::optional<GlobalTensor<T>>> state = sgd.state().momentum;
    if (which == 1) state = adam.state().exp_avg_sq;
    if (which == 2) state = adamw.state().exp_avg;
    std::vector<std::vector<T>> out;
    for (const GlobalTensor<T>& q : params) out.push_back(q.full().to_vector());
    for (const auto& s : state) out.push_back(s ? s->full().to_vector() : std::vector<T>{});
    return out;
  };
  for (int which = 0; which < 3; ++which) {
    const std::string what = std::string(which == 0 ? "SGD" : which == 1 ? "Adam" : "AdamW") + " " +
                             std::string(to_string(dtype_of<T>)) + " on " + cuda.to_string();
    try {
      const auto want = train(on(cuda, "cpu"), which), got = train(cuda, which);
      for (size_t i = 0; i < want.size(); ++i)
        expect_close(f, what + ": tensor " + std::to_string(i), got[i], want[i], rtol);
    } catch (const Error& e) {
      f.add(what + ": " + e.what());
    }
  }
}

void random_bit_equal(const Placement& cuda, Failures& f) {
  const Placement cpu = on(cuda, "cpu");
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  auto same_bits = [&](const std::string& what, const auto& a, const auto& b) {
    const auto x = a.full().to_vector(), y = b.full().to_vector();
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) != 0)
      f.add(what + " on " + cuda.to_string() + ": cuda values are not bit-equal to the cpu values");
  };
  same_bits("randn float", randn<float>({33, 7}, cpu, s0, 42), randn<float>({33, 7}, cuda, s0, 42));
  same_bits("randn double", randn<double>({33, 7}, cpu, s0, 42), randn<double>({33, 7}, cuda, s0, 42));
  same_bits("rand float", rand<float>({33, 7}, cpu, s0, 7), rand<float>({33, 7}, cuda, s0, 7));
}

void boxing_on(const Placement& cuda, Failures& f) {
  const Placement cpu = on(cuda, "cpu");
  const Tensor<float> whole = spsd_test::reference_tensor<float>(Shape{5, 7});
  const std::vector<NdSbp> layouts = spsd_test::all_nd_sbps(cuda.mesh().ndim(), 2);
  int64_t i = 0;
  for (const NdSbp& from : layouts)
    for (const NdSbp& to : layouts) {
      spsd_test::check_boxing(whole, {cuda, from}, {cuda, to}, f);
      // Across memory spaces, a sample (every third pair) in each direction.
      if (i++ % 3 == 0) {
        spsd_test::check_boxing(whole, {cpu, from}, {cuda, to}, f);
        spsd_test::check_boxing(whole, {cuda, from}, {cpu, to}, f);
      }
    }
}

void steady_state_allocations(const Placement& cuda, Failures& f) {
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  GlobalTensor<float> x = randn<float>({64, 32}, cuda, s0, 5), w = randn<float>({32, 32}, cuda, b, 6);
  auto step = [&] { return sum(relu(matmul(x, w)) + x, {1}).full(); };
  step();
  const int64_t warm = device_allocator_stats().raw_allocations;
  for (int k = 0; k < 20; ++k) step();
  const int64_t after = device_allocator_stats().raw_allocations;
  if (after != warm)
    f.add("steady state on " + cuda.to_string() + ": " + std::to_string(after - warm) +
          " device allocations in 20 repeated steps (expected 0: the caching allocator reuses blocks)");
}

// Forward, backward, optimizer step and the loss read of a small MLP: after warm-up, the loss
// read is the only host<->device copy and the only host wait, and the caching allocator serves
// every block. Every backward helper op runs on the device (no host staging).
void training_step_stays_on_device(const Placement& cuda, Failures& f) {
  const NdSbp s0(std::vector<Sbp>(cuda.mesh().ndim(), sbp::split(0)));
  const NdSbp b(std::vector<Sbp>(cuda.mesh().ndim(), sbp::broadcast));
  GlobalTensor<float> w1 = randn<float>({32, 64}, cuda, b, 1) * 0.1f, b1 = zeros<float>({64}, cuda, b),
                      w2 = randn<float>({64, 10}, cuda, b, 2) * 0.1f, table = randn<float>({50, 64}, cuda, b, 3);
  for (GlobalTensor<float>* p : {&w1, &b1, &w2, &table}) p->requires_grad_();
  Adam<float> adam({w1, b1, w2, table}, AdamOptions{});
  const GlobalTensor<float> x = randn<float>({64, 32}, cuda, s0, 4);
  std::vector<int64_t> label_values(64), id_values(64);
  for (int64_t i = 0; i < 64; ++i) label_values[i] = (i * 7) % 10, id_values[i] = (i * 13) % 50;
  const GlobalTensor<int64_t> labels = from_host(Tensor<int64_t>::from_vector({64}, label_values), cuda, s0);
  const GlobalTensor<int64_t> ids = from_host(Tensor<int64_t>::from_vector({64}, id_values), cuda, s0);
  auto step = [&] {
    const GlobalTensor<float> h = gelu(matmul(x, w1) + b1) + embedding(table, ids);
    const GlobalTensor<float> loss = cross_entropy(matmul(tanh(h), w2), labels) + sum(max(h, {1})) * 1e-3f;
    backward(loss);
    adam.step();
    adam.zero_grad();
    return loss.full().to_vector()[0];  // the one read the step asks for
  };
  try {
    for (int k = 0; k < 3; ++k) step();
    synchronize();
    reset_device_traffic();
    const int64_t allocations = device_allocator_stats().raw_allocations;
    step();
    const DeviceTraffic t = device_traffic();
    const std::string where = "training step on " + cuda.to_string() + ": ";
    if (t.total.host_to_device_copies != 0 || t.total.device_to_host_copies != 1 || t.total.synchronizations > 1)
      f.add(where + "expected only the loss read (1 device->host copy, <= 1 synchronization), got " + t.to_string());
    for (const auto& [op, counts] : t.by_op)
      if (op != DeviceTraffic::kNoOp) f.add(where + "op " + op + " touched the host: " + counts.to_string());
    if (device_allocator_stats().raw_allocations != allocations)
      f.add(where + std::to_string(device_allocator_stats().raw_allocations - allocations) +
            " device allocations in a steady step (expected 0)");
  } catch (const Error& e) {
    f.add("training step on " + cuda.to_string() + ": " + e.what());
  }
}

// The examples' MLP trained for 5 steps on cuda and on cpu placements of the same ranks: the same
// loss curve and first gradients (float with SGD, double with Adam; the tolerances of sim-train).
void training_cpu_vs_cuda(const std::vector<int64_t>& ranks, Failures& f) {
  std::vector<std::string> modes = {"data", "tensor"};
  if (ranks.size() % 2 == 0) modes.push_back("2d");
  for (const std::string& mode : modes) {
    try {
      const auto want = spsd_test::train_trace<float>(mode, ranks, 5, "cpu");
      const auto got = spsd_test::train_trace<float>(mode, ranks, 5, "cuda");
      spsd_test::expect_same_training<float>(f, "training (" + mode + ", float, SGD) on cuda vs cpu", got, want);
      const auto want_d = spsd_test::train_trace<double>(mode, ranks, 5, "cpu");
      const auto got_d = spsd_test::train_trace<double>(mode, ranks, 5, "cuda");
      spsd_test::expect_same_training<double>(f, "training (" + mode + ", double, Adam) on cuda vs cpu", got_d, want_d);
    } catch (const Error& e) {
      f.add("training (" + mode + ") on cuda: " + e.what());
    }
  }
}

void run_all(int64_t world, Failures& f) {
  std::vector<int64_t> ranks(world);
  for (int64_t r = 0; r < world; ++r) ranks[r] = r;
  std::vector<Placement> placements = {Placement("cuda", ranks)};
  if (world == 4) placements.push_back(Placement("cuda", {{0, 1}, {2, 3}}));
  for (const Placement& p : placements) {
    spsd_test::OpSuiteOptions options;
    options.full_stride = 5;
    options.other_stride = 17;
    spsd_test::OpSuiteCounts counts;
    spsd_test::run_op_suite(p, options, f, counts);
    if (rank() == 0) std::printf("  op suite on %s: %s\n", p.to_string().c_str(), counts.to_string().c_str());
    every_op_cpu_vs_cuda(p, f);
    backward_cpu_vs_cuda(p, f);
    random_bit_equal(p, f);
    optimizers_cpu_vs_cuda<float>(p, f);
    optimizers_cpu_vs_cuda<double>(p, f);
    boxing_on(p, f);
    steady_state_allocations(p, f);
    training_step_stays_on_device(p, f);
  }
  training_cpu_vs_cuda(ranks, f);
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  if (!cuda_available()) {
    std::printf("SKIP: no usable CUDA device (%s)\n", runtime_info().c_str());
    return 77;
  }
  Failures failures;
  std::printf("rank %d: %s\n", rank(), runtime_info().c_str());
  run_all(world_size(), failures);
  if (world_size() == 1) {
    for (int n : {2, 4}) {
      std::printf("simulate(%d), host-staged on one GPU:\n", n);
      failures.merge(spsd_test::on_simulated_ranks(n, [n](Failures& f) { run_all(n, f); }));
    }
  }
  int64_t mine = static_cast<int64_t>(failures.size()), total = 0;
  world_communicator().all_reduce(&mine, &total, 1, DType::kInt64, ReduceOp::kSum);
  if (!failures.empty()) std::printf("rank %d FAILURES:\n%s", rank(), failures.report().c_str());
  if (rank() == 0) std::printf("%s: %lld failures over all ranks\n", total ? "FAIL" : "PASS", static_cast<long long>(total));
  return total ? 1 : 0;
}
