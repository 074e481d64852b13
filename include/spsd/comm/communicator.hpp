#pragma once
// Communicator: dtype-erased collectives (bytes + DType + ReduceOp) over a fixed, ordered set
// of world ranks. The public calls validate and account; backends only move bytes (and reduce,
// except the 16-bit float types on host backends, which this layer reduces: half_reduction.hpp).
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "spsd/comm/half_reduction.hpp"
#include "spsd/comm/stats.hpp"
#include "spsd/comm/traffic.hpp"
#include "spsd/core/dtype.hpp"
#include "spsd/core/reduce_op.hpp"

namespace spsd {

// One point-to-point transfer of a grouped send_recv; peer is a rank of the communicator.
struct SendSpec {
  int64_t peer;
  const void* data;
  int64_t count;
};
// One point-to-point receive of a grouped send_recv, into data; peer is a rank of the communicator.
struct RecvSpec {
  int64_t peer;
  void* data;
  int64_t count;
};

// Every member calls each operation in the same order with matching arguments (counts are in
// elements; "v" variants take one count per member, packed in member order). Passing
// send == recv to all_reduce / reduce_scatter works in place.
class Communicator;
namespace detail {
// Sets the hook every collective called on this thread runs first (null: none). The runtime
// installs one on each thread that runs a rank, so that a collective waits for the
// communication the thread queued earlier and every rank issues them in program order.
void set_collective_hook(void (*hook)());

// A collective this rank took part in, as the trace sees it once it returned: bytes are
// CommStats' (what this call added to them).
struct CollectiveSpan {
  const Communicator& comm;
  CollectiveKind kind;
  DType dtype;
  int64_t bytes_sent, bytes_received, messages;
  std::chrono::steady_clock::time_point begin, end;
};
// Sets the function that sees every collective completed on this thread (null: none); the
// runtime installs one on a rank's threads while it traces (SPSD_TRACE).
void set_collective_observer(void (*observer)(const CollectiveSpan&));
}  // namespace detail

// Collectives over a fixed, ordered set of world ranks, on untyped bytes with a DType and a
// ReduceOp; the contract of its members is above the forward declaration.
class Communicator {
 public:
  // Over world_ranks, this process being world_ranks[my_index]; it counts into stats. Not copyable.
  Communicator(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int64_t rank() const { return rank_; }  // index of this process in world_ranks()
  // The number of members, and their world ranks in member order.
  int64_t size() const { return static_cast<int64_t>(world_ranks_.size()); }
  const std::vector<int64_t>& world_ranks() const { return world_ranks_; }
  std::string to_string() const;  // "communicator(world ranks [0, 2], rank 1)"

  // The collectives, as MPI's and NCCL's of the same names (the contract above the forward
  // declaration); "_v" forms take a count per member.
  void all_reduce(const void* send, void* recv, int64_t count, DType, ReduceOp);
  void reduce_scatter(const void* send, void* recv, int64_t recv_count, DType, ReduceOp);
  void reduce_scatter_v(const void* send, void* recv, std::span<const int64_t> recv_counts, DType, ReduceOp);
  void all_gather(const void* send, void* recv, int64_t send_count, DType);
  void all_gather_v(const void* send, void* recv, std::span<const int64_t> recv_counts, DType);
  void all_to_all(const void* send, void* recv, int64_t count_per_peer, DType);
  void all_to_all_v(const void* send, std::span<const int64_t> send_counts, void* recv,
                    std::span<const int64_t> recv_counts, DType);
  void broadcast(void* buffer, int64_t count, DType, int64_t root);
  // Grouped point-to-point: every member calls it (with possibly empty lists); the j-th send
  // from a to b matches the j-th receive at b from a.
  void send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType);
  void barrier();
  // Waits for the work this communicator enqueued on device streams and has not yet seen finish
  // (a device communicator returns once its work is enqueued; a host one's calls complete before
  // they return, and this does nothing), bounded by the runtime's timeout; throws that work's
  // failure. Calls of a communicator must not overlap in time.
  virtual void drain() {}

 protected:
  // Arguments are validated: counts has size() entries, peers and root are in range.
  virtual void do_all_reduce(const void* send, void* recv, int64_t count, DType, ReduceOp) = 0;
  virtual void do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType, ReduceOp) = 0;
  virtual void do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType) = 0;
  // uniform: the caller used all_to_all, so every member has the same single count (a rank
  // cannot tell that from its own counts, and members must agree on the MPI call they make).
  virtual void do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                             std::span<const int64_t> recv_counts, DType, bool uniform) = 0;
  virtual void do_broadcast(void* buffer, int64_t count, DType, int64_t root) = 0;
  virtual void do_send_recv(std::span<const SendSpec>, std::span<const RecvSpec>, DType) = 0;
  virtual void do_barrier() = 0;
  // False for host backends (MPI, in-process): MPI has no 16-bit float types, and reducing them
  // pairwise would round at every step, so this layer reduces bfloat16 and float16 itself, over
  // do_all_to_all and do_all_gather (or widened to float32 under HalfReduction::kFloat32Wire),
  // and do_all_reduce / do_reduce_scatter never see them. True for device backends: they get
  // 16-bit reductions as they are and must follow half_reduction() themselves.
  virtual bool reduces_halves() const { return true; }

 private:
  friend void detail::set_collective_hook(void (*hook)());
  friend void detail::set_collective_observer(void (*observer)(const detail::CollectiveSpan&));
  using ObservedClock = std::chrono::steady_clock;  // not "Clock": it would hide a subclass's own
  static void before_call() {
    if (thread_hook_) thread_hook_();
  }
  // The start of a call, for the observer; not read (and not taken) without one.
  static ObservedClock::time_point observed_begin() {
    return thread_observer_ ? ObservedClock::now() : ObservedClock::time_point{};
  }
  static inline thread_local void (*thread_hook_)() = nullptr;
  static inline thread_local void (*thread_observer_)(const detail::CollectiveSpan&) = nullptr;
  // wire: the dtype the elements travel in (reduction_wire_dtype(dtype) for reductions).
  void account(CollectiveKind, traffic::Traffic elems, DType dtype, DType wire, ObservedClock::time_point begin,
               int64_t messages = 0);
  void check_counts(const char* op, const char* arg, std::span<const int64_t> counts) const;
  void all_to_all_checked(const void* send, std::span<const int64_t> send_counts, void* recv,
                          std::span<const int64_t> recv_counts, DType, bool uniform, ObservedClock::time_point begin);
  // The 16-bit reductions of a host backend (reduce_halves.cpp), arguments validated; wire is
  // the call's reduction_wire_dtype.
  void all_reduce_halves(const void* send, void* recv, int64_t count, DType, DType wire, ReduceOp);
  void reduce_scatter_halves(const void* send, void* recv, std::span<const int64_t> counts, DType, DType wire,
                             ReduceOp);

  std::vector<int64_t> world_ranks_;
  int64_t rank_;
  CommStats* stats_;
};

// Prefix sums of counts: the element offset of each member's block in a packed buffer.
std::vector<int64_t> displacements(std::span<const int64_t> counts);

namespace detail {
inline void set_collective_hook(void (*hook)()) { Communicator::thread_hook_ = hook; }
inline void set_collective_observer(void (*observer)(const CollectiveSpan&)) {
  Communicator::thread_observer_ = observer;
}

// Every member passes its own text and gets all of them, in member order (texts of any length,
// packed into int64 words: the communicator moves dtypes). Collective over comm.
std::vector<std::string> all_gather_text(Communicator& comm, const std::string& mine);
}  // namespace detail

}  // namespace spsd
