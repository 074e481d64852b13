#pragma once
// layer_norm and rms_norm over the last axis on the device, as kernel/cpu/normalization.hpp
// (two-pass row statistics, float accumulation for the 16-bit types, each output rounded once).
// Defined for float, double, bfloat16 and float16 in cuda/kernel/normalization.cu.
#include <cstdint>

#include "spsd/core/dtype.hpp"

namespace spsd::kernel::cuda {

// out (rows, len) = (x - mean) rstd w + b (b null: none; rms: mean = 0, rstd of mean(x^2)).
template <FloatingElement T>
void norm_forward(const T* x, const T* w, const T* b, int64_t rows, int64_t len, double eps, bool rms, T* out,
                  void* stream);

// dx from x, w and g, as kernel::cpu::norm_backward_x; dx may be g.
template <FloatingElement T>
void norm_backward_x(const T* x, const T* w, const T* g, int64_t rows, int64_t len, double eps, bool rms, T* dx,
                     void* stream);

// dw (len) = column sums of g * xhat, as kernel::cpu::norm_backward_w.
template <FloatingElement T>
void norm_backward_w(const T* x, const T* g, int64_t rows, int64_t len, double eps, bool rms, T* dw, void* stream);

}  // namespace spsd::kernel::cuda
