#pragma once
// Element type conversion on the device (the kernel of the cast op). Host-callable plain C++:
// `stream` is a cudaStream_t, the call only enqueues work on it, x and out are device memory.
// Defined for all 36 (From, To) pairs of element types in cuda/kernel/cast.cu.
#include <cstdint>

#include "spsd/core/dtype.hpp"

namespace spsd::kernel::cuda {

// out[i] = x[i] converted to To, for i < n (x and out must not overlap):
// - as C++'s static_cast between float, double and the integers (floating to integer
//   truncates toward zero; out-of-range values and NaN, undefined in C++, saturate and give 0);
// - a conversion from or to bfloat16/float16 goes through float: exact to float, then one
//   round to nearest even (core/half.hpp, the cpu's conversion bit for bit), so double -> 16-bit
//   rounds twice (as PyTorch) and a 16-bit value to an integer truncates its float value;
// - From == To is a copy of the bits.
template <Element From, Element To>
void cast(const From* x, To* out, int64_t n, void* stream);

}  // namespace spsd::kernel::cuda
