#pragma once
// A boxing plan: the steps that turn one layout of a tensor into another, each with the
// traffic it is predicted to cause on every rank.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spsd/core/dtype.hpp"
#include "spsd/core/shape.hpp"
#include "spsd/layout/layout.hpp"
#include "spsd/runtime/consistency.hpp"

namespace spsd {

// The boxing primitives, one line each: the StepKind enumerator and the name plans print. Each
// is one record in one file of src/boxing/ (its transition, traffic, latency rounds and run;
// src/boxing/primitive.hpp), which the planner and the executor iterate: adding a primitive is
// this line, that file and its line in meson.build.
#define SPSD_BOXING_PRIMITIVES(X)     \
  X(kAllReduce, all_reduce)           \
  X(kReduceScatter, reduce_scatter)   \
  X(kAllGather, all_gather)           \
  X(kAllToAll, all_to_all)            \
  X(kLocal, local)                    \
  X(kExchange, exchange)              \
  X(kDeviceCopy, device_copy)

// The kind of a boxing step: which primitive runs it (the list above).
enum class StepKind {
#define SPSD_STEP_KIND(kind, name) kind,
  SPSD_BOXING_PRIMITIVES(SPSD_STEP_KIND)
#undef SPSD_STEP_KIND
};
// The primitive's name as plans print it: "all_reduce", "device_copy", ...
std::string_view to_string(StepKind kind);

// What one rank is predicted to send and receive, in bytes, and the point-to-point messages it
// sends (an exchange's; 0 for the collective steps).
struct RankTraffic {
  int64_t rank;  // world rank
  int64_t bytes_sent = 0, bytes_received = 0, messages = 0;
};

// A step holds no per-rank data: what one rank sends and receives is computed from that rank's
// peers when asked, so a plan's size does not grow with the number of ranks (docs/boxing.md).
struct Step {
  StepKind kind;
  Layout from, to;
  int64_t mesh_axis = -1;  // the mesh axis a 1-d step changes; -1 for an exchange or a device copy
  Shape shape;             // the tensor's
  DType dtype = DType::kFloat32;
  int64_t busiest_bytes = 0;  // max over ranks of max(sent, received)
  double cost_us = 0;
  // busiest_bytes: the bytes the busiest rank sends or receives in this step.
  int64_t max_bytes() const { return busiest_bytes; }
  // One rank's predicted traffic; zeros for a rank that takes no part.
  RankTraffic traffic_of(int64_t rank) const;
  // Every participating rank's, in rank order (visits every rank: for printing and tests).
  std::vector<RankTraffic> traffic() const;
  std::string to_string() const;
};

// The steps, in order, that box a tensor of shape and dtype from one layout to another, with
// their total predicted cost in microseconds (the sum of the steps').
struct Plan {
  Shape shape;
  DType dtype;
  Layout from, to;
  std::vector<Step> steps;
  double cost_us = 0;
  // "to_global(shape dtype from ... to ...)": what every to_global running this plan notes for
  // the cross-rank check (runtime/consistency.hpp); built once with the plan. Between memory
  // spaces it names the boxing among host buffers, and it is null when there is none (each rank
  // moves its own piece: nothing to compare).
  std::shared_ptr<const detail::OpIdentity> identity;
  // One rank's predicted traffic summed over the steps (each computed from the rank's peers);
  // bytes_sent and bytes_received are its fields, so a caller needing both asks once.
  RankTraffic traffic_of(int64_t rank) const;
  int64_t bytes_sent(int64_t rank) const { return traffic_of(rank).bytes_sent; }
  int64_t bytes_received(int64_t rank) const { return traffic_of(rank).bytes_received; }
  // Whether some step calls the communicator (its primitive says so); a plan of local steps
  // needs no rendezvous, so the cross-rank check need not run before it.
  bool communicates() const;
  // Bytes the cached plan holds: itself and its steps, not the rank lists its placements share
  // with every other holder of them (layout/rank_list.hpp). The same for any number of ranks
  // (bench/planning --ranks).
  int64_t footprint_bytes() const;
  std::string to_string() const;
};

}  // namespace spsd
