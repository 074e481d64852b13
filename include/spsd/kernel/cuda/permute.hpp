#pragma once
// Data movement between dense device layouts: permute (axis transposition) and copy_region (a
// box of one tensor into a box of another), as kernel/cpu/permute.hpp with a trailing
// cudaStream_t. Defined for every element type in cuda/kernel/permute.cu.
#include <cstdint>
#include <span>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"

namespace spsd::kernel::cuda {

// out = x with axes reordered: out.shape[i] = x_shape[perm[i]], out dense. A perm that is not
// a permutation throws spsd::Error (cpu message). x and out must not overlap.
template <Element T>
void permute(const T* x, const Shape& x_shape, std::span<const int64_t> perm, T* out, void* stream);

// dst[dst_begin + i] = src[src_begin + i] for every index i of the extent box, both tensors
// dense with their shapes; out-of-bounds boxes throw spsd::Error (cpu message). One launch (or
// one memcpy when the box is one contiguous run). src and dst must not overlap.
template <Element T>
void copy_region(const T* src, const Shape& src_shape, std::span<const int64_t> src_begin, T* dst,
                 const Shape& dst_shape, std::span<const int64_t> dst_begin, const Shape& extent, void* stream);

// out (out_shape, dense) = x broadcast numpy-style to out_shape (checked by the op): one
// strided copy, stride 0 along stretched axes (backward's expand).
template <Element T>
void broadcast_to(const T* x, const Shape& x_shape, T* out, const Shape& out_shape, void* stream);

}  // namespace spsd::kernel::cuda
