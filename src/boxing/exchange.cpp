// S/B |-> any layout, on the same or another placement : grouped send/recv of box
// intersections. Every destination receives exactly the elements of its box that it does not
// hold already, each once (the lower bound for S/B layouts); partial targets are filled by
// the ranks at coordinate 0 of the partial axes, the others take the identity.
#include <algorithm>

#include "primitive.hpp"
#include "spsd/kernel/box_copy.hpp"
#include "spsd/layout/partial.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {
// The distinct boxes of an S/B layout partition the tensor; each is held by one or more ranks.
struct Piece {
  const Box* box;                // one of the layout's boxes
  std::vector<int64_t> holders;  // world ranks, in placement order
};

std::vector<Piece> pieces_of(const Layout& layout, const std::vector<Box>& boxes) {
  std::vector<Piece> pieces;
  for (int64_t pos = 0; pos < layout.placement.size(); ++pos) {
    const Box& b = boxes[pos];
    int64_t r = layout.placement.ranks()[pos];
    auto it = std::find_if(pieces.begin(), pieces.end(), [&](const Piece& p) { return *p.box == b; });
    if (it == pieces.end()) pieces.push_back({&b, {r}});
    else it->holders.push_back(r);
  }
  return pieces;
}

// Calls visit(src, dst, need, piece, elements) for each transfer: destination dst needs the part
// of its box `need` that lies in `piece`, and takes it from src. Self first; otherwise the holder
// with the least volume assigned so far (first in placement order on ties), which spreads a
// broadcast source's load over its copies. The planner's prediction and the run share this walk.
template <class Visit>
void for_each_transfer(const Layout& from, const std::vector<Box>& from_boxes, const Layout& to,
                       const std::vector<Box>& to_boxes, Visit&& visit) {
  std::vector<Piece> pieces = pieces_of(from, from_boxes);
  std::vector<int64_t> load(from.placement.size(), 0);
  for (int64_t pos = 0; pos < to.placement.size(); ++pos) {
    int64_t d = to.placement.ranks()[pos];
    if (to.nd_sbp.has_partial() && !holds_partial_value(to.placement, to.nd_sbp, d)) continue;
    const Box& need = to_boxes[pos];
    if (need.empty()) continue;
    for (const Piece& piece : pieces) {
      int64_t elements = overlap(need, *piece.box);
      if (elements == 0) continue;
      if (std::find(piece.holders.begin(), piece.holders.end(), d) != piece.holders.end()) {
        visit(d, d, need, *piece.box, elements);
        continue;
      }
      int64_t best = piece.holders.front();
      for (int64_t h : piece.holders)
        if (load[from.placement.position(h)] < load[from.placement.position(best)]) best = h;
      load[from.placement.position(best)] += elements;
      visit(best, d, need, *piece.box, elements);
    }
  }
}

// Every (source, destination, region) piece, computed the same way on every rank.
struct Transfer {
  int64_t src, dst;  // world ranks; src == dst is a local copy
  Box region;
};

std::vector<Transfer> exchange_transfers(const Layout& from, const std::vector<Box>& from_boxes, const Layout& to,
                                         const std::vector<Box>& to_boxes) {
  std::vector<Transfer> transfers;
  auto add = [&](int64_t src, int64_t dst, const Box& need, const Box& piece, int64_t) {
    transfers.push_back({src, dst, intersect(need, piece)});
  };
  for_each_transfer(from, from_boxes, to, to_boxes, add);
  return transfers;
}

// The exchange moves S/B data only: a partial source would need its pieces reduced first.
bool can_start_from(const NdSbp& nd) { return !nd.has_partial(); }

int64_t rounds(int64_t, int64_t max_messages) { return max_messages; }

StepTraffic exchange_traffic(const StepView& step) {
  const DType dtype = step.dtype;
  const Layout &from = step.from, &to = step.to;
  StepTraffic out;
  std::vector<int64_t> ranks = union_ranks(from.placement, to.placement);
  auto index = [&](int64_t r) { return std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin(); };
  std::vector<RankTraffic>& t = out.ranks;
  t.resize(ranks.size());
  std::vector<int64_t> received_messages(ranks.size(), 0), local(ranks.size(), 0);
  for (size_t i = 0; i < ranks.size(); ++i) t[i].rank = ranks[i];
  auto count = [&](int64_t src, int64_t dst, const Box&, const Box&, int64_t elements) {
    int64_t bytes = elements * size_of(dtype);
    if (src == dst) {
      local[index(dst)] += bytes;
      return;
    }
    t[index(src)].bytes_sent += bytes;
    t[index(src)].messages += 1;
    t[index(dst)].bytes_received += bytes;
    received_messages[index(dst)] += 1;
  };
  for_each_transfer(from, step.from_boxes, to, step.to_boxes, count);
  out.members = static_cast<int64_t>(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    out.max_messages = std::max({out.max_messages, t[i].messages, received_messages[i]});
    out.max_local = std::max(out.max_local, local[i] + t[i].bytes_received);
  }
  return out;
}

StoragePtr run_exchange(const StepView& step, const StoragePtr& in) {
  const DType dtype = step.dtype;
  const int64_t me = rank(), elem = size_of(dtype);
  const Layout &from = step.from, &to = step.to;
  // Plans move data between memory spaces in steps of their own, so both sides share one.
  const DeviceType device = to.placement.device_type();
  std::vector<int64_t> ranks = union_ranks(from.placement, to.placement);
  auto peer = [&](int64_t r) { return std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin(); };
  std::vector<Transfer> transfers = exchange_transfers(from, step.from_boxes, to, step.to_boxes);

  Box old_box = from.placement.contains(me) ? step.from_boxes[from.placement.position(me)] : Box{};
  StoragePtr out;
  Box new_box;
  if (to.placement.contains(me)) {
    new_box = step.to_boxes[to.placement.position(me)];
    out = allocate(new_box, dtype, device);
    if (!holds_partial_value(to.placement, to.nd_sbp, me))
      kernel::fill_identity(out->data(), new_box.numel(), dtype, filler_op(to.placement, to.nd_sbp, me), device);
  }

  // Regions that are one contiguous run travel straight from the input or into the output;
  // the others go through packed buffers sized up front so pointers into them stay valid.
  int64_t pack_elems = 0, unpack_elems = 0;
  bool remote = false;
  for (const Transfer& t : transfers) {
    remote = remote || t.src != t.dst;
    if (t.src == me && t.dst != me && kernel::contiguous_offset(t.region, old_box) < 0) pack_elems += t.region.numel();
    if (t.dst == me && t.src != me && kernel::contiguous_offset(t.region, new_box) < 0) unpack_elems += t.region.numel();
  }
  auto packed = staging(pack_elems, dtype, device), unpacked = staging(unpack_elems, dtype, device);
  std::vector<SendSpec> sends;
  std::vector<RecvSpec> recvs;
  std::vector<std::pair<const Transfer*, char*>> to_unpack;
  char *pack_at = packed.get(), *unpack_at = unpacked.get();
  for (const Transfer& t : transfers) {
    if (t.src == me && t.dst == me) {
      kernel::copy_box(std::as_const(*in).data(), old_box, out->data(), new_box, t.region, elem, device);
    } else if (t.src == me) {
      int64_t offset = kernel::contiguous_offset(t.region, old_box);
      const char* data = static_cast<const char*>(std::as_const(*in).data()) + offset * elem;
      if (offset < 0) {
        kernel::copy_box(std::as_const(*in).data(), old_box, pack_at, t.region, t.region, elem, device);
        data = pack_at;
        pack_at += t.region.numel() * elem;
      }
      sends.push_back({peer(t.dst), data, t.region.numel()});
    } else if (t.dst == me) {
      int64_t offset = kernel::contiguous_offset(t.region, new_box);
      char* data = static_cast<char*>(out->data()) + offset * elem;
      if (offset < 0) {
        data = unpack_at;
        to_unpack.push_back({&t, unpack_at});
        unpack_at += t.region.numel() * elem;
      }
      recvs.push_back({peer(t.src), data, t.region.numel()});
    }
  }
  if (remote) communicator_for(ranks, device).send_recv(sends, recvs, dtype);
  for (auto [t, data] : to_unpack) kernel::copy_box(data, t->region, out->data(), new_box, t->region, elem, device);
  return out;
}

}  // namespace

extern constinit const Primitive exchange_primitive = whole_layout_primitive(
    StepKind::kExchange, Primitive::Reach::kLayouts, /*communicates=*/true, can_start_from, rounds, exchange_traffic, run_exchange);

}  // namespace spsd::detail
