#pragma once
// The boxing primitives. Each one predicts the traffic of its step on every rank (for the
// planner) and runs the step on the calling rank (for to_global); one file per primitive.
#include <memory>
#include <utility>
#include <vector>

#include "spsd/boxing/plan.hpp"
#include "spsd/comm/traffic.hpp"
#include "spsd/layout/split.hpp"
#include "spsd/tensor/storage.hpp"

namespace spsd::detail {

// The ranks along the mesh axis a 1-d step changes, as seen from one of them. It refers to
// the boxes of every rank of the placement, which must outlive it.
struct AxisGroup {
  std::vector<int64_t> ranks;      // world ranks in coordinate order along the axis
  std::vector<int64_t> positions;  // their positions in the placement
  std::vector<int64_t> old_counts, new_counts;  // elements in each member's box before and after
  int64_t me = 0;                  // index of the rank it was built for
  DeviceType device = DeviceType::kCPU;
  const std::vector<Box>* old_all = nullptr;  // every rank's box before and after the step
  const std::vector<Box>* new_all = nullptr;

  int64_t size() const { return static_cast<int64_t>(ranks.size()); }
  const Box& old_box(int64_t m) const { return (*old_all)[positions[m]]; }
  const Box& new_box(int64_t m) const { return (*new_all)[positions[m]]; }
};
// old_boxes / new_boxes: every rank's box in step.from / step.to, in placement order.
AxisGroup axis_group(const Step& step, const std::vector<Box>& old_boxes, const std::vector<Box>& new_boxes,
                     int64_t rank);

// What one rank of a 1-d step moves: elements on the wire and elements written locally.
struct AxisTraffic {
  traffic::Traffic wire;
  int64_t local_elems = 0;
};

AxisTraffic all_gather_traffic(const AxisGroup& g);
AxisTraffic reduce_scatter_traffic(const AxisGroup& g);
AxisTraffic all_reduce_traffic(const AxisGroup& g);
AxisTraffic all_to_all_traffic(const AxisGroup& g);
AxisTraffic local_step_traffic(const AxisGroup& g, const Sbp& from, const Sbp& to);

using StoragePtr = std::shared_ptr<Storage>;
StoragePtr run_all_gather(const AxisGroup& g, DType dtype, const StoragePtr& in);
StoragePtr run_reduce_scatter(const AxisGroup& g, DType dtype, ReduceOp op, const StoragePtr& in);
StoragePtr run_all_reduce(const AxisGroup& g, DType dtype, ReduceOp op, const StoragePtr& in);
StoragePtr run_all_to_all(const AxisGroup& g, DType dtype, const StoragePtr& in);
StoragePtr run_local_step(const AxisGroup& g, const Step& step, DType dtype, const StoragePtr& in);

// The exchange: every (source, destination, region) piece, computed the same way on every rank.
struct Transfer {
  int64_t src, dst;  // world ranks; src == dst is a local copy
  Box region;
};
std::vector<Transfer> exchange_transfers(const Layout& from, const std::vector<Box>& from_boxes, const Layout& to,
                                         const std::vector<Box>& to_boxes);
std::vector<int64_t> exchange_ranks(const Layout& from, const Layout& to);  // sorted union
// What the exchange moves, per rank of exchange_ranks (in that order): bytes and messages, and
// the busiest rank's messages and bytes written (received plus copied locally).
struct ExchangeTraffic {
  std::vector<RankTraffic> traffic;
  int64_t max_messages = 0, max_local = 0;
};
ExchangeTraffic exchange_traffic(DType dtype, const Layout& from, const std::vector<Box>& from_boxes, const Layout& to,
                                 const std::vector<Box>& to_boxes);
StoragePtr run_exchange(const Shape& shape, DType dtype, const Step& step, const StoragePtr& in);

// Predicted traffic and cost of a step on every participating rank, given every rank's box in
// the step's source and target layouts (placement order).
struct Prediction {
  std::vector<RankTraffic> traffic;  // in rank order
  double cost_us = 0;
};
Prediction predict(DType dtype, StepKind kind, const Layout& from, const Layout& to, int64_t mesh_axis,
                   const std::vector<Box>& from_boxes, const std::vector<Box>& to_boxes);
// Runs the step on this rank (a no-op for ranks that do not take part); returns its new storage.
StoragePtr run_step(const Shape& shape, DType dtype, const Step& step, const StoragePtr& in);

// Storage for a box that the caller writes in full (not zero-filled).
StoragePtr allocate(const Box& box, DType dtype, DeviceType device);
// A staging buffer for packing, in the memory space of the step's data, not zero-filled.
struct Staging {
  StoragePtr storage;
  char* get() const { return storage ? static_cast<char*>(storage->data()) : nullptr; }
};
inline Staging staging(int64_t elems, DType dtype, DeviceType device) {
  return {Storage::allocate_uninitialized(elems * size_of(dtype), device)};
}

}  // namespace spsd::detail
