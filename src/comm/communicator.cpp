// Validation and byte accounting shared by every backend (docs/communicators.md has the formulas).
#include "spsd/comm/communicator.hpp"

#include <cstring>
#include <numeric>

#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/comm/traffic.hpp"

namespace spsd {

namespace {
using traffic::total;

void check_count(const char* op, const char* arg, int64_t count) {
  SPSD_CHECK(count >= 0, op, arg, " must be non-negative, got ", count);
}
void check_buffer(const char* op, const char* arg, const void* p, int64_t count) {
  SPSD_CHECK(p != nullptr || count == 0, op, arg, " is null but ", count, " elements are to be moved");
}
// Enum values cast from integers: a backend would read them as some other type or op.
void check_dtype(const char* op, DType dtype) {
  SPSD_CHECK(is_valid(dtype), op, "dtype has the invalid value ", static_cast<int>(dtype));
}
void check_reduce_op(const char* op, ReduceOp reduce) {
  SPSD_CHECK(is_valid(reduce), op, "reduce op has the invalid value ", static_cast<int>(reduce));
}
// bool moves (gathers, broadcasts) but is never reduced: it has no partial layouts.
void check_reducible(const char* op, DType dtype) {
  SPSD_CHECK(allows_partial(dtype), op, "cannot reduce ", dtype, " elements");
}
}  // namespace

std::vector<int64_t> displacements(std::span<const int64_t> counts) {
  std::vector<int64_t> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

namespace detail {
std::vector<std::string> all_gather_text(Communicator& comm, const std::string& mine) {
  const int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(comm.size()), words(comm.size());
  comm.all_gather(&length, lengths.data(), 1, DType::kInt64);
  for (int64_t m = 0; m < comm.size(); ++m) words[m] = (lengths[m] + 7) / 8;
  std::vector<int64_t> packed(words[comm.rank()], 0), gathered(std::accumulate(words.begin(), words.end(), int64_t{0}));
  if (!mine.empty()) std::memcpy(packed.data(), mine.data(), mine.size());  // data() may be null when empty
  comm.all_gather_v(packed.data(), gathered.data(), words, DType::kInt64);
  std::vector<std::string> texts(comm.size());
  const std::vector<int64_t> offsets = displacements(words);
  for (int64_t m = 0; m < comm.size(); ++m)
    texts[m].assign(reinterpret_cast<const char*>(gathered.data() + offsets[m]), static_cast<size_t>(lengths[m]));
  return texts;
}
}  // namespace detail

Communicator::Communicator(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats)
    : world_ranks_(std::move(world_ranks)), rank_(my_index), stats_(stats) {}

std::string Communicator::to_string() const {
  return "communicator(world ranks " + detail::join(world_ranks_) + ", rank " + std::to_string(rank_) + ")";
}

void Communicator::check_counts(const char* op, const char* arg, std::span<const int64_t> counts) const {
  SPSD_CHECK(static_cast<int64_t>(counts.size()) == size(), op, arg, " must have one entry per member (", size(),
             ") of ", to_string(), ", got ", counts.size(), " entries");
  for (int64_t c : counts)
    SPSD_CHECK(c >= 0, op, arg, " must be non-negative, got ", detail::join({counts.begin(), counts.end()}));
}

void Communicator::account(CollectiveKind kind, traffic::Traffic elems, DType dtype, DType wire,
                           ObservedClock::time_point begin, int64_t messages) {
  const int64_t sent = elems.sent * size_of(wire), received = elems.received * size_of(wire);
  stats_->bytes_sent += sent;
  stats_->bytes_received += received;
  stats_->messages += messages;
  stats_->collectives += 1;
  stats_->calls[static_cast<int>(kind)] += 1;
  if (thread_observer_) thread_observer_({*this, kind, dtype, sent, received, messages, begin, ObservedClock::now()});
}

// Counters follow the bandwidth-optimal algorithms' formulas in comm/traffic.hpp.
void Communicator::all_reduce(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  check_count("all_reduce", "count", count);
  check_dtype("all_reduce", dtype);
  check_reduce_op("all_reduce", op);
  check_reducible("all_reduce", dtype);
  check_buffer("all_reduce", "send", send, count);
  check_buffer("all_reduce", "recv", recv, count);
  const DType wire = reduction_wire_dtype(dtype);  // read once: the setting may change meanwhile
  if (is_half(dtype) && !reduces_halves()) all_reduce_halves(send, recv, count, dtype, wire, op);
  else do_all_reduce(send, recv, count, dtype, op);
  account(CollectiveKind::kAllReduce, traffic::all_reduce(count, size(), rank_), dtype, wire, begin);
}

void Communicator::reduce_scatter(const void* send, void* recv, int64_t recv_count, DType dtype, ReduceOp op) {
  before_call();
  check_count("reduce_scatter", "recv_count", recv_count);
  std::vector<int64_t> counts(size(), recv_count);
  reduce_scatter_v(send, recv, counts, dtype, op);
}

void Communicator::reduce_scatter_v(const void* send, void* recv, std::span<const int64_t> counts, DType dtype,
                                    ReduceOp op) {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  check_counts("reduce_scatter", "recv_counts", counts);
  check_dtype("reduce_scatter", dtype);
  check_reduce_op("reduce_scatter", op);
  check_reducible("reduce_scatter", dtype);
  check_buffer("reduce_scatter", "send", send, total(counts));
  check_buffer("reduce_scatter", "recv", recv, counts[rank_]);
  const DType wire = reduction_wire_dtype(dtype);
  if (is_half(dtype) && !reduces_halves()) reduce_scatter_halves(send, recv, counts, dtype, wire, op);
  else do_reduce_scatter(send, recv, counts, dtype, op);
  account(CollectiveKind::kReduceScatter, traffic::reduce_scatter(counts, rank_), dtype, wire, begin);
}

void Communicator::all_gather(const void* send, void* recv, int64_t send_count, DType dtype) {
  before_call();
  check_count("all_gather", "send_count", send_count);
  std::vector<int64_t> counts(size(), send_count);
  all_gather_v(send, recv, counts, dtype);
}

void Communicator::all_gather_v(const void* send, void* recv, std::span<const int64_t> counts, DType dtype) {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  check_counts("all_gather", "recv_counts", counts);
  check_dtype("all_gather", dtype);
  check_buffer("all_gather", "send", send, counts[rank_]);
  check_buffer("all_gather", "recv", recv, total(counts));
  do_all_gather(send, recv, counts, dtype);
  account(CollectiveKind::kAllGather, traffic::all_gather(counts, rank_), dtype, dtype, begin);
}

void Communicator::all_to_all(const void* send, void* recv, int64_t count_per_peer, DType dtype) {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  check_count("all_to_all", "count_per_peer", count_per_peer);
  std::vector<int64_t> counts(size(), count_per_peer);
  all_to_all_checked(send, counts, recv, counts, dtype, true, begin);
}

void Communicator::all_to_all_v(const void* send, std::span<const int64_t> send_counts, void* recv,
                                std::span<const int64_t> recv_counts, DType dtype) {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  all_to_all_checked(send, send_counts, recv, recv_counts, dtype, false, begin);
}

void Communicator::all_to_all_checked(const void* send, std::span<const int64_t> send_counts, void* recv,
                                      std::span<const int64_t> recv_counts, DType dtype, bool uniform,
                                      ObservedClock::time_point begin) {
  check_counts("all_to_all", "send_counts", send_counts);
  check_counts("all_to_all", "recv_counts", recv_counts);
  check_dtype("all_to_all", dtype);
  check_buffer("all_to_all", "send", send, total(send_counts));
  check_buffer("all_to_all", "recv", recv, total(recv_counts));
  do_all_to_all(send, send_counts, recv, recv_counts, dtype, uniform);
  account(CollectiveKind::kAllToAll, traffic::all_to_all(send_counts, recv_counts, rank_), dtype, dtype, begin);
}

void Communicator::broadcast(void* buffer, int64_t count, DType dtype, int64_t root) {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  check_count("broadcast", "count", count);
  check_dtype("broadcast", dtype);
  SPSD_CHECK(root >= 0 && root < size(), "broadcast", "root ", root, " is not a member of ", to_string());
  check_buffer("broadcast", "buffer", buffer, count);
  do_broadcast(buffer, count, dtype, root);
  account(CollectiveKind::kBroadcast, traffic::broadcast(count, size(), rank_, root), dtype, dtype, begin);
}

void Communicator::send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType dtype) {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  check_dtype("send_recv", dtype);
  int64_t sent = 0, received = 0, messages = 0;
  for (const SendSpec& s : sends) {
    SPSD_CHECK(s.peer >= 0 && s.peer < size(), "send_recv", "send peer ", s.peer, " is not a member of ", to_string());
    check_count("send_recv", "send count", s.count);
    check_buffer("send_recv", "send data", s.data, s.count);
    if (s.peer != rank_) sent += s.count, messages += 1;
  }
  for (const RecvSpec& r : recvs) {
    SPSD_CHECK(r.peer >= 0 && r.peer < size(), "send_recv", "recv peer ", r.peer, " is not a member of ", to_string());
    check_count("send_recv", "recv count", r.count);
    check_buffer("send_recv", "recv data", r.data, r.count);
    if (r.peer != rank_) received += r.count;
  }
  do_send_recv(sends, recvs, dtype);
  account(CollectiveKind::kSendRecv, {sent, received}, dtype, dtype, begin, messages);
}

void Communicator::barrier() {
  before_call();
  const ObservedClock::time_point begin = observed_begin();
  do_barrier();
  account(CollectiveKind::kBarrier, {}, DType::kFloat32, DType::kFloat32, begin);
}

}  // namespace spsd
