// A rank killed mid-run (docs/communicators.md, "When a rank dies"): run by check_rank_killed.sh
// under `tools/mpirun -np 4`. Every rank runs a few global ops (boxing, a reduction read on the
// host) that all succeed; then the last rank kills itself with SIGKILL while the others are
// inside the next collective:
//
//   rank_killed op [DEVICE]          the others are in a global op: sum of an S(0) tensor read
//                                    with full() (its consistency check, then its all-reduce)
//   rank_killed collective [DEVICE]  the others are in a raw all_reduce on the communicator of
//                                    the placement (the world's MPI one on cpu; on cuda the
//                                    device communicator: NCCL when every rank has its own GPU,
//                                    host-staged over MPI when ranks share one)
//
// DEVICE is cpu (default) or cuda; with cuda every rank exits 77 (SKIP) where the machine has no
// CUDA device, 1 on any other CUDA error (../common/cuda_devices.hpp).
//
// The last rank sleeps 0.5 s first, so that the others are waiting when it dies. What ends the
// others depends on mpirun: by default Open MPI kills the whole job as soon as it sees a process
// die; with recovery enabled it leaves them running, and their bounded waits throw
// (SPSD_TIMEOUT_S): each prints "rank_killed rank R: spsd::Error: ..." and ~Runtime aborts the job.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include <spsd/spsd.hpp>

#include "../common/cuda_devices.hpp"

int main(int argc, char** argv) {
  spsd::Runtime runtime(argc, argv);
  const char* mode = argc > 1 ? argv[1] : "op";
  const char* device = argc > 2 ? argv[2] : "cpu";
  const int me = spsd::rank(), n = spsd::world_size();
  if (std::strcmp(device, "cuda") == 0)
    if (const auto devices = spsd_test::find_cuda_devices("rank_killed"); devices.count == 0) return devices.exit_code;
  std::vector<int64_t> all(n);
  for (int r = 0; r < n; ++r) all[r] = r;
  spsd::Placement line(device, all);

  // A healthy start: every kind of communication once.
  auto x = spsd::randn<float>({64, 16}, line, {spsd::sbp::split(0)}, /*seed=*/1);
  auto b = x.to_global({spsd::sbp::broadcast});
  auto s = spsd::sum(x * 2.0f);
  float total = s.full().to_vector()[0];
  float reference = spsd::sum(b).full().to_vector()[0] * 2.0f;
  if (std::abs(total - reference) > 1e-3f * (1 + std::abs(reference))) {
    std::fprintf(stderr, "rank_killed rank %d: wrong warm-up result %g, expected %g\n", me, total, reference);
    return 2;
  }
  std::fprintf(stderr, "rank_killed rank %d: warm-up done\n", me);
  std::fflush(stderr);

  if (me == n - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::fprintf(stderr, "rank_killed rank %d: raising SIGKILL\n", me);
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  try {
    if (std::strcmp(mode, "collective") == 0) {
      // A one-element buffer where the placement keeps its data (device memory on cuda).
      spsd::Tensor<float> one = spsd::ones<float>({n}, line, {spsd::sbp::split(0)}).to_local();
      // The communicator that moves the placement's memory: spsd::communicator(line) is the host one
      // (host buffers only), the device one is what boxing on cuda calls.
      spsd::detail::communicator_for(line.ranks(), line.device_type())
          .all_reduce(one.data(), one.data(), 1, spsd::DType::kFloat32, spsd::ReduceOp::kSum);
    } else {
      (void)spsd::sum(x).full().to_vector();
    }
    std::fprintf(stderr, "rank_killed rank %d: no error\n", me);
    return 2;
  } catch (const spsd::Error& e) {
    std::fprintf(stderr, "rank_killed rank %d: spsd::Error: %s\n", me, e.what());
    std::fflush(stderr);
  }
  // Give the other waiting ranks time to print theirs before this one's exit aborts the job.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return 1;
}
