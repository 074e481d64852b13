#pragma once
// What the CUDA side of the build can see; a build without CUDA says so.
#include <string>

namespace spsd::detail {

struct CudaProbe {
  int device_count = 0;
  int nccl_version = 0;  // e.g. 22804 for 2.28.4; 0 when unknown
  std::string problem;   // why there is no usable device, empty when device_count > 0
};

CudaProbe probe_cuda();

}  // namespace spsd::detail
