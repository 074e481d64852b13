#pragma once
// Fused optimizer updates on the device: the counterparts of kernel/cpu/optim.hpp (same
// argument structs, the same per-element code), one grid-stride kernel per call. Host-callable
// plain C++: `stream` is a cudaStream_t; every call only enqueues work on it, and every pointer
// is device memory. Defined for float and double in cuda/kernel/optim.cu. CUDA or launch
// failures throw spsd::Error naming the kernel.
#include <concepts>
#include <cstdint>

#include "spsd/kernel/cpu/optim.hpp"  // SgdStep, AdamStep

namespace spsd::kernel::cuda {

using cpu::AdamStep;
using cpu::SgdStep;

// cpu::sgd_step on device memory.
template <std::floating_point T>
void sgd_step(T* p, const T* g, T* momentum_buf, int64_t n, const SgdStep<T>& s, void* stream);

// cpu::adam_step on device memory.
template <std::floating_point T>
void adam_step(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<T>& s, void* stream);

}  // namespace spsd::kernel::cuda
