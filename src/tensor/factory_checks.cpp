// Collective checks behind to_global(local, ...) and from_host: every rank sees the same
// gathered facts, so every rank reaches the same verdict and throws the same error.
#include <algorithm>
#include <cstring>

#include "spsd/tensor/factory.hpp"

namespace spsd::detail {

std::vector<Shape> gather_local_shapes(std::string_view op, const Placement& placement, const Shape& mine,
                                       bool undefined) {
  Communicator& comm = communicator(placement);
  const int64_t n = placement.size();
  std::vector<int64_t> ndims(n);
  int64_t my_ndim = undefined ? -1 : mine.ndim();  // -1: told to every rank, so all of them throw
  comm.all_gather(&my_ndim, ndims.data(), 1, DType::kInt64);
  for (int64_t k = 0; k < n; ++k)
    SPSD_CHECK(ndims[k] >= 0, op, "rank ", placement.ranks()[k], " passed an undefined local Tensor (shape (), ",
               "no storage); pass Tensor::from_vector or a shaped Tensor");
  for (int64_t k = 0; k < n; ++k)
    SPSD_CHECK(ndims[k] == ndims[0], op, "local tensors differ in rank: rank ", placement.ranks()[0], " has ",
               ndims[0], " axes, rank ", placement.ranks()[k], " has ", ndims[k]);
  std::vector<int64_t> dims(n * my_ndim);
  comm.all_gather(mine.dims().data(), dims.data(), my_ndim, DType::kInt64);
  std::vector<Shape> shapes;
  for (int64_t k = 0; k < n; ++k)
    shapes.emplace_back(std::vector<int64_t>(dims.begin() + k * my_ndim, dims.begin() + (k + 1) * my_ndim));
  return shapes;
}

void check_local_shapes(std::string_view op, const Shape& global, const Placement& placement, const NdSbp& nd_sbp,
                        const std::vector<Shape>& locals) {
  for (int64_t k = 0; k < placement.size(); ++k) {
    int64_t r = placement.ranks()[k];
    Shape expected = box_of(global, placement, nd_sbp, r).shape();
    SPSD_CHECK(locals[k] == expected, op, "rank ", r, " holds a local tensor of shape ", locals[k], " but ",
               nd_sbp, " of global shape ", global, " on ", placement, " gives it ", expected);
  }
}

// Along tensor axis i, the ranks at coordinate 0 of every mesh axis that does not split i
// hold pieces that together span the axis.
Shape infer_global_shape(std::string_view op, const Placement& placement, const NdSbp& nd_sbp,
                         const std::vector<Shape>& locals) {
  check_layout(op, locals[0], placement.mesh(), nd_sbp);
  std::vector<int64_t> dims(locals[0].ndim(), 0);
  for (int64_t k = 0; k < placement.size(); ++k) {
    std::vector<int64_t> c = placement.coords(placement.ranks()[k]);
    for (int64_t i = 0; i < locals[0].ndim(); ++i) {
      bool spans = true;
      for (size_t a = 0; a < nd_sbp.size(); ++a)
        spans = spans && (c[a] == 0 || (nd_sbp[a].is_split() && nd_sbp[a].axis() == i));
      if (spans) dims[i] += locals[k][i];
    }
  }
  // The line of ranks along a split axis contributes once per piece; unsplit axes once overall.
  for (int64_t i = 0; i < locals[0].ndim(); ++i) {
    bool split = false;
    for (const Sbp& s : nd_sbp) split = split || (s.is_split() && s.axis() == i);
    if (!split) dims[i] = locals[0][i];
  }
  Shape global(dims);
  std::string all;
  for (int64_t k = 0; k < placement.size(); ++k)
    all += (k ? ", " : "") + std::string("rank ") + std::to_string(placement.ranks()[k]) + " " + locals[k].to_string();
  for (int64_t k = 0; k < placement.size(); ++k)
    SPSD_CHECK(locals[k] == box_of(global, placement, nd_sbp, placement.ranks()[k]).shape(), op,
               "the local shapes (", all, ") are not ", nd_sbp, " on ", placement, " of any global shape");
  return global;
}

namespace {
// FNV-1a over the shape and the bytes: equal inputs give equal hashes on every rank.
int64_t fingerprint(const Shape& shape, const void* data, int64_t bytes) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const unsigned char* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (int64_t d : shape) mix(reinterpret_cast<const unsigned char*>(&d), sizeof d);
  mix(static_cast<const unsigned char*>(data), bytes);
  return static_cast<int64_t>(h);
}
}  // namespace

void check_same_on_all_ranks(std::string_view op, const Placement& placement, const Shape& shape, const void* data,
                             int64_t bytes) {
  std::vector<int64_t> hashes(placement.size());
  int64_t mine = fingerprint(shape, data, bytes);
  communicator(placement).all_gather(&mine, hashes.data(), 1, DType::kInt64);
  std::vector<int64_t> differing;
  for (int64_t k = 0; k < placement.size(); ++k)
    if (hashes[k] != hashes[0]) differing.push_back(placement.ranks()[k]);
  SPSD_CHECK(differing.empty(), op, "every rank of ", placement, " must pass the same tensor, but ranks ",
             join(differing), " passed data (or shape) different from rank ", placement.ranks()[0], "'s");
}

}  // namespace spsd::detail
