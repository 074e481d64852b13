// Capturing a rank's device work into a CUDA graph (stream_capture.hpp).
#include "stream_capture.hpp"

#include <cuda_runtime.h>

#include <exception>
#include <string>
#include <utility>

#include "../comm/event.cuh"
#include "spsd/core/error.hpp"

namespace spsd::detail {

namespace {

class CudaDeviceGraph final : public DeviceGraph {
 public:
  CudaDeviceGraph(cudaGraphExec_t exec, const DeviceStreams& streams, std::string op, std::weak_ptr<const void> alive,
                  std::shared_ptr<const void> held)
      : exec_(exec), streams_(streams), op_(std::move(op)), alive_(std::move(alive)), held_(std::move(held)) {}
  // Legal whatever is queued: CUDA releases the graph once its launches are done.
  ~CudaDeviceGraph() override { (void)cudaGraphExecDestroy(exec_); }
  CudaDeviceGraph(const CudaDeviceGraph&) = delete;
  CudaDeviceGraph& operator=(const CudaDeviceGraph&) = delete;

  void launch() override {
    const char* op = "graph launch";
    const std::shared_ptr<const void> alive = alive_.lock();
    SPSD_CHECK(alive != nullptr, op, "the CUDA graph of ", op_, " outlived the device runtime that captured it (device ",
               streams_.device, "): its streams and communicators are gone");
    ScopedDevice device(streams_.device, op);
    check_cuda(cudaGraphLaunch(exec_, streams_.compute), op, concat("cudaGraphLaunch of the graph of ", op_));
  }

 private:
  cudaGraphExec_t exec_;
  DeviceStreams streams_;
  std::string op_;
  std::weak_ptr<const void> alive_;
  std::shared_ptr<const void> held_;
};

// Ends the capture on streams.compute (and on every stream that joined it) and drops what it
// recorded; the streams run work again. Used when the capture failed.
void discard_capture(const DeviceStreams& streams) noexcept {
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(streams.compute, &graph);
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
}

std::string why_not_captured(cudaError_t err) {
  switch (err) {
    case cudaErrorStreamCaptureInvalidated:
      return "a call inside it cannot be captured (it waits on the host, copies from or to pageable host memory, "
             "or frees device memory) and invalidated the capture";
    case cudaErrorStreamCaptureUnjoined:
      return "work on the communication stream was not joined back into the compute stream";
    default: return "";
  }
}

}  // namespace

std::unique_ptr<DeviceGraph> capture_device_graph(const DeviceStreams& streams, std::string_view op,
                                                  const std::function<void()>& body,
                                                  const std::function<void()>& issue_queued,
                                                  std::weak_ptr<const void> alive, std::shared_ptr<const void> held) {
  ScopedDevice device(streams.device, op);
  SPSD_CHECK(!capturing(streams, op), op, "a CUDA graph capture is already under way on device ", streams.device,
             " (captures do not nest)");
  check_cuda(cudaStreamBeginCapture(streams.compute, cudaStreamCaptureModeRelaxed), op, "cudaStreamBeginCapture");
  try {
    body();
    issue_queued();  // the worker's collectives are part of the graph, joined back by their events
  } catch (...) {
    // The worker may still hold instructions issued in the capture: they must reach the streams
    // (recorded, then dropped) before it ends, not after, where their events no longer exist.
    try {
      issue_queued();
    } catch (...) {  // the first error is the one to report
    }
    discard_capture(streams);
    throw;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(streams.compute, &graph);
  if (ended != cudaSuccess) {
    if (graph) (void)cudaGraphDestroy(graph);
    const std::string why = why_not_captured(ended);
    check_cuda(ended, op, why.empty() ? "cudaStreamEndCapture" : concat("capturing a CUDA graph: ", why, "; cudaStreamEndCapture"));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable graph is a copy
  check_cuda(made, op, "cudaGraphInstantiate");
  return std::make_unique<CudaDeviceGraph>(exec, streams, std::string(op), std::move(alive), std::move(held));
}

}  // namespace spsd::detail
