#pragma once
// MatmulPrecision: how float32 matrix products may trade exactness for speed, process-wide.
//
// kHighest (the default) computes float32 products in float32. kHigh lets GPUs use TF32 tensor
// cores for float32 GEMMs (inputs rounded to 10 mantissa bits, float32 accumulation): about 8x
// an H100's float32 rate, and torch.backends.cuda.matmul.allow_tf32 / JAX's "high". cpu matmul
// is exact in either setting (no TF32 there); 16-bit and float64 products are unaffected.
// The setting is read when a GEMM launches, so every rank of a program should set the same one
// (a differing setting changes rounding, never layouts or communication).
#include <ostream>
#include <string_view>

namespace spsd {

// kHighest: float32 products in float32; kHigh: TF32 allowed on GPUs.
enum class MatmulPrecision { kHighest, kHigh };

// Sets or reads the process-wide float32 GEMM precision (kHighest by default).
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();

// "highest" or "high" (<< prints the same).
constexpr std::string_view to_string(MatmulPrecision p) {
  return p == MatmulPrecision::kHighest ? "highest" : p == MatmulPrecision::kHigh ? "high" : "invalid precision";
}
inline std::ostream& operator<<(std::ostream& os, MatmulPrecision p) { return os << to_string(p); }

}  // namespace spsd
