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
// values spread so that no rank alone holds the answer.
template <class T>
spsd::GlobalTensor<T> build_layout(const spsd::Tensor<T>& whole, const spsd::Layout& layout);

// Converts whole from `from` to `to` and checks on this rank: the local box (or the full
// tensor for partial targets), and the bytes received: the lower bound for S/B -> S/B, the
// plan's prediction otherwise. Collective over both placements' ranks.
template <class T>
void check_boxing(const spsd::Tensor<T>& whole, const spsd::Layout& from, const spsd::Layout& to, Failures& failures);

}  // namespace spsd_test
