// layer_norm / rms_norm on the device: one block per row for the forward and dx (block
// reductions for the two-pass statistics and the backward's row sums); dw as the row
// statistics into a scratch (rows, 2) buffer, then one thread per column summing down the rows.
#include "common.cuh"
#include "reduce.cuh"

#include <cmath>

#include "spsd/kernel/cuda/normalization.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// (mean, rstd) of the row, the same on every thread of the block (mean = 0 for rms).
template <class T, class C>
__device__ void norm_row_stats(const T* xr, int64_t len, C eps, bool rms, C* scratch, C& mean, C& rstd) {
  mean = 0;
  if (!rms) {
    C s = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) s += widen(xr[i]);
    mean = block_reduce(AddOf{}, s, scratch) / static_cast<C>(len);
  }
  C ss = 0;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    const C d = widen(xr[i]) - mean;
    ss += d * d;
  }
  rstd = C(1) / sqrt(block_reduce(AddOf{}, ss, scratch) / static_cast<C>(len) + eps);
}

template <class T, class C = compute_t<T>>
__global__ void norm_forward_kernel(const T* x, const T* w, const T* b, int64_t rows, int64_t len, C eps, bool rms,
                                    T* out) {
  __shared__ C scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * len;
    T* o = out + row * len;
    C mean, rstd;
    norm_row_stats(xr, len, eps, rms, scratch, mean, rstd);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const C v = (widen(xr[i]) - mean) * rstd * widen(w[i]);
      o[i] = narrow<T>(b ? v + widen(b[i]) : v);
    }
  }
}

template <class T, class C = compute_t<T>>
__global__ void norm_backward_x_kernel(const T* x, const T* w, const T* g, int64_t rows, int64_t len, C eps, bool rms,
                                       T* dx) {
  __shared__ C scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * len, *gr = g + row * len;
    T* o = dx + row * len;
    C mean, rstd;
    norm_row_stats(xr, len, eps, rms, scratch, mean, rstd);
    C sum_gw = 0, sum_gwx = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const C gw = widen(gr[i]) * widen(w[i]);
      sum_gw += gw;
      sum_gwx += gw * (widen(xr[i]) - mean) * rstd;
    }
    const C n = static_cast<C>(len);
    const C a = rms ? C(0) : block_reduce(AddOf{}, sum_gw, scratch) / n;
    const C c = block_reduce(AddOf{}, sum_gwx, scratch) / n;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const C xhat = (widen(xr[i]) - mean) * rstd;
      o[i] = narrow<T>(rstd * (widen(gr[i]) * widen(w[i]) - a - xhat * c));
    }
  }
}

template <class T, class C = compute_t<T>>
__global__ void norm_stats_kernel(const T* x, int64_t rows, int64_t len, C eps, bool rms, C* stats) {
  __shared__ C scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    C mean, rstd;
    norm_row_stats(x + row * len, len, eps, rms, scratch, mean, rstd);
    if (threadIdx.x == 0) {
      stats[2 * row] = mean;
      stats[2 * row + 1] = rstd;
    }
  }
}

template <class T, class C = compute_t<T>>
__global__ void norm_backward_w_kernel(const T* x, const T* g, const C* stats, int64_t rows, int64_t len, T* dw) {
  for (int64_t j = thread_index(); j < len; j += thread_count()) {
    C acc = 0;
    for (int64_t r = 0; r < rows; ++r)
      acc += widen(g[r * len + j]) * (widen(x[r * len + j]) - stats[2 * r]) * stats[2 * r + 1];
    dw[j] = narrow<T>(acc);
  }
}

unsigned row_grid(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20)); }

}  // namespace detail

template <FloatingElement T>
void norm_forward(const T* x, const T* w, const T* b, int64_t rows, int64_t len, double eps, bool rms, T* out,
                  void* stream) {
  if (rows == 0 || len == 0) return;
  detail::norm_forward_kernel<<<detail::row_grid(rows), detail::row_threads(len), 0, detail::as_stream(stream)>>>(
      x, w, b, rows, len, static_cast<compute_t<T>>(eps), rms, out);
  detail::check_launch(rms ? "rms_norm" : "layer_norm");
}

template <FloatingElement T>
void norm_backward_x(const T* x, const T* w, const T* g, int64_t rows, int64_t len, double eps, bool rms, T* dx,
                     void* stream) {
  if (rows == 0 || len == 0) return;
  detail::norm_backward_x_kernel<<<detail::row_grid(rows), detail::row_threads(len), 0, detail::as_stream(stream)>>>(
      x, w, g, rows, len, static_cast<compute_t<T>>(eps), rms, dx);
  detail::check_launch(rms ? "rms_norm_grad" : "layer_norm_grad");
}

template <FloatingElement T>
void norm_backward_w(const T* x, const T* g, int64_t rows, int64_t len, double eps, bool rms, T* dw, void* stream) {
  using C = compute_t<T>;
  const char* name = rms ? "rms_norm_weight_grad" : "layer_norm_weight_grad";
  if (len == 0) return;
  cudaStream_t s = detail::as_stream(stream);
  C* stats = nullptr;
  if (rows > 0) {
    // Freed in stream order: the pool behind cudaMallocAsync reuses it without a synchronization.
    detail::check_cuda(cudaMallocAsync(reinterpret_cast<void**>(&stats), rows * 2 * sizeof(C), s), name,
                       "cudaMallocAsync of the row statistics");
    detail::norm_stats_kernel<<<detail::row_grid(rows), detail::row_threads(len), 0, s>>>(x, rows, len,
                                                                                        static_cast<C>(eps), rms, stats);
    detail::check_launch(name);
  }
  detail::norm_backward_w_kernel<<<detail::blocks_for(len), detail::kThreads, 0, s>>>(x, g, stats, rows, len, dw);
  detail::check_launch(name);
  if (stats) detail::check_cuda(cudaFreeAsync(stats, s), name, "cudaFreeAsync of the row statistics");
}

#define SPSD_INSTANTIATE(T)                                                                                          \
  template void norm_forward<T>(const T*, const T*, const T*, int64_t, int64_t, double, bool, T*, void*);           \
  template void norm_backward_x<T>(const T*, const T*, const T*, int64_t, int64_t, double, bool, T*, void*);        \
  template void norm_backward_w<T>(const T*, const T*, int64_t, int64_t, double, bool, T*, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
