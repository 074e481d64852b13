// Bounded waits under MPI, which a test cannot observe in-process (after a timeout the job must
// end): run by check_diverge_timeout.sh under `tools/mpirun -np 4` with SPSD_TIMEOUT_S=2.
//
//   diverge_timeout check       the last rank never joins a consistency check
//   diverge_timeout create      the last rank never creates the check communicator (first check)
//   diverge_timeout create-rounds  the same with the handshake in rounds (as on sets over 8 ranks):
//                               the others name it after the rounds' and the fallback's timeouts
//   diverge_timeout collective  the last rank never joins a data all_reduce
//   diverge_timeout order       ranks 0 and 1 create {0, 1} and {1, 0}: both get spsd::Error at
//                               once, and can go on (exit 0)
//   diverge_timeout outside     as collective, but the program catches the error outside the
//                               Runtime's scope: ~Runtime must print its text before MPI_Abort
//                               (the handler never runs)
//
// In the timeout modes the last rank sleeps 15 s and exits normally; the others print their
// spsd::Error on stderr ("diverge_timeout rank R: spsd::Error: ..."), and ~Runtime aborts the job.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "spsd/comm/communicator.hpp"
#include "spsd/comm/creation.hpp"
#include "spsd/core/error.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/runtime.hpp"

namespace {

using spsd::detail::check_ops;
using spsd::detail::note_op;
using spsd::detail::OpIdentity;

std::shared_ptr<const OpIdentity> op(const char* description) { return std::make_shared<const OpIdentity>(description); }

int order_mode() {
  if (spsd::world_size() < 2 || spsd::rank() > 1) return 0;
  std::vector<int64_t> mine = spsd::rank() == 0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{1, 0};
  try {
    spsd::communicator(mine);
    std::fprintf(stderr, "diverge_timeout rank %d: creating %s did not throw\n", spsd::rank(),
                 spsd::rank() == 0 ? "{0, 1}" : "{1, 0}");
    return 2;
  } catch (const spsd::Error& e) {
    std::fprintf(stderr, "diverge_timeout rank %d: spsd::Error: %s\n", spsd::rank(), e.what());
  }
  // Nothing was left pending: both create the two sets in the same order and use them.
  for (const auto& ranks : {std::vector<int64_t>{0, 1}, std::vector<int64_t>{1, 0}}) {
    int64_t one = 1, total = 0;
    spsd::communicator(ranks).all_reduce(&one, &total, 1, spsd::DType::kInt64, spsd::ReduceOp::kSum);
    if (total != 2) return 3;
  }
  std::fprintf(stderr, "diverge_timeout rank %d: both orders work after the error\n", spsd::rank());
  return 0;
}

// The last rank never joins an all_reduce; the others' Error unwinds past the Runtime, whose
// destructor aborts the job (the catch below is reached only if it did not).
int outside_mode(int argc, char** argv) {
  int me = -1;
  try {
    spsd::Runtime runtime(argc, argv);
    me = spsd::rank();
    spsd::Communicator& data = spsd::world_communicator();  // created by every rank
    if (me == spsd::world_size() - 1) {
      std::this_thread::sleep_for(std::chrono::seconds(15));
      std::fprintf(stderr, "diverge_timeout rank %d: slept 15 s, exiting normally\n", me);
      return 0;
    }
    float x = 1, y = 0;
    data.all_reduce(&x, &y, 1, spsd::DType::kFloat32, spsd::ReduceOp::kSum);
    std::fprintf(stderr, "diverge_timeout rank %d: no error\n", me);
    return 2;
  } catch (const spsd::Error& e) {
    std::fprintf(stderr, "diverge_timeout rank %d: caught outside the Runtime, after it ended: %s\n", me, e.what());
    return 3;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "outside") == 0) return outside_mode(argc, argv);
  spsd::Runtime runtime(argc, argv);
  const char* mode = argc > 1 ? argv[1] : "check";
  if (std::strcmp(mode, "order") == 0) return order_mode();
  if (std::strcmp(mode, "create-rounds") == 0) {
    spsd::detail::set_handshake_all_pairs_limit(1);
    mode = "create";
  }
  const int me = spsd::rank(), n = spsd::world_size();
  std::vector<int64_t> world(n);
  for (int i = 0; i < n; ++i) world[i] = i;
  spsd::Communicator& data = spsd::world_communicator();
  if (std::strcmp(mode, "create") != 0) {
    // A healthy start: the check communicator exists and one check passes.
    note_op(world, op("warm_up()"));
    check_ops(world);
  }
  note_op(world, op("add((4, 5) float32 (S(0)))"));
  if (me == n - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(15));
    std::fprintf(stderr, "diverge_timeout rank %d: slept 15 s, exiting normally\n", me);
    return 0;
  }
  try {
    if (std::strcmp(mode, "collective") == 0) {
      float x = 1, y = 0;
      data.all_reduce(&x, &y, 1, spsd::DType::kFloat32, spsd::ReduceOp::kSum);
    } else {
      check_ops(world);
    }
    std::fprintf(stderr, "diverge_timeout rank %d: no error\n", me);
    return 2;
  } catch (const spsd::Error& e) {
    std::fprintf(stderr, "diverge_timeout rank %d: spsd::Error: %s\n", me, e.what());
    std::fflush(stderr);
  }
  // Give the other waiting ranks time to print theirs before this one's exit aborts the job.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return 1;
}
