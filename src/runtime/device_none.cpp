// Built without CUDA: a cuda placement cannot bind a device, and the error says why.
#include "context.hpp"
#include "cuda_probe.hpp"
#include "spsd/core/error.hpp"

namespace spsd::detail {

std::unique_ptr<DeviceRuntime> make_device_runtime(Context&, std::string_view op) {
  throw_error(op, "cuda tensors need a CUDA device: ", probe_cuda().problem);
}

}  // namespace spsd::detail
