// Device count and NCCL version, asked once by the runtime.
#include <cuda_runtime.h>
#include <nccl.h>

#include "../../src/runtime/cuda_probe.hpp"

namespace spsd::detail {

CudaProbe probe_cuda() {
  CudaProbe probe;
  int version = 0;
  if (ncclGetVersion(&version) == ncclSuccess) probe.nccl_version = version;
  cudaError_t err = cudaGetDeviceCount(&probe.device_count);
  if (err != cudaSuccess) {
    probe.device_count = 0;
    probe.problem = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error for later callers
  } else if (probe.device_count == 0) {
    probe.problem = "the CUDA driver reports no devices";
  }
  return probe;
}

}  // namespace spsd::detail
