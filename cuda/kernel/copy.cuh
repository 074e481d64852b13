#pragma once
// The strided copy behind copy_box, copy_region and permute (defined in copy.cu): runs of
// contiguous elements moved between two strided index spaces in one launch.
#include "common.cuh"

#include <span>

#include "spsd/core/shape.hpp"

namespace spsd::kernel::cuda::detail {

// For every run index i of dims (row-major) and j < run:
//   dst[dst_off(i) + j] = src[src_off(i) + j], offsets from the strides (in elements).
// Size-1 dims are dropped and nested dims merged; a single run is one cudaMemcpyAsync,
// anything else one kernel launch moving the widest word that elem_bytes and the pointers allow.
void copy_runs(const char* name, const void* src, void* dst, int64_t elem_bytes, int64_t run,
               const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
               const std::vector<int64_t>& dst_strides, cudaStream_t stream);

// The extent box at src_begin of a dense src_shape buffer to dst_begin of a dense dst_shape
// buffer (bounds already checked): the last axis, extended over trailing axes the box spans
// fully in both buffers, is the run (kernel::cpu::copy_dense_box's rule).
void copy_dense_box(const char* name, const void* src, const Shape& src_shape, std::span<const int64_t> src_begin,
                    void* dst, const Shape& dst_shape, std::span<const int64_t> dst_begin, const Shape& extent,
                    int64_t elem_bytes, cudaStream_t stream);

}  // namespace spsd::kernel::cuda::detail
