// softmax / log_softmax on the device. The axis is last (inner == 1): one block per row, with
// block reductions for the max and the sum. Otherwise one thread per (outer, inner) column,
// walking the axis with stride inner, so neighbouring threads read neighbouring elements.
#include "common.cuh"
#include "reduce.cuh"

#include <cmath>

#include "spsd/kernel/cuda/softmax.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// out[i] = exp(x[i] - mx) / sum, or (x[i] - mx) - log(sum exp(x - mx)) when log: the cpu's
// softmax_row. Each thread touches the same indices in every pass, so out may be x.
template <class T>
__global__ void softmax_rows_kernel(const T* x, T* out, int64_t rows, int64_t len, bool log_form) {
  __shared__ T scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * len;
    T* o = out + row * len;
    T mx = -static_cast<T>(INFINITY);  // numeric_limits is host-only without relaxed constexpr
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) mx = MaxOf{}(mx, xr[i]);
    mx = block_reduce(MaxOf{}, mx, scratch);
    T sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const T v = log_form ? xr[i] - mx : exp(xr[i] - mx);
      o[i] = v;
      sum += log_form ? exp(v) : v;
    }
    sum = block_reduce(AddOf{}, sum, scratch);
    if (log_form) {
      const T lse = log(sum);
      for (int64_t i = threadIdx.x; i < len; i += blockDim.x) o[i] -= lse;
    } else {
      const T inv = T(1) / sum;
      for (int64_t i = threadIdx.x; i < len; i += blockDim.x) o[i] *= inv;
    }
  }
}

// One thread per column (o, j) of the (outer, len, inner) view: the cpu's softmax_block, one
// column at a time, in the same order along the axis.
template <class T>
__global__ void softmax_cols_kernel(const T* x, T* out, int64_t outer, int64_t len, int64_t inner, bool log_form) {
  for (int64_t c = thread_index(); c < outer * inner; c += thread_count()) {
    const int64_t o = c / inner, j = c - o * inner;
    const T* xc = x + o * len * inner + j;
    T* oc = out + o * len * inner + j;
    T mx = xc[0];
    for (int64_t r = 1; r < len; ++r) mx = MaxOf{}(mx, xc[r * inner]);
    T sum = 0;
    for (int64_t r = 0; r < len; ++r) {
      const T v = log_form ? xc[r * inner] - mx : exp(xc[r * inner] - mx);
      oc[r * inner] = v;
      sum += log_form ? exp(v) : v;
    }
    const T k = log_form ? log(sum) : T(1) / sum;
    for (int64_t r = 0; r < len; ++r) oc[r * inner] = log_form ? oc[r * inner] - k : oc[r * inner] * k;
  }
}

// Backward, one block per row: dx = y (g - sum(g y)), or g - exp(y) sum(g) when log (the
// cpu's softmax_backward_row): one block reduction, one write. dx may be g.
template <class T>
__global__ void softmax_backward_rows_kernel(const T* y, const T* g, T* dx, int64_t rows, int64_t len, bool log_form) {
  __shared__ T scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *yr = y + row * len, *gr = g + row * len;
    T* o = dx + row * len;
    T sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) sum += log_form ? gr[i] : gr[i] * yr[i];
    sum = block_reduce(AddOf{}, sum, scratch);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x)
      o[i] = log_form ? gr[i] - exp(yr[i]) * sum : yr[i] * (gr[i] - sum);
  }
}

// Backward, one thread per column (o, j) of the (outer, len, inner) view.
template <class T>
__global__ void softmax_backward_cols_kernel(const T* y, const T* g, T* dx, int64_t outer, int64_t len, int64_t inner,
                                             bool log_form) {
  for (int64_t c = thread_index(); c < outer * inner; c += thread_count()) {
    const int64_t o = c / inner, j = c - o * inner, base = o * len * inner + j;
    T sum = 0;
    for (int64_t r = 0; r < len; ++r) {
      const int64_t i = base + r * inner;
      sum += log_form ? g[i] : g[i] * y[i];
    }
    for (int64_t r = 0; r < len; ++r) {
      const int64_t i = base + r * inner;
      dx[i] = log_form ? g[i] - exp(y[i]) * sum : y[i] * (g[i] - sum);
    }
  }
}

// Cross-entropy backward, one block per row of (rows, classes): the cpu's
// cross_entropy_backward (max, sum of exp, one write), g read on the device.
template <class T>
__global__ void cross_entropy_backward_kernel(const T* logits, const int64_t* labels, const T* g, int64_t rows,
                                              int64_t classes, int64_t total_rows, T* dx) {
  __shared__ T scratch[kThreads];
  const T scale = g[0] / static_cast<T>(total_rows);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = logits + row * classes;
    T* o = dx + row * classes;
    const int64_t label = labels[row];
    if (label < 0 || label >= classes) {  // uniform over the block: no barrier is skipped by some
      for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) o[i] = 0;
      continue;
    }
    T mx = -static_cast<T>(INFINITY);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) mx = MaxOf{}(mx, x[i]);
    mx = block_reduce(MaxOf{}, mx, scratch);
    T sum = 0;
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) sum += exp(x[i] - mx);
    const T k = scale / block_reduce(AddOf{}, sum, scratch);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) o[i] = exp(x[i] - mx) * k - (i == label ? scale : T(0));
  }
}

}  // namespace detail

namespace detail {

// A tensor around its softmax axis: outer rows of len elements, inner apart (inner == 1: each
// row contiguous, one block per row; else one thread per (outer, inner) column).
struct AxisRows {
  int64_t outer = 1, len = 1, inner = 1;
  unsigned row_blocks() const { return static_cast<unsigned>(std::min<int64_t>(outer, int64_t{1} << 20)); }
};

AxisRows axis_rows(const char* name, const Shape& shape, int64_t axis) {
  SPSD_CHECK(axis >= 0 && axis < shape.ndim(), name, "axis ", axis, " is out of range for shape ", shape);
  AxisRows r;
  for (int64_t d = 0; d < axis; ++d) r.outer *= shape[d];
  for (int64_t d = axis + 1; d < shape.ndim(); ++d) r.inner *= shape[d];
  r.len = shape[axis];
  return r;
}

}  // namespace detail

template <std::floating_point T>
void softmax(const T* x, const Shape& shape, int64_t axis, T* out, bool log, void* stream) {
  const char* name = log ? "log_softmax" : "softmax";
  const detail::AxisRows r = detail::axis_rows(name, shape, axis);
  if (shape.numel() == 0) return;
  cudaStream_t s = detail::as_stream(stream);
  if (r.inner == 1)
    detail::softmax_rows_kernel<<<r.row_blocks(), detail::row_threads(r.len), 0, s>>>(x, out, r.outer, r.len, log);
  else
    detail::softmax_cols_kernel<<<detail::blocks_for(r.outer * r.inner), detail::kThreads, 0, s>>>(
        x, out, r.outer, r.len, r.inner, log);
  detail::check_launch(name);
}

template <std::floating_point T>
void softmax_backward(const T* y, const T* g, const Shape& shape, int64_t axis, T* dx, bool log, void* stream) {
  const char* name = log ? "log_softmax_grad" : "softmax_grad";
  const detail::AxisRows r = detail::axis_rows(name, shape, axis);
  if (shape.numel() == 0) return;
  cudaStream_t s = detail::as_stream(stream);
  if (r.inner == 1)
    detail::softmax_backward_rows_kernel<<<r.row_blocks(), detail::row_threads(r.len), 0, s>>>(y, g, dx, r.outer,
                                                                                               r.len, log);
  else
    detail::softmax_backward_cols_kernel<<<detail::blocks_for(r.outer * r.inner), detail::kThreads, 0, s>>>(
        y, g, dx, r.outer, r.len, r.inner, log);
  detail::check_launch(name);
}

template <std::floating_point T>
void cross_entropy_backward(const T* logits, const int64_t* labels, const T* g, int64_t rows, int64_t classes,
                            int64_t total_rows, T* dx, void* stream) {
  if (rows == 0 || classes == 0) return;
  const unsigned blocks = detail::AxisRows{rows, classes, 1}.row_blocks();
  detail::cross_entropy_backward_kernel<<<blocks, detail::row_threads(classes), 0, detail::as_stream(stream)>>>(
      logits, labels, g, rows, classes, total_rows, dx);
  detail::check_launch("cross_entropy_grad");
}

#define SPSD_INSTANTIATE(T)                                                                        \
  template void softmax<T>(const T*, const Shape&, int64_t, T*, bool, void*);                     \
  template void softmax_backward<T>(const T*, const T*, const Shape&, int64_t, T*, bool, void*); \
  template void cross_entropy_backward<T>(const T*, const int64_t*, const T*, int64_t, int64_t, int64_t, T*, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
