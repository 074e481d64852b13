// Rank-side checks of GlobalTensor::item() and distribute (issue 25), shared by the sim and mpi
// tests: every layout on the placements a world of world_size() ranks holds.
#include "misc_suite.hpp"

#include <numeric>

#include "boxing_suite.hpp"

namespace spsd_test {

using namespace spsd;

namespace {

// The placements the tests use in a world of n ranks: the whole world as each mesh that fits,
// and subsets (every other rank; the last rank alone), so that ranks outside take part.
std::vector<Placement> placements_of(int64_t n, const std::string& device) {
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), int64_t{0});
  std::vector<Placement> out = {Placement(device, all)};
  if (n == 4) out.push_back(Placement(device, all, Shape{2, 2}));
  if (n >= 2) {
    std::vector<int64_t> odd;
    for (int64_t r = 1; r < n; r += 2) odd.push_back(r);
    out.push_back(Placement(device, odd));
    if (odd.back() != n - 1) out.push_back(Placement(device, std::vector<int64_t>{n - 1}));
  }
  return out;
}

// One value per element type that every type holds exactly.
template <class T>
T sample_value() {
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>)
    return static_cast<T>(-2.5f);
  else
    return static_cast<T>(-7);
}

template <class T>
void check_item_all_layouts(Failures& mine, const Shape& shape, const std::string& device) {
  const T value = sample_value<T>();
  const Tensor<T> whole = Tensor<T>::from_vector(shape, {value});
  for (const Placement& p : placements_of(world_size(), device)) {
    for (const NdSbp& nd : all_nd_sbps(p.mesh().ndim(), shape.ndim())) {
      const std::string what = "item of " + shape.to_string() + " " + std::string(to_string(dtype_of<T>)) + " " +
                               nd.to_string() + " on " + p.to_string() + " on rank " + std::to_string(rank());
      // build_layout spreads a partial value over the members (no rank alone holds it).
      const GlobalTensor<T> t = build_layout(whole, Layout{p, nd});
      reset_comm_stats();
      const T got = t.item();
      if (!(got == value)) mine.add(what + ": got " + show(got) + ", expected " + show(value));
      // One collective of one element, whatever the layout; P axes of two ops first box within
      // the placement.
      int64_t partial_ops = 0;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin})
        for (const Sbp& s : nd)
          if (s.is_partial() && s.reduce_op() == op) {
            ++partial_ops;
            break;
          }
      const CommStats stats = comm_stats();
      if (partial_ops <= 1) {
        // The broadcast's root: the first rank of the placement whose piece holds the element.
        int64_t root = -1;
        for (int64_t r : p.ranks())
          if (root < 0 && box_of(shape, p, nd, r).numel() == 1) root = r;
        const int64_t n = world_size(), me = rank();
        const CollectiveKind kind = partial_ops ? CollectiveKind::kAllReduce : CollectiveKind::kBroadcast;
        const traffic::Traffic expected = partial_ops ? traffic::all_reduce(1, n, me) : traffic::broadcast(1, n, me, root);
        const int64_t elem = static_cast<int64_t>(sizeof(T));
        if (stats.collectives != 1 || stats.calls_of(kind) != 1 || stats.bytes_received != expected.received * elem ||
            stats.bytes_sent != expected.sent * elem)
          mine.add(what + ": expected one " + std::string(to_string(kind)) + " of one element (" +
                   std::to_string(expected.sent * elem) + " B sent, " + std::to_string(expected.received * elem) +
                   " B received), got " + stats.to_string());
      }
    }
  }
}

// distribute of every layout of whole over each placement, from each source rank; checks the
// values and the bytes this rank received: the shape's broadcast and its piece, no more.
template <class T>
void check_distribute(Failures& mine, const Shape& shape, const std::string& device) {
  const Tensor<T> whole = reference_tensor<T>(shape);
  const int64_t me = rank(), n = world_size();
  for (const Placement& p : placements_of(n, device)) {
    for (const NdSbp& nd : all_nd_sbps(p.mesh().ndim(), shape.ndim())) {
      for (int64_t src = 0; src < n; ++src) {
        const std::string what = "distribute of " + shape.to_string() + " " + std::string(to_string(dtype_of<T>)) +
                                 " " + nd.to_string() + " on " + p.to_string() + " from rank " +
                                 std::to_string(src) + " on rank " + std::to_string(me);
        reset_comm_stats();
        // Only src passes the data: the others pass an undefined tensor.
        const GlobalTensor<T> t = distribute(me == src ? whole : Tensor<T>(), p, nd, src);
        const CommStats stats = comm_stats();
        int64_t piece = 0;
        if (p.contains(me) && me != src && holds_partial_value(p, nd, me))
          piece = box_of(shape, p, nd, me).numel() * static_cast<int64_t>(sizeof(T));
        const int64_t header = me == src ? 0 : (2 + shape.ndim()) * 8;
        if (stats.bytes_received != header + piece)
          mine.add(what + ": received " + std::to_string(stats.bytes_received) + " B, expected " +
                   std::to_string(header) + " B of shape and " + std::to_string(piece) + " B of piece");
        if (!(t.shape() == shape)) mine.add(what + ": shape " + t.shape().to_string());
        // Every rank of the placement holds its box (the partial filler elsewhere), as from_host's.
        if (p.contains(me)) {
          const GlobalTensor<T> reference = from_host(whole, p, nd);
          const std::vector<T> got = t.to_local().to_vector();  // host values, on any device
          expect_elements(mine, what, got.data(), reference.to_local().to_vector());
        }
      }
    }
  }
}

}  // namespace

void run_item_suite(Failures& mine, const std::string& device) {
  check_item_all_layouts<float>(mine, Shape{1}, device);
  check_item_all_layouts<double>(mine, Shape{1, 1}, device);
  check_item_all_layouts<bfloat16>(mine, Shape{1}, device);
  check_item_all_layouts<float16>(mine, Shape{1}, device);
  check_item_all_layouts<int64_t>(mine, Shape{1, 1}, device);
  check_item_all_layouts<int32_t>(mine, Shape{}, device);
}

void run_distribute_suite(Failures& mine, const std::string& device) {
  check_distribute<float>(mine, Shape{5, 3}, device);  // uneven over 2, 3 and 4
  check_distribute<bfloat16>(mine, Shape{7}, device);
  check_distribute<int64_t>(mine, Shape{3, 2, 2}, device);
  check_distribute<double>(mine, Shape{}, device);  // 0-d: no dims to broadcast
}

}  // namespace spsd_test
