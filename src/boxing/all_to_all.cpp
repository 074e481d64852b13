// S(i) |-> S(j) along one mesh axis : all_to_all (v-variant), packing box intersections.
#include "axis_group.hpp"
#include "spsd/kernel/box_copy.hpp"
#include "spsd/runtime/device.hpp"

namespace spsd::detail {

namespace {
// Elements this rank sends to (received from) each member: its old box meets their new box.
std::vector<int64_t> send_counts(const AxisGroup& g) {
  std::vector<int64_t> c;
  for (int64_t m = 0; m < g.size(); ++m) c.push_back(overlap(g.old_box(g.me), g.new_box(m)));
  return c;
}
std::vector<int64_t> recv_counts(const AxisGroup& g) {
  std::vector<int64_t> c;
  for (int64_t m = 0; m < g.size(); ++m) c.push_back(overlap(g.old_box(m), g.new_box(g.me)));
  return c;
}

// True when every member sends the same count to every member.
bool uniform_everywhere(const AxisGroup& g) {
  int64_t first = overlap(g.old_box(0), g.new_box(0));
  for (int64_t a = 0; a < g.size(); ++a)
    for (int64_t b = 0; b < g.size(); ++b)
      if (overlap(g.old_box(a), g.new_box(b)) != first) return false;
  return true;
}

int64_t rounds(int64_t n, int64_t) { return n - 1; }

// traffic::all_to_all of send_counts and recv_counts, summed without building them: the
// planner prices this for every member of every group of every all_to_all it considers.
AxisTraffic member_traffic(const AxisGroup& g, const StepView&) {
  traffic::Traffic t;
  for (int64_t m = 0; m < g.size(); ++m) {
    if (m == g.me) continue;
    t.sent += overlap(g.old_box(g.me), g.new_box(m));
    t.received += overlap(g.old_box(m), g.new_box(g.me));
  }
  return {t, g.new_box(g.me).numel()};
}

StoragePtr run(const AxisGroup& g, const StepView& step, const StoragePtr& in) {
  const DType dtype = step.dtype;
  const int64_t elem = size_of(dtype);
  std::vector<int64_t> sends = send_counts(g), recvs = recv_counts(g);
  std::vector<int64_t> send_displs = displacements(sends), recv_displs = displacements(recvs);
  const Box &mine = g.old_box(g.me), &target = g.new_box(g.me);
  auto send_buf = staging(traffic::total(sends), dtype, g.device), recv_buf = staging(traffic::total(recvs), dtype, g.device);
  for (int64_t m = 0; m < g.size(); ++m) {
    Box region = intersect(mine, g.new_box(m));
    kernel::copy_box(std::as_const(*in).data(), mine, send_buf.get() + send_displs[m] * elem, region, region, elem, g.device);
  }
  // Every member sees the whole pattern, so all agree on the uniform call when it applies.
  if (uniform_everywhere(g))
    communicator_for(g.ranks, g.device).all_to_all(send_buf.get(), recv_buf.get(), sends[0], dtype);
  else
    communicator_for(g.ranks, g.device).all_to_all_v(send_buf.get(), sends, recv_buf.get(), recvs, dtype);
  StoragePtr out = allocate(target, dtype, g.device);
  for (int64_t m = 0; m < g.size(); ++m) {
    Box region = intersect(g.old_box(m), target);
    kernel::copy_box(recv_buf.get() + recv_displs[m] * elem, region, out->data(), target, region, elem, g.device);
  }
  return out;
}

}  // namespace

extern constinit const Primitive all_to_all_primitive = axis_primitive<member_traffic, run>(
    StepKind::kAllToAll, [](const NdSbp& nd, int64_t axis, const Sbp& to) { return nd[axis].is_split() && to.is_split(); }, rounds);

}  // namespace spsd::detail
