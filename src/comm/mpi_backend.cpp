#include "mpi_backend.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <numeric>
#include <span>
#include <string>
#include <thread>

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

// The datatype elements of t move as. MPI has no 16-bit float types: they move as 2-byte words
// and are never reduced by MPI (Communicator reduces them above the backend, reduces_halves()).
MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kBFloat16: case DType::kFloat16: return MPI_UINT16_T;
    case DType::kBool: return MPI_UINT8_T;  // one byte; moved, never reduced (Communicator checks)
  }
  throw_error("mpi", "no MPI datatype for dtype value ", static_cast<int>(t));
}
// The datatype MPI reduces t as: an MPI_SUM of 16-bit floats as MPI_UINT16_T would add bit patterns.
MPI_Datatype mpi_reduction_type(DType t, const char* op) {
  SPSD_CHECK(!is_half(t), op, "the MPI backend cannot reduce ", t, " (the communicator reduces 16-bit types itself)");
  return mpi_type(t);
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

std::atomic<bool> timed_out{false};

// Polls until every request completed; false when the timeout passed first (the requests are
// then left as they are). Each MPI_Testall also drives MPI's progress, which nonblocking
// collectives need. The first millisecond it polls back to back, as blocking MPI does (yielding
// at once made small and medium collectives up to 2x slower, bench/comm on 2 and 4 ranks);
// after that it yields the thread between polls, so a long wait does not hold a core that a
// peer (tests run 4 ranks on 2 cores) or another program needs. When mpirun oversubscribes,
// OpenMPI's progress engine also yields inside MPI_Testall (mpi_yield_when_idle).
bool wait_bounded(std::span<MPI_Request> requests, std::chrono::milliseconds timeout, const char* op) {
  using Clock = std::chrono::steady_clock;
  constexpr std::chrono::microseconds kSpin{1000};
  int done = 0;
  check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), op);
  if (done) return true;
  const Clock::time_point start = Clock::now(), deadline = start + timeout, spin_until = start + kSpin;
  for (;;) {
    check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), op);
    if (done) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    if (now >= spin_until) std::this_thread::yield();
  }
}

[[noreturn]] void throw_timeout(const char* op, std::chrono::milliseconds timeout, const std::string& where,
                                const std::string& why) {
  timed_out.store(true);
  throw_error(op, "no completion within ", timeout.count() / 1000.0, " s on ", where, ": ", why,
              "; the job will be aborted at exit");
}

// The world ranks whose requests (requests[i] talks to world rank peers[i]) are still pending.
std::vector<int64_t> pending_peers(std::span<MPI_Request> requests, std::span<const int64_t> peers) {
  std::vector<int64_t> r;
  for (size_t i = 0; i < requests.size(); ++i) {
    int done = 1;
    if (requests[i] != MPI_REQUEST_NULL) MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
    if (!done && std::find(r.begin(), r.end(), peers[i]) == r.end()) r.push_back(peers[i]);
  }
  std::sort(r.begin(), r.end());
  return r;
}

// Receives nobody will match are cancelled, so MPI never writes into buffers the caller frees
// after the error; sends are released (MPI cannot reliably cancel them).
void abandon(std::span<MPI_Request> requests, size_t receives) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (i < receives) MPI_Cancel(&requests[i]);
    MPI_Request_free(&requests[i]);
  }
}

// FNV-1a over the ranks and the purpose: what a member is creating, for the handshake.
uint64_t creation_token(const std::vector<int64_t>& world_ranks, uint64_t purpose) {
  uint64_t h = 1469598103934665603ull ^ purpose;
  for (int64_t r : world_ranks) {
    for (int b = 0; b < 8; ++b) {
      h ^= static_cast<uint64_t>(r >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

}  // namespace

bool mpi_wait_timed_out() { return timed_out.load(); }

MpiCommunicator::MpiCommunicator(boost::mpi::communicator comm, std::vector<int64_t> world_ranks, CommStats* stats,
                                 const std::chrono::milliseconds* timeout)
    : Communicator(std::move(world_ranks), comm.rank(), stats), comm_(std::move(comm)), timeout_(timeout) {}

void MpiCommunicator::wait(MPI_Request& request, const char* op) {
  if (wait_bounded({&request, 1}, *timeout_, op)) return;
  const std::vector<int64_t> silent = unanswered_probe(op);
  const std::chrono::milliseconds bound = probe_bound();
  throw_timeout(op, *timeout_, to_string(),
                concat("a rank died or diverged; ",
                       silent.empty() ? concat("every member answered a probe within ", bound.count() / 1000.0,
                                               " s (they are waiting in another operation)")
                                      : concat("no answer within ", bound.count() / 1000.0, " s from world ranks ",
                                               join(silent), " (dead, stopped, unreachable or busy elsewhere)")));
}

std::chrono::milliseconds MpiCommunicator::probe_bound() const {
  return std::min(*timeout_, std::chrono::milliseconds(1000));
}

// A collective cannot say which member it waits for: after its timeout each member sends every
// other a word on a tag of its own and names those it hears nothing from within probe_bound().
// Members whose waits timed out alike answer each other (their timeouts fire within the skew of
// their arrivals); a dead, frozen or cut-off member does not. The job is aborted after a timeout,
// so probe messages left unmatched never meet later traffic. Sends read a static word; receives
// land in buffers kept for the process's life (MPI may still write them after the cancel).
std::vector<int64_t> MpiCommunicator::unanswered_probe(const char* op) {
  constexpr int kProbeTag = 31;
  static const int64_t kWord = 0;
  static std::vector<std::unique_ptr<int64_t[]>> sinks;
  const int64_t n = size(), me = rank();
  if (n == 1) return {};
  sinks.push_back(std::make_unique<int64_t[]>(static_cast<size_t>(n)));
  int64_t* sink = sinks.back().get();
  std::vector<MPI_Request> requests;
  std::vector<int64_t> peers;
  for (int64_t p = 0; p < n; ++p)
    if (p != me) {
      requests.emplace_back();
      peers.push_back(world_ranks()[p]);
      check_mpi(MPI_Irecv(&sink[p], 1, MPI_INT64_T, static_cast<int>(p), kProbeTag, native(), &requests.back()), op);
    }
  const size_t receives = requests.size();
  for (int64_t p = 0; p < n; ++p)
    if (p != me) {
      requests.emplace_back();
      check_mpi(MPI_Isend(&kWord, 1, MPI_INT64_T, static_cast<int>(p), kProbeTag, native(), &requests.back()), op);
    }
  std::vector<int64_t> silent;
  if (!wait_bounded(std::span(requests).first(receives), probe_bound(), op))
    silent = pending_peers(std::span(requests).first(receives), peers);
  abandon(requests, receives);
  return silent;
}

// Count and displacement arrays stay alive until wait() returns: MPI reads them until completion.
void MpiCommunicator::do_all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) {
  MPI_Request request;
  check_mpi(MPI_Iallreduce(in_place_if(send, recv), recv, as_int(count, "all_reduce"), mpi_reduction_type(t, "all_reduce"),
                           mpi_op(op), native(),
                           &request),
            "all_reduce");
  wait(request, "all_reduce");
}

void MpiCommunicator::do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType t,
                                        ReduceOp op) {
  // MPI_IN_PLACE reads the input from recv and leaves the result at its start, as we promise.
  const void* in = in_place_if(send, recv);
  const MPI_Datatype type = mpi_reduction_type(t, "reduce_scatter");
  MPI_Request request;
  std::vector<int> int_counts;
  if (uniform(counts)) {
    check_mpi(MPI_Ireduce_scatter_block(in, recv, as_int(counts[0], "reduce_scatter"), type, mpi_op(op), native(),
                                        &request),
              "reduce_scatter");
  } else {
    int_counts = as_ints(counts, "reduce_scatter");
    check_mpi(MPI_Ireduce_scatter(in, recv, int_counts.data(), type, mpi_op(op), native(), &request),
              "reduce_scatter");
  }
  wait(request, "reduce_scatter");
}

void MpiCommunicator::do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType t) {
  int64_t offset = displacements(counts)[rank()];
  const void* in = send == static_cast<const char*>(recv) + offset * size_of(t) ? MPI_IN_PLACE : send;
  int mine = as_int(counts[rank()], "all_gather");
  MPI_Request request;
  std::vector<int> int_counts, displs;
  if (uniform(counts)) {
    check_mpi(MPI_Iallgather(in, mine, mpi_type(t), recv, mine, mpi_type(t), native(), &request), "all_gather");
  } else {
    int_counts = as_ints(counts, "all_gather");
    displs = int_displacements(counts, "all_gather");
    check_mpi(MPI_Iallgatherv(in, mine, mpi_type(t), recv, int_counts.data(), displs.data(), mpi_type(t), native(),
                              &request),
              "all_gather");
  }
  wait(request, "all_gather");
}

void MpiCommunicator::do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                    std::span<const int64_t> recv_counts, DType t, bool uniform) {
  MPI_Request request;
  if (uniform) {
    int n = as_int(send_counts[0], "all_to_all");
    check_mpi(MPI_Ialltoall(send, n, mpi_type(t), recv, n, mpi_type(t), native(), &request), "all_to_all");
    wait(request, "all_to_all");
    return;
  }
  std::vector<int> sc = as_ints(send_counts, "all_to_all"), sd = int_displacements(send_counts, "all_to_all");
  std::vector<int> rc = as_ints(recv_counts, "all_to_all"), rd = int_displacements(recv_counts, "all_to_all");
  check_mpi(MPI_Ialltoallv(send, sc.data(), sd.data(), mpi_type(t), recv, rc.data(), rd.data(), mpi_type(t), native(),
                           &request),
            "all_to_all");
  wait(request, "all_to_all");
}

void MpiCommunicator::do_broadcast(void* buffer, int64_t count, DType t, int64_t root) {
  MPI_Request request;
  check_mpi(MPI_Ibcast(buffer, as_int(count, "broadcast"), mpi_type(t), static_cast<int>(root), native(), &request),
            "broadcast");
  wait(request, "broadcast");
}

// Receives are posted first; messages between one pair keep their order (MPI non-overtaking).
// On a timeout the message names the members nothing arrived from (or that took nothing).
void MpiCommunicator::do_send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType t) {
  constexpr int kTag = 7;
  std::vector<MPI_Request> requests;
  std::vector<int64_t> peers;  // world rank of each request's peer
  requests.reserve(sends.size() + recvs.size());
  for (const RecvSpec& r : recvs) {
    requests.emplace_back();
    peers.push_back(world_ranks()[r.peer]);
    check_mpi(MPI_Irecv(r.data, as_int(r.count, "send_recv"), mpi_type(t), static_cast<int>(r.peer), kTag, native(),
                        &requests.back()),
              "send_recv");
  }
  for (const SendSpec& s : sends) {
    requests.emplace_back();
    peers.push_back(world_ranks()[s.peer]);
    check_mpi(MPI_Isend(s.data, as_int(s.count, "send_recv"), mpi_type(t), static_cast<int>(s.peer), kTag, native(),
                        &requests.back()),
              "send_recv");
  }
  if (wait_bounded(requests, *timeout_, "send_recv")) return;
  std::span<MPI_Request> all(requests);
  std::vector<int64_t> silent = pending_peers(all.first(recvs.size()), std::span(peers).first(recvs.size()));
  std::vector<int64_t> deaf = pending_peers(all.subspan(recvs.size()), std::span(peers).subspan(recvs.size()));
  abandon(all, recvs.size());
  std::string why = !silent.empty() ? concat("nothing arrived from world ranks ", join(silent))
                                    : concat("world ranks ", join(deaf), " took none of the messages sent to them");
  throw_timeout("send_recv", *timeout_, to_string(), why + " (a rank died or diverged)");
}

void MpiCommunicator::do_barrier() {
  MPI_Request request;
  check_mpi(MPI_Ibarrier(native(), &request), "barrier");
  wait(request, "barrier");
}

MpiBackend::MpiBackend(const std::chrono::milliseconds* timeout, CreationStats* creation)
    : world_(MPI_COMM_WORLD, boost::mpi::comm_duplicate), timeout_(timeout), creation_(creation) {
  MPI_Comm_set_errhandler(static_cast<MPI_Comm>(world_), MPI_ERRORS_RETURN);
  handshake_ = boost::mpi::communicator(static_cast<MPI_Comm>(world_), boost::mpi::comm_duplicate);
  MPI_Comm_set_errhandler(static_cast<MPI_Comm>(handshake_), MPI_ERRORS_RETURN);
}

// Every other member's token, sent to and received from each: O(n) messages per member, and on
// a timeout the members nothing arrived from are known. Small sets, and the fallback that names
// the culprits after the rounds below found a difference.
MpiBackend::PairwiseOutcome MpiBackend::exchange_all_pairs(const std::vector<int64_t>& world_ranks, int64_t my_index,
                                                           uint64_t mine, const char* op) {
  constexpr int kTag = 21;
  const size_t others = world_ranks.size() - 1;
  // [0] mine, [1 + k] peer k's: on the heap, kept after a timeout while MPI may still use them.
  auto tokens = std::make_unique<uint64_t[]>(others + 1);
  tokens[0] = mine;
  uint64_t* theirs = tokens.get() + 1;
  std::vector<MPI_Request> requests(2 * others);
  std::vector<int64_t> peers;
  for (size_t i = 0, k = 0; i < world_ranks.size(); ++i)
    if (static_cast<int64_t>(i) != my_index) {
      peers.push_back(world_ranks[i]);
      check_mpi(MPI_Irecv(&theirs[k], 1, MPI_UINT64_T, static_cast<int>(world_ranks[i]), kTag,
                          static_cast<MPI_Comm>(handshake_), &requests[k]),
                op);
      ++k;
    }
  for (size_t k = 0; k < others; ++k)
    check_mpi(MPI_Isend(&tokens[0], 1, MPI_UINT64_T, static_cast<int>(peers[k]), kTag, static_cast<MPI_Comm>(handshake_),
                        &requests[others + k]),
              op);
  creation_->handshake_messages_sent += static_cast<int64_t>(others);
  PairwiseOutcome out;
  if (!wait_bounded(requests, *timeout_, op)) {
    out.complete = false;
    out.silent = pending_peers(std::span(requests).first(others), peers);
    abandon(requests, others);
    abandoned_.push_back(std::move(tokens));
  }
  for (size_t k = 0; k < others; ++k) {
    if (std::find(out.silent.begin(), out.silent.end(), peers[k]) != out.silent.end()) continue;
    ++creation_->handshake_messages_received;
    if (theirs[k] != mine) out.different.push_back(peers[k]);
  }
  std::sort(out.different.begin(), out.different.end());
  return out;
}

// Dissemination (Hensgen, Finkel, Manber): in round k member i sends the (min, max) of the tokens
// it knows to member i + 2^k and merges what member i - 2^k sends it (mod n). After ceil(log2 n)
// rounds every member's pair covers all n tokens, each through a chain of messages, so a member
// that ends with min == max == its own token knows that every member is creating this very
// communicator now, and a member whose pair differs knows that some member is not: all members of
// a consistent set reach the same verdict, and none enters MPI_Comm_create_group while another
// diverged (it would wait there for ever). The whole exchange is bounded by one timeout.
MpiBackend::RoundsOutcome MpiBackend::disseminate(const std::vector<int64_t>& world_ranks, int64_t my_index,
                                                  uint64_t mine, const char* op) {
  constexpr int kFirstTag = 100;  // round k uses kFirstTag + k: rounds never match each other
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + *timeout_;
  const int64_t n = static_cast<int64_t>(world_ranks.size());
  uint64_t known[2] = {mine, mine};  // (min, max)
  int64_t round = 0;
  for (int64_t reach = 1; reach < n; reach *= 2, ++round) {
    const int64_t to = world_ranks[handshake_send_to(n, my_index, round)],
                  from = world_ranks[handshake_receive_from(n, my_index, round)];
    auto buffer = std::make_unique<uint64_t[]>(4);  // out (min, max), in (min, max)
    uint64_t *out = buffer.get(), *in = buffer.get() + 2;
    out[0] = known[0], out[1] = known[1];
    MPI_Request requests[2];
    const int tag = kFirstTag + static_cast<int>(round);
    check_mpi(MPI_Irecv(in, 2, MPI_UINT64_T, static_cast<int>(from), tag, static_cast<MPI_Comm>(handshake_),
                        &requests[0]),
              op);
    check_mpi(MPI_Isend(out, 2, MPI_UINT64_T, static_cast<int>(to), tag, static_cast<MPI_Comm>(handshake_),
                        &requests[1]),
              op);
    ++creation_->handshake_messages_sent;
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    if (!wait_bounded(requests, left, op)) {
      abandon(requests, 1);
      abandoned_.push_back(std::move(buffer));
      return {false, false, from, round};
    }
    ++creation_->handshake_messages_received;
    known[0] = std::min(known[0], in[0]);
    known[1] = std::max(known[1], in[1]);
  }
  return {true, known[0] == mine && known[1] == mine, -1, round};
}

void MpiBackend::handshake(const std::vector<int64_t>& world_ranks, int64_t my_index, uint64_t purpose,
                           const char* op) {
  if (world_ranks.size() == 1) return;
  const uint64_t mine = creation_token(world_ranks, purpose);
  const int64_t n = static_cast<int64_t>(world_ranks.size());
  const bool rounds = n > handshake_all_pairs_limit();
  RoundsOutcome r;
  if (rounds) {
    r = disseminate(world_ranks, my_index, mine, op);
    if (r.complete && r.agree) return;
  }
  // Only now, on a difference or a timeout of the rounds, does every member hear from every other.
  PairwiseOutcome p = exchange_all_pairs(world_ranks, my_index, mine, op);
  const std::string what = concat("creating communicator(world ranks ", join(world_ranks), ", rank ", my_index, ")",
                                  purpose == 1 ? " for consistency checks" : "");
  const std::string different = concat("world ranks ", join(p.different),
                                       " were creating a different communicator at the same point");
  if (!p.complete || !r.complete) {
    std::string why = !p.silent.empty()
                          ? concat("world ranks ", join(p.silent), " never came to create it")
                          : concat("world rank ", r.late, " sent nothing in round ", r.round,
                                   " of the handshake, and came only after the timeout");
    if (!p.different.empty()) why += "; " + different;
    throw_timeout(op, *timeout_, what, why + " (a rank died or diverged)");
  }
  if (!rounds && p.different.empty()) return;  // the small sets' only exchange passed
  SPSD_CHECK(!p.different.empty(), op, "while ", what,
             ": the handshake's rounds found members creating something else, but every member's token matched "
             "when exchanged (a diverging program)");
  throw_error(op, "while ", what, ": ", different,
              " (a diverging program: every member must create the rank sets it belongs to in the same order)");
}

// MPI_Comm_create_group is collective over the group's members only: ranks outside a placement
// never take part in creating its communicator. It blocks, so the handshake runs first.
MPI_Comm MpiBackend::create_comm(const std::vector<int64_t>& world_ranks, int64_t my_index, uint64_t purpose,
                                 const char* op) {
  handshake(world_ranks, my_index, purpose, op);
  MPI_Group world_group, group;
  check_mpi(MPI_Comm_group(static_cast<MPI_Comm>(world_), &world_group), op);
  std::vector<int> ranks = as_ints(world_ranks, op);
  check_mpi(MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group), op);
  MPI_Comm comm;
  check_mpi(MPI_Comm_create_group(static_cast<MPI_Comm>(world_), group, /*tag=*/11 + static_cast<int>(purpose), &comm),
            op);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

std::unique_ptr<Communicator> MpiBackend::create(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats) {
  MPI_Comm comm = create_comm(world_ranks, my_index, 0, "communicator");
  return std::make_unique<MpiCommunicator>(boost::mpi::communicator(comm, boost::mpi::comm_take_ownership),
                                           std::move(world_ranks), stats, timeout_);
}

// A communicator of its own (a new MPI context), never the data communicator of the same ranks.
std::unique_ptr<Communicator> MpiBackend::create_check(std::vector<int64_t> world_ranks, int64_t my_index,
                                                       CommStats* stats) {
  MPI_Comm comm = create_comm(world_ranks, my_index, 1, "communicator");
  return std::make_unique<MpiCommunicator>(boost::mpi::communicator(comm, boost::mpi::comm_take_ownership),
                                           std::move(world_ranks), stats, timeout_);
}

}  // namespace spsd::detail
