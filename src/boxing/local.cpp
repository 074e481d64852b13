// Steps with no traffic, along one mesh axis:
//   B |-> S(i) : slice out this rank's piece
//   B |-> P(op): keep (max/min, or sum at coordinate 0), zeros elsewhere for sum
//   S(i) |-> P(op) : pad this rank's piece with op's identity to the whole parent box
#include "axis_group.hpp"
#include "spsd/kernel/box_copy.hpp"

namespace spsd::detail {

namespace {

// Padding with max/min's identity is wrong under a later P(sum), which would add the paddings.
bool later_sum(const NdSbp& nd, int64_t mesh_axis) {
  for (size_t b = mesh_axis + 1; b < nd.size(); ++b)
    if (nd[b] == sbp::partial_sum) return true;
  return false;
}

bool changes(const NdSbp& nd, int64_t axis, const Sbp& to) {
  const Sbp& from = nd[axis];
  if (from.is_split()) return to.is_partial() && (to.reduce_op() == ReduceOp::kSum || !later_sum(nd, axis));
  return from.is_broadcast() && !to.is_broadcast();
}

bool shares_input(const AxisGroup& g, const StepView& step) {
  const Sbp &from = step.from.nd_sbp[step.mesh_axis], &to = step.to.nd_sbp[step.mesh_axis];
  return from.is_broadcast() && to.is_partial() && (to.reduce_op() != ReduceOp::kSum || g.me == 0);
}

AxisTraffic member_traffic(const AxisGroup& g, const StepView& step) {
  return {{}, shares_input(g, step) ? 0 : g.new_counts[g.me]};
}

StoragePtr run(const AxisGroup& g, const StepView& step, const StoragePtr& in) {
  const Sbp &from = step.from.nd_sbp[step.mesh_axis], &to = step.to.nd_sbp[step.mesh_axis];
  if (shares_input(g, step)) return in;
  const int64_t elem = size_of(step.dtype);
  const Box &old_box = g.old_box(g.me), &new_box = g.new_box(g.me);
  StoragePtr out = allocate(new_box, step.dtype, g.device);
  if (to.is_partial()) {
    kernel::fill_identity(out->data(), new_box.numel(), step.dtype, to.reduce_op(), g.device);
    if (from.is_split()) kernel::copy_box(std::as_const(*in).data(), old_box, out->data(), new_box, old_box, elem, g.device);
    return out;  // B -> P(sum) off coordinate 0: the identity alone
  }
  kernel::copy_box(std::as_const(*in).data(), old_box, out->data(), new_box, new_box, elem, g.device);  // B -> S(i)
  return out;
}

}  // namespace

extern constinit const Primitive local_primitive =
    axis_primitive<member_traffic, run>(StepKind::kLocal, changes, no_rounds, /*communicates=*/false);

}  // namespace spsd::detail
