#include "local_backend.hpp"

#include <cstring>
#include <exception>
#include <numeric>

#include "spsd/core/error.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::detail {

namespace {
char* at(void* base, int64_t elems, DType t) { return static_cast<char*>(base) + elems * size_of(t); }
const char* at(const void* base, int64_t elems, DType t) { return static_cast<const char*>(base) + elems * size_of(t); }
void copy(void* dst, const void* src, int64_t elems, DType t) {
  if (elems > 0 && dst != src) std::memmove(dst, src, elems * size_of(t));
}
}  // namespace

std::shared_ptr<LocalGroup> LocalWorld::group(const std::vector<int64_t>& world_ranks, int channel) {
  std::lock_guard lock(mutex_);
  auto& g = groups_[{world_ranks, channel}];
  if (!g) g = std::make_shared<LocalGroup>(this, world_ranks);
  return g;
}

void LocalWorld::abort(const std::string& reason) {
  std::vector<std::shared_ptr<LocalGroup>> groups;
  {
    std::lock_guard lock(mutex_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    aborted_.store(true);
    for (auto& [ranks, g] : groups_) groups.push_back(g);
  }
  for (auto& g : groups) g->wake_all();
}

std::string LocalWorld::abort_reason() {
  std::lock_guard lock(mutex_);
  return abort_reason_;
}

void LocalGroup::wake_all() {
  std::lock_guard lock(mutex_);
  cv_.notify_all();
}

void LocalGroup::arrive_and_wait(int64_t member, std::chrono::milliseconds timeout, const char* op) {
  std::unique_lock lock(mutex_);
  auto fail_if_aborted = [&] {
    if (world_->aborted())
      throw_error(op, "abandoned on world rank ", world_ranks_[member], " because ", world_->abort_reason());
    if (!broken_.empty()) throw Error(broken_);
  };
  fail_if_aborted();
  uint64_t my_phase = phase_;
  arrived_flags_[member] = true;
  if (++arrived_ == static_cast<int64_t>(world_ranks_.size())) {
    arrived_ = 0;
    std::fill(arrived_flags_.begin(), arrived_flags_.end(), false);
    ++phase_;
    cv_.notify_all();
    return;
  }
  bool done = cv_.wait_for(lock, timeout, [&] { return phase_ != my_phase || world_->aborted() || !broken_.empty(); });
  if (phase_ != my_phase) return;
  if (done) fail_if_aborted();
  std::vector<int64_t> missing;
  for (size_t i = 0; i < world_ranks_.size(); ++i)
    if (!arrived_flags_[i]) missing.push_back(world_ranks_[i]);
  broken_ = concat(op, ": timed out after ", timeout.count() / 1000.0, " s on the communicator of world ranks ",
                   join(world_ranks_), ": world ranks ", join(missing), " never arrived (diverging program or dead rank)");
  cv_.notify_all();
  throw Error(broken_);
}

std::string LocalCall::describe() const {
  std::string s = std::string(to_string(kind)) + "(" + std::string(to_string(dtype));
  if (kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter) s += ", " + std::string(to_string(op));
  if (kind == CollectiveKind::kBroadcast) s += ", root " + std::to_string(root);
  if (!counts.empty()) s += ", counts " + join(counts);
  return s + ")";
}

LocalCommunicator::LocalCommunicator(std::shared_ptr<LocalGroup> group, int64_t my_index, CommStats* stats,
                                     const std::chrono::milliseconds* timeout)
    : Communicator(group->world_ranks(), my_index, stats), group_(std::move(group)), timeout_(timeout) {}

namespace {

// Whether the messages member a sends to member b have, in order, the counts b receives from a.
// Allocates nothing: every member checks every pair at every send_recv.
bool messages_match(const LocalCall& ca, const LocalCall& cb, int64_t a, int64_t b) {
  auto s = ca.sends.begin();
  auto r = cb.recvs.begin();
  for (;;) {
    while (s != ca.sends.end() && s->peer != b) ++s;
    while (r != cb.recvs.end() && r->peer != a) ++r;
    if (s == ca.sends.end() || r == cb.recvs.end()) return s == ca.sends.end() && r == cb.recvs.end();
    if (s->count != r->count) return false;
    ++s;
    ++r;
  }
}

}  // namespace

// Every member evaluates the same published calls, so all of them throw (or none does).
void LocalCommunicator::check_matching_calls() {
  const LocalCall& first = group_->call(0);
  const char* op = spsd::to_string(group_->call(rank()).kind).data();
  for (int64_t m = 1; m < size(); ++m) {
    const LocalCall& c = group_->call(m);
    bool same = c.kind == first.kind && c.dtype == first.dtype && c.counts == first.counts &&
                (c.kind != CollectiveKind::kBroadcast || c.root == first.root) &&
                ((c.kind != CollectiveKind::kAllReduce && c.kind != CollectiveKind::kReduceScatter) || c.op == first.op);
    SPSD_CHECK(same, op, "members of the communicator of world ranks ", join(world_ranks()),
               " called different collectives: world rank ", world_ranks()[0], " called ", first.describe(),
               ", world rank ", world_ranks()[m], " called ", c.describe());
  }
  for (int64_t a = 0; a < size(); ++a)
    for (int64_t b = 0; b < size(); ++b) {
      const LocalCall& ca = group_->call(a);
      const LocalCall& cb = group_->call(b);
      if (first.kind == CollectiveKind::kAllToAll)
        SPSD_CHECK(ca.send_counts[b] == cb.recv_counts[a], op, "world rank ", world_ranks()[a], " sends ",
                   ca.send_counts[b], " elements to world rank ", world_ranks()[b], ", which expects ",
                   cb.recv_counts[a]);
      if (first.kind == CollectiveKind::kSendRecv && !messages_match(ca, cb, a, b)) {
        std::vector<int64_t> sent, expected;
        for (const SendSpec& s : ca.sends) if (s.peer == b) sent.push_back(s.count);
        for (const RecvSpec& r : cb.recvs) if (r.peer == a) expected.push_back(r.count);
        throw_error(op, "world rank ", world_ranks()[a], " sends messages of ", join(sent), " elements to world rank ",
                    world_ranks()[b], ", which receives ", join(expected));
      }
    }
}

template <class Read, class Finish>
void LocalCommunicator::run(LocalCall mine, Read&& read, Finish&& finish) {
  const char* op = spsd::to_string(mine.kind).data();
  group_->call(rank()) = std::move(mine);
  group_->arrive_and_wait(rank(), *timeout_, op);
  // A mismatch is reported only after the second wait: a member leaving early could publish its
  // next call while slower members still compare this one (wrong messages, or a missed mismatch).
  std::exception_ptr mismatch;
  try {
    check_matching_calls();
  } catch (const Error&) {
    mismatch = std::current_exception();
  }
  if (!mismatch) read();
  group_->arrive_and_wait(rank(), *timeout_, op);
  if (mismatch) std::rethrow_exception(mismatch);
  finish();
}

// Every member reduces all contributions in member order, so results are bit-identical everywhere.
void LocalCommunicator::do_all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) {
  std::vector<char> result(count * size_of(t));
  LocalCall c{.kind = CollectiveKind::kAllReduce, .dtype = t, .op = op, .counts = {count}, .send = send};
  run(std::move(c),
      [&] {
        copy(result.data(), group_->call(0).send, count, t);
        for (int64_t m = 1; m < size(); ++m) combine_into(result.data(), group_->call(m).send, count, t, op);
      },
      [&] { copy(recv, result.data(), count, t); });
}

void LocalCommunicator::do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType t,
                                          ReduceOp op) {
  std::vector<int64_t> counts_v(counts.begin(), counts.end());
  int64_t mine = counts_v[rank()], offset = displacements(counts)[rank()];
  std::vector<char> result(mine * size_of(t));
  LocalCall c{.kind = CollectiveKind::kReduceScatter, .dtype = t, .op = op, .counts = counts_v, .send = send};
  run(std::move(c),
      [&] {
        copy(result.data(), at(group_->call(0).send, offset, t), mine, t);
        for (int64_t m = 1; m < size(); ++m)
          combine_into(result.data(), at(group_->call(m).send, offset, t), mine, t, op);
      },
      [&] { copy(recv, result.data(), mine, t); });
}

void LocalCommunicator::do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType t) {
  std::vector<int64_t> counts_v(counts.begin(), counts.end());
  std::vector<int64_t> displs = displacements(counts);
  LocalCall c{.kind = CollectiveKind::kAllGather, .dtype = t, .counts = counts_v, .send = send};
  run(std::move(c),
      [&] {
        for (int64_t m = 0; m < size(); ++m) copy(at(recv, displs[m], t), group_->call(m).send, counts_v[m], t);
      },
      [] {});
}

void LocalCommunicator::do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                      std::span<const int64_t> recv_counts, DType t, bool) {
  std::vector<int64_t> recv_displs = displacements(recv_counts);
  LocalCall c{.kind = CollectiveKind::kAllToAll, .dtype = t, .send_counts = {send_counts.begin(), send_counts.end()},
              .recv_counts = {recv_counts.begin(), recv_counts.end()}, .send = send};
  run(std::move(c),
      [&] {
        for (int64_t m = 0; m < size(); ++m) {
          const LocalCall& peer = group_->call(m);
          int64_t offset = displacements(peer.send_counts)[rank()];
          copy(at(recv, recv_displs[m], t), at(peer.send, offset, t), recv_counts[m], t);
        }
      },
      [] {});
}

void LocalCommunicator::do_broadcast(void* buffer, int64_t count, DType t, int64_t root) {
  LocalCall c{.kind = CollectiveKind::kBroadcast, .dtype = t, .root = root, .counts = {count}, .send = buffer};
  run(std::move(c), [&] { copy(buffer, group_->call(root).send, count, t); }, [] {});
}

void LocalCommunicator::do_send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType t) {
  LocalCall c{.kind = CollectiveKind::kSendRecv, .dtype = t, .sends = {sends.begin(), sends.end()},
              .recvs = {recvs.begin(), recvs.end()}};
  run(std::move(c),
      [&] {
        std::vector<size_t> next(size(), 0);  // per peer: how many of its sends to me are consumed
        for (const RecvSpec& r : recvs) {
          const std::vector<SendSpec>& theirs = group_->call(r.peer).sends;
          size_t& k = next[r.peer];
          while (theirs[k].peer != rank()) ++k;  // matched counts were checked above
          copy(r.data, theirs[k].data, r.count, t);
          ++k;
        }
      },
      [] {});
}

void LocalCommunicator::do_barrier() { run(LocalCall{.kind = CollectiveKind::kBarrier}, [] {}, [] {}); }

}  // namespace spsd::detail
