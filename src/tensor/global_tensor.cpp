// The layout and piece checks of global tensors (tensor/global_tensor.hpp).
#include "spsd/tensor/global_tensor.hpp"

namespace spsd::detail {

void check_global_layout(std::string_view op, const Shape& shape, const Placement& placement, const NdSbp& nd_sbp) {
  check_layout(op, shape, placement.mesh(), nd_sbp);
  check_placement(op, placement);
}

void check_layout_dtype(std::string_view op, DType dtype, const NdSbp& nd_sbp) {
  SPSD_CHECK(allows_partial(dtype) || !nd_sbp.has_partial(), op, "a ", dtype, " tensor cannot have the partial layout ",
             nd_sbp, ": partial values are summed or compared, and ", dtype, " values are neither");
}

void check_piece_holds(std::string_view op, std::string_view what, int64_t index, const Shape& shape, DType dtype,
                       const Placement& placement, const NdSbp& nd_sbp, std::span<const int64_t> coords,
                       const Storage* local) {
  // The name is made only for an error: dispatch checks every split input of every op.
  auto name = [&] { return index >= 0 ? concat(what, " ", index) : std::string(what); };
  SPSD_CHECK(local != nullptr, op, name(), " holds no data on rank ", rank(), ", which is in ", placement);
  const int64_t bytes = local->bytes(), need = piece_numel(shape, placement.mesh(), nd_sbp, coords) * size_of(dtype);
  SPSD_CHECK(bytes >= need, op, name(), " holds ", bytes, " bytes on rank ", rank(), " but its piece of ", shape, " ",
             nd_sbp, " on ", placement, " needs ", need, " bytes");
}

void check_piece(std::string_view op, std::string_view what, const Shape& shape, DType dtype, const Placement& placement,
                 const NdSbp& nd_sbp, const Storage* local) {
  check_global_layout(op, shape, placement, nd_sbp);
  const int64_t me = rank();
  if (placement.contains(me))
    check_piece_holds(op, what, -1, shape, dtype, placement, nd_sbp, placement.coords(me), local);
}

}  // namespace spsd::detail
