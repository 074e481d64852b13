#pragma once
// Fused optimizer updates on the device: the counterparts of kernel/cpu/optim.hpp (same
// argument structs, the same per-element code), one grid-stride kernel per call. Host-callable
// plain C++: `stream` is a cudaStream_t; every call only enqueues work on it, and every pointer
// is device memory. Defined for float, double, bfloat16 and float16 in cuda/kernel/optim.cu.
// CUDA or launch failures throw spsd::Error naming the kernel.
//
// The step's scalars are compute_t<T> (float for a 16-bit parameter: an lr of 1e-4 or a beta2 of
// 0.999 would lose digits in 16 bits); a 16-bit parameter and its state (of its dtype) load into
// float, update there with the cpu's formulas, and round once per array on store. Mixed-precision
// training keeps float32 masters instead (docs/cuda.md): this path is for pure 16-bit models.
#include <cstdint>

#include "spsd/core/dtype.hpp"
#include "spsd/kernel/cpu/optim.hpp"  // SgdStep, AdamStep

namespace spsd::kernel::cuda {

using cpu::AdamStep;
using cpu::SgdStep;

// cpu::sgd_step on device memory.
template <FloatingElement T>
void sgd_step(T* p, const T* g, T* momentum_buf, int64_t n, const SgdStep<compute_t<T>>& s, void* stream);

// cpu::adam_step on device memory.
template <FloatingElement T>
void adam_step(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<compute_t<T>>& s, void* stream);

}  // namespace spsd::kernel::cuda
