#include "dry_backend.hpp"

#include <algorithm>
#include <cstring>

#include "spsd/core/shape.hpp"

namespace spsd::detail {

namespace {
char* at(void* base, int64_t elems, DType t) { return static_cast<char*>(base) + elems * size_of(t); }
const char* at(const void* base, int64_t elems, DType t) { return static_cast<const char*>(base) + elems * size_of(t); }

// dst gets min(have, want) elements of src and zeros after them: the part of a member's
// contribution this rank can stand in for.
void fill(void* dst, int64_t want, const void* src, int64_t have, DType t) {
  const int64_t n = std::min(want, have);
  if (n > 0 && dst != src) std::memmove(dst, src, n * size_of(t));
  if (want > n) std::memset(at(dst, n, t), 0, (want - n) * size_of(t));
}

// Every member is this rank: a reduction returns this rank's contribution (not n times it: the
// value is a stand-in either way, and a copy keeps it finite), a gather repeats it.
class DryCommunicator final : public Communicator {
 public:
  using Communicator::Communicator;

 protected:
  void do_all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp) override {
    fill(recv, count, send, count, t);
  }
  void do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType t, ReduceOp) override {
    fill(recv, counts[rank()], at(send, displacements(counts)[rank()], t), counts[rank()], t);
  }
  void do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType t) override {
    const std::vector<int64_t> displs = displacements(counts);
    for (int64_t m = 0; m < size(); ++m)
      if (m != rank()) fill(at(recv, displs[m], t), counts[m], send, counts[rank()], t);
    fill(at(recv, displs[rank()], t), counts[rank()], send, counts[rank()], t);
  }
  void do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                     std::span<const int64_t> recv_counts, DType t, bool) override {
    // What member m sends me is stood in for by what I send m.
    const std::vector<int64_t> send_displs = displacements(send_counts), recv_displs = displacements(recv_counts);
    std::vector<char> copy(static_cast<const char*>(send),
                           at(send, send_displs.back() + send_counts.back(), t));  // send and recv may overlap
    for (int64_t m = 0; m < size(); ++m)
      fill(at(recv, recv_displs[m], t), recv_counts[m], at(copy.data(), send_displs[m], t), send_counts[m], t);
  }
  void do_broadcast(void*, int64_t, DType, int64_t) override {}  // the root's buffer is this rank's
  // The j-th message from a peer is stood in for by my j-th to it (an exchange, such as the
  // consistency check's, is symmetric), or zeros where I send it none.
  void do_send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType t) override {
    std::vector<size_t> next(static_cast<size_t>(size()), 0);
    for (const RecvSpec& r : recvs) {
      size_t& k = next[static_cast<size_t>(r.peer)];
      while (k < sends.size() && sends[k].peer != r.peer) ++k;
      if (k < sends.size()) {
        fill(r.data, r.count, sends[k].data, sends[k].count, t);
        ++k;
      } else {
        fill(r.data, r.count, nullptr, 0, t);
      }
    }
  }
  void do_barrier() override {}
};
}  // namespace

std::unique_ptr<Communicator> DryBackend::create(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats) {
  return std::make_unique<DryCommunicator>(std::move(world_ranks), my_index, stats);
}

std::unique_ptr<Communicator> DryBackend::create_check(std::vector<int64_t> world_ranks, int64_t my_index,
                                                       CommStats* stats) {
  return std::make_unique<DryCommunicator>(std::move(world_ranks), my_index, stats);
}

}  // namespace spsd::detail
