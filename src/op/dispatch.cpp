// The dtype-erased steps of the dispatch path (op/dispatch.hpp).
#include "spsd/op/dispatch.hpp"

#include <limits>

#include "spsd/boxing/planner.hpp"
#include "spsd/runtime/consistency.hpp"
#include "spsd/runtime/log.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {

// The number of elements of the piece at coords of a tensor of this shape and layout (the
// numel of box_at, without building the box).
int64_t piece_numel(const Shape& shape, const Shape& mesh, const NdSbp& nd_sbp, const std::vector<int64_t>& coords) {
  int64_t numel = shape.numel();
  if (numel == 0) return 0;
  for (int64_t a = 0; a < mesh.ndim(); ++a) {
    if (!nd_sbp[a].is_split()) continue;
    const int64_t axis = nd_sbp[a].axis();
    bool first = true;  // the first mesh axis splitting this tensor axis handles the nested ones
    for (int64_t b = 0; b < a && first; ++b) first = !(nd_sbp[b].is_split() && nd_sbp[b].axis() == axis);
    if (!first) continue;
    int64_t extent = shape[axis];
    for (int64_t b = a; b < mesh.ndim(); ++b)
      if (nd_sbp[b].is_split() && nd_sbp[b].axis() == axis) extent = balanced_range(extent, mesh[b], coords[b]).size();
    numel = numel / shape[axis] * extent;
  }
  return numel;
}

}  // namespace

Prepared prepare_op(const OpSchema& op, const OpAttrs& attrs, std::span<const InputRef> inputs,
                    const Scalar& scalar) {
  SPSD_CHECK(!inputs.empty(), op.name, "needs at least one input");
  const Placement& placement = *inputs[0].placement;
  for (size_t i = 1; i < inputs.size(); ++i)
    SPSD_CHECK(*inputs[i].placement == placement, op.name, "inputs must share one placement: input 0 is on ",
               placement, ", input ", i, " is on ", *inputs[i].placement, " (move one with to_global first)");
  // Inputs made by the raw GlobalTensor constructor are not checked there: their layouts must
  // fit the shapes and the mesh, and the placement the world, before anything is planned.
  for (const InputRef& in : inputs) check_layout(op.name, *in.shape, placement.mesh(), *in.nd_sbp);
  check_placement(op.name, placement);

  std::vector<ResolveInput> refs;
  refs.reserve(inputs.size());
  for (const InputRef& in : inputs) refs.push_back({in.shape, in.dtype, in.nd_sbp});
  Prepared p;
  p.resolution = resolve(op, attrs, placement, refs);
  const Resolution& r = *p.resolution;

  const int64_t me = rank();
  p.participates = placement.contains(me);
  if (!p.participates) return p;
  p.coords = placement.coords(me);
  if (log_enabled("dispatch") && me == placement.ranks().front()) log_line("dispatch", r.to_string());
  const ScalarOperand operand{scalar.f, scalar.bits};
  note_op(placement.ranks(), r.identity, scalar.present ? &operand : nullptr);
  if (r.communicates()) check_ops(placement.ranks());

  p.locals.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::shared_ptr<Storage>& local = *inputs[i].local;
    SPSD_CHECK(local != nullptr, op.name, "input ", i, " holds no data on rank ", me, ", which is in ", placement);
    // A raw GlobalTensor's piece must hold its box (a smaller one would be read past its end).
    const int64_t need = size_of(inputs[i].dtype) * (local->bytes() >= inputs[i].shape->numel() * size_of(inputs[i].dtype)
                                                         ? 0
                                                         : piece_numel(*inputs[i].shape, placement.mesh(),
                                                                       *inputs[i].nd_sbp, p.coords));
    SPSD_CHECK(local->bytes() >= need, op.name, "input ", i, " holds ", local->bytes(), " bytes on rank ", me,
               " but its piece of ", *inputs[i].shape, " ", *inputs[i].nd_sbp, " on ", placement, " needs ", need,
               " bytes");
    p.locals.push_back(r.plans[i] ? run_plan(r.plans[i], local, Urgency::kNow) : local);
  }
  return p;
}

int64_t agree_on_bad_element(const Resolution& r, int64_t local) {
  const std::vector<int64_t>& ranks = r.placement.ranks();
  if (ranks.size() == 1) return local;
  check_ops(ranks);
  int64_t v = local < 0 ? std::numeric_limits<int64_t>::max() : local;
  communicator(r.placement).all_reduce(&v, &v, 1, DType::kInt64, ReduceOp::kMin);
  return v == std::numeric_limits<int64_t>::max() ? -1 : v;
}

}  // namespace spsd::detail
