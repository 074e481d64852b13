// distribute (tensor/factory.hpp): a global tensor from one source rank's host data. The shape
// is broadcast, the data scattered point-to-point: each rank receives its piece and no more.
#include <numeric>
#include <vector>

#include "spsd/comm/communicator.hpp"
#include "spsd/tensor/factory.hpp"

namespace spsd::detail {

GlobalData distribute_data(const void* whole, const Shape& src_shape, bool undefined, DType dtype,
                           const Placement& placement, const NdSbp& given, int64_t src_rank) {
  const int64_t n = world_size(), me = rank();
  SPSD_CHECK(src_rank >= 0 && src_rank < n, "distribute", "src_rank ", src_rank, " is not a rank of the world of ", n,
             " ranks");
  check_placement("distribute", placement);
  std::vector<int64_t> world(n);
  std::iota(world.begin(), world.end(), int64_t{0});
  // Ranks that disagree on dtype, layout or src_rank fail here, before any data moves.
  note_op(world, std::make_shared<const OpIdentity>(concat("distribute(", to_string(dtype), " ", given, " on ",
                                                           placement, " from rank ", src_rank, ")")));
  check_ops(world);

  Communicator& comm = world_communicator();
  int64_t header[2] = {undefined ? -1 : src_shape.ndim(), static_cast<int64_t>(dtype)};
  comm.broadcast(header, 2, DType::kInt64, src_rank);
  SPSD_CHECK(header[0] >= 0, "distribute", "src_rank ", src_rank, " passed an undefined tensor (shape (), no storage)",
             "; pass Tensor::from_vector or a shaped Tensor there");
  SPSD_CHECK(header[1] == static_cast<int64_t>(dtype), "distribute", "src_rank ", src_rank, " passed a ",
             to_string(static_cast<DType>(header[1])), " tensor but rank ", me, " asked for ", to_string(dtype));
  std::vector<int64_t> dims = me == src_rank ? src_shape.dims() : std::vector<int64_t>(header[0]);
  if (header[0] > 0) comm.broadcast(dims.data(), header[0], DType::kInt64, src_rank);
  const Shape shape(dims);
  const NdSbp nd_sbp = normalize_axes(given, shape.ndim());
  check_global_layout("distribute", shape, placement, nd_sbp);

  // The ranks that receive a piece: the partial value's holders whose box is not empty.
  auto receives = [&](int64_t r) {
    return holds_partial_value(placement, nd_sbp, r) && box_of(shape, placement, nd_sbp, r).numel() > 0;
  };
  const int64_t elem = size_of(dtype);
  std::vector<unsigned char> mine;  // this rank's piece, in host memory
  std::vector<std::vector<unsigned char>> packed;
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  if (me == src_rank) {
    const auto* from = static_cast<const unsigned char*>(whole);
    packed.reserve(placement.ranks().size());
    for (int64_t r : placement.ranks()) {
      if (!receives(r)) continue;
      const Box box = box_of(shape, placement, nd_sbp, r);
      std::vector<unsigned char> piece(static_cast<size_t>(box.numel() * elem));
      for_each_box_row(shape, box, [&](int64_t g, int64_t i, int64_t row) {
        std::memcpy(piece.data() + i * elem, from + g * elem, static_cast<size_t>(row * elem));
      });
      if (r == me) {
        mine = std::move(piece);
      } else {
        packed.push_back(std::move(piece));
        sends.push_back({r, packed.back().data(), box.numel()});
      }
    }
  } else if (placement.contains(me) && receives(me)) {
    const int64_t numel = box_of(shape, placement, nd_sbp, me).numel();
    mine.resize(static_cast<size_t>(numel * elem));
    recvs.push_back({src_rank, mine.data(), numel});
  }
  comm.send_recv(sends, recvs, dtype);

  if (!placement.contains(me)) return {shape, dtype, placement, nd_sbp, nullptr};
  const DeviceType device = placement.device_type();
  const int64_t numel = box_of(shape, placement, nd_sbp, me).numel();
  std::shared_ptr<Storage> local = Storage::allocate_uninitialized(numel * elem, device);
  if (holds_partial_value(placement, nd_sbp, me)) {
    if (numel > 0) copy_bytes(local->data(), device, mine.data(), DeviceType::kCPU, numel * elem);
  } else {
    visit_dtype(dtype, [&]<class T>() {
      const T identity = reduce_identity<T>(filler_op(placement, nd_sbp, me));
      fill_elements(local->data(), device, numel, &identity, sizeof(T));
    });
  }
  return {shape, dtype, placement, nd_sbp, std::move(local)};
}

}  // namespace spsd::detail
