#pragma once
// Capturing a rank's device work into a CUDA graph (spsd/runtime/device_graph.hpp). The capture
// begins on the compute stream; the communication stream joins it through the events that order
// a collective after its inputs, and leaves it through the event the compute stream then waits
// for (cuda/comm/device_streams.hpp, nccl_communicator.cu). Host code only (no kernels), so the
// fake-CUDA tests link it (test/fake_cuda).
#include <functional>
#include <memory>
#include <string_view>

#include "../comm/device_streams.hpp"
#include "spsd/runtime/device_graph.hpp"

namespace spsd::detail {

// Runs body while streams.compute is captured, then issue_queued (it must return once every
// communication instruction queued so far was issued onto the streams, host side, without
// waiting on a stream), ends the capture and returns the graph, launched on streams.compute.
// The capture mode is relaxed: the communication worker issues from another thread, and
// allocations (cudaMalloc) stay legal. launch() throws once `alive` expired (the streams are
// gone); `held` lives as long as the graph (what it must keep allocated).
// Throws spsd::Error naming op when a capture is already under way, when body made a call that
// cannot be captured (the capture was invalidated: a host synchronization, a copy to or from
// pageable host memory, a cudaFree), or when work on the communication stream was not joined back
// into the compute stream. When body or issue_queued throws, the capture is ended and discarded
// and the exception rethrown. In every case no stream captures any more on return.
std::unique_ptr<DeviceGraph> capture_device_graph(const DeviceStreams& streams, std::string_view op,
                                                  const std::function<void()>& body,
                                                  const std::function<void()>& issue_queued,
                                                  std::weak_ptr<const void> alive, std::shared_ptr<const void> held);

}  // namespace spsd::detail
