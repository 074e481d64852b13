// softmax / log_softmax on the device. The axis is last (inner == 1): one block per row, with
// block reductions for the max and the sum. Otherwise one thread per (outer, inner) column,
// walking the axis with stride inner, so neighbouring threads read neighbouring elements.
#include "common.cuh"
#include "reduce.cuh"

#include <cmath>

#include "spsd/kernel/cuda/softmax.hpp"

namespace spsd::kernel::cuda {

namespace detail {

// The kernels load T, compute in C = compute_t<T> (max, sums and exp in float for the 16-bit
// types) and store each output once, rounded: the output pass recomputes exp(x - mx) from x
// rather than rounding an intermediate into out (the value is the same for float and double).

// out[i] = exp(x[i] - mx) * (1 / sum), or (x[i] - mx) - log(sum exp(x - mx)) when log: the cpu's
// softmax_row. The passes only read x until the last, which reads x[i] and then writes out[i]
// from the same thread, so out may be x.
template <class T, class C = compute_t<T>>
__global__ void softmax_rows_kernel(const T* x, T* out, int64_t rows, int64_t len, bool log_form) {
  __shared__ C scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * len;
    T* o = out + row * len;
    C mx = -static_cast<C>(INFINITY);  // numeric_limits is host-only without relaxed constexpr
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) mx = MaxOf{}(mx, widen(xr[i]));
    mx = block_reduce(MaxOf{}, mx, scratch);
    C sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) sum += exp(widen(xr[i]) - mx);
    sum = block_reduce(AddOf{}, sum, scratch);
    const C k = log_form ? log(sum) : C(1) / sum;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const C v = widen(xr[i]) - mx;
      o[i] = narrow<T>(log_form ? v - k : exp(v) * k);
    }
  }
}

// One thread per column (o, j) of the (outer, len, inner) view: the cpu's softmax_block, one
// column at a time, in the same order along the axis.
template <class T, class C = compute_t<T>>
__global__ void softmax_cols_kernel(const T* x, T* out, int64_t outer, int64_t len, int64_t inner, bool log_form) {
  for (int64_t c = thread_index(); c < outer * inner; c += thread_count()) {
    const int64_t o = c / inner, j = c - o * inner;
    const T* xc = x + o * len * inner + j;
    T* oc = out + o * len * inner + j;
    C mx = widen(xc[0]);
    for (int64_t r = 1; r < len; ++r) mx = MaxOf{}(mx, widen(xc[r * inner]));
    C sum = 0;
    for (int64_t r = 0; r < len; ++r) sum += exp(widen(xc[r * inner]) - mx);
    const C k = log_form ? log(sum) : C(1) / sum;
    for (int64_t r = 0; r < len; ++r) {
      const C v = widen(xc[r * inner]) - mx;
      oc[r * inner] = narrow<T>(log_form ? v - k : exp(v) * k);
    }
  }
}

// Backward, one block per row: dx = y (g - sum(g y)), or g - exp(y) sum(g) when log (the
// cpu's softmax_backward_row): one block reduction, one write. dx may be g.
template <class T, class C = compute_t<T>>
__global__ void softmax_backward_rows_kernel(const T* y, const T* g, T* dx, int64_t rows, int64_t len, bool log_form) {
  __shared__ C scratch[kThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *yr = y + row * len, *gr = g + row * len;
    T* o = dx + row * len;
    C sum = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) sum += log_form ? widen(gr[i]) : widen(gr[i]) * widen(yr[i]);
    sum = block_reduce(AddOf{}, sum, scratch);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      const C yi = widen(yr[i]), gi = widen(gr[i]);
      o[i] = narrow<T>(log_form ? gi - exp(yi) * sum : yi * (gi - sum));
    }
  }
}

// Backward, one thread per column (o, j) of the (outer, len, inner) view.
template <class T, class C = compute_t<T>>
__global__ void softmax_backward_cols_kernel(const T* y, const T* g, T* dx, int64_t outer, int64_t len, int64_t inner,
                                             bool log_form) {
  for (int64_t c = thread_index(); c < outer * inner; c += thread_count()) {
    const int64_t o = c / inner, j = c - o * inner, base = o * len * inner + j;
    C sum = 0;
    for (int64_t r = 0; r < len; ++r) {
      const int64_t i = base + r * inner;
      sum += log_form ? widen(g[i]) : widen(g[i]) * widen(y[i]);
    }
    for (int64_t r = 0; r < len; ++r) {
      const int64_t i = base + r * inner;
      const C yi = widen(y[i]), gi = widen(g[i]);
      dx[i] = narrow<T>(log_form ? gi - exp(yi) * sum : yi * (gi - sum));
    }
  }
}

// Cross-entropy backward, one block per row of (rows, classes): the cpu's
// cross_entropy_backward (max, sum of exp, one write), g read on the device.
template <class T, class C = compute_t<T>>
__global__ void cross_entropy_backward_kernel(const T* logits, const int64_t* labels, const T* g, int64_t rows,
                                              int64_t classes, int64_t total_rows, T* dx) {
  __shared__ C scratch[kThreads];
  const C scale = widen(g[0]) / static_cast<C>(total_rows);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = logits + row * classes;
    T* o = dx + row * classes;
    const int64_t label = labels[row];
    if (label < 0 || label >= classes) {  // uniform over the block: no barrier is skipped by some
      for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) o[i] = narrow<T>(C(0));
      continue;
    }
    C mx = -static_cast<C>(INFINITY);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) mx = MaxOf{}(mx, widen(x[i]));
    mx = block_reduce(MaxOf{}, mx, scratch);
    C sum = 0;
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) sum += exp(widen(x[i]) - mx);
    const C k = scale / block_reduce(AddOf{}, sum, scratch);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
      o[i] = narrow<T>(exp(widen(x[i]) - mx) * k - (i == label ? scale : C(0)));
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

template <FloatingElement T>
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

template <FloatingElement T>
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

template <FloatingElement T>
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
