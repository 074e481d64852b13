#pragma once
// Element-wise CUDA kernels: the device counterparts of kernel/cpu/elementwise.hpp (same ops,
// enums, broadcasting and integer wrapping), plus fill and scale. Host-callable plain C++:
// `stream` is a cudaStream_t; every call only enqueues work on it (asynchronous), and every
// pointer is device memory. Defined for float, double, bfloat16, float16, int32_t and int64_t in
// cuda/kernel/elementwise.cu; the 16-bit types compute in float and round once per output
// element (scalars s and factors widen exactly to float). CUDA or launch failures throw
// spsd::Error naming the kernel.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/kernel/cpu/elementwise.hpp"  // UnaryOp, BinaryOp, unary_supports

namespace spsd::kernel::cuda {

using cpu::BinaryOp;
using cpu::UnaryOp;

// out[i] = op(x[i]) for i < n; out may be x. Integer T supports neg, relu and abs only; other
// ops throw spsd::Error even when n == 0 (as the cpu kernel). gelu (erf) and gelu_tanh are the cpu
// formulas (kernel/derivative.hpp's shared functions).
template <Element T>
void unary(UnaryOp op, const T* x, T* out, int64_t n, void* stream);

// out = a op b with numpy broadcasting; out_shape must be the broadcast of a_shape and b_shape
// (checked on the host). Integer add/sub/mul wrap, integer div truncates and -x/-1 wraps.
// Unlike the cpu kernel, an integer zero divisor is not detected here (the data is on the
// device): callers check it first (copy.hpp's first_zero); a zero divisor gives 0.
// out may be a or b when that input has out's shape.
template <Element T>
void binary(BinaryOp op, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
            const Shape& out_shape, void* stream);

// out[i] = a[i] op s, or s op a[i] when scalar_first. An integer divisor s == 0 (not
// scalar_first) throws spsd::Error even when n == 0, like the cpu kernel.
template <Element T>
void binary_scalar(BinaryOp op, const T* a, compute_t<T> s, T* out, int64_t n, bool scalar_first, void* stream);

// out = 1 where a == b, else 0, numpy broadcasting as binary (backward's mask_eq).
template <Element T>
void equal_mask(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out, const Shape& out_shape,
                void* stream);

// out[i] = f'(saved[i]) * g[i], f = op (kernel/derivative.hpp); floating types only.
template <Element T>
void unary_grad(UnaryOp op, const T* saved, const T* g, T* out, int64_t n, void* stream);

// out[i] = value for i < n.
template <Element T>
void fill(T* out, int64_t n, T value, void* stream);

// x[i] *= factor for i < n (mean = sum then scale); integer products wrap (cpu::scale).
template <Element T>
void scale(T* x, int64_t n, compute_t<T> factor, void* stream);

}  // namespace spsd::kernel::cuda
