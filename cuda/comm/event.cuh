#pragma once
// RAII for the CUDA objects the communicators hold: move-only Event and Stream, a scoped device
// switch, and check_cuda, which turns a failed CUDA call into spsd::Error naming the operation.
// Host code only (no kernels), so plain C++ translation units such as tests can include it too.
#include <cuda_runtime.h>

#include <string_view>
#include <utility>

#include "spsd/core/error.hpp"

namespace spsd::detail {

// "op: what failed: cudaErrorX (text)". The error is also cleared from the thread's last-error
// slot, so the next caller of cudaGetLastError does not report it a second time.
inline void check_cuda(cudaError_t err, std::string_view op, std::string_view what) {
  if (err == cudaSuccess) [[likely]]
    return;
  (void)cudaGetLastError();
  throw_error(op, what, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

// Makes `device` current for the scope and restores the previous device after it: CUDA events,
// allocations and NCCL initialisation bind to the current device, which the caller may not have set.
class ScopedDevice {
 public:
  ScopedDevice(int device, std::string_view op) {
    check_cuda(cudaGetDevice(&previous_), op, "cudaGetDevice");
    if (previous_ == device) return;
    check_cuda(cudaSetDevice(device), op, concat("cudaSetDevice(", device, ")"));
    switched_ = true;
  }
  ~ScopedDevice() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// A timing-free event (cheapest to record and wait on), created on the current device.
class Event {
 public:
  Event() = default;  // empty: holds no event until one is moved in
  explicit Event(std::string_view op) {
    check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), op, "cudaEventCreateWithFlags");
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  ~Event() {
    if (event_) (void)cudaEventDestroy(event_);
  }

  cudaEvent_t get() const { return event_; }
  // Captures the work enqueued on `stream` so far.
  void record(cudaStream_t stream, std::string_view op) {
    check_cuda(cudaEventRecord(event_, stream), op, "cudaEventRecord");
  }
  // Work enqueued on `stream` from now on starts after the captured work finished.
  void make_wait(cudaStream_t stream, std::string_view op) const {
    check_cuda(cudaStreamWaitEvent(stream, event_, 0), op, "cudaStreamWaitEvent");
  }
  // True once the captured work finished; throws on an error of that work.
  bool done(std::string_view op) const {
    cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    check_cuda(err, op, "cudaEventQuery");
    return true;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// A stream on the current device; non-blocking by default, so it never synchronizes implicitly
// with the legacy default stream (ordering must come from events, as in the runtime).
class Stream {
 public:
  Stream() = default;
  explicit Stream(std::string_view op, unsigned flags = cudaStreamNonBlocking) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, flags), op, "cudaStreamCreateWithFlags");
  }
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  ~Stream() {
    if (stream_) (void)cudaStreamDestroy(stream_);
  }

  cudaStream_t get() const { return stream_; }
  void synchronize(std::string_view op) const {
    check_cuda(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
  }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace spsd::detail
