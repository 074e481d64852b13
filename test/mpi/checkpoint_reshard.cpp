// Checkpoints across processes and world sizes (test/common/checkpoint_suite.hpp), driven by
// check_checkpoint.sh: `save DIR` on 4 ranks writes the reference checkpoint; `load DIR SCRATCH`
// on any number of ranks loads it in every layout and checks damaged copies made under SCRATCH.
// Each rank prints what it found wrong; the exit status is non-zero on every rank if any failed.
#include <cstdio>
#include <string>

#include "checkpoint_suite.hpp"

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  const std::string mode = argc > 2 ? argv[1] : "";
  spsd_test::Failures failures;
  int loads = 0;
  if (mode == "save" && argc == 3) {
    spsd_test::save_reference_checkpoint(argv[2]);
  } else if (mode == "load" && argc == 4) {
    loads = spsd_test::check_reference_loads(failures, argv[2]);
    spsd_test::check_corruption_detected(failures, argv[2], argv[3]);
  } else {
    std::fprintf(stderr, "usage: checkpoint_reshard save DIR | load DIR SCRATCH\n");
    return 2;
  }
  if (!failures.empty()) std::fprintf(stderr, "rank %d:\n%s", spsd::rank(), failures.report().c_str());
  int64_t mine = failures.empty() ? 0 : 1, any = 0;
  spsd::world_communicator().all_reduce(&mine, &any, 1, spsd::DType::kInt64, spsd::ReduceOp::kMax);
  if (spsd::rank() == 0)
    std::printf("checkpoint_reshard %s on %d ranks: %d loads, %s\n", mode.c_str(), spsd::world_size(), loads,
                any ? "FAILED" : "ok");
  return static_cast<int>(any);
}
