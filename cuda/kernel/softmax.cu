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

}  // namespace detail

template <std::floating_point T>
void softmax(const T* x, const Shape& shape, int64_t axis, T* out, bool log, void* stream) {
  const char* name = log ? "log_softmax" : "softmax";
  SPSD_CHECK(axis >= 0 && axis < shape.ndim(), name, "axis ", axis, " is out of range for shape ", shape);
  if (shape.numel() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (int64_t d = axis + 1; d < shape.ndim(); ++d) inner *= shape[d];
  const int64_t len = shape[axis];
  cudaStream_t s = detail::as_stream(stream);
  if (inner == 1) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(outer, int64_t{1} << 20));
    detail::softmax_rows_kernel<<<blocks, detail::row_threads(len), 0, s>>>(x, out, outer, len, log);
  } else {
    detail::softmax_cols_kernel<<<detail::blocks_for(outer * inner), detail::kThreads, 0, s>>>(x, out, outer, len,
                                                                                               inner, log);
  }
  detail::check_launch(name);
}

#define SPSD_INSTANTIATE(T) template void softmax<T>(const T*, const Shape&, int64_t, T*, bool, void*);
SPSD_CUDA_FOR_EACH_FLOATING(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
