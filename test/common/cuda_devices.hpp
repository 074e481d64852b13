#pragma once
// Whether a gpu test program runs, skips or fails. It skips (exit 77, meson's SKIP) only where the
// machine has no CUDA device: the runtime counts none (cudaErrorNoDevice), or no CUDA driver is
// installed at all (cudaErrorInsufficientDriver with driver version 0: a machine without a GPU).
// Any other answer (a driver too old for the runtime, a broken installation) fails with its text,
// so that a GPU machine with a broken driver cannot give an all-SKIP table. SPSD_REQUIRE_GPU=1
// (tools/gpu-check sets it) makes the skip a failure too.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <spsd/core/config.hpp>
#if SPSD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace spsd_test {

struct CudaDevices {
  int count = 0;      // > 0: the program runs
  int exit_code = 0;  // when count is 0: what the program returns at once, 77 (SKIP) or 1 (FAIL)
};

// Says why on stdout when there is no device; `program` names the program in that line.
inline CudaDevices find_cuda_devices(const char* program) {
  std::string absent;  // why the machine has no device
#if SPSD_HAVE_CUDA
  int count = 0, driver = -1;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) return {count, 0};
  if (err == cudaSuccess || err == cudaErrorNoDevice) {
    absent = "the CUDA driver reports no device";
  } else if (err == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0) {
    absent = "no CUDA driver is installed";
  } else {
    std::printf("%s: FAIL: no usable CUDA device: cudaGetDeviceCount: %s (%s)\n", program, cudaGetErrorName(err),
                cudaGetErrorString(err));
    return {0, 1};
  }
#else
  absent = "spsd was built without CUDA";
#endif
  const char* required = std::getenv("SPSD_REQUIRE_GPU");
  if (required && *required && std::string(required) != "0") {
    std::printf("%s: FAIL: no usable CUDA device (%s), and SPSD_REQUIRE_GPU=%s\n", program, absent.c_str(), required);
    return {0, 1};
  }
  std::printf("%s: SKIP: no CUDA device (%s)\n", program, absent.c_str());
  return {0, 77};
}

}  // namespace spsd_test
