#pragma once
// The MPI backend (Boost.MPI for environment and communicator lifetime, the C API for the
// collectives Boost.MPI lacks: v-variants, reduce-scatter, grouped send/recv). Host memory only.
// Every operation is nonblocking MPI completed by one bounded wait (the runtime's timeout), so a
// rank that died or diverged gives spsd::Error instead of a hang.
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <chrono>
#include <memory>

#include "backend.hpp"
#include "spsd/comm/creation.hpp"

namespace spsd::detail {

// True once any MPI wait of this process timed out: requests are left pending that no rank
// will complete, so the process must not call MPI_Finalize (~Runtime calls MPI_Abort instead).
bool mpi_wait_timed_out();

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(boost::mpi::communicator comm, std::vector<int64_t> world_ranks, CommStats* stats,
                  const std::chrono::milliseconds* timeout);
  MPI_Comm native() const { return static_cast<MPI_Comm>(comm_); }

 protected:
  void do_all_reduce(const void* send, void* recv, int64_t count, DType, ReduceOp) override;
  void do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType, ReduceOp) override;
  void do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType) override;
  void do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                     std::span<const int64_t> recv_counts, DType, bool uniform) override;
  void do_broadcast(void* buffer, int64_t count, DType, int64_t root) override;
  void do_send_recv(std::span<const SendSpec>, std::span<const RecvSpec>, DType) override;
  void do_barrier() override;
  bool reduces_halves() const override { return false; }

 private:
  // Waits (bounded) for the one request a nonblocking collective returned; on a timeout the
  // error names the members that do not answer a probe (unanswered_probe).
  void wait(MPI_Request& request, const char* op);
  std::vector<int64_t> unanswered_probe(const char* op);
  std::chrono::milliseconds probe_bound() const;

  boost::mpi::communicator comm_;
  const std::chrono::milliseconds* timeout_;  // the context's: set_timeout applies at once
};

class MpiBackend final : public Backend {
 public:
  // MPI must be initialized; the handshakes count their messages into *creation.
  MpiBackend(const std::chrono::milliseconds* timeout, CreationStats* creation);
  std::string name() const override { return "mpi"; }
  std::unique_ptr<Communicator> create(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats) override;
  std::unique_ptr<Communicator> create_check(std::vector<int64_t> world_ranks, int64_t my_index,
                                             CommStats* stats) override;
  int64_t rank() const { return world_.rank(); }
  int64_t size() const { return world_.size(); }

 private:
  // The members agree on which communicator they are creating, within the timeout, before the
  // (blocking) MPI_Comm_create_group: a missing or diverged member gives an error naming it.
  // ceil(log2 n) messages per member on sets over handshake_all_pairs_limit(), else n - 1.
  void handshake(const std::vector<int64_t>& world_ranks, int64_t my_index, uint64_t purpose, const char* op);
  struct PairwiseOutcome {
    bool complete = true;
    std::vector<int64_t> silent;     // world ranks whose token never came
    std::vector<int64_t> different;  // world ranks whose token differs from mine
  };
  PairwiseOutcome exchange_all_pairs(const std::vector<int64_t>& world_ranks, int64_t my_index, uint64_t mine,
                                     const char* op);
  struct RoundsOutcome {
    bool complete = true, agree = true;
    int64_t late = -1, round = 0;  // on a timeout: the world rank waited for, in which round
  };
  RoundsOutcome disseminate(const std::vector<int64_t>& world_ranks, int64_t my_index, uint64_t mine, const char* op);
  MPI_Comm create_comm(const std::vector<int64_t>& world_ranks, int64_t my_index, uint64_t purpose, const char* op);

  boost::mpi::communicator world_;      // a duplicate of MPI_COMM_WORLD: our traffic never meets the user's
  boost::mpi::communicator handshake_;  // another one, only for the creation handshakes
  const std::chrono::milliseconds* timeout_;
  CreationStats* creation_;
  // Handshake buffers of requests abandoned at a timeout: MPI may still read or write them.
  std::vector<std::unique_ptr<uint64_t[]>> abandoned_;
};

}  // namespace spsd::detail
