// Index kernels on the device: embedding rows, pick one class per row, the NaN marking of
// out-of-range indices and the search for the first of them (for the host's error). One thread per output element; indices are read on the device.
#include "common.cuh"

#include <limits>

#include "spsd/kernel/cuda/index.hpp"

namespace spsd::kernel::cuda {

namespace detail {

template <class T>
__global__ void embedding_kernel(const T* weight, int64_t row_begin, int64_t rows, int64_t dim,
                                 const int64_t* indices, int64_t total, T* out) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t i = e / dim, j = e - i * dim, row = indices[i] - row_begin;
    out[e] = (row >= 0 && row < rows) ? weight[row * dim + j] : T{0};
  }
}

template <class T>
__global__ void pick_kernel(const T* x, int64_t n, int64_t c_begin, int64_t c, const int64_t* labels, T* out) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    const int64_t j = labels[i] - c_begin;
    out[i] = (j >= 0 && j < c) ? x[i * c + j] : T{0};
  }
}

template <class T>
__global__ void mark_out_of_range_kernel(const int64_t* indices, int64_t bound, int64_t dim, int64_t total, T* out,
                                         T value) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t index = indices[e / dim];
    if (index < 0 || index >= bound) out[e] = value;
  }
}

// *p += v, atomically; integers wrap (added as unsigned). A 16-bit float adds in float and rounds
// once per add (core/half.hpp's conversion, as the cpu), through a 16-bit compare-and-swap: the
// hardware's bf16/fp16 atomicAdd rounds its own way.
template <class T>
__device__ void atomic_add(T* p, T v) {
  if constexpr (is_half_v<T>) {
    auto* word = reinterpret_cast<unsigned short*>(p);
    unsigned short seen = *word, assumed;
    do {
      assumed = seen;
      seen = atomicCAS(word, assumed, T(static_cast<float>(T::from_bits(assumed)) + static_cast<float>(v)).bits);
    } while (seen != assumed);
  } else if constexpr (std::is_same_v<T, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  else if constexpr (std::is_same_v<T, int32_t>)
    atomicAdd(reinterpret_cast<unsigned*>(p), static_cast<unsigned>(v));
  else
    atomicAdd(p, v);
}

// The smallest i whose index lies outside [0, bound), into *first (INT64_MAX: none); rare, so an
// atomic per bad index costs nothing on clean data.
__global__ void first_out_of_range_kernel(const int64_t* indices, int64_t n, int64_t bound,
                                          unsigned long long* first) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    if (indices[i] < 0 || indices[i] >= bound) atomicMin(first, static_cast<unsigned long long>(i));
}

// One thread: the host's record gets the first bad index of this launch unless it holds one
// already; the scratch word is left at "none" for the next launch.
__global__ void record_out_of_range_kernel(const int64_t* indices, unsigned long long* first,
                                           volatile spsd::detail::FoundValue* found, int64_t tag) {
  constexpr unsigned long long kNone = 0x7fffffffffffffffull;  // INT64_MAX, "none" (value_errors.hpp)
  const unsigned long long at = *first;
  if (at == kNone) return;
  if (found->tag == 0) {
    found->position = static_cast<int64_t>(at);
    found->value = indices[at];
    __threadfence_system();  // the host sees position and value before it sees the tag
    found->tag = tag;
  }
  *first = kNone;
}

// One thread per element of g: adds it into its row (atomically: indices may repeat).
template <class T>
__global__ void embedding_grad_kernel(const T* g, const int64_t* indices, int64_t row_begin, int64_t rows,
                                      int64_t dim, int64_t total, T* out) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t i = e / dim, j = e - i * dim, row = indices[i] - row_begin;
    if (row >= 0 && row < rows) atomic_add(out + row * dim + j, g[e]);
  }
}

// One thread per output element: each is written once, zeros included (no separate fill).
template <class T>
__global__ void pick_grad_kernel(const T* g, const int64_t* labels, int64_t c, int64_t total, T* out) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t i = e / c;
    out[e] = labels[i] == e - i * c ? g[i] : T{0};
  }
}

}  // namespace detail

template <Element T>
void embedding(const T* weight, int64_t row_begin, int64_t rows, int64_t dim, const int64_t* indices, int64_t n,
               T* out, void* stream) {
  const int64_t total = n * dim;
  if (total == 0) return;
  detail::embedding_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(
      weight, row_begin, rows, dim, indices, total, out);
  detail::check_launch("embedding");
}

template <Element T>
void pick(const T* x, int64_t n, int64_t c_begin, int64_t c, const int64_t* labels, T* out, void* stream) {
  if (n == 0) return;
  detail::pick_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(x, n, c_begin, c,
                                                                                                 labels, out);
  detail::check_launch("pick");
}

template <Element T>
void mark_out_of_range(const int64_t* indices, int64_t n, int64_t bound, int64_t dim, T* out, void* stream) {
  const int64_t total = n * dim;
  if (total == 0) return;
  detail::mark_out_of_range_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(
      indices, bound, dim, total, out, std::numeric_limits<T>::quiet_NaN());
  detail::check_launch("mark_out_of_range");
}

template <Element T>
void embedding_grad(const T* g, const int64_t* indices, int64_t n, int64_t row_begin, int64_t rows, int64_t dim,
                    T* out, void* stream) {
  if (rows * dim == 0) return;
  detail::check_cuda(cudaMemsetAsync(out, 0, static_cast<size_t>(rows * dim) * sizeof(T), detail::as_stream(stream)),
                     "embedding_grad", "zeroing the gradient");
  const int64_t total = n * dim;
  if (total == 0) return;
  detail::embedding_grad_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(
      g, indices, row_begin, rows, dim, total, out);
  detail::check_launch("embedding_grad");
}

template <Element T>
void pick_grad(const T* g, const int64_t* labels, int64_t n, int64_t c, T* out, void* stream) {
  const int64_t total = n * c;
  if (total == 0) return;
  detail::pick_grad_kernel<<<detail::blocks_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(
      g, labels, c, total, out);
  detail::check_launch("pick_grad");
}

void note_out_of_range(const int64_t* indices, int64_t n, int64_t bound, int64_t* scratch,
                       spsd::detail::FoundValue* found, int64_t tag, void* stream) {
  if (n == 0) return;
  auto* first = reinterpret_cast<unsigned long long*>(scratch);
  detail::first_out_of_range_kernel<<<detail::blocks_for(n), detail::kThreads, 0, detail::as_stream(stream)>>>(
      indices, n, bound, first);
  detail::check_launch("note_out_of_range");
  detail::record_out_of_range_kernel<<<1, 1, 0, detail::as_stream(stream)>>>(indices, first, found, tag);
  detail::check_launch("note_out_of_range");
}

#define SPSD_INSTANTIATE(T)                                                                                   \
  template void embedding<T>(const T*, int64_t, int64_t, int64_t, const int64_t*, int64_t, T*, void*);       \
  template void pick<T>(const T*, int64_t, int64_t, int64_t, const int64_t*, T*, void*);                     \
  template void mark_out_of_range<T>(const int64_t*, int64_t, int64_t, int64_t, T*, void*);                \
  template void embedding_grad<T>(const T*, const int64_t*, int64_t, int64_t, int64_t, int64_t, T*, void*); \
  template void pick_grad<T>(const T*, const int64_t*, int64_t, int64_t, T*, void*);
SPSD_CUDA_FOR_EACH_ELEMENT(SPSD_INSTANTIATE)
#undef SPSD_INSTANTIATE

}  // namespace spsd::kernel::cuda
