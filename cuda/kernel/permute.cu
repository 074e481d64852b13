// permute and copy_region on the device. permute merges axes like the cpu kernel, then: a
// kept last axis copies contiguous runs, a last-two-axes transpose uses shared-memory tiles
// (both global reads and writes coalesced), anything else is a strided gather (copy_runs).
#include "copy.cuh"  // first: common.cuh's pragma covers the cpu headers below

#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cpu/permute.hpp"
#include "spsd/kernel/cuda/permute.hpp"

namespace spsd::kernel::cuda {

namespace detail {

constexpr int kTile = 32, kTileRows = 8;

// For each batch b: out[b][i][j] = in[base(b) + i + j * ld], out (rows, cols) dense. The tile
// is loaded along i (the input's stride-1 axis) and stored along j (the output's); the +1
// column keeps the transposed read free of shared-memory bank conflicts.
template <class T>
__global__ void transpose_kernel(const T* in, int64_t ld, T* out, int64_t rows, int64_t cols, int64_t batches,
                                 Strided<1> batch) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t col_tiles = (cols + kTile - 1) / kTile, row_tiles = (rows + kTile - 1) / kTile;
  for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
    int64_t base[1];
    batch.offsets(b, base);
    const T* src = in + base[0];
    T* dst = out + b * rows * cols;
    for (int64_t ti = blockIdx.y; ti < row_tiles; ti += gridDim.y) {
      for (int64_t tj = blockIdx.x; tj < col_tiles; tj += gridDim.x) {
        const int64_t i0 = ti * kTile, j0 = tj * kTile;
        for (int jj = threadIdx.y; jj < kTile; jj += kTileRows) {
          const int64_t i = i0 + threadIdx.x, j = j0 + jj;
          if (i < rows && j < cols) tile[jj][threadIdx.x] = src[i + j * ld];
        }
        __syncthreads();
        for (int ii = threadIdx.y; ii < kTile; ii += kTileRows) {
          const int64_t i = i0 + ii, j = j0 + threadIdx.x;
          if (i < rows && j < cols) dst[i * cols + j] = tile[threadIdx.x][ii];
        }
        __syncthreads();
      }
    }
  }
}

}  // namespace detail

template <Element T>
void permute(const T* x, const Shape& x_shape, std::span<const int64_t> perm, T* out, void* stream) {
  const auto [dims, strides] = cpu::detail::plan_permute(x_shape, perm);
  const int64_t n = x_shape.numel();
  if (n == 0) return;
  cudaStream_t s = detail::as_stream(stream);
  const size_t k = dims.size();
  const std::vector<int64_t> out_strides = contiguous_strides(Shape(dims));
  if (k >= 2 && strides[k - 1] != 1 && strides[k - 2] == 1) {  // batches of 2-d transposes
    const int64_t rows = dims[k - 2], cols = dims[k - 1], batches = n / (rows * cols);
    const auto batch = detail::make_strided<1>("permute", std::vector<int64_t>(dims.begin(), dims.end() - 2),
                                               {std::vector<int64_t>(strides.begin(), strides.end() - 2)});
    const dim3 grid(detail::grid_dim((cols + detail::kTile - 1) / detail::kTile, INT32_MAX),
                    detail::grid_dim((rows + detail::kTile - 1) / detail::kTile, 65535), detail::grid_dim(batches, 65535));
    // The tile holds raw words: moving bits needs no arithmetic, and a 16-bit float's default
    // constructor (zero bits) is not allowed on __shared__ memory.
    using Word = std::conditional_t<is_half_v<T>, uint16_t, T>;
    detail::transpose_kernel<Word><<<grid, dim3(detail::kTile, detail::kTileRows), 0, s>>>(
        reinterpret_cast<const Word*>(x), strides[k - 1], reinterpret_cast<Word*>(out), rows, cols, batches, batch);
    detail::check_launch("permute");
    return;
  }
  // A kept last axis (or none left: the identity) moves contiguous runs; else runs of one element.
  const bool runs = k == 0 || strides[k - 1] == 1;
  const int64_t run = runs && k > 0 ? dims[k - 1] : 1;
  const size_t outer = runs && k > 0 ? k - 1 : k;
  detail::copy_runs("permute", x, out, sizeof(T), run, std::vector<int64_t>(dims.begin(), dims.begin() + outer),
                    std::vector<int64_t>(strides.begin(), strides.begin() + outer),
                    std::vector<int64_t>(out_strides.begin(), out_strides.begin() + outer), s);
}

template <Element T>
void copy_region(const T* src, const Shape& src_shape, std::span<const int64_t> src_begin, T* dst,
                 const Shape& dst_shape, std::span<const int64_t> dst_begin, const Shape& extent, void* stream) {
  cpu::detail::check_copy_region(src_shape, src_begin, dst_shape, dst_begin, extent);
  detail::copy_dense_box("copy_region", src, src_shape, src_begin, dst, dst_shape, dst_begin, extent, sizeof(T),
                         detail::as_stream(stream));
}

template <Element T>
void broadcast_to(const T* x, const Shape& x_shape, T* out, const Shape& out_shape, void* stream) {
  const int64_t r = out_shape.ndim();
  if (out_shape.numel() == 0) return;
  const std::vector<int64_t> from = cpu::detail::broadcast_strides(x_shape, r), to = contiguous_strides(out_shape);
  // A last axis that x has (stride 1) moves as runs; a stretched one is runs of one element.
  const bool runs = r > 0 && from[r - 1] == 1;
  const size_t outer = runs ? static_cast<size_t>(r - 1) : static_cast<size_t>(r);
  const std::vector<int64_t>& dims = out_shape.dims();
  detail::copy_runs("expand", x, out, sizeof(T), runs ? out_shape[r - 1] : 1,
                    std::vector<int64_t>(dims.begin(), dims.begin() + outer),
                    std::vector<int64_t>(from.begin(), from.begin() + outer),
                    std::vector<int64_t>(to.begin(), to.begin() + outer), detail::as_stream(stream));
}

#define SPSD_INSTANTIATE(T)                                                                                  \
  template void permute<T>(const T*, const Shape&, std::span<const int64_t>, T*, void*);                    \
  template void copy_region<T>(const T*, const Shape&, std::span<const int64_t>, T*, const Shape&,          \
                               std::span<const int64_t>, const Shape&, void*);                             \
  template void broadcast_to<T>(const T*, const Shape&, T*, const Shape&, void*);
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
