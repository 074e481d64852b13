#pragma once
// Block-level reductions shared by the reduce and softmax kernels.
#include "common.cuh"

namespace spsd::kernel::cuda::detail {

// f-reduction of v over the 32 lanes of a warp that calls this together; lane 0 gets the result.
template <class T, class F>
__device__ T warp_reduce(F f, T v) {
  for (unsigned s = 16; s > 0; s /= 2) v = f(v, __shfl_down_sync(0xffffffffu, v, s));
  return v;
}

// f-reduction of every thread's v over a 1-d block whose size is a power of two in [32, kThreads];
// every thread gets the result. scratch holds blockDim.x values; the block must call this
// uniformly (it synchronizes). Shuffles within each warp, then over the warps' results: three
// barriers, where a shared-memory tree has one per halving (9 at 256 threads).
template <class T, class F>
__device__ T block_reduce(F f, T v, T* scratch) {
  constexpr unsigned kAll = 0xffffffffu;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(f, v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    if (lane < warps) v = scratch[lane];  // the other lanes' values are never folded in
    for (unsigned s = 16; s > 0; s /= 2) {
      const T other = __shfl_down_sync(kAll, v, s);
      if (lane + s < warps) v = f(v, other);
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  const T r = scratch[0];
  __syncthreads();  // scratch may be reused right after
  return r;
}

// Threads for a block folding len elements: a power of two from one warp up to kThreads.
inline int row_threads(int64_t len) {
  int t = 32;
  while (t < kThreads && t < len) t *= 2;
  return t;
}

}  // namespace spsd::kernel::cuda::detail
