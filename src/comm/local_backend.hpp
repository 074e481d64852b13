#pragma once
// The in-process backend behind spsd::simulate: threads are ranks, collectives read each
// other's buffers through shared memory between two barriers.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend.hpp"

namespace spsd::detail {

class LocalGroup;

// Shared by the threads of one simulate() call.
class LocalWorld {
 public:
  explicit LocalWorld(int64_t size) : size_(size) {}
  int64_t size() const { return size_; }
  // The group over exactly these world ranks, in this order (created by the first caller).
  // channel 1 is the consistency check's: a separate group over the same ranks.
  std::shared_ptr<LocalGroup> group(const std::vector<int64_t>& world_ranks, int channel = 0);
  // A rank failed: every rank waiting now or later in a collective throws with this reason.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }
  std::string abort_reason();

 private:
  int64_t size_;
  std::atomic<bool> aborted_{false};
  std::mutex mutex_;
  std::string abort_reason_;
  std::map<std::pair<std::vector<int64_t>, int>, std::shared_ptr<LocalGroup>> groups_;
};

// What one member publishes for the collective it is in.
struct LocalCall {
  CollectiveKind kind = CollectiveKind::kBarrier;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int64_t root = 0;
  std::vector<int64_t> counts;       // must be equal on every member
  std::vector<int64_t> send_counts;  // all_to_all: per peer; checked against peers' recv_counts
  std::vector<int64_t> recv_counts;
  const void* send = nullptr;
  void* recv = nullptr;
  std::vector<SendSpec> sends;  // send_recv
  std::vector<RecvSpec> recvs;
  std::string describe() const;
};

class LocalGroup {
 public:
  LocalGroup(LocalWorld* world, std::vector<int64_t> world_ranks)
      : world_(world), world_ranks_(std::move(world_ranks)), calls_(world_ranks_.size()),
        arrived_flags_(world_ranks_.size(), false) {}
  const std::vector<int64_t>& world_ranks() const { return world_ranks_; }
  LocalCall& call(int64_t member) { return calls_[member]; }
  // Blocks until every member arrived; throws on timeout, on an aborted world, or if the group
  // broke (a member timed out earlier).
  void arrive_and_wait(int64_t member, std::chrono::milliseconds timeout, const char* op);
  void wake_all();

 private:
  LocalWorld* world_;
  std::vector<int64_t> world_ranks_;
  std::vector<LocalCall> calls_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t phase_ = 0;
  int64_t arrived_ = 0;
  std::vector<bool> arrived_flags_;
  std::string broken_;
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int64_t my_index, CommStats* stats,
                    const std::chrono::milliseconds* timeout);

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
  // Publishes `mine`, waits for all, checks that the calls match, runs read (which may read
  // every member's published buffers), waits again so no buffer is reused early, runs finish.
  template <class Read, class Finish>
  void run(LocalCall mine, Read&& read, Finish&& finish);
  void check_matching_calls();

  std::shared_ptr<LocalGroup> group_;
  const std::chrono::milliseconds* timeout_;
};

class LocalBackend final : public Backend {
 public:
  LocalBackend(std::shared_ptr<LocalWorld> world, const std::chrono::milliseconds* timeout)
      : world_(std::move(world)), timeout_(timeout) {}
  std::string name() const override { return "simulated (threads as ranks)"; }
  std::unique_ptr<Communicator> create(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats) override {
    return std::make_unique<LocalCommunicator>(world_->group(world_ranks), my_index, stats, timeout_);
  }
  std::unique_ptr<Communicator> create_check(std::vector<int64_t> world_ranks, int64_t my_index,
                                             CommStats* stats) override {
    return std::make_unique<LocalCommunicator>(world_->group(world_ranks, 1), my_index, stats, timeout_);
  }

 private:
  std::shared_ptr<LocalWorld> world_;
  const std::chrono::milliseconds* timeout_;
};

}  // namespace spsd::detail
