// The float32 wire's conversion kernels (half_wire.hpp). Grid-stride loops: a collective's
// buffers are large and contiguous, and the conversion is a small part of its time.
#include "half_wire.hpp"

#include <algorithm>

#include "event.cuh"
#include "spsd/core/half.hpp"

namespace spsd::detail {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, int64_t{1} << 16));
}

template <class T>
__global__ void widen_kernel(const T* src, float* dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = static_cast<float>(src[i]);
}

template <class T>
__global__ void narrow_kernel(const float* src, T* dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = T(src[i]);
}

}  // namespace

void widen_halves(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (t == DType::kBFloat16)
    widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const bfloat16*>(src), dst, n);
  else
    widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const float16*>(src), dst, n);
  check_cuda(cudaGetLastError(), "half reduction", concat("widening ", n, " ", t, " elements to float32"));
}

void narrow_to_halves(const float* src, DType t, void* dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (t == DType::kBFloat16)
    narrow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, static_cast<bfloat16*>(dst), n);
  else
    narrow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, static_cast<float16*>(dst), n);
  check_cuda(cudaGetLastError(), "half reduction", concat("rounding ", n, " float32 elements to ", t));
}

}  // namespace spsd::detail
