#pragma once
// Loading a stored tensor into another floating dtype (docs/checkpoints.md, "Loading into another
// dtype"): the elements convert as cast<U> converts them (kernel/convert.hpp).
#include <cstdint>

#include "spsd/core/dtype.hpp"

namespace spsd::detail {

// Whether a tensor stored as `stored` loads into `target`: the same dtype, or two floating ones.
constexpr bool loads_as(DType stored, DType target) {
  return stored == target || (is_floating(stored) && is_floating(target));
}

// n elements of dtype from at src, written at dst as dtype to (loads_as(from, to) holds). Widening
// is exact; narrowing rounds to nearest even, once from float or double to float and from float
// to a 16-bit type; a double goes to a 16-bit type through float (two roundings, as bfloat16(x)
// and cast<> do); 16-bit to 16-bit goes through float, exact then rounded once.
void convert_elements(const void* src, DType from, void* dst, DType to, int64_t n);

}  // namespace spsd::detail
