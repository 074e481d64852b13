// gpu-misc: GlobalTensor::item() and distribute on cuda placements (misc_suite.hpp): item's one
// device -> host copy and collective, distribute's host pieces copied to each rank's device, for
// every layout; a user op with only a cpu kernel (examples/custom/bias_gelu.hpp) on a cuda
// placement: an spsd::Error naming it, on every rank. On this process's ranks and, when run alone, on 2 and 4 simulated ranks sharing
// the GPU. Exits 77 (meson: SKIP) only where the machine has no CUDA device
// (cuda_devices.hpp).
#include <cstdio>

#include "../sim/sim_helpers.hpp"
#include "custom/bias_gelu.hpp"
#include "cuda_devices.hpp"
#include "misc_suite.hpp"

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

void run_all(Failures& f) {
  spsd_test::run_item_suite(f, "cuda");
  spsd_test::run_distribute_suite(f, "cuda");
  check_cpu_only_op_on_cuda(f);
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
