// Built without CUDA: no devices, and the reason says so.
#include "cuda_probe.hpp"

namespace spsd::detail {
CudaProbe probe_cuda() { return {0, 0, "spsd was built without CUDA (meson option cuda found no nvcc/CUDA 12+)"}; }
}  // namespace spsd::detail
