#pragma once
// The two streams of a rank's device: kernels go on compute, collectives on comm; a
// collective orders itself after earlier kernels and before later ones with events.
#include <cuda_runtime.h>

namespace spsd::detail {

struct DeviceStreams {
  int device = -1;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
};

}  // namespace spsd::detail
