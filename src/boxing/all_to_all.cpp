// S(i) |-> S(j) along one mesh axis : all_to_all (v-variant), packing box intersections.
#include <algorithm>
#include <functional>

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

// True when every member sends the same count to every member. Member a sends member b the
// part of the parent box in old piece a (along tensor axis i) and new piece b (along j != i),
// so the counts are all equal exactly when the old pieces are and the new pieces are.
bool uniform_everywhere(const AxisGroup& g) {
  auto all_equal = [](const std::vector<int64_t>& c) { return std::adjacent_find(c.begin(), c.end(), std::not_equal_to<>()) == c.end(); };
  return all_equal(g.old_counts) && all_equal(g.new_counts);
}

int64_t rounds(int64_t n, int64_t) { return n - 1; }

// traffic::all_to_all of send_counts and recv_counts without building them: the members' new
// boxes partition the parent box that holds this member's old one (and the old boxes the
// parent that holds its new one), so all but what it keeps goes out, and all but that comes in.
AxisTraffic member_traffic(const AxisGroup& g, const StepView&) {
  const int64_t kept = g.kept(g.me);
  return {{g.old_counts[g.me] - kept, g.new_counts[g.me] - kept}, g.new_counts[g.me]};
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
