#pragma once
// Runtime: the process (or simulated rank) state: world, rank, communicators, timeouts.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spsd/comm/communicator.hpp"
#include "spsd/layout/placement.hpp"

namespace spsd {

// The process's (or a simulated rank's) state: world, rank, communicators, timeouts.
class Runtime {
 public:
  Runtime();
  // Initializes MPI when the build has it and nobody did yet (then finalizes it at the end).
  Runtime(int& argc, char**& argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

 private:
  void init(int* argc, char*** argv);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// This rank's world rank and the world's size.
int rank();
int world_size();
int local_rank();  // OMPI_COMM_WORLD_LOCAL_RANK, else LOCAL_RANK, else 0; the thread index under simulate
// Waits for all pending work of this rank: the communication still queued on its
// communication stream (docs/runtime.md) and kernels still running on its CUDA streams.
// Throws the error of a queued communication that nobody has seen yet.
void synchronize();

// Runs body on world_size threads, each a rank with its own runtime and the in-process
// communicator. When a rank throws, ranks waiting in collectives throw too; the first
// exception is rethrown after every thread ended.
void simulate(int world_size, const std::function<void()>& body);

// Runs body once, on a thread of its own, as rank 0 of a world of world_size ranks that are not
// there: for planning a job larger than the machine (docs/compile.md, "Planning without the
// ranks"). Collectives complete at once, moving no data: each returns what it would if every
// rank held what rank 0 holds, so values are not the program's; shapes, layouts, boxing plans,
// comm_stats() bytes and spsd::compile's search are (they depend on shapes only). Kernels run
// on rank 0's pieces. Cuda placements are refused (an Error naming the op). Rethrows body's
// exception.
void dry_run(int64_t world_size, const std::function<void()>& body);

// The communicator over these world ranks, in this order; the calling rank must be one of
// them. Created at first use (collectively over those ranks only) and cached.
Communicator& communicator(const std::vector<int64_t>& world_ranks);
Communicator& communicator(const Placement& placement);
Communicator& world_communicator();

// Throws unless every rank of the placement exists in the world (the first use of a placement).
void check_placement(std::string_view op, const Placement& placement);

// Bound on every wait of every backend: a collective, a consistency check or a communicator
// creation that does not complete within it throws spsd::Error naming the operation, the
// communicator and the bound (a rank died or diverged). Default: the environment variable
// SPSD_TIMEOUT_S (seconds, fractions allowed; SPSD_TIMEOUT is read as an older alias), read
// when the Runtime starts, else 30 s. Per rank (per simulated rank under simulate). Under MPI a
// timeout cannot be recovered from: the error must end the program, and ~Runtime then calls
// MPI_Abort instead of MPI_Finalize (docs/communicators.md).
void set_timeout(std::chrono::milliseconds timeout);
std::chrono::milliseconds timeout();

// One line: version, rank, world, backend, CUDA devices and NCCL version (or why none).
std::string runtime_info();

}  // namespace spsd
