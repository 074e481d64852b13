// The layout and piece checks of global tensors, and item() (tensor/global_tensor.hpp).
#include "spsd/tensor/global_tensor.hpp"

#include <numeric>
#include <vector>

#include "spsd/comm/communicator.hpp"
#include "spsd/core/reduce_op.hpp"
#include "spsd/runtime/consistency.hpp"

namespace spsd::detail {

const Placement& undefined_placement() {
  static const Placement placement("cpu", {0});
  return placement;
}

void throw_undefined(std::string_view op, DType dtype) {
  throw_error(op, "the tensor is undefined (a default-constructed GlobalTensor<", dtype,
              ">): assign a tensor to it before using it");
}

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

// ---- item() ----

namespace {
// Whether rank r's piece holds the element (the only one) at coordinate 0 of every broadcast
// mesh axis: the one copy per partial member that a reduction over the world may count.
bool contributes(const GlobalData& t, int64_t r) {
  if (box_of(t.shape, t.placement, t.nd_sbp, r).numel() == 0) return false;
  const std::vector<int64_t> coords = t.placement.coords(r);
  for (size_t a = 0; a < t.nd_sbp.size(); ++a)
    if (t.nd_sbp[a].is_broadcast() && coords[a] != 0) return false;
  return true;
}
}  // namespace

void item_of(const GlobalData& given, void* out) {
  check_not_capturing("item", "a value read on the host would be fixed at capture, not read again on a replay; return the tensor from the step and read it after the call");
  SPSD_CHECK(given.shape.numel() == 1, "item", "needs a tensor of one element, got ", describe(given), " (",
             given.shape.numel(), " elements)");
  check_piece("item", "the tensor", given);
  const int64_t n = world_size(), me = rank();
  std::vector<int64_t> world(n);
  std::iota(world.begin(), world.end(), int64_t{0});
  // Partial axes of one reduce op become one all-reduce over the world; of several, they are
  // nested reductions that one collective cannot express, so the placement reduces them first.
  bool partial = false, mixed = false;
  ReduceOp op = ReduceOp::kSum;
  for (const Sbp& s : given.nd_sbp) {
    if (!s.is_partial()) continue;
    mixed = mixed || (partial && op != s.reduce_op());
    partial = true;
    op = s.reduce_op();
  }
  const GlobalData t = mixed ? hooks.to_layout(given, given.placement, without_partial(given.nd_sbp)) : given;
  partial = partial && !mixed;

  note_op(world, std::make_shared<const OpIdentity>("item(" + describe(t) + ")"));
  check_ops(world);
  const int64_t elem = size_of(t.dtype);
  std::vector<unsigned char> value(static_cast<size_t>(elem));
  auto read_mine = [&] {
    copy_bytes(value.data(), DeviceType::kCPU, std::as_const(*t.local).data(), t.placement.device_type(), elem);
  };
  Communicator& comm = world_communicator();
  if (!partial) {
    // B and S: the first rank of the placement whose piece holds the element sends it.
    int64_t root = -1;
    for (int64_t r : t.placement.ranks())
      if (root < 0 && box_of(t.shape, t.placement, t.nd_sbp, r).numel() == 1) root = r;
    if (me == root) read_mine();
    comm.broadcast(value.data(), 1, t.dtype, root);
  } else {
    if (t.placement.contains(me) && contributes(t, me)) {
      read_mine();
    } else {
      visit_dtype(t.dtype, [&]<class T>() {
        const T identity = reduce_identity<T>(op);
        std::memcpy(value.data(), &identity, sizeof(T));
      });
    }
    comm.all_reduce(value.data(), value.data(), 1, t.dtype, op);
  }
  std::memcpy(out, value.data(), static_cast<size_t>(elem));
}

}  // namespace spsd::detail
