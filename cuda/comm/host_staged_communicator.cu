// Host-staged communicator: each call copies its device inputs into pinned host memory on the
// communication stream (after the kernels that wrote them: wait_for_inputs), runs the same
// operation on the host communicator, and copies the results back on that stream. Synchronous by
// construction (the host needs the data, and the pinned buffers are reused by the next call), but
// it waits only for the comm stream, so kernels launched meanwhile keep the compute stream busy.
// For the same reason it cannot be captured into a CUDA graph: every call, barrier included,
// throws while the compute stream captures, before it touches a stream or a peer (every member
// captures the same program, so every member throws; none waits for another).
#include "host_staged_communicator.hpp"

#include <cuda_runtime.h>

#include <utility>

#include "event.cuh"
#include "spsd/comm/traffic.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::detail {

namespace {

// Page-locked host memory (copies to and from it run at full speed and asynchronously), grown on
// demand and kept: pinning costs far more than the copies, so it is not redone per call.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    if (data_) (void)cudaFreeHost(data_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes` (null while nothing was ever needed: the host communicator accepts a null
  // buffer for zero elements).
  char* reserve(int64_t bytes, std::string_view op) {
    if (bytes <= bytes_) return data_;
    if (data_) check_cuda(cudaFreeHost(std::exchange(data_, nullptr)), op, "cudaFreeHost of a staging buffer");
    bytes_ = 0;
    void* p = nullptr;
    // Portable: pinned for every device's context, whichever device is current.
    check_cuda(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), op,
               concat("cudaHostAlloc of ", bytes, " bytes for staging"));
    data_ = static_cast<char*>(p);
    bytes_ = bytes;
    return data_;
  }

 private:
  char* data_ = nullptr;
  int64_t bytes_ = 0;
};

class HostStagedCommunicator final : public Communicator {
 public:
  HostStagedCommunicator(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats,
                         std::unique_ptr<Communicator> host, const DeviceStreams& streams)
      : Communicator(std::move(world_ranks), my_index, stats), host_(std::move(host)), streams_(streams) {}

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
  // Each do_* first makes streams_.device current (so that no CUDA context is ever created on
  // another device), refuses a graph capture, and orders the comm stream after the inputs'
  // kernels: begin().
  void begin(const char* op);
  void refuse_capture(const char* op);
  // Enqueues a copy on the comm stream.
  void enqueue_copy(void* dst, const void* src, int64_t elems, DType t, cudaMemcpyKind kind, const char* op);
  void synchronize(const char* op);
  // Device elements -> `buffer` (grown as needed), complete on return; the host copy's address.
  char* stage_in(PinnedBuffer& buffer, const void* device, int64_t elems, DType t, const char* op);
  // Host results -> device, complete on return (the pinned buffer may be reused at once).
  void stage_out(void* device, const void* host, int64_t elems, DType t, const char* op);

  std::unique_ptr<Communicator> host_;
  DeviceStreams streams_;
  PinnedBuffer send_, recv_;
  Event inputs_written_;  // created at the first call, on the device
};

void HostStagedCommunicator::refuse_capture(const char* op) {
  SPSD_CHECK(!capturing(streams_, op), op, "host-staged communication (ranks sharing a GPU, or no NCCL) cannot be "
             "captured into a CUDA graph: it waits on the host for its copies (", to_string(), ", device ",
             streams_.device, ")");
}

void HostStagedCommunicator::begin(const char* op) {
  refuse_capture(op);
  if (!inputs_written_.get()) inputs_written_ = Event(op);
  wait_for_inputs(streams_, inputs_written_, op);
}

void HostStagedCommunicator::enqueue_copy(void* dst, const void* src, int64_t elems, DType t, cudaMemcpyKind kind,
                                          const char* op) {
  if (elems == 0) return;
  const int64_t bytes = elems * size_of(t);
  const char* direction = kind == cudaMemcpyDeviceToHost ? " bytes device to host" : " bytes host to device";
  check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, streams_.comm), op,
             concat("cudaMemcpyAsync of ", bytes, direction));
}

void HostStagedCommunicator::synchronize(const char* op) {
  check_cuda(cudaStreamSynchronize(streams_.comm), op, "cudaStreamSynchronize of the communication stream");
}

char* HostStagedCommunicator::stage_in(PinnedBuffer& buffer, const void* device, int64_t elems, DType t,
                                       const char* op) {
  char* host = buffer.reserve(elems * size_of(t), op);
  enqueue_copy(host, device, elems, t, cudaMemcpyDeviceToHost, op);
  synchronize(op);
  return host;
}

void HostStagedCommunicator::stage_out(void* device, const void* host, int64_t elems, DType t, const char* op) {
  enqueue_copy(device, host, elems, t, cudaMemcpyHostToDevice, op);
  synchronize(op);
}

// Host send and recv are distinct buffers, so a device call in place (send == recv) needs nothing special.
void HostStagedCommunicator::do_all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) {
  ScopedDevice scope(streams_.device, "all_reduce");
  begin("all_reduce");
  const char* in = stage_in(send_, send, count, t, "all_reduce");
  char* out = recv_.reserve(count * size_of(t), "all_reduce");
  host_->all_reduce(in, out, count, t, op);
  stage_out(recv, out, count, t, "all_reduce");
}

void HostStagedCommunicator::do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType t,
                                               ReduceOp op) {
  ScopedDevice scope(streams_.device, "reduce_scatter");
  begin("reduce_scatter");
  const int64_t mine = counts[rank()];
  const char* in = stage_in(send_, send, traffic::total(counts), t, "reduce_scatter");
  char* out = recv_.reserve(mine * size_of(t), "reduce_scatter");
  host_->reduce_scatter_v(in, out, counts, t, op);
  stage_out(recv, out, mine, t, "reduce_scatter");
}

void HostStagedCommunicator::do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType t) {
  ScopedDevice scope(streams_.device, "all_gather");
  begin("all_gather");
  const int64_t total = traffic::total(counts);
  const char* in = stage_in(send_, send, counts[rank()], t, "all_gather");
  char* out = recv_.reserve(total * size_of(t), "all_gather");
  host_->all_gather_v(in, out, counts, t);
  stage_out(recv, out, total, t, "all_gather");
}

// The uniform form stays uniform on the host: MPI members must agree on the call they make.
void HostStagedCommunicator::do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                           std::span<const int64_t> recv_counts, DType t, bool uniform) {
  ScopedDevice scope(streams_.device, "all_to_all");
  begin("all_to_all");
  const int64_t recv_total = traffic::total(recv_counts);
  const char* in = stage_in(send_, send, traffic::total(send_counts), t, "all_to_all");
  char* out = recv_.reserve(recv_total * size_of(t), "all_to_all");
  if (uniform)
    host_->all_to_all(in, out, send_counts[0], t);
  else
    host_->all_to_all_v(in, send_counts, out, recv_counts, t);
  stage_out(recv, out, recv_total, t, "all_to_all");
}

// Only the root's data travels down, and only the other members' buffers change.
void HostStagedCommunicator::do_broadcast(void* buffer, int64_t count, DType t, int64_t root) {
  ScopedDevice scope(streams_.device, "broadcast");
  begin("broadcast");
  const bool is_root = rank() == root;
  char* host =
      is_root ? stage_in(send_, buffer, count, t, "broadcast") : send_.reserve(count * size_of(t), "broadcast");
  host_->broadcast(host, count, t, root);
  if (!is_root) stage_out(buffer, host, count, t, "broadcast");
}

// All messages travel packed: every send in one pinned buffer, every receive in the other, with
// one synchronization each way however many messages there are.
void HostStagedCommunicator::do_send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType t) {
  const char* op = "send_recv";
  ScopedDevice scope(streams_.device, op);
  begin(op);
  int64_t send_total = 0, recv_total = 0;
  for (const SendSpec& s : sends) send_total += s.count;
  for (const RecvSpec& r : recvs) recv_total += r.count;
  char* packed_sends = send_.reserve(send_total * size_of(t), op);
  char* packed_recvs = recv_.reserve(recv_total * size_of(t), op);

  std::vector<SendSpec> host_sends;
  host_sends.reserve(sends.size());
  int64_t offset = 0;
  for (const SendSpec& s : sends) {
    char* at = packed_sends ? packed_sends + offset * size_of(t) : nullptr;
    enqueue_copy(at, s.data, s.count, t, cudaMemcpyDeviceToHost, op);
    host_sends.push_back({s.peer, at, s.count});
    offset += s.count;
  }
  synchronize(op);

  std::vector<RecvSpec> host_recvs;
  host_recvs.reserve(recvs.size());
  offset = 0;
  for (const RecvSpec& r : recvs) {
    host_recvs.push_back({r.peer, packed_recvs ? packed_recvs + offset * size_of(t) : nullptr, r.count});
    offset += r.count;
  }
  host_->send_recv(host_sends, host_recvs, t);

  for (size_t i = 0; i < recvs.size(); ++i)
    enqueue_copy(recvs[i].data, host_recvs[i].data, recvs[i].count, t, cudaMemcpyHostToDevice, op);
  synchronize(op);
}

void HostStagedCommunicator::do_barrier() {
  refuse_capture("barrier");
  host_->barrier();
}

}  // namespace

std::unique_ptr<Communicator> make_host_staged_communicator(std::vector<int64_t> world_ranks, int64_t my_index,
                                                            CommStats* stats, std::unique_ptr<Communicator> host,
                                                            const DeviceStreams& streams) {
  const char* op = "communicator";
  SPSD_CHECK(host != nullptr, op, "the host-staged communicator over world ranks ", join(world_ranks),
             " needs a host communicator");
  SPSD_CHECK(host->world_ranks() == world_ranks && host->rank() == my_index, op, "the host ", host->to_string(),
             " must have the members and rank of the host-staged communicator(world ranks ", join(world_ranks),
             ", rank ", my_index, ")");
  SPSD_CHECK(streams.device >= 0, op, "streams.device must name a CUDA device, got ", streams.device);
  SPSD_CHECK(stats != nullptr, op, "the host-staged communicator needs counters");
  return std::make_unique<HostStagedCommunicator>(std::move(world_ranks), my_index, stats, std::move(host), streams);
}

}  // namespace spsd::detail
