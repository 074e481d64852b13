#pragma once
// The randomized differential test of the eager runtime (issue 7), shared by the simulate and
// MPI tests. A seeded generator writes a program of global-tensor steps (factories on 1-d and
// 2-d placements of the world and of fewer ranks, element-wise ops with broadcasting, matmul,
// reductions, softmax, to_global to random layouts and placements, in-place updates such as
// optimizer steps, tensors dropped right after an asynchronous to_global was issued on them,
// host reads in the middle, synchronize(), host collectives on the world communicator). Every
// rank runs the same program twice, once asynchronously (set_synchronous(false), with an inline
// threshold the program chooses, 0 forcing everything with traffic onto the communication
// stream) and once synchronously, each time on fresh tensors, and every host read plus the
// final full() and local piece of every live tensor must be bit-identical between the two runs.
//
// The generator never branches on the rank, and it only writes steps that are valid for the
// shapes, dtypes and placements it tracks (it never relies on the library rejecting a step):
// an spsd::Error while a program runs is a failure too. A failure names the seed and prints the
// program; SPSD_ASYNC_SEED=<seed> SPSD_ASYNC_PROGRAMS=1 runs just that program.
#include <cstdint>
#include <string>

#include "failures.hpp"

namespace spsd_test {

// What one rank saw over a batch of programs.
struct AsyncSummary {
  int64_t programs = 0, steps = 0;
  int64_t reads = 0, read_bytes = 0;  // host reads compared (per run), and their bytes
  int64_t queued = 0, inline_run = 0;  // comm_stream_stats() summed over the asynchronous runs
  double async_s = 0, sync_s = 0;      // time spent in each mode
  void merge(const AsyncSummary& o);
  std::string to_string() const;
};

// The program the generator writes for (seed, world size), as text (what a failure prints).
std::string async_program_text(uint64_t seed, int64_t world_size, int steps);

// Runs the programs of seeds first_seed .. first_seed + count - 1 for the calling world (every
// rank of it calls this with the same arguments), each asynchronously and synchronously, and
// records in failures where a run differs or throws (a thrown error is recorded, then
// rethrown: the ranks' collectives cannot be trusted after it).
AsyncSummary check_async_programs(uint64_t first_seed, int count, int steps, Failures& failures);

// SPSD_ASYNC_PROGRAMS when set (a positive count), else fallback.
int async_program_count(int fallback);
// SPSD_ASYNC_SEED when set, else fallback.
uint64_t async_first_seed(uint64_t fallback);

}  // namespace spsd_test
