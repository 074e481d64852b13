// Dtype-erased device copies: strided runs (boxing's pack/unpack, slices, permutes), identity
// fills, the zero-divisor scan and plain byte copies.
#include "copy.cuh"  // first: common.cuh's pragma covers the cpu headers below

#include <climits>
#include <cstdint>

#include "spsd/core/reduce_op.hpp"
#include "spsd/kernel/cpu/broadcasting.hpp"
#include "spsd/kernel/cuda/copy.hpp"
#include "spsd/kernel/cuda/elementwise.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// Word w of the copy: run r = w / run, position j in it; offsets of run r from idx.
template <class W>
__global__ void copy_runs_kernel(const W* src, W* dst, int64_t run, int64_t total, Strided<2> idx) {
  for (int64_t w = thread_index(); w < total; w += thread_count()) {
    const int64_t r = w / run, j = w - r * run;
    int64_t off[2];
    idx.offsets(r, off);
    dst[off[1] + j] = src[off[0] + j];
  }
}

template <class W>
void launch_copy_runs(const char* name, const void* src, void* dst, int64_t words_per_elem, int64_t run,
                      const std::vector<int64_t>& dims, std::array<std::vector<int64_t>, 2> strides,
                      cudaStream_t stream) {
  for (auto& s : strides)
    for (int64_t& v : s) v *= words_per_elem;
  const Strided<2> idx = make_strided<2>(name, dims, strides);
  int64_t runs = 1;
  for (int64_t d : dims) runs *= d;
  const int64_t words = run * words_per_elem, total = runs * words;
  copy_runs_kernel<W><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const W*>(src), static_cast<W*>(dst),
                                                                 words, total, idx);
  check_launch(name);
}

void copy_runs(const char* name, const void* src, void* dst, int64_t elem_bytes, int64_t run,
               const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
               const std::vector<int64_t>& dst_strides, cudaStream_t stream) {
  const cpu::detail::Collapsed<2> c = cpu::detail::collapse<2>(dims, {src_strides, dst_strides});
  int64_t runs = 1;
  for (int64_t d : c.dims) runs *= d;
  if (runs == 0 || run == 0) return;
  if (c.dims.empty()) {  // one contiguous run
    check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(run * elem_bytes), cudaMemcpyDeviceToDevice, stream),
               name, "cudaMemcpyAsync");
    return;
  }
  // Every offset is a multiple of elem_bytes, so a word that divides it and both base
  // addresses is aligned everywhere.
  const auto fits = [&](int64_t w) {
    return elem_bytes % w == 0 && reinterpret_cast<uintptr_t>(src) % w == 0 && reinterpret_cast<uintptr_t>(dst) % w == 0;
  };
  if (fits(8)) launch_copy_runs<uint64_t>(name, src, dst, elem_bytes / 8, run, c.dims, c.strides, stream);
  else if (fits(4)) launch_copy_runs<uint32_t>(name, src, dst, elem_bytes / 4, run, c.dims, c.strides, stream);
  else launch_copy_runs<unsigned char>(name, src, dst, elem_bytes, run, c.dims, c.strides, stream);
}

void copy_dense_box(const char* name, const void* src, const Shape& src_shape, std::span<const int64_t> src_begin,
                    void* dst, const Shape& dst_shape, std::span<const int64_t> dst_begin, const Shape& extent,
                    int64_t elem_bytes, cudaStream_t stream) {
  const int64_t r = extent.ndim();
  if (extent.numel() == 0) return;
  const std::vector<int64_t> ss = contiguous_strides(src_shape), ds = contiguous_strides(dst_shape);
  int64_t so = 0, dof = 0;
  for (int64_t d = 0; d < r; ++d) {
    so += src_begin[d] * ss[d];
    dof += dst_begin[d] * ds[d];
  }
  const char* from = static_cast<const char*>(src) + so * elem_bytes;
  char* to = static_cast<char*>(dst) + dof * elem_bytes;
  if (r == 0) {
    copy_runs(name, from, to, elem_bytes, 1, {}, {}, {}, stream);
    return;
  }
  int64_t k = r - 1, run = extent[k];  // run covers axes k..r-1
  while (k > 0 && extent[k] == src_shape[k] && extent[k] == dst_shape[k]) run *= extent[--k];
  copy_runs(name, from, to, elem_bytes, run, std::vector<int64_t>(extent.dims().begin(), extent.dims().begin() + k),
            std::vector<int64_t>(ss.begin(), ss.begin() + k), std::vector<int64_t>(ds.begin(), ds.begin() + k), stream);
}

// first = min(first, i) for every i with x[i] == 0; a thread stops at its first zero.
template <class T>
__global__ void first_zero_kernel(const T* x, int64_t n, unsigned long long* first) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    if (x[i] == T(0)) {
      atomicMin(first, static_cast<unsigned long long>(i));
      return;
    }
  }
}

// A stream-ordered device scratch value, freed on the stream even when a check throws.
struct StreamScratch {
  void* ptr = nullptr;
  cudaStream_t stream;
  StreamScratch(size_t bytes, cudaStream_t s, const char* name) : stream(s) {
    check_cuda(cudaMallocAsync(&ptr, bytes, stream), name, "cudaMallocAsync");
  }
  ~StreamScratch() { cudaFreeAsync(ptr, stream); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
};

}  // namespace detail

void copy_box(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region,
              int64_t elem_bytes, void* stream) {
  if (region.empty()) return;
  const int64_t d = region.ndim();
  SPSD_CHECK(src_box.ndim() == d && dst_box.ndim() == d, "copy_box", "boxes of different ranks: src ", src_box,
             ", dst ", dst_box, ", region ", region);
  std::vector<int64_t> src_begin(d), dst_begin(d);
  for (int64_t k = 0; k < d; ++k) {
    src_begin[k] = region.begin[k] - src_box.begin[k];
    dst_begin[k] = region.begin[k] - dst_box.begin[k];
  }
  detail::copy_dense_box("copy_box", src, src_box.shape(), src_begin, dst, dst_box.shape(), dst_begin, region.shape(),
                         elem_bytes, detail::as_stream(stream));
}

void fill_identity(void* dst, int64_t n, DType dtype, ReduceOp op, void* stream) {
  visit_dtype(dtype, [&]<class T>() { fill<T>(static_cast<T*>(dst), n, reduce_identity<T>(op), stream); });
}

int64_t first_zero(const void* x, int64_t n, DType dtype, void* stream) {
  if (n == 0) return -1;
  cudaStream_t s = detail::as_stream(stream);
  unsigned long long first = ULLONG_MAX;
  {
    detail::StreamScratch scratch(sizeof first, s, "first_zero");
    auto* dev = static_cast<unsigned long long*>(scratch.ptr);
    detail::check_cuda(cudaMemsetAsync(dev, 0xFF, sizeof first, s), "first_zero", "cudaMemsetAsync");  // ULLONG_MAX
    visit_dtype(dtype, [&]<class T>() {
      detail::first_zero_kernel<<<detail::blocks_for(n), detail::kThreads, 0, s>>>(static_cast<const T*>(x), n, dev);
    });
    detail::check_launch("first_zero");
    detail::check_cuda(cudaMemcpyAsync(&first, dev, sizeof first, cudaMemcpyDeviceToHost, s), "first_zero",
                       "cudaMemcpyAsync");
  }
  detail::check_cuda(cudaStreamSynchronize(s), "first_zero", "cudaStreamSynchronize");
  return first == ULLONG_MAX ? -1 : static_cast<int64_t>(first);
}

void copy_bytes(void* dst, const void* src, int64_t bytes, void* stream) {
  if (bytes == 0) return;
  detail::check_cuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                     detail::as_stream(stream)),
                     "copy_bytes", "cudaMemcpyAsync");
}

}  // namespace spsd::kernel::cuda
