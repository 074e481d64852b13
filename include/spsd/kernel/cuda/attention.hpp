#pragma once
// Scaled dot-product attention on the device, the contract of kernel/cpu/attention.hpp (same
// AttentionDims, outputs, masking and -inf lse for rows without keys). Defined for float,
// double, bfloat16 and float16 in cuda/kernel/attention.cu: 16-bit inputs are loaded as float,
// computed in float and rounded once.
//
// Forward: fused, one pass, no (seq x seq) matrix: a block per (batch x head, tile of queries),
// a warp per query row, the keys and values streamed through shared memory in tiles of 32
// (lane j scores key j; online softmax with warp reductions; each lane accumulates its share
// of the head_dim columns in registers). head_dim up to 256.
// Backward: two fused kernels, probabilities recomputed from lse, no (seq x seq) matrix:
// dq with a warp per query row streaming key tiles; dk and dv with a warp per key row
// streaming query tiles (q, g and out through shared memory). No tensor cores yet.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/kernel/cpu/attention.hpp"

namespace spsd::kernel::cuda {

using cpu::AttentionDims;

// The head_dim the device kernels take (their register accumulators); larger throws spsd::Error.
constexpr int64_t kMaxAttentionHeadDim = 256;

// The cpu kernels' contract (kernel/cpu/attention.hpp), enqueued on stream (a cudaStream_t),
// every pointer device memory. spsd::Error for head_dim > kMaxAttentionHeadDim.
template <FloatingElement T>
void attention_forward(const T* q, const T* k, const T* v, const AttentionDims& d, T* out, compute_t<T>* lse,
                       void* stream);
template <FloatingElement T>
void attention_backward_q(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                          const AttentionDims& d, T* dq, void* stream);
template <FloatingElement T>
void attention_backward_kv(const T* q, const T* k, const T* v, const T* out, const T* g, const compute_t<T>* lse,
                           const AttentionDims& d, T* dkv, void* stream);

}  // namespace spsd::kernel::cuda
