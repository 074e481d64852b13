// NCCL communicator. It is created nonblocking (config.blocking = 0): every NCCL call returns at
// once and we poll its state, so creation and every collective are bounded by the runtime's
// timeout and a dead or diverged peer ends in ncclCommAbort and an spsd::Error, never a hang.
//
// A collective is only enqueued: the comm stream waits for the compute stream (an event), runs
// the NCCL group, and the compute stream waits for it (another event), so kernels launched later
// read the results, and the host never blocks on NCCL. A 16-bit reduction under
// HalfReduction::kFloat32Wire adds two kernels to that comm-stream work: its input widened into
// float32 scratch before the group, the float32 result rounded back after it. Each call's
// completion event is kept until it is seen done. Every later call (and drain(), which the
// device runtime runs before the host waits on a stream) first checks them: an asynchronous NCCL
// error, or a collective that has not finished within the timeout of its start, aborts the
// communicator and raises Error there, naming the collective. Buffers need no extra care:
// everything that may reuse a buffer runs on the compute stream after the completion event, or
// on the comm stream after the collective.
//
// Inside a CUDA graph capture (runtime/device_graph.hpp) the same calls are recorded instead of
// run: the events join the comm stream into the capture and back. Their completion events are
// not kept (an event recorded in a capture never completes; the replay is the graph's launch),
// and scratch that a capture used is never freed before the communicator goes (the graph keeps
// its address): growing it then allocates anew and keeps the old buffer.
#include "nccl_communicator.hpp"

#include <nccl.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "event.cuh"
#include "half_wire.hpp"
#include "spsd/comm/half_reduction.hpp"
#include "spsd/comm/traffic.hpp"
#include "spsd/core/error.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::detail {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    // Reduced natively under HalfReduction::kNative (NCCL adds in float and rounds per step of
    // its algorithm: docs/cuda.md); kFloat32Wire reduces float32 instead (float32_wire).
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBool: return ncclUint8;  // one byte; moved, never reduced (Communicator checks)
  }
  throw_error("nccl", "no NCCL datatype for dtype value ", static_cast<int>(t));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  throw_error("nccl", "no NCCL reduction for reduce op value ", static_cast<int>(op));
}

char* at(void* base, int64_t elems, DType t) { return static_cast<char*>(base) + elems * size_of(t); }
const char* at(const void* base, int64_t elems, DType t) { return static_cast<const char*>(base) + elems * size_of(t); }

bool uniform(std::span<const int64_t> counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

// Whether a reduction of t goes through float32 (half_reduction.hpp). Communicator counted the
// call's bytes with the same setting moments before: every rank sets it at one point, after
// synchronize(), never while a collective runs. A single member takes this path too (NCCL
// copies), so the conversions run, and are tested, on one GPU.
bool float32_wire(DType t) { return is_half(t) && reduction_wire_dtype(t) == DType::kFloat32; }

// The bound of one call: when it ends, and the timeout it was computed from (for the message).
struct Deadline {
  std::chrono::milliseconds bound;
  Clock::time_point at;
  explicit Deadline(std::chrono::milliseconds b) : bound(b), at(Clock::now() + b) {}
};

// Device memory grown on demand and kept: cudaFree synchronizes the whole device, too costly per
// call. The owner drains its pending collectives before growing it (cudaFree waits for them, but
// without a bound).
class DeviceScratch {
 public:
  explicit DeviceScratch(int device) : device_(device) {}
  ~DeviceScratch() {
    if (data_) (void)cudaFree(data_);
    for (void* p : kept_) (void)cudaFree(p);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  bool holds(int64_t bytes) const { return bytes <= bytes_; }
  // in_graph: a capture is under way (the buffer returned is then never freed before this goes;
  // nor is any buffer returned during an earlier capture).
  void* get(int64_t bytes, std::string_view op, bool in_graph) {
    if (!holds(bytes)) grow(bytes, op, in_graph);
    graphed_ = graphed_ || in_graph;
    return data_;
  }

 private:
  void grow(int64_t bytes, std::string_view op, bool in_graph) {
    ScopedDevice device(device_, op);
    if (data_ && (graphed_ || in_graph))
      kept_.push_back(std::exchange(data_, nullptr));  // a graph may still use it; cudaFree ends a capture
    else if (data_)
      check_cuda(cudaFree(std::exchange(data_, nullptr)), op, "cudaFree of the scratch buffer");
    graphed_ = false;
    bytes_ = 0;
    check_cuda(cudaMalloc(&data_, bytes), op, concat("cudaMalloc of ", bytes, " bytes of scratch"));
    bytes_ = bytes;
  }

  int device_;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  bool graphed_ = false;      // data_ was handed out during a capture
  std::vector<void*> kept_;   // earlier buffers that graphs use, freed with this
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats, Communicator& bootstrap,
                   const DeviceStreams& streams, const std::chrono::milliseconds* timeout);
  ~NcclCommunicator() override;
  void drain() override;

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
  void create(Communicator& bootstrap);
  // Orders one operation between the compute and comm streams: `calls` (NCCL calls) run inside
  // one NCCL group, `after` enqueues further work (device copies) on the comm stream behind them,
  // `before` ahead of the group, once the inputs are written (the float32 wire's widening).
  // Returns once it is enqueued; its completion event joins pending_.
  void run(const char* op, const std::function<void()>& calls, const std::function<void()>& after = {},
           const std::function<void()>& before = {});
  // Drops the pending collectives that finished; throws (from inside guarded: the communicator is
  // aborted) on an asynchronous NCCL error, or when the oldest is past its deadline. When `wait`,
  // polls until none is left.
  void settle_pending(const char* op, bool wait);
  // Scratch of at least bytes, after the collectives that may still use the old one.
  void* scratch(int64_t bytes, const char* op);
  // Accepts ncclSuccess and ncclInProgress (the state of a nonblocking call still being posted).
  void check(ncclResult_t result, const char* op, std::string_view what);
  // check, then polls until a call that returned ncclInProgress is posted.
  void settle(ncclResult_t result, const char* op, std::string_view what, const Deadline& deadline);
  // Polls until done(state of the communicator) or the deadline; an asynchronous NCCL error (a
  // peer or network failure) ends the wait at once instead of as a timeout.
  void poll(const char* op, const Deadline& deadline, const std::function<bool(ncclResult_t)>& done);
  void copy(void* dst, const void* src, int64_t elems, DType t, const char* op);
  // Runs body; on any failure aborts the NCCL communicator (NCCL's rule after an error: nothing can
  // be assumed about enqueued work), remembers why, and rethrows.
  template <class Body>
  void guarded(Body&& body);
  std::string where() const;
  std::string last_error() const;

  DeviceStreams streams_;
  const std::chrono::milliseconds* timeout_;
  ncclComm_t comm_ = nullptr;
  bool created_ = false;
  std::string broken_;  // why comm_ was aborted: every later call names it
  Event before_;
  // Enqueued collectives not yet seen complete, oldest first, and events to reuse.
  struct Pending {
    const char* op;
    Event done;
    Deadline deadline;
  };
  std::deque<Pending> pending_;
  std::vector<Event> spare_events_;
  DeviceScratch scratch_;
};

NcclCommunicator::NcclCommunicator(std::vector<int64_t> world_ranks, int64_t my_index, CommStats* stats,
                                   Communicator& bootstrap, const DeviceStreams& streams,
                                   const std::chrono::milliseconds* timeout)
    : Communicator(std::move(world_ranks), my_index, stats), streams_(streams), timeout_(timeout),
      scratch_(streams.device) {
  guarded([&] { create(bootstrap); });
  created_ = true;
}

void NcclCommunicator::create(Communicator& bootstrap) {
  const char* op = "communicator";
  // Word 0 says whether member 0 got an id, so a failure there raises on every member instead of
  // leaving the others to start NCCL with garbage.
  static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
  std::array<int64_t, 1 + sizeof(ncclUniqueId) / sizeof(int64_t)> message{};
  if (rank() == 0) {
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    message[0] = r == ncclSuccess ? 1 : -static_cast<int64_t>(r);
    if (r == ncclSuccess) std::memcpy(&message[1], &id, sizeof id);
  }
  bootstrap.broadcast(message.data(), static_cast<int64_t>(message.size()), DType::kInt64, 0);
  SPSD_CHECK(message[0] == 1, op, "while ", where(), ": member 0 (world rank ", world_ranks()[0],
             ") could not create an NCCL unique id: ", ncclGetErrorString(static_cast<ncclResult_t>(-message[0])));
  ncclUniqueId id;
  std::memcpy(&id, &message[1], sizeof id);

  ScopedDevice device(streams_.device, op);
  before_ = Event(op);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return at once (ncclInProgress) and we poll with a bound
  const Deadline deadline(*timeout_);
  settle(ncclCommInitRankConfig(&comm_, static_cast<int>(size()), id, static_cast<int>(rank()), &config), op,
         "ncclCommInitRankConfig", deadline);
}

// Finalize lets NCCL flush and quiesce before destroy; the wait is bounded, so a dead peer cannot
// hang the destructor: past the timeout (or on any error) the communicator is aborted instead.
NcclCommunicator::~NcclCommunicator() {
  if (!comm_) return;
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != streams_.device &&
                        cudaSetDevice(streams_.device) == cudaSuccess;
  ncclResult_t state = ncclCommFinalize(comm_);
  const Clock::time_point deadline = Clock::now() + *timeout_;
  while (state == ncclInProgress && Clock::now() < deadline) {
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    if (state == ncclInProgress) std::this_thread::yield();
  }
  if (state == ncclSuccess)
    (void)ncclCommDestroy(comm_);
  else
    (void)ncclCommAbort(comm_);
  if (switched) (void)cudaSetDevice(previous);
}

std::string NcclCommunicator::where() const {
  return concat(created_ ? "" : "creating ", to_string(), " on NCCL (device ", streams_.device, ")");
}

std::string NcclCommunicator::last_error() const {
  const char* text = ncclGetLastError(comm_);
  return text && *text ? concat(" (", text, ")") : std::string();
}

template <class Body>
void NcclCommunicator::guarded(Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    if (comm_) {
      (void)ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    pending_.clear();  // nothing enqueued on an aborted communicator will be waited for
    if (broken_.empty()) broken_ = e.what();
    throw;
  }
}

void NcclCommunicator::check(ncclResult_t result, const char* op, std::string_view what) {
  if (result == ncclSuccess || result == ncclInProgress) [[likely]]
    return;
  throw_error(op, what, " failed on ", where(), ": ", ncclGetErrorString(result), last_error());
}

void NcclCommunicator::settle(ncclResult_t result, const char* op, std::string_view what, const Deadline& deadline) {
  check(result, op, what);
  if (result == ncclInProgress) poll(op, deadline, [](ncclResult_t state) { return state == ncclSuccess; });
}

// The first millisecond polls back to back (small collectives finish in microseconds), then it
// yields between polls so a long wait does not hold a core a peer process may need.
void NcclCommunicator::poll(const char* op, const Deadline& deadline, const std::function<bool(ncclResult_t)>& done) {
  const Clock::time_point spin_until = Clock::now() + std::chrono::microseconds(1000);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &state), op, "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress)
      throw_error(op, "NCCL reported ", ncclGetErrorString(state), " on ", where(), last_error(),
                  "; the NCCL communicator was aborted");
    if (done(state)) return;
    const Clock::time_point now = Clock::now();
    if (now >= deadline.at)
      throw_error(op, "no completion within ", deadline.bound.count() / 1000.0, " s on ", where(),
                  ": a rank died or diverged; the NCCL communicator was aborted");
    if (now >= spin_until) std::this_thread::yield();
  }
}

void NcclCommunicator::copy(void* dst, const void* src, int64_t elems, DType t, const char* op) {
  if (elems == 0 || dst == src) return;
  check_cuda(cudaMemcpyAsync(dst, src, elems * size_of(t), cudaMemcpyDeviceToDevice, streams_.comm), op,
             concat("cudaMemcpyAsync of ", elems * size_of(t), " bytes device to device"));
}

void NcclCommunicator::settle_pending(const char* op, bool wait) {
  const Clock::time_point spin_until = Clock::now() + std::chrono::microseconds(1000);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    check(ncclCommGetAsyncError(comm_, &state), op, "ncclCommGetAsyncError");
    const char* during = pending_.empty() ? op : pending_.front().op;
    if (state != ncclSuccess && state != ncclInProgress)
      throw_error(during, "NCCL reported ", ncclGetErrorString(state), " on ", where(), last_error(),
                  "; the NCCL communicator was aborted");
    // ncclInProgress: a call is still being posted, nothing after it can be complete.
    while (state == ncclSuccess && !pending_.empty() && pending_.front().done.done(op)) {
      spare_events_.push_back(std::move(pending_.front().done));
      pending_.pop_front();
    }
    if (pending_.empty()) return;
    const Clock::time_point now = Clock::now();
    const Deadline& oldest = pending_.front().deadline;
    if (now >= oldest.at)
      throw_error(pending_.front().op, "no completion within ", oldest.bound.count() / 1000.0, " s on ", where(),
                  ": a rank died or diverged; the NCCL communicator was aborted");
    if (!wait) return;
    if (now >= spin_until) std::this_thread::yield();
  }
}

void NcclCommunicator::drain() {
  if (pending_.empty()) return;
  SPSD_CHECK(comm_ != nullptr, "drain", where(),
             " cannot be used: its NCCL communicator was aborted after an earlier failure: ", broken_);
  guarded([&] {
    ScopedDevice device(streams_.device, "drain");
    settle_pending("drain", true);
  });
}

void* NcclCommunicator::scratch(int64_t bytes, const char* op) {
  // Reusing it needs nothing (the comm stream runs collectives in order; a compute-stream write
  // comes after the last one's completion event); growing frees the old buffer (keeps it, in a
  // capture: cudaFree there is illegal, and the graph goes on using it).
  if (!scratch_.holds(bytes)) drain();
  return scratch_.get(bytes, op, capturing(streams_, op));
}

void NcclCommunicator::run(const char* op, const std::function<void()>& calls, const std::function<void()>& after,
                           const std::function<void()>& before) {
  SPSD_CHECK(comm_ != nullptr, op, where(),
             " cannot be used: its NCCL communicator was aborted after an earlier failure: ", broken_);
  guarded([&] {
    ScopedDevice device(streams_.device, op);
    settle_pending(op, false);  // an earlier collective's failure surfaces here, at the latest
    const Deadline deadline(*timeout_);
    wait_for_inputs(streams_, before_, op);  // inputs written by earlier kernels on compute
    if (before) before();
    check(ncclGroupStart(), op, "ncclGroupStart");
    try {
      calls();
    } catch (...) {
      (void)ncclGroupEnd();  // close the group before the abort in guarded()
      throw;
    }
    // Nothing else may go on the comm stream before the group is posted (NCCL's nonblocking rule).
    settle(ncclGroupEnd(), op, "ncclGroupEnd", deadline);
    if (after) after();
    Event done;
    if (spare_events_.empty()) {
      done = Event(op);
    } else {
      done = std::move(spare_events_.back());
      spare_events_.pop_back();
    }
    done.record(streams_.comm, op);
    done.make_wait(streams_.compute, op);  // later kernels on compute read the results (joins a capture)
    if (capturing(streams_, op))
      spare_events_.push_back(std::move(done));  // recorded in a capture: it never completes
    else
      pending_.push_back({op, std::move(done), deadline});
  });
}

void NcclCommunicator::do_all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op) {
  const ncclRedOp_t reduce = nccl_op(op);
  if (float32_wire(t)) {
    // In place in float32 scratch: widened before the group, rounded once into recv after it.
    float* wide = static_cast<float*>(scratch(count * size_of(DType::kFloat32), "all_reduce"));
    run(
        "all_reduce",
        [&] {
          check(ncclAllReduce(wide, wide, count, ncclFloat32, reduce, comm_, streams_.comm), "all_reduce",
                "ncclAllReduce");
        },
        [&] { narrow_to_halves(wide, t, recv, count, streams_.comm); },
        [&] { widen_halves(send, t, wide, count, streams_.comm); });
    return;
  }
  const ncclDataType_t type = nccl_type(t);
  run("all_reduce", [&] {
    check(ncclAllReduce(send, recv, count, type, reduce, comm_, streams_.comm), "all_reduce", "ncclAllReduce");
  });
}

void NcclCommunicator::do_reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType t,
                                         ReduceOp op) {
  const char* name = "reduce_scatter";
  const ncclDataType_t type = nccl_type(t);
  const ncclRedOp_t reduce = nccl_op(op);
  const int64_t mine = counts[rank()], offset = displacements(counts)[rank()];
  if (float32_wire(t)) {
    // The whole input widened into float32 scratch, reduced there (NCCL's in-place
    // reduce-scatter, or the all-reduce of uneven blocks below), our block rounded into recv.
    const int64_t total = traffic::total(counts);
    float* wide = static_cast<float*>(scratch(total * size_of(DType::kFloat32), name));
    const auto widen = [&] { widen_halves(send, t, wide, total, streams_.comm); };
    const auto narrow = [&] { narrow_to_halves(wide + offset, t, recv, mine, streams_.comm); };
    if (uniform(counts))
      run(
          name,
          [&] {
            check(ncclReduceScatter(wide, wide + offset, mine, ncclFloat32, reduce, comm_, streams_.comm), name,
                  "ncclReduceScatter");
          },
          narrow, widen);
    else
      run(
          name,
          [&] {
            check(ncclAllReduce(wide, wide, total, ncclFloat32, reduce, comm_, streams_.comm), name, "ncclAllReduce");
          },
          narrow, widen);
    return;
  }
  if (uniform(counts)) {
    // NCCL's in-place form leaves our block where it was in the input; ours promises it at the
    // start of recv, hence the copy (member 0's block is already there).
    void* out = send == recv ? at(recv, offset, t) : recv;
    run(name,
        [&] {
          check(ncclReduceScatter(send, out, mine, type, reduce, comm_, streams_.comm), name, "ncclReduceScatter");
        },
        [&] { copy(recv, out, mine, t, name); });
    return;
  }
  // Uneven blocks (NCCL has no reduce-scatter-v): all-reduce the whole input into scratch and keep
  // our block. Cost: 2(n-1)/n of the input sent per member instead of the (n-1)/n of a
  // reduce-scatter, plus scratch the size of the input (grouped ncclReduce per root would send ~1x).
  const int64_t total = traffic::total(counts);
  void* reduced = scratch(total * size_of(t), name);
  run(name,
      [&] { check(ncclAllReduce(send, reduced, total, type, reduce, comm_, streams_.comm), name, "ncclAllReduce"); },
      [&] { copy(recv, at(reduced, offset, t), mine, t, name); });
}

void NcclCommunicator::do_all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType t) {
  const char* name = "all_gather";
  const ncclDataType_t type = nccl_type(t);
  if (uniform(counts)) {
    // In place when send == recv + rank * count: NCCL's own in-place form.
    run(name, [&] { check(ncclAllGather(send, recv, counts[0], type, comm_, streams_.comm), name, "ncclAllGather"); });
    return;
  }
  // Uneven blocks: one broadcast per member that has data, in one group so NCCL runs them together.
  const std::vector<int64_t> displs = displacements(counts);
  run(name, [&] {
    for (int64_t k = 0; k < size(); ++k) {
      if (counts[k] == 0) continue;  // every member skips the same roots
      char* block = at(recv, displs[k], t);
      const void* source = k == rank() ? send : block;  // only the root's is read
      check(ncclBroadcast(source, block, counts[k], type, static_cast<int>(k), comm_, streams_.comm), name,
            "ncclBroadcast");
    }
  });
}

// Grouped send/recv serves both forms; our own block is a device copy. Zero-count messages are
// skipped on both sides (a sender's count to b equals b's receive count from it).
void NcclCommunicator::do_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                     std::span<const int64_t> recv_counts, DType t, bool) {
  const char* name = "all_to_all";
  const ncclDataType_t type = nccl_type(t);
  const int64_t me = rank();
  SPSD_CHECK(send_counts[me] == recv_counts[me], name, "member ", me, " of ", to_string(), " sends ", send_counts[me],
             " elements to itself but expects to receive ", recv_counts[me]);
  const std::vector<int64_t> sd = displacements(send_counts), rd = displacements(recv_counts);
  run(name,
      [&] {
        for (int64_t p = 0; p < size(); ++p) {
          if (p == me) continue;
          if (send_counts[p] > 0)
            check(ncclSend(at(send, sd[p], t), send_counts[p], type, static_cast<int>(p), comm_, streams_.comm), name,
                  "ncclSend");
          if (recv_counts[p] > 0)
            check(ncclRecv(at(recv, rd[p], t), recv_counts[p], type, static_cast<int>(p), comm_, streams_.comm), name,
                  "ncclRecv");
        }
      },
      [&] { copy(at(recv, rd[me], t), at(send, sd[me], t), recv_counts[me], t, name); });
}

void NcclCommunicator::do_broadcast(void* buffer, int64_t count, DType t, int64_t root) {
  const ncclDataType_t type = nccl_type(t);
  run("broadcast", [&] {
    check(ncclBroadcast(buffer, buffer, count, type, static_cast<int>(root), comm_, streams_.comm), "broadcast",
          "ncclBroadcast");
  });
}

// NCCL executes grouped calls to the same peer in order, which keeps the j-th send to b matched
// with b's j-th receive. Messages to ourselves are device copies, paired in the same order.
void NcclCommunicator::do_send_recv(std::span<const SendSpec> sends, std::span<const RecvSpec> recvs, DType t) {
  const char* name = "send_recv";
  const ncclDataType_t type = nccl_type(t);
  std::vector<const SendSpec*> self_sends;
  std::vector<const RecvSpec*> self_recvs;
  for (const SendSpec& s : sends)
    if (s.peer == rank()) self_sends.push_back(&s);
  for (const RecvSpec& r : recvs)
    if (r.peer == rank()) self_recvs.push_back(&r);
  SPSD_CHECK(self_sends.size() == self_recvs.size(), name, "member ", rank(), " of ", to_string(), " sends ",
             self_sends.size(), " messages to itself but receives ", self_recvs.size());
  for (size_t j = 0; j < self_sends.size(); ++j)
    SPSD_CHECK(self_sends[j]->count == self_recvs[j]->count, name, "member ", rank(), " of ", to_string(),
               " sends ", self_sends[j]->count, " elements to itself in its message ", j, " but receives ",
               self_recvs[j]->count);
  run(name,
      [&] {
        for (const SendSpec& s : sends)
          if (s.peer != rank() && s.count > 0)
            check(ncclSend(s.data, s.count, type, static_cast<int>(s.peer), comm_, streams_.comm), name, "ncclSend");
        for (const RecvSpec& r : recvs)
          if (r.peer != rank() && r.count > 0)
            check(ncclRecv(r.data, r.count, type, static_cast<int>(r.peer), comm_, streams_.comm), name, "ncclRecv");
      },
      [&] {
        for (size_t j = 0; j < self_sends.size(); ++j)
          copy(self_recvs[j]->data, self_sends[j]->data, self_sends[j]->count, t, name);
      });
}

// A one-element all-reduce, waited for: completes on a member only once every member has joined it.
void NcclCommunicator::do_barrier() {
  void* flag = scratch(sizeof(int32_t), "barrier");
  // Only the ordering matters, but sanitizers (initcheck) rightly flag reading unset memory.
  check_cuda(cudaMemsetAsync(flag, 0, sizeof(int32_t), streams_.compute), "barrier", "cudaMemsetAsync");
  run("barrier", [&] {
    check(ncclAllReduce(flag, flag, 1, ncclInt32, ncclSum, comm_, streams_.comm), "barrier", "ncclAllReduce");
  });
  drain();
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(std::vector<int64_t> world_ranks, int64_t my_index,
                                                     CommStats* stats, Communicator& bootstrap,
                                                     const DeviceStreams& streams,
                                                     const std::chrono::milliseconds* timeout) {
  const char* op = "communicator";
  SPSD_CHECK(my_index >= 0 && my_index < static_cast<int64_t>(world_ranks.size()), op, "member index ", my_index,
             " is not in world ranks ", join(world_ranks));
  SPSD_CHECK(bootstrap.world_ranks() == world_ranks && bootstrap.rank() == my_index, op, "the bootstrap ",
             bootstrap.to_string(), " must have the members and rank of the NCCL communicator(world ranks ",
             join(world_ranks), ", rank ", my_index, ")");
  SPSD_CHECK(streams.device >= 0, op, "streams.device must name a CUDA device, got ", streams.device);
  SPSD_CHECK(stats != nullptr && timeout != nullptr, op, "the NCCL communicator needs counters and a timeout");
  return std::make_unique<NcclCommunicator>(std::move(world_ranks), my_index, stats, bootstrap, streams, timeout);
}

}  // namespace spsd::detail
