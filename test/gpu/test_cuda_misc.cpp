// gpu-misc: GlobalTensor::item() and distribute on cuda placements (misc_suite.hpp): item's one
// device -> host copy and collective, distribute's host pieces copied to each rank's device, for
// every layout. On this process's ranks and, when run alone, on 2 and 4 simulated ranks sharing
// the GPU. Exits 77 (meson: SKIP) where no CUDA device is usable.
#include <cstdio>

#include "../sim/sim_helpers.hpp"
#include "misc_suite.hpp"

using namespace spsd;
using spsd_test::Failures;

namespace {
void run_all(Failures& f) {
  spsd_test::run_item_suite(f, "cuda");
  spsd_test::run_distribute_suite(f, "cuda");
}
}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  if (!cuda_available()) {
    std::printf("SKIP: no usable CUDA device (%s)\n", runtime_info().c_str());
    return 77;
  }
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
