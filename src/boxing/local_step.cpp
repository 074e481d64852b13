// Steps with no traffic, along one mesh axis:
//   B |-> S(i) : slice out this rank's piece
//   B |-> P(op): keep (max/min, or sum at coordinate 0), zeros elsewhere for sum
//   S(i) |-> P(op) : pad this rank's piece with op's identity to the whole parent box
#include "box_copy.hpp"
#include "primitives.hpp"

namespace spsd::detail {

namespace {
bool shares_input(const AxisGroup& g, const Sbp& from, const Sbp& to) {
  return from.is_broadcast() && to.is_partial() && (to.reduce_op() != ReduceOp::kSum || g.me == 0);
}
}  // namespace

AxisTraffic local_step_traffic(const AxisGroup& g, const Sbp& from, const Sbp& to) {
  return {{}, shares_input(g, from, to) ? 0 : g.new_box(g.me).numel()};
}

StoragePtr run_local_step(const AxisGroup& g, const Step& step, DType dtype, const StoragePtr& in) {
  const Sbp &from = step.from.nd_sbp[step.mesh_axis], &to = step.to.nd_sbp[step.mesh_axis];
  if (shares_input(g, from, to)) return in;
  const Box &old_box = g.old_box(g.me), &new_box = g.new_box(g.me);
  StoragePtr out = allocate(new_box, dtype, g.device);
  if (to.is_partial()) {
    fill_identity(out->data(), new_box.numel(), dtype, to.reduce_op(), g.device);
    if (from.is_split()) copy_region(std::as_const(*in).data(), old_box, out->data(), new_box, old_box, size_of(dtype), g.device);
    return out;  // B -> P(sum) off coordinate 0: the identity alone
  }
  copy_region(std::as_const(*in).data(), old_box, out->data(), new_box, new_box, size_of(dtype), g.device);  // B -> S(i)
  return out;
}

}  // namespace spsd::detail
