#pragma once
// The overflow check of loss scaling (a GradScaler) on the device: many gradients report into
// one device flag, read back once per step, so checking a model costs one copy, not one
// synchronization per tensor. Defined for the floating types in cuda/kernel/nonfinite.cu.
#include <cstdint>

#include "spsd/core/dtype.hpp"

namespace spsd::kernel::cuda {

// Sets *flag (device memory) to 1.0f when some x[i], i < n, is inf or NaN; otherwise leaves it
// alone: it never writes 0, so the caller zeroes the flag once and passes it to every tensor.
// Only enqueues work on `stream` (no host synchronization).
template <FloatingElement T>
void note_nonfinite(const T* x, int64_t n, float* flag, void* stream);

}  // namespace spsd::kernel::cuda
