#pragma once
// The CUDA kernels of the comparison and mask ops: the device counterparts of
// kernel/cpu/compare.hpp (same predicates, broadcasting, keys). Host-callable plain C++: `stream`
// is a cudaStream_t, every call only enqueues work on it, every pointer is device memory.
// Defined in cuda/kernel/compare.cu for the six element types and (compare, where, masked_fill)
// bool.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/compare_ops.hpp"

namespace spsd::kernel::cuda {

// Each as kernel/cpu/compare.hpp's function of the same name, enqueued on stream: out = a op b
// (bool, numpy broadcasting); out[i] = a[i] op s; out = cond ? a : b; out = mask ? value : x;
// argmax/argmin's keys.
template <Element T>
void compare(CompareOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, bool* out,
             const Shape& out_shape, void* stream);
template <Element T>
void compare_scalar(CompareOp op, const T* a, compute_t<T> s, bool* out, int64_t n, void* stream);
template <Element T>
void where(const bool* cond, const Shape& cond_shape, const T* a, const Shape& a_shape, const T* b,
           const Shape& b_shape, T* out, const Shape& out_shape, void* stream);
template <Element T>
void masked_fill(const T* x, const Shape& x_shape, const bool* mask, const Shape& mask_shape, compute_t<T> value,
                 T* out, void* stream);
template <Element T>
void extreme_keys(const T* x, const T* m, int64_t outer, int64_t len, int64_t inner, int64_t offset, int64_t n,
                  int64_t* keys, void* stream);

}  // namespace spsd::kernel::cuda
