// gpu-misc: GlobalTensor::item() and distribute on cuda placements (misc_suite.hpp): item's one
// device -> host copy and collective, distribute's host pieces copied to each rank's device, for
// every layout; a user op with only a cpu kernel (examples/custom/bias_gelu.hpp) on a cuda
// placement: an spsd::Error naming it, on every rank; an index out of range found by a kernel
// without a host wait, raised on every rank; the results issue 38 fixed against PyTorch, on cuda
// (argmax/argmin of rows of only -inf/+inf split with an empty piece, var with N - correction = 0
// on a split axis, pow's gradient where the exponent is 0); a pipelined step on cuda stages
// equal to one process's on cuda (pipeline_checks.hpp, issue 39); a compiled step as CUDA graphs
// (issue 41). On this process's ranks and, when run
// alone, on 2 and 4 simulated ranks sharing the GPU. Exits 77 (meson: SKIP) only where the
// machine has no CUDA device (cuda_devices.hpp).
#include <cmath>
#include <cstdio>
#include <limits>

#include "../sim/sim_helpers.hpp"
#include "compile_checks.hpp"
#include "custom/bias_gelu.hpp"
#include "cuda_devices.hpp"
#include "misc_suite.hpp"
#include "pipeline_checks.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {
void check_cpu_only_op_on_cuda(Failures& f) {
  std::vector<int64_t> ranks(world_size());
  for (int64_t r = 0; r < world_size(); ++r) ranks[r] = r;
  const Placement p("cuda", ranks);
  const NdSbp B(sbp::broadcast);
  try {
    (void)examples::bias_gelu(ones<float>(Shape{4, 3}, p, B), ones<float>(Shape{3}, p, B));
    f.add("bias_gelu on cuda: no error, but it has only a cpu kernel");
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.rfind("bias_gelu: has no cuda kernel", 0) != 0) f.add("bias_gelu on cuda: unexpected error: " + m);
  }
}

// want: NaN matches NaN.
template <class T>
void expect_values(Failures& f, const std::string& what, const GlobalTensor<T>& got, const std::vector<T>& want) {
  const std::vector<T> v = got.full().to_vector();
  bool same = v.size() == want.size();
  for (size_t i = 0; same && i < v.size(); ++i)
    if constexpr (std::is_floating_point_v<T>) same = v[i] == want[i] || (std::isnan(v[i]) && std::isnan(want[i]));
    else same = v[i] == want[i];
  if (!same) f.add(what + " on cuda, layout " + got.nd_sbp().to_string() + ": wrong values");
}

void check_results_against_pytorch(Failures& f) {
  std::vector<int64_t> ranks(world_size());
  for (int64_t r = 0; r < world_size(); ++r) ranks[r] = r;
  const Placement p("cuda", ranks);
  constexpr float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> rows = {-inf, -inf, -inf, -inf, 2, -inf, inf, inf, inf};
  for (const NdSbp& l : {NdSbp(sbp::broadcast), NdSbp(sbp::split(1))}) {
    const auto x = from_host(Tensor<float>::from_vector({3, 3}, rows), p, l);
    expect_values(f, "argmax of rows of -inf", argmax(x, 1), std::vector<int64_t>{0, 1, 0});
    expect_values(f, "argmin of rows of +inf", argmin(x, 1), std::vector<int64_t>{0, 0, 0});
    const auto v = from_host(Tensor<float>::from_vector({3, 3}, {1, 2, 4, 5, 5, 5, -1, 0, 1}), p, l);
    expect_values(f, "var with N - correction = 0", var(v, {1}, false, 3), std::vector<float>{inf, nan, inf});
    auto b = from_host(Tensor<float>::from_vector({3}, {0, 0, 2}), p, sbp::broadcast);
    auto e = from_host(Tensor<float>::from_vector({3}, {0, 1, 0}), p, sbp::broadcast);
    b.requires_grad_();
    backward(sum(pow(b, e)) + sum(pow(b, 0.0f)));
    expect_values(f, "pow's gradient where the exponent is 0", b.grad(), std::vector<float>{0, 1, 0});
  }
}

// An index out of range on cuda (op/index_check.hpp): the op waits for nothing on the host (a
// kernel reports into the device flag), and every rank raises the error naming the op and the
// first bad value once the flag was read (synchronize()) and a consistency check ran (full()).
void check_out_of_range_on_cuda(Failures& f) {
  std::vector<int64_t> ranks(world_size());
  for (int64_t r = 0; r < world_size(); ++r) ranks[r] = r;
  const Placement p("cuda", ranks);
  const auto w = ones<float>(Shape{4, 3}, p, NdSbp(sbp::broadcast));
  const auto ids = from_host(Tensor<int64_t>::from_vector({8}, {0, 1, 2, 3, 0, 9, 2, 1}), p, NdSbp(sbp::split(0)));
  const auto labels = from_host(Tensor<int64_t>::from_vector({8}, {0, 1, 2, -1, 2, 0, 5, 1}), p, NdSbp(sbp::split(0)));
  const auto logits = ones<float>(Shape{8, 3}, p, NdSbp(sbp::split(0)));
  for (int which = 0; which < 2; ++which) {
    const std::string what = which == 0 ? "embedding on cuda" : "cross_entropy on cuda";
    const std::string want = which == 0 ? "embedding: indices[5] = 9 is outside [0, 4), the rows of the weight (4, 3) float32"
                                        : "cross_entropy: labels[3] = -1 is outside [0, 3)";
    try {
      const int64_t waits = device_traffic().total.synchronizations;
      const GlobalTensor<float> y = which == 0 ? embedding(w, ids) : cross_entropy(logits, labels);
      if (device_traffic().total.synchronizations != waits) f.add(what + ": the op waited for the device");
      synchronize();  // reads the flag (one rank: raised here)
      (void)y.full();  // a consistency check carries it to every rank
      synchronize();
      f.add(what + ": no error");
    } catch (const Error& e) {
      if (std::string(e.what()).find(want) == std::string::npos) f.add(what + ": unexpected error: " + e.what());
    }
  }
}

// A compiled step on cuda placements replays as CUDA graphs (docs/compile.md, "CUDA graphs"): the
// character GPT trained 6 Adam steps, compiled (captured at the third call, the graphs launched
// from the fourth) and eagerly: where the ranks communicate through NCCL or not at all (one
// rank), the same losses and parameters bit for bit, and explain() names the graphs; where
// communication is host-staged (simulated ranks, processes sharing the GPU), the second replay is
// refused with an Error on every rank, and cuda_graph = false replays op by op, equal to eager.
void check_compiled_graphs(Failures& f) {
  std::vector<int64_t> ranks(world_size());
  for (int64_t r = 0; r < world_size(); ++r) ranks[r] = r;
  using spsd_test::gpt_compiled_run;
  const auto eager = gpt_compiled_run<float>("data", ranks, 6, false, {}, {}, std::nullopt, "cuda");
  const auto same = [&](const std::string& what, const spsd_test::CompiledRun& run) {
    if (run.losses != eager.losses) f.add("compiled on cuda, " + what + ": losses differ from eager's");
    if (run.parameters != eager.parameters) f.add("compiled on cuda, " + what + ": parameters differ from eager's");
  };
  if (world_size() == 1) {
    const auto graphs = gpt_compiled_run<float>("data", ranks, 6, true, {}, {}, std::nullopt, "cuda");
    same("CUDA graphs", graphs);
    if (graphs.explanation.find("CUDA graph") == std::string::npos)
      f.add("compiled on cuda: explain() does not say the step replays as CUDA graphs:\n" + graphs.explanation);
    return;
  }
  try {
    (void)gpt_compiled_run<float>("data", ranks, 6, true, {}, {}, std::nullopt, "cuda");
    f.add("compiled on cuda, host-staged: no error at the graphs' capture");
  } catch (const Error& e) {
    if (std::string(e.what()).find("cannot be captured") == std::string::npos)
      f.add(std::string("compiled on cuda, host-staged: unexpected error: ") + e.what());
  }
  same("op by op", gpt_compiled_run<float>("data", ranks, 6, true, {.cuda_graph = false}, {}, std::nullopt, "cuda"));
}

void run_all(Failures& f) {
  spsd_test::run_item_suite(f, "cuda");
  spsd_test::run_distribute_suite(f, "cuda");
  check_cpu_only_op_on_cuda(f);
  check_out_of_range_on_cuda(f);
  check_results_against_pytorch(f);
  const int pipelined = spsd_test::run_pipeline_checks(f, /*quick=*/true, "cuda");
  if (pipelined == 0) f.add("pipeline on cuda: no case ran");
  check_compiled_graphs(f);
}
}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  if (const auto devices = spsd_test::find_cuda_devices("gpu-misc"); devices.count == 0) return devices.exit_code;
  Failures failures;
  run_all(failures);
  if (world_size() == 1)
    for (int n : {2, 4}) failures.merge(spsd_test::on_simulated_ranks(n, [](Failures& f) { run_all(f); }));
  int64_t mine = static_cast<int64_t>(failures.size()), total = 0;
  world_communicator().all_reduce(&mine, &total, 1, DType::kInt64, ReduceOp::kSum);
  if (!failures.empty()) std::printf("rank %d FAILURES:\n%s", rank(), failures.report().c_str());
  if (rank() == 0) std::printf("%s: %lld failures over all ranks\n", total ? "FAIL" : "PASS", static_cast<long long>(total));
  return total ? 1 : 0;
}
