#pragma once
// The CUDA device of a rank: binding (local_rank % device_count, at first use), its compute
// and communication streams, its caching allocator, and the byte moves between host and device
// that tensors and boxing need. In a build without CUDA, or where no device is usable, every
// entry point that needs a device throws spsd::Error saying why.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "spsd/comm/communicator.hpp"
#include "spsd/layout/placement.hpp"
#include "spsd/runtime/device_allocator.hpp"
#include "spsd/runtime/device_graph.hpp"
#include "spsd/runtime/trace.hpp"
#include "spsd/runtime/value_errors.hpp"

namespace spsd {

// The CUDA device this rank uses (binds it at the first call); throws spsd::Error naming the
// reason when there is none (built without CUDA, no driver, no device).
int device();
// Whether a cuda placement can be used on this rank (no throw): a device could be bound.
bool cuda_available();
// This rank's device allocator statistics (throws like device()).
DeviceAllocatorStats device_allocator_stats();
// Gives the allocator's cached blocks back to the driver.
void empty_device_cache();

namespace detail {

// The device state of one rank; lives in the rank's context, created at first use.
class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual int device() const = 0;
  virtual void* compute_stream() = 0;  // a cudaStream_t
  DeviceAllocator& allocator() { return *shared_allocator(); }
  virtual const std::shared_ptr<DeviceAllocator>& shared_allocator() = 0;
  // See detail::copy_bytes and detail::zero_bytes; at least one side is device memory here.
  virtual void copy_bytes(void* dst, DeviceType dst_device, const void* src, DeviceType src_device, int64_t bytes) = 0;
  virtual void zero_bytes(void* dst, int64_t bytes) = 0;
  // See detail::fill_elements; value_bytes is 2, 4 or 8 here.
  virtual void fill_elements(void* dst, int64_t count, const void* value, int64_t value_bytes) = 0;
  // Waits on the host for everything enqueued on this rank's streams.
  virtual void synchronize() = 0;
  // The flag kernels report bad input values into (runtime/value_errors.hpp), made at the first call.
  virtual DeviceValueFlag value_flag() = 0;
  // Makes this rank's device current on the calling thread (the communication worker's).
  virtual void bind_calling_thread() = 0;
  // For communication queued now and run later by the worker: marks, now, the point on the
  // compute stream where its inputs are written, and returns `run` wrapped so that its device
  // collectives wait for that point only, not for the kernels the rank launches meanwhile.
  // While tracing, the wrapped run is also timed on the communication stream (lane kCudaComm,
  // named `name`, with `bytes`).
  virtual std::function<void()> ordered_after_current_work(std::string_view name, int64_t bytes,
                                                           std::function<void()> run) = 0;
  // The communicator that moves device buffers among these world ranks (NCCL when every rank
  // has its own GPU, else host-staged over the host backend); cached per rank set.
  virtual Communicator& communicator(const std::vector<int64_t>& world_ranks) = 0;
  // Captures the device work body enqueues on this rank (kernels, device copies and fills, NCCL
  // collectives, run inline or by the communication worker) into a CUDA graph to replay
  // (device_graph.hpp; what a body may do: docs/cuda.md, "CUDA graphs"). Communication queued
  // before is issued and waited for first, outside the graph; what body queues is issued before
  // the capture ends. Device blocks freed while it captures stay allocated as long as the graph
  // (its replays use them). Throws spsd::Error naming op when body does what cannot be captured
  // (host-staged communication, a host synchronization, a copy to or from host memory), or
  // rethrows what body threw; the capture is then ended and discarded, and the streams and
  // communicators work as before.
  virtual std::unique_ptr<DeviceGraph> capture_graph(std::string_view op, const std::function<void()>& body) = 0;
  // The trace's spans on the compute stream (SPSD_TRACE; only called while tracing): begin
  // records a timing event on it now, end records another and keeps span, whose times
  // resolve_trace_spans reads from the two (waiting for them) when the trace is written.
  virtual std::unique_ptr<DeviceMark> begin_compute_span() = 0;
  virtual void end_compute_span(std::unique_ptr<DeviceMark> begin, TraceSpan span) = 0;
  virtual void resolve_trace_spans(std::vector<TraceSpan>& out) = 0;
};

// This rank's device runtime, created (device bound, streams made) at the first call; throws
// spsd::Error naming op and the reason when no device is usable.
DeviceRuntime& device_runtime(std::string_view op);

// Copies bytes between any two memory spaces, ordered after earlier work on the compute
// stream; returns when a host destination holds the data (a device destination may still be
// pending on the compute stream, which later kernels are ordered after).
void copy_bytes(void* dst, DeviceType dst_device, const void* src, DeviceType src_device, int64_t bytes);
// Zero-fills bytes of memory in the given space.
void zero_bytes(void* dst, DeviceType device, int64_t bytes);
// Sets count elements of value_bytes bytes each to *value, in the given space; on a device, a
// fill on the compute stream (no host copy). value_bytes: 2, 4 or 8 (the element sizes).
void fill_elements(void* dst, DeviceType device, int64_t count, const void* value, int64_t value_bytes);
// The stream to launch kernels on for this memory space (nullptr for the CPU): the compute
// stream, or the one a KernelStreamOverride on this thread names.
void* stream_for(DeviceType device);

// While alive, this thread's device kernels and copies go on `stream` (a cudaStream_t) instead
// of the compute stream: the communication worker inside a queued instruction, whose pack and
// unpack kernels then run on the communication stream, after the instruction's inputs.
class KernelStreamOverride {
 public:
  explicit KernelStreamOverride(void* stream) noexcept;
  ~KernelStreamOverride();
  KernelStreamOverride(const KernelStreamOverride&) = delete;
  KernelStreamOverride& operator=(const KernelStreamOverride&) = delete;

 private:
  void* previous_;
};
void* kernel_stream_override();  // null: none
// The communicator for a boxing step whose buffers live in device (the host one for the CPU).
Communicator& communicator_for(const std::vector<int64_t>& world_ranks, DeviceType device);

// Device memory for Storage: blocks from this rank's caching allocator; the allocator stays
// alive while any block does (a tensor may outlive its Runtime).
struct DeviceBlock {
  void* data = nullptr;
  std::shared_ptr<DeviceAllocator> owner;
};
DeviceBlock allocate_device_block(int64_t bytes);

}  // namespace detail

}  // namespace spsd
