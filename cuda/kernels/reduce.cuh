#pragma once
// Block-level reductions shared by the reduce and softmax kernels.
#include "common.cuh"

namespace spsd::kernel::cuda::detail {

// f-reduction of every thread's v over a 1-d block whose size is a power of two <= kThreads;
// every thread gets the result. scratch holds blockDim.x values; the block must call this
// uniformly (it synchronizes).
template <class T, class F>
__device__ T block_reduce(F f, T v, T* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) scratch[t] = f(scratch[t], scratch[t + s]);
    __syncthreads();
  }
  const T r = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return r;
}

// Threads for a block that folds rows of len elements: a power of two in [32, kThreads].
inline int row_threads(int64_t len) {
  int t = 32;
  while (t < kThreads && t < len) t *= 2;
  return t;
}

}  // namespace spsd::kernel::cuda::detail
