#include "convert.hpp"

#include <cstring>

#include "spsd/kernel/convert.hpp"

namespace spsd::detail {

void convert_elements(const void* src, DType from, void* dst, DType to, int64_t n) {
  if (from == to) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n * size_of(from)));
    return;
  }
  visit_dtype(from, [&]<class From>() {
    visit_dtype(to, [&]<class To>() {
      if constexpr (FloatingElement<From> && FloatingElement<To>) {
        const From* in = static_cast<const From*>(src);
        To* out = static_cast<To*>(dst);
        for (int64_t i = 0; i < n; ++i) out[i] = kernel::convert<To>(in[i]);  // cast<To>'s conversion
      } else {
        throw_error("load_checkpoint", "no conversion from ", from, " to ", to);  // callers check loads_as
      }
    });
  });
}

}  // namespace spsd::detail
