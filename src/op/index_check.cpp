// Indices outside their range (op/index_check.hpp): this rank's piece scanned on cpu, or by a
// kernel reporting into the device flag on cuda; a bad one thrown at once or noted for the
// placement's next consistency check.
#include "spsd/op/index_check.hpp"

#include <utility>

#include "spsd/core/config.hpp"
#include "spsd/op/dispatch.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/value_errors.hpp"
#if SPSD_HAVE_CUDA
#include "spsd/kernel/cuda/index.hpp"
#endif

namespace spsd::detail {

namespace {

thread_local std::string_view tls_name;

// "embedding: indices[1, 2] = -1 is outside [0, 5), the rows of the weight (5, 3) float32"
std::string index_error(std::string_view op, const IndexCheck& c, const Shape& shape, int64_t index, int64_t value) {
  std::vector<int64_t> at(static_cast<size_t>(shape.ndim()));
  for (int64_t d = shape.ndim() - 1; d >= 0; --d) {
    at[d] = index % shape[d];
    index /= shape[d];
  }
  return concat(op, ": ", c.argument, join(at), " = ", value, " is outside [0, ", c.bound, "), ", c.range);
}

}  // namespace

IndexErrorName::IndexErrorName(std::string_view op) noexcept : previous_(std::exchange(tls_name, op)) {}
IndexErrorName::~IndexErrorName() { tls_name = previous_; }

void check_indices(std::string_view op, const Resolution& r, const KernelArgs& k, const IndexCheck& c) {
  const std::string_view name = tls_name.empty() ? op : tls_name;
  const LocalInput& in = k.inputs[c.input];
  const int64_t n = in.shape.numel();
  if (n == 0) return;
  const std::vector<int64_t>& ranks = r.placement.ranks();
  const TensorMeta& global = r.inputs[c.input];
  if (k.target.on_device()) {
#if SPSD_HAVE_CUDA
    const DeviceValueFlag flag = device_value_flag(name);
    ValueCheck check{ranks, op_number(ranks),
                     [name = std::string(name), c, piece = in.shape, box = in.box, global](int64_t position, int64_t value) {
                       const int64_t index = LocalInput{nullptr, piece, box, &global}.global_index(position);
                       return std::pair(index, index_error(name, c, global.shape, index, value));
                     }};
    const int64_t tag = register_value_check(std::move(check));
    kernel::cuda::note_out_of_range(in.as<int64_t>(), n, c.bound, flag.scratch, flag.found, tag, k.target.stream);
#endif
    return;
  }
  const int64_t* v = in.as<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] >= 0 && v[i] < c.bound) continue;
    const int64_t index = in.global_index(i);
    std::string text = index_error(name, c, global.shape, index, v[i]);
    // Every rank holds every index (B on each mesh axis): each finds this one, and all throw now.
    bool whole = true;
    for (const Sbp& s : r.signature().inputs[c.input]) whole = whole && s.is_broadcast();
    if (whole) throw Error(text);
    note_data_error(ranks, op_number(ranks), index, std::move(text));
    return;
  }
}

}  // namespace spsd::detail
