#pragma once
// The two streams of a rank's device: kernels go on compute, collectives on comm; a
// collective orders itself after earlier kernels and before later ones with events.
#include <cuda_runtime.h>

#include <string_view>

#include "event.cuh"

namespace spsd::detail {

struct DeviceStreams {
  int device = -1;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
};

// The event that marks the inputs of the communication running on this thread as written: the
// device runtime records it on the compute stream when the rank's thread issues the instruction
// and sets it while the communication worker runs it (null otherwise). Waiting for it instead of
// for everything on compute so far lets a collective start before kernels launched after it was
// issued (the next layers' backward), which is the overlap.
inline thread_local cudaEvent_t tls_inputs_ready = nullptr;

// Makes the comm stream wait until the inputs are written: for tls_inputs_ready, else for all
// work enqueued on compute so far (`scratch` records that point).
inline void wait_for_inputs(const DeviceStreams& s, Event& scratch, std::string_view op) {
  if (tls_inputs_ready) {
    check_cuda(cudaStreamWaitEvent(s.comm, tls_inputs_ready, 0), op, "cudaStreamWaitEvent");
    return;
  }
  scratch.record(s.compute, op);
  scratch.make_wait(s.comm, op);
}

// Whether a CUDA graph capture (runtime/device_graph.hpp) is under way on the compute stream
// (where captures begin; the comm stream joins them), invalidated ones included.
inline bool capturing(const DeviceStreams& s, std::string_view op) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(s.compute, &status), op, "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace spsd::detail
