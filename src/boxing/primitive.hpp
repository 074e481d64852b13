#pragma once
// A boxing primitive as one record: which transitions it makes, what a step of it moves and
// costs, and how it runs. Each src/boxing/<name>.cpp defines one, next to its body; the list is
// SPSD_BOXING_PRIMITIVES (boxing/plan.hpp). The planner proposes steps from the records and the
// executor runs them through the records; neither knows any primitive by name.
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "layout_boxes.hpp"
#include "spsd/boxing/plan.hpp"
#include "spsd/layout/split.hpp"
#include "spsd/tensor/storage.hpp"

namespace spsd::detail {

using StoragePtr = std::shared_ptr<Storage>;

// A step as a primitive sees it: the tensor, both layouts and any rank's box in each.
struct StepView {
  const Shape& shape;
  DType dtype;
  const Layout& from;
  const Layout& to;
  int64_t mesh_axis;                // the mesh axis a kMeshAxis step changes; -1 otherwise
  const LayoutBoxes& from_boxes;    // of from and to
  const LayoutBoxes& to_boxes;
  // When running a planned step: its busiest rank's bytes, as planned (a collective call that no
  // rank needs is skipped by all); -1 while planning.
  int64_t planned_max_bytes = -1;
};

// What the cost model needs of a step: the busiest rank's figures. Primitives compute them
// without visiting every rank where they can (axis_group.cpp, exchange.cpp).
struct StepTraffic {
  int64_t members = 1;       // ranks of one group (the n of latency_rounds)
  int64_t max_messages = 0;  // the busiest rank's messages sent or received
  int64_t max_local = 0;     // the busiest rank's bytes written locally
  int64_t max_bytes = 0;     // the busiest rank's max(bytes sent, bytes received)
};

struct Primitive {
  // How the planner proposes it: a 1-d step along one mesh axis, a move between any two S/B
  // layouts (the target's and those the planner offers), or the same layout in another memory
  // space (the planner puts one around the host boxing of a cpu <-> cuda conversion).
  enum class Reach { kMeshAxis, kLayouts, kMemorySpace };

  StepKind kind;
  Reach reach;
  bool communicates;  // calls the communicator; false: each rank copies locally, no rendezvous
  // kMeshAxis: whether it turns nd[axis] into `to`, the other axes kept. The planner has already
  // checked that the axis may change alone (the nesting rules in planner.cpp).
  bool (*changes_axis)(const NdSbp& nd, int64_t axis, const Sbp& to);
  // kLayouts: whether it can start from a layout with this NdSbp.
  bool (*can_start_from)(const NdSbp& nd);
  int64_t (*rounds)(int64_t members, int64_t max_messages);  // latency rounds of its algorithm
  StepTraffic (*traffic)(const StepView& step);
  // Figures no larger than traffic's, found in O(1), for a primitive whose traffic visits every
  // rank (null: none). The planner prices with them first and skips the step when even that
  // price cannot improve on what it has.
  StepTraffic (*traffic_floor)(const StepView& step);
  // One rank's bytes and messages (zeros for a rank that takes no part), from that rank's peers
  // alone: what Plan::bytes_sent(rank) and the executor's accounting read.
  RankTraffic (*rank_traffic)(const StepView& step, int64_t rank);
  // Runs the step on this rank, which is in the step's source or target placement: in is its
  // piece in step.from (null when it holds none), the result its piece in step.to (null likewise).
  StoragePtr (*run)(const StepView& step, const StoragePtr& in);
  // rank_traffic of each of ranks, for a primitive whose per-rank figures share work that one
  // rank's call redoes (null: rank_traffic per rank). Step::traffic() (explain_boxing) reads it:
  // every rank of 16,384 in milliseconds, not seconds.
  std::vector<RankTraffic> (*ranks_traffic)(const StepView& step, std::span<const int64_t> ranks) = nullptr;
};

// The record of a primitive that is not along one mesh axis (reach kLayouts or kMemorySpace).
constexpr Primitive whole_layout_primitive(StepKind kind, Primitive::Reach reach, bool communicates,
                                           bool (*can_start_from)(const NdSbp&), int64_t (*rounds)(int64_t, int64_t),
                                           StepTraffic (*traffic)(const StepView&),
                                           RankTraffic (*rank_traffic)(const StepView&, int64_t),
                                           StoragePtr (*run)(const StepView&, const StoragePtr&),
                                           StepTraffic (*traffic_floor)(const StepView&) = nullptr,
                                           std::vector<RankTraffic> (*ranks_traffic)(const StepView&,
                                                                                     std::span<const int64_t>) = nullptr) {
  return {kind, reach, communicates, nullptr, can_start_from, rounds, traffic, traffic_floor, rank_traffic, run, ranks_traffic};
}

// The record of kind (src/boxing/primitive_table.cpp), and all of them in SPSD_BOXING_PRIMITIVES order.
const Primitive& primitive(StepKind kind);
std::span<const Primitive* const> primitives();

// Latency rounds shared by several records.
inline int64_t no_rounds(int64_t, int64_t) { return 0; }
inline int64_t log_rounds(int64_t n, int64_t) {
  return n <= 1 ? 0 : static_cast<int64_t>(std::ceil(std::log2(static_cast<double>(n))));
}

// A step's busiest-rank bytes and its cost under the model of its placements' device.
struct Prediction {
  int64_t max_bytes = 0;
  double cost_us = 0;
};
Prediction predict(const Primitive& p, const StepView& step);
// The cost of p's traffic_floor (a lower bound of predict's), or -1 when p has none.
double cost_floor(const Primitive& p, const StepView& step);

// Storage for a box that the caller writes in full (not zero-filled).
inline StoragePtr allocate(const Box& box, DType dtype, DeviceType device) {
  return Storage::allocate_uninitialized(box.numel() * size_of(dtype), device);
}
// A staging buffer for packing, in the memory space of the step's data, not zero-filled.
struct Staging {
  StoragePtr storage;
  char* get() const { return storage ? static_cast<char*>(storage->data()) : nullptr; }
};
inline Staging staging(int64_t elems, DType dtype, DeviceType device) {
  return {Storage::allocate_uninitialized(elems * size_of(dtype), device)};
}

}  // namespace spsd::detail
