#pragma once
// Splitting a batch into micro-batches along axis 0 (the pipeline runner, pipeline/runner.hpp).
//
// Micro-batch i of m takes, from each piece the batch is split into along axis 0, that piece's
// part i of m (layout/split.hpp's balanced parts: the first ones one row longer when m does not
// divide the rows): a local copy, no communication, and the micro-batch keeps the batch's
// layout. That needs every piece to hold the same number of rows; otherwise (or when the batch
// is partial) micro-batch i is rows balanced_range(N, m, i) of the whole batch, sliced with the
// global slice op and boxed back into the batch's layout, which communicates.
//
// Inputs and targets must pair the same rows: split_rows() says, from both tensors' layouts,
// which of the two ways both take.
#include <cstdint>
#include <vector>

#include "spsd/layout/split.hpp"
#include "spsd/op/shape_ops.hpp"
#include "spsd/runtime/runtime.hpp"
#include "spsd/tensor/global_tensor.hpp"

namespace spsd::pipeline {

namespace detail {

// Into how many pieces x's layout cuts axis 0 (1 when no mesh axis splits it); 0 when they
// differ in size or x is partial: then only the global slice pairs rows right.
template <Element T>
int64_t equal_row_pieces(const GlobalTensor<T>& x) {
  if (x.nd_sbp().has_partial()) return 0;
  int64_t pieces = 1;
  for (int64_t a = 0; a < x.placement().mesh().ndim(); ++a)
    if (x.nd_sbp()[a].is_split() && x.nd_sbp()[a].axis() == 0) pieces *= x.placement().mesh()[a];
  return x.shape()[0] % pieces == 0 ? pieces : 0;
}

// Micro-batch i of m of x, piece by piece (see above).
template <Element T>
GlobalTensor<T> local_microbatch(const GlobalTensor<T>& x, int64_t pieces, int64_t m, int64_t i) {
  const int64_t rows = x.shape()[0] / pieces;
  const spsd::Range part = spsd::balanced_range(rows, m, i);
  std::vector<int64_t> dims = x.shape().dims();
  dims[0] = part.size() * pieces;
  const Shape shape(dims);
  if (!x.placement().contains(rank())) return GlobalTensor<T>(shape, x.placement(), x.nd_sbp(), Tensor<T>());
  const Tensor<T>& local = x.to_local();
  std::vector<int64_t> local_dims = local.shape().dims();
  const int64_t row_elems = local_dims[0] ? local.numel() / local_dims[0] : 0;
  local_dims[0] = part.size();
  const DeviceType device = local.device_type();
  const int64_t bytes = part.size() * row_elems * static_cast<int64_t>(sizeof(T));
  Tensor<T> piece(Shape(local_dims), Storage::allocate_uninitialized(bytes, device));
  spsd::detail::copy_bytes(piece.data(), device, local.data() + part.begin * row_elems, device, bytes);
  return GlobalTensor<T>(shape, x.placement(), x.nd_sbp(), std::move(piece));
}

}  // namespace detail

// The way a batch of inputs and one of targets split into m micro-batches: piece by piece when
// both are cut into the same number of equal pieces along axis 0 (pieces > 0), else by global
// rows (pieces == 0).
struct RowSplit {
  int64_t pieces = 0;
  int64_t microbatches = 1;
};
// The RowSplit of m micro-batches for this pair: piece by piece when both layouts cut axis 0
// into the same number of equal pieces of at least m rows each. No communication; no checks.
template <Element A, Element B>
RowSplit split_rows(const GlobalTensor<A>& inputs, const GlobalTensor<B>& targets, int64_t m) {
  const int64_t a = detail::equal_row_pieces(inputs), b = detail::equal_row_pieces(targets);
  const bool local = a > 0 && a == b && inputs.shape()[0] / a >= m;
  return {local ? a : 0, m};
}

// Micro-batch i of x under split (x's rows: at least split.microbatches).
template <Element T>
GlobalTensor<T> microbatch(const GlobalTensor<T>& x, const RowSplit& split, int64_t i) {
  if (split.pieces > 0) return detail::local_microbatch(x, split.pieces, split.microbatches, i);
  const spsd::Range rows = spsd::balanced_range(x.shape()[0], split.microbatches, i);
  GlobalTensor<T> part = spsd::slice(x, 0, rows.begin, rows.end);
  return part.nd_sbp() == x.nd_sbp() || x.nd_sbp().has_partial() ? part : part.to_global(x.nd_sbp());
}

}  // namespace spsd::pipeline
