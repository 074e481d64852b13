#pragma once
// The rank-side communicator suite shared by the simulate and the MPI tests: every operation,
// every DType and ReduceOp, uneven and zero counts, in place variants, on the world and on
// sub-communicators (rows, columns, planes of the meshes the world size allows). Each rank
// computes the expected data and counters itself from closed formulas, never through the library.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

enum class Family { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kBroadcast, kSendRecv, kBarrier };
inline constexpr std::array<Family, 7> kAllFamilies = {Family::kAllReduce, Family::kReduceScatter, Family::kAllGather,
                                                       Family::kAllToAll,  Family::kBroadcast,     Family::kSendRecv,
                                                       Family::kBarrier};
std::string_view to_string(Family);

// A communicator the suite runs on: its name (same on every rank) and this rank's group.
struct SuiteComm {
  std::string name;
  std::vector<int64_t> world_ranks;
};

// The communicators the calling rank belongs to, in an order every rank agrees on: the world,
// the world reversed, the even ranks, and the axis groups of every 2-d mesh a x b = world size
// (a, b >= 2) and of the 2x2x2 mesh. A group already listed is not repeated.
std::vector<SuiteComm> suite_communicators(int64_t rank, int64_t world_size);

// Runs one family on every suite communicator of the calling rank, for every DType.
// Must be called by every rank of the world (it is collective).
void run_collective_suite(Family family, Failures& failures);

// bfloat16 and float16 all_reduce and reduce_scatter_v of random pieces (signs mixed, magnitudes
// over 2^40 for bfloat16, 2^26 for float16, so sums cancel and round) on every suite
// communicator, under the current spsd::half_reduction(). Every sum must lie within the bound of
// docs/communicators.md of the exact sum of the pieces, and under kNative be bit-equal to their
// float32 sum in member order rounded once (on 4 members also for pieces where another order
// rounds differently); max and min are exact; the counters count 2 bytes per element, 4 under
// kFloat32Wire. Collective over the world.
void run_half_reduction_suite(Failures& failures);

}  // namespace spsd_test
