#pragma once
// The rank-side boxing suite shared by the simulate and MPI tests. The reference is a plain
// tensor every rank knows; layouts are built from it by the test's own code (partial values
// spread over the ranks adversarially), converted by the library, and compared with boxes of
// the reference computed here, never through the library's boxing.
#include <string>
#include <vector>

#include "failures.hpp"

namespace spsd_test {

// Small integers, so sums of a few of them are exact in float.
template <class T>
spsd::Tensor<T> reference_tensor(const spsd::Shape& shape);

// Every NdSbp a mesh of ndim axes can hold for a tensor of tensor_ndim axes.
std::vector<spsd::NdSbp> all_nd_sbps(int64_t mesh_ndim, int64_t tensor_ndim);

// This rank's component of (placement, nd_sbp) for the reference, with each partial group's
// values spread so that no rank alone holds the answer. The P(sum) parts are small integers
// times part_scale, and the arithmetic is done in compute_t<T> and rounded: for 16-bit types
// the pieces are exact (their sum is the whole) only when the whole's values and the parts fit
// the type's precision (integers below 256 in bfloat16, as reference_tensor's).
template <class T>
spsd::GlobalTensor<T> build_layout(const spsd::Tensor<T>& whole, const spsd::Layout& layout, double part_scale = 1.0);

// Converts whole from `from` to `to` and checks on this rank: the local box (or the full
// tensor for partial targets), and the bytes received: the lower bound for S/B -> S/B, the
// plan's prediction otherwise. Collective over both placements' ranks. Returns this rank's
// counters of the conversion.
template <class T>
spsd::CommStats check_boxing(const spsd::Tensor<T>& whole, const spsd::Layout& from, const spsd::Layout& to, Failures& failures);

// The counters of a 16-bit conversion (narrow) against the float32 one of the same shape and
// layouts (wide): where the planner takes the same path for both dtypes, the same calls with half
// the bytes sent and received ("moves carry 2 bytes per element", P(sum) reductions included)
// and every step's predicted traffic halved. Returns false, checking nothing, where the paths
// differ: the cost model's per-step latency can make another path the cheaper one for 2-byte
// elements (e.g. (5, 3) (S(0), P(sum)) -> (P(max), S(0)) on 2x2), and the bytes of different
// paths do not compare.
bool expect_half_bytes(Failures& failures, const std::string& what, const spsd::Shape& shape, spsd::DType narrow_dtype,
                       const spsd::Layout& from, const spsd::Layout& to, const spsd::CommStats& wide,
                       const spsd::CommStats& narrow);

}  // namespace spsd_test
