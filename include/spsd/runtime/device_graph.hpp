#pragma once
// A CUDA graph of a rank's device work: what the rank's streams were given while it was captured
// (kernels, copies, NCCL collectives; DeviceRuntime::capture_graph), replayed by launch() at the
// same device addresses. One replay costs one launch instead of one per kernel and collective.
// Not available in a build without CUDA (capture_graph needs a device and throws without one).

namespace spsd::detail {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Enqueues the captured work on the rank's compute stream, after everything enqueued there
  // before; returns at once. It reads and writes the very buffers the capture used, so what was
  // written into them since is what it sees. Throws spsd::Error when the device runtime that
  // captured it is gone (its streams and communicators with it).
  virtual void launch() = 0;
};

}  // namespace spsd::detail
