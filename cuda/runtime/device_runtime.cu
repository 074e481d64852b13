// A rank's CUDA device: bound as local_rank % device_count at the first use of a cuda placement,
// with a compute and a communication stream, a caching allocator, and one device communicator
// per rank set (NCCL when every member has its own GPU, host-staged otherwise). No kernels here
// (fill_words.cu has the fill), so the fake-CUDA tests link this file too (test/fake_cuda).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../src/runtime/context.hpp"
#include "../../src/runtime/cuda_probe.hpp"
#include "../comm/device_streams.hpp"
#include "../comm/event.cuh"
#include "../comm/gpu_identity.hpp"
#include "../comm/host_staged_communicator.hpp"
#include "../comm/nccl_communicator.hpp"
#include "device_trace.cuh"
#include "fill_words.hpp"
#include "stream_capture.hpp"
#include "spsd/core/error.hpp"
#include "spsd/runtime/runtime.hpp"
#include "spsd/runtime/scheduler.hpp"

namespace spsd::detail {

namespace {

class CudaRawMemory final : public RawDeviceMemory {
 public:
  explicit CudaRawMemory(int device) : device_(device) {}
  // ScopedDevice: the last block of a rank may be freed on another rank's thread (simulate).
  void* allocate(int64_t bytes) override {
    ScopedDevice on(device_, "device allocate");
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;  // the allocator frees its cache and retries
    }
    check_cuda(err, "device allocate", concat("cudaMalloc of ", bytes, " bytes on ", name()));
    return p;
  }
  void release(void* p) override {
    // Blocks may be released at process exit after the driver unloaded: nothing to report then
    // (so no ScopedDevice, which throws).
    int previous = device_;
    cudaGetDevice(&previous);
    cudaSetDevice(device_);
    cudaFree(p);
    cudaSetDevice(previous);
    cudaGetLastError();
  }
  std::string name() const override { return "cuda:" + std::to_string(device_); }

 private:
  int device_;
};

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  CudaDeviceRuntime(Context& ctx, std::string_view op) : ctx_(ctx) {
    const CudaProbe probe = probe_cuda();
    SPSD_CHECK(probe.device_count > 0, op, "cuda tensors need a usable CUDA device: ", probe.problem);
    streams_.device = static_cast<int>(ctx.local_rank % probe.device_count);
    check_cuda(cudaSetDevice(streams_.device), op, concat("binding rank ", ctx.rank, " to device ", streams_.device));
    // Non-blocking: the legacy default stream must not serialize our streams with each other.
    compute_ = Stream(op);
    comm_ = Stream(op);
    streams_.compute = compute_.get();
    streams_.comm = comm_.get();
    allocator_ = std::make_shared<DeviceAllocator>(std::make_unique<CudaRawMemory>(streams_.device));
    if (ctx.trace) {
      trace_ = std::make_unique<DeviceTrace>();
      ctx.trace->attach_device(this);  // the recorder goes first (context.hpp)
    }
  }

  ~CudaDeviceRuntime() override {
    alive_.reset();  // graphs that outlive this refuse to launch
    communicators_.clear();  // NCCL communicators before their streams
    cudaSetDevice(streams_.device);
    for (cudaStream_t s : {streams_.compute, streams_.comm})
      if (s) cudaStreamSynchronize(s);  // work in flight before the streams go (their destructors)
    trace_.reset();  // its events, now complete
    if (flag_.found) cudaFreeHost(flag_.found);
    if (flag_.scratch) cudaFree(flag_.scratch);
    cudaGetLastError();
  }

  int device() const override { return streams_.device; }
  void* compute_stream() override { return streams_.compute; }
  // Where this thread's copies and fills go: the compute stream, or the communication stream
  // inside a queued instruction (KernelStreamOverride).
  cudaStream_t work_stream() const {
    void* s = kernel_stream_override();
    return s ? static_cast<cudaStream_t>(s) : streams_.compute;
  }
  const std::shared_ptr<DeviceAllocator>& shared_allocator() override { return allocator_; }

  void bind_calling_thread() override {
    check_cuda(cudaSetDevice(streams_.device), "communication stream", concat("binding to device ", streams_.device));
  }

  // The worker runs the wrapper while this runtime lives (the context ends its stream first).
  // Inside it, everything the instruction enqueues goes on the communication stream, after the
  // compute work issued before it: its collectives, and its pack/unpack kernels and copies
  // (KernelStreamOverride); its allocations take only blocks freed before the issue, and the
  // blocks it frees return once the compute stream waits for it (device_allocator.hpp).
  std::function<void()> ordered_after_current_work(std::string_view name, int64_t bytes,
                                                   std::function<void()> run) override {
    std::shared_ptr<Event> ready = take_event();
    ready->record(streams_.compute, "communication");
    const int64_t generation = allocator_->begin_generation();
    const bool traced = trace_ && !capturing_;  // no spans in a graph: their events never complete
    return [this, name, bytes, generation, traced, run = std::move(run), ready = std::move(ready)] {
      ready->make_wait(streams_.comm, "communication");
      std::unique_ptr<DeviceMark> start = traced ? trace_->begin(streams_.comm) : nullptr;
      {
        DeviceAllocator::DeferFrees held(*allocator_);
        // Destroyed before `held` releases its blocks, also when run throws: the compute stream
        // waits for everything enqueued (ready is re-recorded: every wait on it was issued).
        struct JoinCompute {
          const DeviceStreams& streams;
          cudaEvent_t done;
          ~JoinCompute() {
            (void)cudaEventRecord(done, streams.comm);
            (void)cudaStreamWaitEvent(streams.compute, done, 0);
          }
        } join{streams_, ready->get()};
        struct InputsReady {  // what the communicators wait for (cuda/comm/device_streams.hpp)
          explicit InputsReady(cudaEvent_t e) { tls_inputs_ready = e; }
          ~InputsReady() { tls_inputs_ready = nullptr; }
        } inputs(ready->get());
        const KernelStreamOverride on_comm(streams_.comm);
        const DeviceAllocator::OnlyBlocksFreedBefore older(generation);
        run();
      }
      if (!start) return;
      // Timed from when its inputs are ready to the end of everything it enqueued.
      TraceSpan span{TraceLane::kCudaComm, std::string(name), "instruction", {}, {}, {{"bytes", bytes}}};
      trace_->end(std::move(start), streams_.comm, std::move(span));
    };
  }

  void synchronize() override {
    refuse_in_capture("synchronize", "waiting on the host for the device");
    drain_communicators();
    compute_.synchronize("synchronize");
    comm_.synchronize("synchronize");
  }

  DeviceValueFlag value_flag() override {
    if (!flag_.found) {
      refuse_in_capture("value flag", "making the flag (a synchronous copy)");
      ScopedDevice on(streams_.device, "value flag");
      void* found = nullptr;
      check_cuda(cudaHostAlloc(&found, sizeof(FoundValue), cudaHostAllocDefault), "value flag", "pinned record");
      *static_cast<FoundValue*>(found) = FoundValue{0, 0, 0};
      void* scratch = nullptr;
      check_cuda(cudaMalloc(&scratch, sizeof(int64_t)), "value flag", "device scratch word");
      const int64_t none = std::numeric_limits<int64_t>::max();
      check_cuda(cudaMemcpy(scratch, &none, sizeof none, cudaMemcpyHostToDevice), "value flag", "clearing the scratch word");
      flag_ = {static_cast<FoundValue*>(found), static_cast<int64_t*>(scratch)};
    }
    return flag_;
  }

  void copy_bytes(void* dst, DeviceType dst_device, const void* src, DeviceType src_device, int64_t bytes) override {
    if (dst_device == DeviceType::kCPU || src_device == DeviceType::kCPU)
      refuse_in_capture("copy", concat("copying ", bytes, " bytes ", to_string(src_device), " -> ", to_string(dst_device)));
    // Unified addressing lets the driver tell host from device pointers; ordered on the work stream.
    check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, work_stream()), "copy",
               concat("copying ", bytes, " bytes ", to_string(src_device), " -> ", to_string(dst_device)));
    if (dst_device == DeviceType::kCPU) {
      drain_communicators();
      check_cuda(cudaStreamSynchronize(work_stream()), "copy", "waiting for a device -> host copy");
    }
  }

  void zero_bytes(void* dst, int64_t bytes) override {
    check_cuda(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), work_stream()), "zero fill",
               concat("zeroing ", bytes, " bytes"));
  }

  void fill_elements(void* dst, int64_t count, const void* value, int64_t value_bytes) override {
    fill_words(dst, count, value, value_bytes, work_stream());
    check_cuda(cudaGetLastError(), "fill", concat("filling ", count, " elements of ", value_bytes, " bytes"));
  }

  Communicator& communicator(const std::vector<int64_t>& world_ranks) override {
    auto it = communicators_.find(world_ranks);
    if (it != communicators_.end()) return *it->second;
    Communicator& host = spsd::communicator(world_ranks);  // validates the ranks, bootstraps
    const int64_t me = host.rank();
    // Threads of one process (simulate) share their GPU, and NCCL refuses two members on one
    // GPU, so both take the host-staged path.
    const bool simulated = ctx_.backend->name() != "mpi";
    std::unique_ptr<Communicator> comm;
    if (simulated || ranks_share_a_gpu(host, streams_.device))
      comm = make_host_staged_communicator(world_ranks, me, &ctx_.stats,
                                           ctx_.backend->create(world_ranks, me, &staging_stats_), streams_);
    else
      comm = make_nccl_communicator(world_ranks, me, &ctx_.stats, host, streams_, &ctx_.timeout);
    return *communicators_.emplace(world_ranks, std::move(comm)).first->second;
  }

  // The graph's held blocks: freed during the capture, used by its replays, freed with it.
  struct GraphBlocks {
    std::shared_ptr<DeviceAllocator> allocator;
    std::vector<void*> blocks;
    ~GraphBlocks() {
      for (void* p : blocks) allocator->free(p);
    }
  };

  std::unique_ptr<DeviceGraph> capture_graph(std::string_view op, const std::function<void()>& body) override {
    SPSD_CHECK(!capturing_, op, "a CUDA graph capture (", capture_op_, ") is already under way on device ",
               streams_.device, " (captures do not nest)");
    drain_communicators();  // queued before: issued and done outside the graph, nothing left pending
    auto held = std::make_shared<GraphBlocks>();
    held->allocator = allocator_;
    capture_op_ = std::string(op);
    capturing_ = true;
    allocator_->hold_frees(&held->blocks);
    struct Done {
      CudaDeviceRuntime& rt;
      ~Done() {
        rt.allocator_->hold_frees(nullptr);
        rt.capturing_ = false;
      }
    } done{*this};
    return capture_device_graph(streams_, op, body, [] { before_host_communication(); }, alive_, held);
  }

  std::unique_ptr<DeviceMark> begin_compute_span() override {
    return trace_ && !capturing_ ? trace_->begin(streams_.compute) : nullptr;
  }
  void end_compute_span(std::unique_ptr<DeviceMark> begin, TraceSpan span) override {
    if (trace_ && begin) trace_->end(std::move(begin), streams_.compute, std::move(span));
  }
  void resolve_trace_spans(std::vector<TraceSpan>& out) override {
    if (trace_) trace_->resolve(out);
  }

 private:
  // An event from the pool; it goes back when the last holder drops it (an event may be recorded
  // again once the streams that wait for it were told to: they captured its state then).
  std::shared_ptr<Event> take_event() {
    std::unique_ptr<Event> e;
    {
      std::lock_guard lock(event_pool_->mutex);
      if (!event_pool_->events.empty()) {
        e = std::move(event_pool_->events.back());
        event_pool_->events.pop_back();
      }
    }
    if (!e) {
      ScopedDevice on(streams_.device, "communication");
      e = std::make_unique<Event>("communication");
    }
    return std::shared_ptr<Event>(e.release(), [pool = event_pool_](Event* used) {
      std::lock_guard lock(pool->mutex);
      pool->events.emplace_back(used);
    });
  }

  // What needs the host to wait for the device, or host memory: refused while a graph captures
  // (an illegal call would invalidate the capture; this names the culprit instead).
  void refuse_in_capture(std::string_view op, std::string_view what) const {
    if (capturing_)
      throw_error(op, what, " cannot be captured into the CUDA graph of ", capture_op_,
                  ": it waits on the host or reads or writes host memory");
  }

  // Before the host waits on a stream: the compute stream may wait for collectives still in
  // flight, whose failure (a dead peer) must end in an Error within the timeout, not a hang. The
  // communication worker is idle first (this thread must not use a communicator alongside it).
  void drain_communicators() {
    if (communicators_.empty()) return;
    before_host_communication();
    for (auto& [ranks, comm] : communicators_) comm->drain();
  }

  Context& ctx_;
  Stream compute_, comm_;  // declared before the communicators, so destroyed after them
  DeviceStreams streams_;  // their handles, as the communicators take them
  std::shared_ptr<DeviceAllocator> allocator_;
  CommStats staging_stats_;  // the host half of host-staged calls; counted once, in ctx_.stats
  std::map<std::vector<int64_t>, std::unique_ptr<Communicator>> communicators_;
  // Events of ordered_after_current_work, reused (the pool outlives the runtime while a queued
  // instruction still holds one).
  struct EventPool {
    std::mutex mutex;
    std::vector<std::unique_ptr<Event>> events;
  };
  std::shared_ptr<EventPool> event_pool_ = std::make_shared<EventPool>();
  std::unique_ptr<DeviceTrace> trace_;  // SPSD_TRACE only
  // While capture_graph runs (set on the rank's thread, read on the worker's too).
  std::atomic<bool> capturing_{false};
  std::string capture_op_;
  std::shared_ptr<const void> alive_ = std::make_shared<int>(0);  // expires first: graphs check it
  DeviceValueFlag flag_;                // value_flag(), made at its first use
};

}  // namespace

std::unique_ptr<DeviceRuntime> make_device_runtime(Context& ctx, std::string_view op) {
  return std::make_unique<CudaDeviceRuntime>(ctx, op);
}

}  // namespace spsd::detail
