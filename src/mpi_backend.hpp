#pragma once
// The MPI backend (Boost.MPI for environment and communicator lifetime, the C API for the
// collectives Boost.MPI lacks: v-variants, reduce-scatter, grouped send/recv). Host memory only.
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <memory>

#include "context.hpp"

namespace spsd::detail {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(boost::mpi::communicator comm, std::vector<int64_t> world_ranks, CommStats* stats);
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

 private:
  boost::mpi::communicator comm_;
};

class MpiBackend final : public Backend {
 public:
  MpiBackend();  // MPI must be initialized
  std::string name() const override { return "mpi"; }
  std::unique_ptr<Communicator> create(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats) override;
  int64_t rank() const { return world_.rank(); }
  int64_t size() const { return world_.size(); }

 private:
  boost::mpi::communicator world_;  // a duplicate of MPI_COMM_WORLD: our traffic never meets the user's
};

}  // namespace spsd::detail
