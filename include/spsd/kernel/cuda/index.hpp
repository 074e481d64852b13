#pragma once
// Index kernels for vocabulary/class-parallel layers on the device: kernel/cpu/index.hpp's
// embedding and pick (zeros for rows/classes this rank does not hold, so pieces sum to the
// answer), plus the NaN marking that op/index.hpp applies on the rank holding row/class 0, and
// the scan for the first index out of range that op/index_check.hpp reports.
// Defined for every element type in cuda/kernel/index.cu; indices, labels,
// weight, x and out are all device memory.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/runtime/value_errors.hpp"

namespace spsd::kernel::cuda {

// out (n, dim): out[i] = weight row indices[i] - row_begin when row_begin <= indices[i] <
// row_begin + rows, else zeros. weight is (rows, dim).
template <Element T>
void embedding(const T* weight, int64_t row_begin, int64_t rows, int64_t dim, const int64_t* indices, int64_t n,
               T* out, void* stream);

// out[i] = x[i, labels[i] - c_begin] when c_begin <= labels[i] < c_begin + c, else 0.
// x is (n, c): classes [c_begin, c_begin + c).
template <Element T>
void pick(const T* x, int64_t n, int64_t c_begin, int64_t c, const int64_t* labels, T* out, void* stream);

// out (n, dim): row i becomes quiet_NaN (0 for integers, as numeric_limits says) where
// indices[i] < 0 or indices[i] >= bound: op/index.hpp's out-of-range marking for embedding
// (bound = vocabulary size, dim = embedding dim) and pick (bound = classes, dim = 1).
template <Element T>
void mark_out_of_range(const int64_t* indices, int64_t n, int64_t bound, int64_t dim, T* out, void* stream);

// Finds indices[i] outside [0, bound), i < n, for op/index_check.hpp: the first one's position
// (the smallest i) and value go to *found with `tag`, unless found->tag is set already (an earlier
// launch's find stays until the host has read it). scratch: one device int64 that holds INT64_MAX
// before and after. Two launches on stream (a grid-stride minimum, then one thread writing the
// pinned record, tag last, after a system fence); no host wait.
void note_out_of_range(const int64_t* indices, int64_t n, int64_t bound, int64_t* scratch,
                       spsd::detail::FoundValue* found, int64_t tag, void* stream);

// The gradients of embedding and pick (kernel/cpu/index.hpp): out (rows, dim) = zeros plus g row i
// at row indices[i] - row_begin for the indices this rank holds (atomic adds: a row taken twice
// sums in no fixed order, so float results may differ from the cpu's in the last bits); and
// out (n, c) = g[i] at [i, labels[i]], 0 elsewhere.
template <Element T>
void embedding_grad(const T* g, const int64_t* indices, int64_t n, int64_t row_begin, int64_t rows, int64_t dim,
                    T* out, void* stream);
template <Element T>
void pick_grad(const T* g, const int64_t* labels, int64_t n, int64_t c, T* out, void* stream);

}  // namespace spsd::kernel::cuda
