#include "boxing_suite.hpp"

#include <algorithm>

namespace spsd_test {

using namespace spsd;

template <class T>
Tensor<T> reference_tensor(const Shape& shape) {
  std::vector<T> v(shape.numel());
  for (int64_t g = 0; g < shape.numel(); ++g) v[g] = static_cast<T>((g * 37) % 101 - 50);
  return Tensor<T>::from_vector(shape, v);
}

std::vector<NdSbp> all_nd_sbps(int64_t mesh_ndim, int64_t tensor_ndim) {
  std::vector<Sbp> options;
  for (int64_t i = 0; i < tensor_ndim; ++i) options.push_back(sbp::split(i));
  options.insert(options.end(), {sbp::broadcast, sbp::partial_sum, sbp::partial_max, sbp::partial_min});
  std::vector<NdSbp> all;
  std::vector<size_t> pick(mesh_ndim, 0);
  for (;;) {
    std::vector<Sbp> axes;
    for (size_t k : pick) axes.push_back(options[k]);
    all.emplace_back(axes);
    int64_t a = mesh_ndim - 1;
    while (a >= 0 && ++pick[a] == options.size()) pick[a--] = 0;
    if (a < 0) return all;
  }
}

namespace {

// The elements of box, read from the whole row-major reference.
template <class T>
std::vector<T> values_in(const Tensor<T>& whole, const Box& box) {
  std::vector<T> out;
  out.reserve(box.numel());
  std::vector<int64_t> strides = contiguous_strides(whole.shape()), idx(box.begin);
  for (int64_t n = 0; n < box.numel(); ++n) {
    int64_t g = 0;
    for (size_t k = 0; k < idx.size(); ++k) g += idx[k] * strides[k];
    out.push_back(whole.data()[g]);
    for (int64_t k = static_cast<int64_t>(idx.size()) - 1; k >= 0 && ++idx[k] == box.end[k]; --k) idx[k] = box.begin[k];
  }
  return out;
}

template <class T>
T identity(ReduceOp op) {
  return op == ReduceOp::kSum ? T{0} : op == ReduceOp::kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// Partial values for one rank. With one op on every partial axis, the group's members share
// the value in a way that depends on the element: sum splits it into parts, max/min put it on
// a member chosen per element and smaller/larger values elsewhere. With mixed ops, the nested
// construction: coordinate 0 everywhere holds it, others the identity of the op of their last
// non-zero partial axis.
template <class T>
std::vector<T> partial_values(std::vector<T> v, const Box& box, const Shape& shape, const Layout& layout, int64_t r,
                              double part_scale) {
  using C = compute_t<T>;  // 16-bit: float arithmetic, rounded per stored value
  std::vector<int64_t> coords = layout.placement.coords(r);
  std::vector<ReduceOp> ops;
  int64_t p = 0, group = 1;
  for (size_t a = 0; a < layout.nd_sbp.size(); ++a)
    if (layout.nd_sbp[a].is_partial()) {
      ops.push_back(layout.nd_sbp[a].reduce_op());
      p = p * layout.placement.mesh()[a] + coords[a];
      group *= layout.placement.mesh()[a];
    }
  if (ops.empty()) return v;
  bool one_op = std::all_of(ops.begin(), ops.end(), [&](ReduceOp op) { return op == ops[0]; });
  std::vector<int64_t> strides = contiguous_strides(shape), idx(box.begin);
  for (size_t n = 0; n < v.size(); ++n) {
    int64_t g = 0;
    for (size_t k = 0; k < idx.size(); ++k) g += idx[k] * strides[k];
    auto part = [&](int64_t q) { return static_cast<C>(static_cast<C>((g + 3 * q) % 7 - 3) * static_cast<C>(part_scale)); };
    if (one_op && ops[0] == ReduceOp::kSum) {
      if (p == 0) {
        C first = static_cast<C>(v[n]);
        for (int64_t q = 1; q < group; ++q) first -= part(q);
        v[n] = static_cast<T>(first);
      } else {
        v[n] = static_cast<T>(part(p));
      }
    } else if (one_op) {
      const C offset = static_cast<C>(1 + (g + p) % 5);
      if (p != g % group) v[n] = static_cast<T>(ops[0] == ReduceOp::kMax ? static_cast<C>(v[n]) - offset : static_cast<C>(v[n]) + offset);
    } else if (p != 0) {
      ReduceOp filler = ReduceOp::kSum;
      for (size_t a = 0; a < layout.nd_sbp.size(); ++a)
        if (layout.nd_sbp[a].is_partial() && coords[a] != 0) filler = layout.nd_sbp[a].reduce_op();
      v[n] = identity<T>(filler);
    }
    for (int64_t k = static_cast<int64_t>(idx.size()) - 1; k >= 0 && ++idx[k] == box.end[k]; --k) idx[k] = box.begin[k];
  }
  return v;
}

std::string describe(const Shape& shape, DType dtype, const Layout& from, const Layout& to) {
  return "boxing " + shape.to_string() + " " + std::string(spsd::to_string(dtype)) + " " + from.to_string() + " -> " +
         to.to_string() + " on rank " + std::to_string(spsd::rank());
}

}  // namespace

template <class T>
GlobalTensor<T> build_layout(const Tensor<T>& whole, const Layout& layout, double part_scale) {
  const int64_t me = spsd::rank();
  if (!layout.placement.contains(me)) return GlobalTensor<T>(whole.shape(), layout.placement, layout.nd_sbp, Tensor<T>());
  Box box = box_of(whole.shape(), layout.placement, layout.nd_sbp, me);
  std::vector<T> v = partial_values(values_in(whole, box), box, whole.shape(), layout, me, part_scale);
  return GlobalTensor<T>(whole.shape(), layout.placement, layout.nd_sbp,
                         Tensor<T>::from_vector(box.shape(), v, layout.placement.device_type()));
}

template <class T>
CommStats check_boxing(const Tensor<T>& whole, const Layout& from, const Layout& to, Failures& failures) {
  const Shape& shape = whole.shape();
  const int64_t me = spsd::rank(), elem = sizeof(T);
  GlobalTensor<T> x = build_layout(whole, from);
  reset_comm_stats();
  GlobalTensor<T> y = x.to_global(to.placement, to.nd_sbp);
  CommStats moved = comm_stats();
  auto what = [&] { return describe(shape, dtype_of<T>, from, to); };

  bool partial = from.nd_sbp.has_partial() || to.nd_sbp.has_partial();
  if (!to.placement.contains(me)) {
    if (y.to_local().defined()) failures.add(what() + ": a rank outside the target holds data");
  } else if (!to.nd_sbp.has_partial()) {
    Box box = box_of(shape, to.placement, to.nd_sbp, me);
    if (!(y.to_local().shape() == box.shape()))
      failures.add(what() + ": local shape " + y.to_local().shape().to_string() + ", expected " + box.shape().to_string());
    else
      expect_elements(failures, what, y.to_local().to_vector().data(), values_in(whole, box));
  }

  // Bytes: the lower bound between S/B layouts, the plan's prediction when partial values move.
  int64_t expected_received = 0;
  if (!partial) {
    if (to.placement.contains(me)) {
      Box need = box_of(shape, to.placement, to.nd_sbp, me);
      int64_t held = from.placement.contains(me) ? intersect(need, box_of(shape, from.placement, from.nd_sbp, me)).numel() : 0;
      expected_received = (need.numel() - held) * elem;
    }
  } else {
    expected_received = plan_boxing(shape, dtype_of<T>, from, to)->bytes_received(me);
  }
  if (moved.bytes_received != expected_received)
    failures.add(what() + ": received " + std::to_string(moved.bytes_received) + " bytes, expected " +
                 std::to_string(expected_received) + (partial ? " (plan)" : " (lower bound)"));
  if (partial && moved.bytes_sent != plan_boxing(shape, dtype_of<T>, from, to)->bytes_sent(me))
    failures.add(what() + ": sent " + std::to_string(moved.bytes_sent) + " bytes, the plan says " +
                 std::to_string(plan_boxing(shape, dtype_of<T>, from, to)->bytes_sent(me)));

  // Partial targets: the reduction of the pieces must be the reference.
  if (to.nd_sbp.has_partial() && to.placement.contains(me)) {
    Tensor<T> full = y.full();
    expect_elements(failures, [&] { return what() + " (full)"; }, full.data(), whole.to_vector());
  }
  return moved;
}

bool expect_half_bytes(Failures& failures, const std::string& what, const Shape& shape, DType narrow_dtype,
                       const Layout& from, const Layout& to, const CommStats& wide, const CommStats& narrow) {
  const auto wide_plan = plan_boxing(shape, DType::kFloat32, from, to);
  const auto narrow_plan = plan_boxing(shape, narrow_dtype, from, to);
  if (wide_plan->steps.size() != narrow_plan->steps.size()) return false;
  for (size_t i = 0; i < wide_plan->steps.size(); ++i) {
    const Step &w = wide_plan->steps[i], &n = narrow_plan->steps[i];
    if (w.kind != n.kind || !(w.from == n.from) || !(w.to == n.to) || w.mesh_axis != n.mesh_axis) return false;
  }
  for (size_t i = 0; i < wide_plan->steps.size(); ++i) {
    const Step &w = wide_plan->steps[i], &n = narrow_plan->steps[i];
    const std::vector<RankTraffic> wide = w.traffic(), narrow = n.traffic();
    bool halved = wide.size() == narrow.size();
    for (size_t r = 0; halved && r < wide.size(); ++r)
      halved = 2 * narrow[r].bytes_sent == wide[r].bytes_sent && 2 * narrow[r].bytes_received == wide[r].bytes_received;
    if (!halved) failures.add(what + ": step " + std::to_string(i + 1) + " predicts {" + n.to_string() + "}, float32 {" +
                              w.to_string() + "}: expected half the bytes");
  }
  CommStats halved = wide;
  halved.bytes_sent = wide.bytes_sent / 2;
  halved.bytes_received = wide.bytes_received / 2;
  if (wide.bytes_sent % 2 != 0 || wide.bytes_received % 2 != 0 || !(narrow == halved))
    failures.add(what + ": 16-bit counters {" + narrow.to_string() + "}, float32 {" + wide.to_string() +
                 "}: expected the same calls with half the bytes");
  return true;
}

#define SPSD_TEST_INSTANTIATE(T)                                                                 \
  template Tensor<T> reference_tensor<T>(const Shape&);                                          \
  template GlobalTensor<T> build_layout<T>(const Tensor<T>&, const Layout&, double);             \
  template CommStats check_boxing<T>(const Tensor<T>&, const Layout&, const Layout&, Failures&);
SPSD_TEST_INSTANTIATE(float)
SPSD_TEST_INSTANTIATE(double)
SPSD_TEST_INSTANTIATE(int32_t)
SPSD_TEST_INSTANTIATE(int64_t)
SPSD_TEST_INSTANTIATE(spsd::bfloat16)
SPSD_TEST_INSTANTIATE(spsd::float16)
#undef SPSD_TEST_INSTANTIATE

}  // namespace spsd_test
