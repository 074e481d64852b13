#pragma once
// Reductions over a set of axes (sum, max, min) on the device: kernel/cpu/reduce.hpp's
// semantics (output layout, identities, wrapping integer sums) with a trailing cudaStream_t.
// Defined for every element type in cuda/kernel/reduce.cu; bfloat16 and float16 accumulate in
// float and round once per output.
#include <cstdint>
#include <span>

#include "spsd/core/dtype.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::kernel::cuda {

// out = op-reduction of x over axes (sorted, unique, in [0, ndim): checked on the host, same
// message as the cpu kernel). out holds x's elements with the reduced axes removed. An empty
// reduced extent gives reduce_identity<T>(op) (finite lowest()/max() for floating max/min); a
// non-empty floating max/min starts from -inf/+inf, so a row of -inf has max -inf. Floating
// sums combine in a different order than the cpu kernel (a tree), so they differ by rounding.
template <Element T>
void reduce(ReduceOp op, const T* x, const Shape& x_shape, std::span<const int64_t> axes, T* out, void* stream);

}  // namespace spsd::kernel::cuda
