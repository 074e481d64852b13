#include "mpi_backend.hpp"

#include <climits>
#include <numeric>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::detail {

namespace {

void check_mpi(int code, const char* op) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw_error(op, "MPI error: ", std::string(text, len));
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
  }
  throw_error("mpi", "no MPI datatype for ", t);
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  throw_error("mpi", "no MPI op for ", op);
}

// MPI counts and displacements are int: larger messages are refused rather than truncated.
int as_int(int64_t n, const char* op) {
  SPSD_CHECK(n <= INT_MAX, op, "count ", n, " exceeds the MPI backend's limit of ", INT_MAX, " elements per call");
  return static_cast<int>(n);
}
std::vector<int> as_ints(std::span<const int64_t> v, const char* op) {
  std::vector<int> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = as_int(v[i], op);
  return r;
}
std::vector<int> int_displacements(std::span<const int64_t> counts, const char* op) {
  std::vector<int64_t> d = displacements(counts);
  return as_ints(d, op);
}
bool uniform(std::span<const int64_t> counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}
const void* in_place_if(const void* send, const void* recv) { return send == recv ? MPI_IN_PLACE : send; }

}  // namespace

MpiCommunicator::MpiCommunicator(boost::mpi::communicator comm, std::vector<int64_t> world_ranks, CommStats* stats)
    : Communicator(std::move(world_ranks), comm.rank(), stats), comm_(std::move(comm)) {}

void MpiCommunicator::do_all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) {
  check_mpi(MPI_Allreduce(in_place_if(send, recv), recv, as_int(count, "all_reduce"), mpi_type(t), mpi_op(op), native()),
            "all_reduce");
}

void MpiCommunicator::do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType t,
                                        ReduceOp op) {
  // MPI_IN_PLACE reads the input from recv and leaves the result at its start, as we promise.
  const void* in = in_place_if(send, recv);
  if (uniform(counts))
    check_mpi(MPI_Reduce_scatter_block(in, recv, as_int(counts[0], "reduce_scatter"), mpi_type(t), mpi_op(op), native()),
              "reduce_scatter");
  else
    check_mpi(MPI_Reduce_scatter(in, recv, as_ints(counts, "reduce_scatter").data(), mpi_type(t), mpi_op(op), native()),
              "reduce_scatter");
}

void MpiCommunicator::do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType t) {
  int64_t offset = displacements(counts)[rank()];
  const void* in = send == static_cast<const char*>(recv) + offset * size_of(t) ? MPI_IN_PLACE : send;
  int mine = as_int(counts[rank()], "all_gather");
  if (uniform(counts))
    check_mpi(MPI_Allgather(in, mine, mpi_type(t), recv, mine, mpi_type(t), native()), "all_gather");
  else
    check_mpi(MPI_Allgatherv(in, mine, mpi_type(t), recv, as_ints(counts, "all_gather").data(),
                             int_displacements(counts, "all_gather").data(), mpi_type(t), native()),
              "all_gather");
}

void MpiCommunicator::do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                    std::span<const int64_t> recv_counts, DType t, bool uniform) {
  if (uniform) {
    int n = as_int(send_counts[0], "all_to_all");
    check_mpi(MPI_Alltoall(send, n, mpi_type(t), recv, n, mpi_type(t), native()), "all_to_all");
    return;
  }
  check_mpi(MPI_Alltoallv(send, as_ints(send_counts, "all_to_all").data(),
                          int_displacements(send_counts, "all_to_all").data(), mpi_type(t), recv,
                          as_ints(recv_counts, "all_to_all").data(), int_displacements(recv_counts, "all_to_all").data(),
                          mpi_type(t), native()),
            "all_to_all");
}

void MpiCommunicator::do_broadcast(void* buffer, int64_t count, DType t, int64_t root) {
  check_mpi(MPI_Bcast(buffer, as_int(count, "broadcast"), mpi_type(t), static_cast<int>(root), native()), "broadcast");
}

// Receives are posted first; messages between one pair keep their order (MPI non-overtaking).
void MpiCommunicator::do_send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType t) {
  constexpr int kTag = 7;
  std::vector<MPI_Request> requests;
  requests.reserve(sends.size() + recvs.size());
  for (const RecvSpec& r : recvs) {
    requests.emplace_back();
    check_mpi(MPI_Irecv(r.data, as_int(r.count, "send_recv"), mpi_type(t), static_cast<int>(r.peer), kTag, native(),
                        &requests.back()),
              "send_recv");
  }
  for (const SendSpec& s : sends) {
    requests.emplace_back();
    check_mpi(MPI_Isend(s.data, as_int(s.count, "send_recv"), mpi_type(t), static_cast<int>(s.peer), kTag, native(),
                        &requests.back()),
              "send_recv");
  }
  check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "send_recv");
}

void MpiCommunicator::do_barrier() { check_mpi(MPI_Barrier(native()), "barrier"); }

MpiBackend::MpiBackend() : world_(MPI_COMM_WORLD, boost::mpi::comm_duplicate) {
  MPI_Comm_set_errhandler(static_cast<MPI_Comm>(world_), MPI_ERRORS_RETURN);
}

// MPI_Comm_create_group is collective over the group's members only: ranks outside a placement
// never take part in creating its communicator.
std::unique_ptr<Communicator> MpiBackend::create(std::vector<int64_t> world_ranks, int64_t, CommStats* stats) {
  MPI_Group world_group, group;
  check_mpi(MPI_Comm_group(static_cast<MPI_Comm>(world_), &world_group), "communicator");
  std::vector<int> ranks = as_ints(world_ranks, "communicator");
  check_mpi(MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group), "communicator");
  MPI_Comm comm;
  check_mpi(MPI_Comm_create_group(static_cast<MPI_Comm>(world_), group, /*tag=*/11, &comm), "communicator");
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(boost::mpi::communicator(comm, boost::mpi::comm_take_ownership),
                                           std::move(world_ranks), stats);
}

}  // namespace spsd::detail
