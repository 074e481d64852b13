// S/B |-> any layout, on the same or another placement : grouped send/recv of box
// intersections. Every destination receives exactly the elements of its box that it does not
// hold already, each once (the lower bound for S/B layouts); partial targets are filled by
// the ranks at coordinate 0 of the partial axes, the others take the identity.
//
// Each rank finds its own peers by arithmetic on the split boundaries (the pieces that meet its
// box, LayoutBoxes::pieces_meeting), never by scanning every pair of ranks; the busiest rank's
// figures come from per-rank formulas (exchange_traffic). A piece held by several ranks (a
// broadcast source) goes to each rank that needs it from the holder with the least volume
// assigned so far (first in placement order on ties), which spreads the load over its copies;
// that choice is made per piece, over the ranks that need that piece.
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <queue>

#include "least_loaded.hpp"
#include "piece_requests.hpp"
#include <unordered_map>

#include "primitive.hpp"
#include "rank_classes.hpp"
#include "spsd/kernel/box_copy.hpp"
#include "spsd/layout/partial.hpp"
#include "spsd/runtime/device.hpp"
#include "spsd/runtime/runtime.hpp"

namespace spsd::detail {

namespace {

// Who sends a replicated piece to whom: (destination position, holder position, elements), in
// destination order. The destinations are the ranks of the target that hold its value, need part
// of the piece and do not hold the piece themselves.
struct Served {
  int64_t dst_pos, src_pos, elements;
};
std::vector<Served> serve_piece(const StepView& step, int64_t piece) {
  const LayoutBoxes &from = step.from_boxes, &to = step.to_boxes;
  const Box box = from.box(piece);
  const std::vector<int64_t> holders = from.holders(piece, false);
  std::vector<int64_t> dsts;
  for (int64_t p : to.pieces_meeting(box)) to.for_each_holder(p, true, [&](int64_t d) { dsts.push_back(d); });
  if (to.replicas() > 1) std::sort(dsts.begin(), dsts.end());  // else one holder per piece, in order already
  // The least-loaded holder, the first on ties: the smallest (load, holder number).
  std::priority_queue<std::pair<int64_t, size_t>, std::vector<std::pair<int64_t, size_t>>, std::greater<>> least;
  for (size_t h = 0; h < holders.size(); ++h) least.push({0, h});
  std::vector<Served> served;
  for (int64_t d : dsts) {
    const int64_t held = from.placement().position(to.placement().ranks()[d]);
    if (held >= 0 && from.piece_offset(held) == piece) continue;  // it holds the piece: a local copy
    const int64_t elements = to.overlap(d, from, piece);
    auto [load, best] = least.top();
    least.pop();
    least.push({load + elements, best});
    served.push_back({d, holders[best], elements});
  }
  return served;
}

// The holder (position in the source) that serve_piece deals the request of target position
// dst_pos for the piece, by blocks of requests (piece_requests.hpp) instead of one by one.
int64_t serving_holder(const StepView& step, PieceRequests& requests, int64_t piece, int64_t dst_pos) {
  const LayoutBoxes& from = step.from_boxes;
  const std::vector<int64_t>& local = requests.local_copies(piece);
  LeastLoaded dealer(from.replicas());
  size_t next_local = 0;
  int64_t taker = -1;
  requests.for_each_block(piece, dst_pos, [&](const PieceRequests::Block& b, bool isolated) {
    int64_t count = b.count;
    for (; next_local < local.size() && local[next_local] < b.end; ++next_local) --count;
    const int64_t h = dealer.deal(b.size, count, isolated ? 0 : -1);
    if (isolated) taker = h;
  });
  return from.holders(piece, false)[taker];
}

// Along one tensor axis: how many target pieces meet a source piece's range, and whether they
// all take the same number of its elements (how many: part).
struct AxisRequests {
  int64_t pieces = -1, part = 0;  // pieces -1: not found yet
  bool uniform = true;
};

// The busiest holder of a replicated piece, without serving it when every request for it has the
// same size (the usual case): the least-loaded rule then deals the requests out in turn, so the
// first holder takes ceil(requests / holders) of them. Otherwise they are dealt block by block
// (piece_requests.hpp, least_loaded.hpp).
struct Busiest {
  int64_t elements = 0, messages = 0;
};
// What pricing remembers across the pieces of a replicated source.
struct ReplicaMemo {
  explicit ReplicaMemo(const StepView& step) : axes(step.shape.ndim()), requests(step.from_boxes, step.to_boxes) {}
  std::vector<std::vector<AxisRequests>> axes;  // per tensor axis, per source piece number
  PieceRequests requests;
  // Requests dealt, keyed by the blocks' number, then (block, local copies in it) for each
  // block that has some.
  std::map<std::vector<int64_t>, LeastLoaded> dealt;
  std::vector<int64_t> pattern;  // the key being looked up
};

// The requests for the piece at offset `piece` dealt over its holders (least_loaded.hpp), once
// per pattern of blocks and local copies: pieces with the same pattern are dealt alike.
const LeastLoaded& dealt_requests(const StepView& step, ReplicaMemo& memo, int64_t piece) {
  const PieceRequests::Blocks b = memo.requests.blocks(piece);
  std::vector<int64_t>& pattern = memo.pattern;
  pattern.assign(1, b.id);
  for (int64_t d : memo.requests.local_copies(piece)) {
    const int64_t i = std::upper_bound(b.blocks.begin(), b.blocks.end(), d,
                                       [](int64_t d, const PieceRequests::Block& x) { return d < x.end; }) -
                      b.blocks.begin();
    if (pattern.size() > 1 && pattern[pattern.size() - 2] == i) ++pattern.back();
    else pattern.insert(pattern.end(), {i, 1});
  }
  auto at = memo.dealt.find(pattern);
  if (at == memo.dealt.end()) {
    at = memo.dealt.try_emplace(pattern, step.from_boxes.replicas()).first;
    const std::vector<int64_t>& copies = at->first;
    for (size_t i = 0, next = 1; i < b.blocks.size(); ++i) {
      int64_t count = b.blocks[i].count;
      if (next < copies.size() && copies[next] == static_cast<int64_t>(i)) count -= copies[next + 1], next += 2;
      at->second.deal(b.blocks[i].size, count);
    }
  }
  return at->second;
}
// The piece is named by its numbers along the tensor axes (LayoutBoxes::piece_at); local_copies:
// how many of its holders need part of it themselves, when known.
Busiest busiest_holder(const StepView& step, std::span<const int64_t> leaves, ReplicaMemo& memo,
                       std::optional<int64_t> local_copies) {
  const LayoutBoxes &from = step.from_boxes, &to = step.to_boxes;
  int64_t size = 1, requests = to.replicas();
  bool uniform = true;
  std::vector<int64_t> along;
  for (int64_t e = 0; e < step.shape.ndim() && uniform; ++e) {
    const int64_t leaf = leaves[e];
    if (memo.axes[e].empty()) memo.axes[e].resize(from.leaf_count(e));
    AxisRequests& a = memo.axes[e][leaf];
    if (a.pieces < 0) {
      const Range range = from.leaf_range(e, leaf);
      along.clear();
      to.pieces_meeting(e, range.begin, range.end, along);
      auto part = [&](int64_t leaf) {
        const Range r = to.range(leaf, e);
        return std::min(r.end, range.end) - std::max(r.begin, range.begin);
      };
      a.pieces = static_cast<int64_t>(along.size());
      a.part = along.empty() ? 0 : part(along.front());
      for (int64_t leaf : along) a.uniform = a.uniform && part(leaf) == a.part;
    }
    requests *= a.pieces;
    size *= a.part;
    uniform = a.uniform;
  }
  const int64_t piece = local_copies && uniform ? -1 : from.piece_at(leaves);  // its offset, where needed
  if (!uniform) {  // dealt by blocks
    const LeastLoaded& dealt = dealt_requests(step, memo, piece);
    return {dealt.max_load(), dealt.max_messages()};
  }
  // Holders that are value holders of the target and need part of the piece copy it locally.
  const int64_t k = from.replicas();  // its holders (a source of the exchange has no partial axis)
  requests -= local_copies ? *local_copies : static_cast<int64_t>(memo.requests.local_copies(piece).size());
  const int64_t turns = (requests + k - 1) / k;
  return {turns * size, turns};
}

// A rank's part in the exchange, from its positions in both layouts (-1: not there).
struct Roles {
  int64_t from_pos, to_pos;
  bool receives;  // holds the target's value and needs a non-empty box
};
Roles roles_of(const StepView& step, int64_t rank) {
  Roles r{step.from_boxes.placement().position(rank), step.to_boxes.placement().position(rank), false};
  r.receives = r.to_pos >= 0 && step.to_boxes.holds_value(r.to_pos) && step.to_boxes.numel(r.to_pos) > 0;
  return r;
}

// Elements of its target box the rank holds already (copied locally, never received).
int64_t kept(const StepView& step, const Roles& r) {
  return r.receives && r.from_pos >= 0 ? step.to_boxes.overlap(r.to_pos, step.from_boxes, r.from_pos) : 0;
}

// How many pieces of `of` meet each piece of `boxes`, per tensor axis and piece number there:
// the ranks of a step share few distinct pieces, so each is counted once.
class MeetingCounts {
 public:
  MeetingCounts(const LayoutBoxes& of, const LayoutBoxes& boxes) : of_(&of), boxes_(&boxes), counts_(boxes.shape().ndim()) {}
  // How many pieces of `of` meet the box at pos of `boxes`: the product over tensor axes.
  int64_t at(int64_t pos) {
    int64_t n = 1;
    for (int64_t e = 0; e < boxes_->shape().ndim() && n > 0; ++e) n *= along(e, pos);
    return n;
  }
  // Along tensor axis e alone.
  int64_t along(int64_t e, int64_t pos) { return along_piece(e, boxes_->leaf(pos, e)); }
  // For the piece numbered leaf along e.
  int64_t along_piece(int64_t e, int64_t leaf) {
    std::vector<int64_t>& counts = counts_[e];
    if (counts.empty()) counts.assign(boxes_->leaf_count(e), -1);
    int64_t& c = counts[leaf];
    if (c < 0) {
      const Range r = boxes_->leaf_range(e, leaf);
      c = of_->count_pieces_meeting(e, r.begin, r.end);
    }
    return c;
  }

 private:
  const LayoutBoxes *of_, *boxes_;
  std::vector<std::vector<int64_t>> counts_;  // -1: not counted yet
};

// Pieces of the source meeting each target piece, and the reverse.
struct Meetings {
  MeetingCounts sources_per_target, targets_per_source;
  explicit Meetings(const StepView& step)
      : sources_per_target(step.from_boxes, step.to_boxes), targets_per_source(step.to_boxes, step.from_boxes) {}
};

// One rank's elements sent and received and its messages of each, by formula where the source
// holds each piece once: the rank sends its piece to every value holder of the target that needs
// part of it but itself, and each target element has to.replicas() such holders.
struct Counts {
  int64_t sent = 0, received = 0, sent_messages = 0, received_messages = 0;
};
Counts counts_of(const StepView& step, const Roles& r, const std::vector<Served>* own_piece, Meetings& meetings) {
  const LayoutBoxes &from = step.from_boxes, &to = step.to_boxes;
  Counts c;
  const int64_t self = kept(step, r);
  if (r.receives) {
    c.received = to.numel(r.to_pos) - self;
    c.received_messages = meetings.sources_per_target.at(r.to_pos) - (self > 0 ? 1 : 0);
  }
  if (r.from_pos < 0 || from.numel(r.from_pos) == 0) return c;
  if (own_piece) {  // a replicated source: what serve_piece gave this holder
    for (const Served& s : *own_piece)
      if (s.src_pos == r.from_pos) c.sent += s.elements, c.sent_messages += 1;
    return c;
  }
  c.sent = to.replicas() * from.numel(r.from_pos) - self;
  c.sent_messages = to.replicas() * meetings.targets_per_source.at(r.from_pos) - (self > 0 ? 1 : 0);
  return c;
}

// The exchange moves S/B data only: a partial source would need its pieces reduced first.
bool can_start_from(const NdSbp& nd) { return !nd.has_partial(); }

int64_t rounds(int64_t, int64_t max_messages) { return max_messages; }

// counts_of's figures over the rank classes of the two layouts (rank_classes.hpp) instead of
// every rank, when both are on the same ranks in the same order (false otherwise): per tensor
// axis, a rank's source and target piece sizes, what they share, and how many pieces of each
// meet the other. A rank that does not hold the target's value (a partial target's ranks off
// coordinate 0) only sends.
constexpr int64_t kExchangeFormula = 3;  // for_each_rank_class's name for the values below
bool busiest_by_classes(const StepView& step, bool replicated, StepTraffic& out) {
  const LayoutBoxes &from = step.from_boxes, &to = step.to_boxes;
  const int64_t elem = size_of(step.dtype), replicas = to.replicas();
  Meetings meetings(step);
  const LayoutBoxes* layouts[] = {&from, &to};
  return for_each_rank_class(
      std::span<const LayoutBoxes* const>(layouts), kExchangeFormula,
      [&](int64_t e, std::span<const int64_t> pieces) -> AxisValues {
        const Range x = from.leaf_range(e, pieces[0]), y = to.leaf_range(e, pieces[1]);
        return {x.size(), y.size(), overlap(x, y),
                meetings.sources_per_target.along_piece(e, pieces[1]),
                meetings.targets_per_source.along_piece(e, pieces[0])};
      },
      [&](std::span<const AxisValues> v, int64_t ranks, int64_t value_holders) {
        int64_t held = 1, needed = 1, shared = 1, sources = 1, targets = 1;
        for (const AxisValues& a : v) held *= a[0], needed *= a[1], shared *= a[2], sources *= a[3], targets *= a[4];
        auto account = [&](bool receives) {
          const int64_t kept = receives ? shared : 0;
          Counts c;
          if (receives) c.received = needed - kept, c.received_messages = sources - (kept > 0 ? 1 : 0);
          if (!replicated && held > 0)
            c.sent = replicas * held - kept, c.sent_messages = replicas * targets - (kept > 0 ? 1 : 0);
          out.max_bytes = std::max({out.max_bytes, c.sent * elem, c.received * elem});
          out.max_messages = std::max({out.max_messages, c.sent_messages, c.received_messages});
        };
        if (value_holders > 0) account(needed > 0);
        if (value_holders < ranks) account(false);
      });
}

// Every rank of both placements once, by formula, so O(ranks) with no pair scanned (within one
// placement, once per rank class); a replicated source first serves each of its pieces.
StepTraffic exchange_traffic(const StepView& step) {
  const LayoutBoxes &from = step.from_boxes, &to = step.to_boxes;
  const int64_t elem = size_of(step.dtype);
  const bool replicated = from.replicas() > 1;
  StepTraffic out;
  ReplicaMemo memo(step);
  if (replicated) {
    // Where both layouts are on the same ranks, the local copies of every piece in one pass over
    // the ranks (its holders are all of them), each piece named by its numbers along the axes.
    const LayoutBoxes* layouts[] = {&from, &to};
    auto piece_id = [&](auto&& number) {
      int64_t id = 0;
      for (int64_t e = 0; e < step.shape.ndim(); ++e) id = id * from.leaf_count(e) + number(e);
      return id;
    };
    int64_t pieces = 1;
    for (int64_t e = 0; e < step.shape.ndim(); ++e) pieces *= from.leaf_count(e);
    std::vector<int64_t> local(pieces, 0);
    const bool counted = for_each_rank(std::span<const LayoutBoxes* const>(layouts), [&](const PieceOdometer& at) {
      if (!at.holds_values()) return;
      for (int64_t e = 0; e < step.shape.ndim(); ++e) {
        const Range x = from.leaf_range(e, at.pieces(e)[0]), y = to.leaf_range(e, at.pieces(e)[1]);
        if (overlap(x, y) == 0) return;
      }
      ++local[piece_id([&](int64_t e) { return at.pieces(e)[0]; })];
    });
    // Every non-empty piece, by its numbers along the axes counted up in the order of the ids.
    std::vector<int64_t> leaves(step.shape.ndim(), 0);
    for (int64_t id = 0; id < pieces; ++id) {
      bool empty = false;
      for (int64_t e = 0; e < step.shape.ndim() && !empty; ++e) empty = from.leaf_range(e, leaves[e]).size() == 0;
      if (!empty) {
        const Busiest b = busiest_holder(step, leaves, memo, counted ? std::optional<int64_t>(local[id]) : std::nullopt);
        out.max_bytes = std::max(out.max_bytes, b.elements * elem);
        out.max_messages = std::max(out.max_messages, b.messages);
      }
      for (int64_t e = step.shape.ndim() - 1; e >= 0 && ++leaves[e] == from.leaf_count(e); --e) leaves[e] = 0;
    }
  }
  out.members = from.size();
  out.max_local = to.numel(0) * elem;  // self copies and receipts fill each target box: the first is the largest
  if (busiest_by_classes(step, replicated, out)) return out;
  from.index_positions();
  to.index_positions();
  Meetings meetings(step);
  auto account = [&](int64_t rank) {
    const Roles r = roles_of(step, rank);
    Counts c = counts_of(step, r, nullptr, meetings);
    if (replicated) c.sent = c.sent_messages = 0;  // counted per piece above
    out.max_bytes = std::max({out.max_bytes, c.sent * elem, c.received * elem});
    out.max_messages = std::max({out.max_messages, c.sent_messages, c.received_messages});
  };
  for (int64_t rank : from.placement().ranks()) account(rank);
  for (int64_t rank : to.placement().ranks())
    if (from.placement().position(rank) < 0) {
      account(rank);
      ++out.members;
    }
  return out;
}

// What exchange_traffic finds at least, from a few ranks of the target: the busiest rank writes
// the first target box (the largest), receives at least what any of them does and exchanges at
// least as many messages. The few: the first and last rank, and each rank at the far end of one
// mesh axis (where boxes of two layouts tend to part ways).
StepTraffic exchange_traffic_floor(const StepView& step) {
  const LayoutBoxes& to = step.to_boxes;
  const int64_t elem = size_of(step.dtype);
  StepTraffic floor{.members = 0, .max_messages = 0, .max_local = to.numel(0) * elem, .max_bytes = 0};
  std::vector<int64_t> sample = {0, to.size() - 1};
  const Shape& mesh = to.placement().mesh();
  for (int64_t a = 0, stride = to.size(); a < mesh.ndim(); ++a) {
    stride /= mesh[a];
    sample.push_back((mesh[a] - 1) * stride);
  }
  Meetings meetings(step);
  for (int64_t pos : sample) {
    const Roles r = roles_of(step, to.placement().ranks()[pos]);
    if (!r.receives) continue;
    const int64_t self = kept(step, r);
    floor.max_bytes = std::max(floor.max_bytes, (to.numel(pos) - self) * elem);
    floor.max_messages = std::max(floor.max_messages, meetings.sources_per_target.at(pos) - (self > 0 ? 1 : 0));
  }
  return floor;
}

RankTraffic exchange_rank_traffic(const StepView& step, int64_t rank) {
  const Roles r = roles_of(step, rank);
  std::vector<Served> own;
  const bool replicated = step.from_boxes.replicas() > 1 && r.from_pos >= 0;
  if (replicated) own = serve_piece(step, step.from_boxes.piece_offset(r.from_pos));
  Meetings meetings(step);
  const Counts c = counts_of(step, r, replicated ? &own : nullptr, meetings);
  const int64_t elem = size_of(step.dtype);
  return {rank, c.sent * elem, c.received * elem, c.sent_messages};
}

// Every rank's figures with one Meetings, and a replicated piece's requests dealt by blocks once
// per pattern (what serve_piece deals one by one): 16,384 ranks in milliseconds.
std::vector<RankTraffic> exchange_ranks_traffic(const StepView& step, std::span<const int64_t> ranks) {
  const LayoutBoxes& from = step.from_boxes;
  Meetings meetings(step);
  std::optional<ReplicaMemo> memo;
  if (from.replicas() > 1) memo.emplace(step);
  const int64_t elem = size_of(step.dtype);
  std::vector<RankTraffic> out;
  out.reserve(ranks.size());
  for (const int64_t rank : ranks) {
    const Roles r = roles_of(step, rank);
    Counts c = counts_of(step, r, nullptr, meetings);
    if (memo && r.from_pos >= 0 && from.numel(r.from_pos) > 0) {
      const int64_t piece = from.piece_offset(r.from_pos);
      int64_t holder = 0, index = -1;  // this rank's place among the piece's holders
      from.for_each_holder(piece, false, [&](int64_t pos) {
        if (pos == r.from_pos) index = holder;
        ++holder;
      });
      const LeastLoaded& dealt = dealt_requests(step, *memo, piece);
      c.sent = dealt.load(index), c.sent_messages = dealt.messages(index);
    }
    out.push_back({rank, c.sent * elem, c.received * elem, c.sent_messages});
  }
  return out;
}

// This rank's transfers: what it receives (and copies from itself), then what it sends.
struct Transfer {
  int64_t src, dst;  // world ranks; src == dst is a local copy
  Box region;
};
std::vector<Transfer> my_transfers(const StepView& step, int64_t me) {
  const LayoutBoxes &from = step.from_boxes, &to = step.to_boxes;
  const Roles r = roles_of(step, me);
  const bool replicated = from.replicas() > 1;
  std::vector<Transfer> transfers;
  PieceRequests requests(from, to);
  if (r.receives) {
    const Box need = to.box(r.to_pos);
    const int64_t own = r.from_pos >= 0 ? from.piece_offset(r.from_pos) : -1;
    for (int64_t piece : from.pieces_meeting(need)) {
      int64_t src = from.placement().ranks()[piece];
      if (piece == own) src = me;
      else if (replicated)
        src = from.placement().ranks()[serving_holder(step, requests, piece, r.to_pos)];
      transfers.push_back({src, me, intersect(need, from.box(piece))});
    }
  }
  if (r.from_pos >= 0 && from.numel(r.from_pos) > 0) {
    const Box mine = from.box(r.from_pos);
    auto send = [&](int64_t dst_pos) {
      const int64_t dst = to.placement().ranks()[dst_pos];
      if (dst != me) transfers.push_back({me, dst, intersect(to.box(dst_pos), mine)});
    };
    if (replicated) {
      for (const Served& s : serve_piece(step, from.piece_offset(r.from_pos)))
        if (s.src_pos == r.from_pos) send(s.dst_pos);
    } else {
      for (int64_t piece : to.pieces_meeting(mine))
        for (int64_t d : to.holders(piece, true)) send(d);
    }
  }
  return transfers;
}

StoragePtr run_exchange(const StepView& step, const StoragePtr& in) {
  const DType dtype = step.dtype;
  const int64_t me = rank(), elem = size_of(dtype);
  const Layout &from = step.from, &to = step.to;
  // Plans move data between memory spaces in steps of their own, so both sides share one.
  const DeviceType device = to.placement.device_type();
  std::vector<int64_t> ranks = union_ranks(from.placement, to.placement);
  auto peer = [&](int64_t r) { return std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin(); };
  const std::vector<Transfer> transfers = my_transfers(step, me);

  const int64_t from_pos = from.placement.position(me), to_pos = to.placement.position(me);
  Box old_box = from_pos >= 0 ? step.from_boxes.box(from_pos) : Box{};
  StoragePtr out;
  Box new_box;
  if (to_pos >= 0) {
    new_box = step.to_boxes.box(to_pos);
    out = allocate(new_box, dtype, device);
    if (!step.to_boxes.holds_value(to_pos))
      kernel::fill_identity(out->data(), new_box.numel(), dtype, filler_op(to.placement, to.nd_sbp, me), device);
  }

  // Regions that are one contiguous run travel straight from the input or into the output;
  // the others go through packed buffers sized up front so pointers into them stay valid.
  int64_t pack_elems = 0, unpack_elems = 0;
  for (const Transfer& t : transfers) {
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
    } else {
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
  // Every member of the union calls send_recv (it is collective), unless no rank moves anything:
  // then none does. The plan says which, the same on every rank.
  if (step.planned_max_bytes != 0)
    communicator_for(ranks, device).send_recv(sends, recvs, dtype);
  for (auto [t, data] : to_unpack) kernel::copy_box(data, t->region, out->data(), new_box, t->region, elem, device);
  return out;
}

}  // namespace

extern constinit const Primitive exchange_primitive =
    whole_layout_primitive(StepKind::kExchange, Primitive::Reach::kLayouts, /*communicates=*/true, can_start_from,
                           rounds, exchange_traffic, exchange_rank_traffic, run_exchange, exchange_traffic_floor,
                           exchange_ranks_traffic);

}  // namespace spsd::detail
