#pragma once
// The rank-side differential suite of the bool-valued and mask ops (issue 25), shared by the
// simulate and MPI tests: comparisons (tensor-tensor with broadcasting, tensor-scalar, both
// orders), logical and/or/not, where, masked_fill (value 0, which keeps P(sum), and another),
// argmax/argmin (split reduced axis included), and casts to and from bool. For every case and a
// deterministic sample (every stride-th) of the combinations of input layouts (every NdSbp of
// the mesh; bool inputs take no partial layouts), the inputs are built from one host tensor
// (from_host, or lopsided partial pieces from build_layout), the op runs, and the result's full()
// is compared exactly with a plain-loop reference (the inputs are multiples of 1/2, exact in
// every type and every partial piece, so comparisons and selections are exact).
#include <cstdint>
#include <string>

#include "failures.hpp"

namespace spsd_test {

struct CompareSuiteCounts {
  int64_t cases = 0;  // op runs checked on this rank
};

// Collective over the placement's ranks (and every rank of the world calls it).
void run_compare_suite(const spsd::Placement& placement, int64_t stride, Failures& failures, CompareSuiteCounts& counts);

}  // namespace spsd_test
